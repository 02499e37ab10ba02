"""The run lock: one controller per tree, taken before anything else touches `.fwloop/`.

An `flock` on `.fwloop/run.lock`, held for the run's life. The kernel drops it when the process
dies, however it dies, so a stale lock cannot exist; the file holds the owner's pid only to name
it in the loser's message.

Taking the lock and writing the pid are two steps, and a contender refused in between would read
no pid or a dead run's. Both happen under a second `flock` (`run.lock.gate`, held for
microseconds), which a refused contender also holds while it reads the pid: to every other
contender, the lock and its owner's pid appear at once.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from pytest_fwloop.workspace.journal import WorkspaceLocked

LOCK_NAME = "run.lock"
GATE_NAME = "run.lock.gate"


class RunLock:
    """`<state_dir>/run.lock`; `acquire` raises `WorkspaceLocked` naming the live owner."""

    def __init__(self, state_dir: Path) -> None:
        self.path = state_dir / LOCK_NAME
        self._fd: int | None = None

    def acquire(self) -> None:
        if self._fd is not None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        gate = os.open(self.path.with_name(GATE_NAME), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(gate, fcntl.LOCK_EX)  # closing it below lets the next contender in
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                owner = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "unknown"
                os.close(fd)
                raise WorkspaceLocked(
                    f"fwloop: another pytest --fwloop (pid {owner}) is running in "
                    f"{self.path.parent.parent}; wait for it to finish or stop it with "
                    "`fwloop cancel`"
                ) from None
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        finally:
            os.close(gate)
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor drops the flock
            self._fd = None
