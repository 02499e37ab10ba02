"""Running one logged, abortable, time-bounded subprocess: the build and each child pytest.

Each process gets its own session so a timeout or an abort can stop it together with everything it
started (a QEMU, a compiler), and nothing is left running.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol


def addopts_without_loop(addopts: str) -> str:
    """PYTEST_ADDOPTS for a process the loop starts: without `--fwloop`, so it cannot start
    another loop (the `--fwloop-*` options are inert without it)."""
    return " ".join(arg for arg in addopts.split() if arg != "--fwloop")


#: How long a stopped process group gets between SIGTERM and SIGKILL.
GRACE_SECONDS = 5.0
#: How often a running process is checked for its timeout and an abort (and, where no pidfd
#: tells of its end at once, for its end).
POLL_SECONDS = 0.01


@dataclass(frozen=True)
class ProcessResult:
    returncode: int | None
    timed_out: bool
    aborted: bool
    duration: float


class Supervised(Protocol):
    """What supervising needs of a process: a `subprocess.Popen`, or a forked child pytest."""

    @property
    def pid(self) -> int: ...

    @property
    def returncode(self) -> int | None: ...

    def poll(self) -> int | None: ...

    def wait(self, timeout: float | None = None) -> int: ...


def run_logged(
    argv: Sequence[str] | str,
    *,
    cwd: Path,
    log_path: Path,
    timeout: float,
    abort: threading.Event,
    env: Mapping[str, str] | None = None,
    shell: bool = False,
) -> ProcessResult:
    """Run to completion, a timeout, or an abort; stdout and stderr go to `log_path`.

    Raises FileNotFoundError/PermissionError when the program cannot be started.
    """
    started = time.monotonic()
    process = spawn_logged(argv, cwd=cwd, log_path=log_path, env=env, shell=shell)
    return supervise(process, started, timeout, abort)


def spawn_logged(
    argv: Sequence[str] | str,
    *,
    cwd: Path,
    log_path: Path,
    env: Mapping[str, str] | None = None,
    shell: bool = False,
) -> subprocess.Popen[bytes]:
    """Start a process in its own session, stdout and stderr to `log_path`."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("wb") as log:
        return subprocess.Popen(
            argv,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=dict(env) if env is not None else None,
            shell=shell,
            start_new_session=True,
        )


def supervise(
    process: Supervised, started: float, timeout: float, abort: threading.Event
) -> ProcessResult:
    """Wait for a process that leads its own process group, stopping the group on a timeout
    (`timeout` seconds after `started`, a monotonic time) or an abort."""
    deadline = started + timeout
    timed_out = aborted = False
    with _end_of(process.pid, abort) as pause:
        while process.poll() is None:
            if abort.is_set():
                aborted = True
            elif time.monotonic() > deadline:
                timed_out = True
            if aborted or timed_out:
                stop_group(process)
                break
            pause(POLL_SECONDS)
    return ProcessResult(
        returncode=process.returncode,
        timed_out=timed_out,
        aborted=aborted,
        duration=time.monotonic() - started,
    )


@contextlib.contextmanager
def _end_of(pid: int, abort: threading.Event) -> Iterator[Callable[[float], object]]:
    """A pause that ends early when the process `pid` ends (a pidfd, on Linux), so its end is
    seen at once rather than up to a poll later; elsewhere, one that ends on an abort."""
    try:
        fd = os.pidfd_open(pid)
    except (AttributeError, OSError):  # not Linux 5.3+, or the process is gone already
        yield abort.wait
        return
    try:
        yield lambda seconds: select.select([fd], [], [], seconds)
    finally:
        os.close(fd)


def stop_group(process: Supervised) -> None:
    """SIGTERM the process's group, SIGKILL what is left after a grace period, and reap."""
    for sig, wait in ((signal.SIGTERM, GRACE_SECONDS), (signal.SIGKILL, None)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            break
        try:
            process.wait(timeout=wait)
            break
        except subprocess.TimeoutExpired:
            continue
    process.wait()
