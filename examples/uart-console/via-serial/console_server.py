"""A console server for the host-built firmware, standing in for a board behind a serial line.

Like ser2net or a lab's terminal server it offers the console on a TCP port, which pyserial and
pytest-fwloop's `fwloop_serial` open as `socket://127.0.0.1:PORT`. Each connection gets a freshly
booted firmware (build/uartcon, started with the connection as its stdin and stdout), as if the
board were power-cycled when its console is attached: a new test session sees the latest build.

    python via-serial/console_server.py [--port 7001] [build/uartcon]

It prints `socket://127.0.0.1:PORT` once it listens (`--port 0` picks a free port) and runs until
SIGTERM or Ctrl-C, which also stops the firmware it started. Only 127.0.0.1 is served.
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import socket
import subprocess
import sys
from pathlib import Path
from types import FrameType

DEFAULT_FIRMWARE = Path(__file__).resolve().parent.parent / "build" / "uartcon"


def _stop(signum: int, frame: FrameType | None) -> None:
    sys.exit(0)


class Boards:
    """The firmware processes serving connections, each reaped as soon as it exits."""

    def __init__(self, firmware: Path) -> None:
        self.firmware = firmware
        self.running: list[subprocess.Popen[bytes]] = []

    def start(self, connection: socket.socket) -> None:
        # The firmware writes a reply and its prompt separately: without this each prompt
        # would wait for the reply's delayed ACK, ~40 ms a command.
        connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.running.append(
            subprocess.Popen([self.firmware], stdin=connection.fileno(), stdout=connection.fileno())
        )

    def reap(self, signum: int, frame: FrameType | None) -> None:
        """The SIGCHLD handler: a board whose connection closed is reaped at once."""
        self.running = [board for board in self.running if board.poll() is None]

    def stop(self) -> None:
        for board in self.running:
            board.terminate()
        for board in self.running:
            board.wait()


def serve(listener: socket.socket, firmware: Path) -> None:
    """Accept connections until stopped; each gets its own firmware process."""
    boards = Boards(firmware)
    signal.signal(signal.SIGCHLD, boards.reap)
    try:
        while True:
            connection, _ = listener.accept()
            # The firmware owns the connection from here; our copy closes at once.
            with connection:
                boards.start(connection)
    finally:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        boards.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("firmware", nargs="?", type=Path, default=DEFAULT_FIRMWARE)
    parser.add_argument("--port", type=int, default=7001, help="TCP port on 127.0.0.1 (0: any)")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, _stop)
    with socket.create_server(("127.0.0.1", args.port)) as listener:
        print(f"socket://127.0.0.1:{listener.getsockname()[1]}", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            serve(listener, args.firmware.resolve())


if __name__ == "__main__":
    main()
