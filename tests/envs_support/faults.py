"""Faults that a test injects from inside a loop's child run, where `FAULT_SUPPORT` puts this
package on sys.path. `first_time` lets a fault fire once, so the rerun that follows finds the rig
healthy again.
"""

from __future__ import annotations

import os
import signal
import time
from typing import TYPE_CHECKING

from envs_support.procs import children_of, process_state

if TYPE_CHECKING:
    from pathlib import Path

EXIT_SECONDS = 5.0


def first_time(flag: Path) -> bool:
    """True the first time it is called for `flag` (in any process), False ever after."""
    try:
        flag.touch(exist_ok=False)
    except FileExistsError:
        return False
    return True


def terminate_children(pid: int) -> None:
    """SIGTERM every child of `pid` (a server's sessions) and wait until they have exited."""
    children = children_of(pid)
    for child in children:
        os.kill(child, signal.SIGTERM)
    deadline = time.monotonic() + EXIT_SECONDS
    while any(alive(child) for child in children):
        if time.monotonic() > deadline:
            raise RuntimeError(f"children {children} of {pid} did not exit")
        time.sleep(0.01)


def stop_server(pid: int) -> None:
    """Stop a server and its sessions; the sessions go first, so that the server is still
    there to reap them (PID 1 on these machines may not), then the server itself, waited for:
    the next test must find its port closed, not race the server's exit (on two busy cores
    a server can still accept a connection well after SIGTERM was sent)."""
    terminate_children(pid)
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + EXIT_SECONDS
    while alive(pid):
        if time.monotonic() > deadline:
            raise RuntimeError(f"server {pid} did not exit")
        time.sleep(0.01)


def alive(pid: int) -> bool:
    """Running: neither gone nor a zombie waiting for its parent."""
    try:
        return process_state(pid) != "Z"
    except OSError:
        return False
