"""Flaky tests (seed 001 status FLAKY; DESIGN.md §13), as plain decisions.

A test that fails is rerun in the same iteration, with no code change, before it counts as
failed; one that passes on a rerun is flaky. It is never sent to the coder as a failure, and it
counts as `fwloop_flaky_policy` says: `exclude` (in neither count, like a skip), `pass` or `fail`.
"""

from __future__ import annotations

from typing import Literal

from pytest_fwloop.core.results import (
    COMMAND_NODEID_PREFIX,
    IterationResults,
    TestRecord,
    not_passing,
)
from pytest_fwloop.core.signature import signature

FlakyPolicy = Literal["exclude", "pass", "fail"]


def rerun_candidates(
    results: IterationResults, previous: IterationResults | None, root: str = ""
) -> list[str]:
    """The failures worth rerunning: not the environment's (they have their own reset), not a
    file that did not collect, and not one that failed the same way in the previous iteration
    (it was rerun then, and a patch that left it alone will not have made it flaky); a test found
    flaky before is rerun again, so it never reaches the coder as a failure."""
    before = {
        t.nodeid: signature(t, root)
        for t in (previous.tests if previous else [])
        if not_passing(t) and not t.flaky
    }
    return [
        t.nodeid
        for t in results.tests
        if not_passing(t)
        and t.env_failure is None
        and t.phase != "collect"
        and not t.nodeid.startswith(COMMAND_NODEID_PREFIX)
        and before.get(t.nodeid) != signature(t, root)
    ]


def counted(record: TestRecord, reruns: int, policy: FlakyPolicy) -> TestRecord:
    """The record of a test that failed and then passed on its `reruns`-th rerun."""
    outcome = {"exclude": "skipped", "pass": "passed", "fail": record.outcome}[policy]
    return record.model_copy(update={"outcome": outcome, "flaky": True, "reruns": reruns})


def with_flaky(
    results: IterationResults, flaky: dict[str, int], policy: FlakyPolicy
) -> IterationResults:
    """`results` with each flaky test's record counted by `policy`."""
    tests = [counted(t, flaky[t.nodeid], policy) if t.nodeid in flaky else t for t in results.tests]
    return results.model_copy(update={"tests": tests})
