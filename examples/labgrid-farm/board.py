"""A stand-in for one board of the farm: its console on a TCP port, as ser2net would offer it.

Every connection gets a freshly booted firmware (`python -B -m fw` from this directory, with the
connection as its stdin and stdout), as if the board were flashed with the tree's current `fw/`
and power-cycled when its console is attached: each test session of the loop sees the latest
patch. A real board needs a labgrid strategy that flashes the new image instead (README.md).

    python board.py [--port 7001]

It prints `socket://127.0.0.1:PORT` once it listens (`--port 0` picks a free port) and runs until
SIGTERM or Ctrl-C, which also stops the firmware it booted. Only 127.0.0.1 is served.
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

HERE = Path(__file__).resolve().parent


def _stop(signum: int, frame: FrameType | None) -> None:
    sys.exit(0)


def serve(listener: socket.socket) -> None:
    """Accept connections until stopped; each gets its own firmware process."""
    booted: list[subprocess.Popen[bytes]] = []
    try:
        while True:
            connection, _ = listener.accept()
            # The firmware writes its reply and its prompt separately: no delayed ACK between.
            connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            booted = [board for board in booted if board.poll() is None]
            # -B: no bytecode cache, so a patch made within the same second is never missed.
            with connection:  # the firmware owns the connection; our copy closes at once
                booted.append(
                    subprocess.Popen(
                        [sys.executable, "-B", "-m", "fw"],
                        cwd=HERE,
                        stdin=connection.fileno(),
                        stdout=connection.fileno(),
                    )
                )
    finally:
        for board in booted:
            board.terminate()
        for board in booted:
            board.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=7001, help="TCP port on 127.0.0.1 (0: any)")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, _stop)
    with socket.create_server(("127.0.0.1", args.port)) as listener:
        print(f"socket://127.0.0.1:{listener.getsockname()[1]}", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            serve(listener)


if __name__ == "__main__":
    main()
