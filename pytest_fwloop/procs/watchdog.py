"""The run's watchdog (see `reaper.py`): `python -m pytest_fwloop.procs.watchdog TOKEN STATE_DIR`.

Waits for end of input on stdin, which the kernel gives when the controller exits or dies, then
stops every process that carries the run's token and runs the exit commands the run kept (a
board's lock to give back). Imports nothing of the loop but `reaper`, so it starts in
milliseconds.
"""

from __future__ import annotations

import signal
import sys
from pathlib import Path

from pytest_fwloop.procs.reaper import run_exit_commands, stop_owned


def main() -> None:
    for name in ("SIGINT", "SIGHUP", "SIGTERM"):
        signal.signal(getattr(signal, name), signal.SIG_IGN)
    sys.stdin.buffer.read()  # returns at EOF: the controller is gone
    stop_owned(sys.argv[1])
    run_exit_commands(Path(sys.argv[2]))


if __name__ == "__main__":
    main()
