"""What the child's reporting costs a test: its recorder, progress stream, results and JUnit XML.

    python benchmarks/child_reporting.py [--rounds N] [--tests 1000,10000]

For each suite of trivial green tests (500 a file), pytest runs in this process, in
interleaved rounds after one untimed round, once plain and once as a loop's child runs
(`--fwloop-child-report`, `--fwloop-child-junit`); each session's CPU time is taken from its
start to its end (`pytest_sessionstart` to `pytest_sessionfinish`, so imports and start-up are
left out, and with them most of the machine's noise). Printed: min / median / max of each side
and the difference of the medians a test (goal <= 0.1 ms, issue 35). The plugins installed
where this runs load on both sides (`-p no:randomly`, `-p no:cacheprovider` on both).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import pytest
from loop_speed import green_suite  # beside this script, first on its search path


class SessionClock:
    """The CPU time of one pytest session."""

    def __init__(self) -> None:
        self.started = 0.0
        self.seconds = 0.0

    def pytest_sessionstart(self) -> None:
        self.started = time.process_time()

    def pytest_sessionfinish(self) -> None:
        self.seconds = time.process_time() - self.started


def session_cpu(folder: Path, *args: str) -> float:
    clock = SessionClock()
    options = ["-q", "-p", "no:randomly", "-p", "no:cacheprovider", "--import-mode=importlib"]
    pytest.main([*options, str(folder), *args], plugins=[clock])
    for name in [name for name in sys.modules if name.startswith("test_")]:
        del sys.modules[name]  # the next session imports the test files afresh
    return clock.seconds


def measure(scratch: Path, tests: int, rounds: int) -> list[str]:
    """The lines to print for a suite of `tests` tests."""
    folder = green_suite(scratch / f"suite-{tests}", tests, 500)
    out = scratch / f"out-{tests}"
    child = (
        f"--fwloop-child-report={out / 'results.json'}",
        f"--fwloop-child-junit={out / 'j.xml'}",
    )
    plain: list[float] = []
    recorded: list[float] = []
    for timed in (False, *([True] * rounds)):
        seconds = session_cpu(folder), session_cpu(folder, *child)
        if timed:
            plain.append(seconds[0])
            recorded.append(seconds[1])
    lines = []
    for label, values in (("plain", plain), ("child", recorded)):
        low, mid, high = min(values), statistics.median(values), max(values)
        lines.append(f"  {label}: {low:.3f} / {mid:.3f} / {high:.3f} s CPU")
    extra = (statistics.median(recorded) - statistics.median(plain)) / tests
    lines.append(
        f"  {tests:,} tests: the child's reporting {extra * 1e6:.1f} us a test (goal <= 100)"
    )
    return lines


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--tests", default="1000,10000")
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        for tests in (int(n) for n in options.tests.split(",")):
            with open(os.devnull, "w") as quiet, contextlib.redirect_stdout(quiet):
                lines = measure(Path(scratch), tests, options.rounds)  # pytest's output: off
            print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
