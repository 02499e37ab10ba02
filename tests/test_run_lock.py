"""The run lock between real processes: one owner per tree, and every refused start names it."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
from pathlib import Path

import pytest

# Each line from the test: a moment on the shared monotonic clock and a state directory. The
# contenders spin until that moment, so they reach for the lock within microseconds of each
# other, then say whether they won (and keep the lock) or what the refusal said.
CONTENDER = """
import os, sys, time
from pathlib import Path
from pytest_fwloop.workspace.lock import RunLock
from pytest_fwloop.workspace.journal import WorkspaceLocked

held = []
for line in sys.stdin:
    moment, state_dir = line.split(maxsplit=1)
    lock = RunLock(Path(state_dir.strip()))
    while time.monotonic_ns() < int(moment):
        pass
    try:
        lock.acquire()
    except WorkspaceLocked as exc:
        print("lost", exc, flush=True)
    else:
        held.append(lock)
        print("won", os.getpid(), flush=True)
"""
CONTENDERS = 3
TRIALS = 200
NO_SUCH_PID = 2**22 + 1  # above the kernel's largest pid_max: never a live process


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="CLOCK_MONOTONIC is shared")
def test_of_contenders_starting_at_once_each_refused_one_names_the_owner(tmp_path: Path) -> None:
    """In half the trials the lock file still names a run that ended long ago."""
    refusals: list[tuple[str, str]] = []
    with contextlib.ExitStack() as stack:  # each exit closes the pipes, which ends the loop
        contenders = [
            stack.enter_context(
                subprocess.Popen(
                    [sys.executable, "-c", CONTENDER],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    text=True,
                    bufsize=1,
                )
            )
            for _ in range(CONTENDERS)
        ]
        for trial in range(TRIALS):
            state_dir = tmp_path / f"tree-{trial}" / ".fwloop"
            if trial % 2:
                state_dir.mkdir(parents=True)
                (state_dir / "run.lock").write_text(f"{NO_SUCH_PID}\n")
            moment = time.monotonic_ns() + 5_000_000
            for contender in contenders:
                assert contender.stdin is not None
                contender.stdin.write(f"{moment} {state_dir}\n")
                contender.stdin.flush()
            said = []
            for contender in contenders:
                assert contender.stdout is not None
                said.append(contender.stdout.readline().strip())
            [owner] = [line.split()[1] for line in said if line.startswith("won ")]
            refusals += [(owner, line) for line in said if line.startswith("lost ")]
    assert len(refusals) == TRIALS * (CONTENDERS - 1)
    unnamed = [line for owner, line in refusals if f"(pid {owner}) is running" not in line]
    assert unnamed == [], f"{len(unnamed)} of {len(refusals)} refusals: {unnamed[:3]}"
