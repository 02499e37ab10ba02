"""A host "board" serving a console on a pty, reached through a symlink as a USB serial would be.

Run as `python board.py LINK`; it prints `READY` on stdout once LINK points at its pty. Like a
real board it boots (prints its banner) only on the first byte received, since pyserial drops
whatever arrived before it opened the port. Commands, one per line:

    ping -> pong           echo TEXT -> TEXT       big N -> N bytes of text, then END
    reset -> a new pty behind LINK, the old one hung up (a board reset)
    die -> exit, the port hangs up

It exits when its stdin closes, so a test that dies does not leave it running.
"""

from __future__ import annotations

import os
import select
import subprocess
import sys
import tty
from pathlib import Path

BANNER = b"BOARD 1.0 ready\n"
PROMPT = b"> "


class Pty:
    """Our master end plus an open, raw slave (so our own output is not echoed back)."""

    def __init__(self, link: Path) -> None:
        self.master, self.slave = os.openpty()
        tty.setraw(self.slave)
        temporary = link.with_name(link.name + ".new")
        temporary.unlink(missing_ok=True)
        temporary.symlink_to(os.ttyname(self.slave))
        temporary.replace(link)
        self.booted = False
        self.line = b""

    def close(self) -> None:
        """Hang up; output the test has not read yet is lost, as on a real reset."""
        os.close(self.master)
        os.close(self.slave)

    def write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(self.master, view) :]


def answer(line: str) -> bytes:
    """The reply to one command line (without the prompt)."""
    if line == "ping":
        return b"pong\n"
    if line.startswith("echo "):
        return line[5:].encode() + b"\n"
    if line.startswith("big "):
        size = int(line[4:])
        row = b"0123456789abcdef" * 4 + b"\n"
        return (row * (size // len(row) + 1))[:size] + b"END\n"
    if line == "":
        return b""
    return b"ERR unknown command\n"


def serve(link: Path) -> None:
    port = Pty(link)
    sys.stdout.write("READY\n")
    sys.stdout.flush()
    while True:
        ready, _, _ = select.select([port.master, sys.stdin], [], [])
        if sys.stdin in ready and not os.read(sys.stdin.fileno(), 1024):
            return
        if port.master not in ready:
            continue
        data = os.read(port.master, 4096)
        if not port.booted:
            port.booted = True
            port.write(BANNER + PROMPT)
        port.line += data
        while b"\n" in port.line:
            raw, port.line = port.line.split(b"\n", 1)
            command = raw.decode().strip()
            if command == "die":
                port.close()
                return
            if command == "reset":
                old, port = port, Pty(link)  # LINK points at the new pty before the old hangs up
                old.close()
                break
            port.write(answer(command) + PROMPT)


class Board:
    """The test side: starts this file as a process and stops it again."""

    def __init__(self, link: Path) -> None:
        self.link = link
        self.url = str(link)
        self.process = subprocess.Popen(
            [sys.executable, __file__, str(link)], stdin=subprocess.PIPE, stdout=subprocess.PIPE
        )
        assert self.process.stdout is not None
        if self.process.stdout.readline() != b"READY\n":
            self.stop()
            raise RuntimeError(f"board on {link} did not start")

    def stop(self) -> None:
        """Close its stdin (it exits), kill it if it does not, and reap it."""
        assert self.process.stdin is not None
        assert self.process.stdout is not None
        self.process.stdin.close()
        self.process.stdout.close()
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


if __name__ == "__main__":
    serve(Path(sys.argv[1]))
