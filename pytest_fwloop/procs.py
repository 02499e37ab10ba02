"""Running one logged, abortable, time-bounded subprocess: the build and each child pytest.

Each process gets its own session so a timeout or an abort can stop it together with everything it
started (a QEMU, a compiler), and nothing is left running.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

#: How long a stopped process group gets between SIGTERM and SIGKILL.
GRACE_SECONDS = 5.0
POLL_SECONDS = 0.05


@dataclass(frozen=True)
class ProcessResult:
    returncode: int | None
    timed_out: bool
    aborted: bool
    duration: float


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
    log_path.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            argv,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=dict(env) if env is not None else None,
            shell=shell,
            start_new_session=True,
        )
        deadline = started + timeout
        timed_out = aborted = False
        while process.poll() is None:
            if abort.is_set():
                aborted = True
            elif time.monotonic() > deadline:
                timed_out = True
            if aborted or timed_out:
                stop_group(process)
                break
            abort.wait(POLL_SECONDS)
    return ProcessResult(
        returncode=process.returncode,
        timed_out=timed_out,
        aborted=aborted,
        duration=time.monotonic() - started,
    )


def stop_group(process: subprocess.Popen[bytes]) -> None:
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
