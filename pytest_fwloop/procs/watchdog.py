"""The run's watchdog process (see `reaper.py`): `python -m pytest_fwloop.procs.watchdog TOKEN`.

Waits for end of input on stdin, which the kernel gives when the controller exits or dies, then
stops every process that carries the run's token. Imports nothing of the loop but `children`, so
it starts in milliseconds.
"""

from __future__ import annotations

import signal
import sys

from pytest_fwloop.procs.reaper import stop_owned


def main() -> None:
    for name in ("SIGINT", "SIGHUP", "SIGTERM"):
        signal.signal(getattr(signal, name), signal.SIG_IGN)
    sys.stdin.buffer.read()  # returns at EOF: the controller is gone
    stop_owned(sys.argv[1])


if __name__ == "__main__":
    main()
