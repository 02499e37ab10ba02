"""Flaky tests (seed 001 status FLAKY; DESIGN.md §13), as plain decisions.

A test that fails is rerun in the same iteration, with no code change, before it counts as
failed; one that passes on a rerun is flaky. It is never sent to the coder as a failure, and it
counts as `fwloop_flaky_policy` says: `exclude` (in neither count, like a skip), `pass` or `fail`.
One that fails every rerun is sent with its latest failure: a first attempt on a hung board says
less than the reruns on a fresh one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from pytest_fwloop.core.suite.results import (
    COMMAND_NODEID_PREFIX,
    IterationResults,
    TestRecord,
    not_passing,
)
from pytest_fwloop.core.suite.signature import signature

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


@dataclass
class Reruns:
    """What the flaky reruns of one child run found, taken one rerun at a time (`take`)."""

    #: Tests that passed on a rerun: node id -> which rerun.
    flaky: dict[str, int] = field(default_factory=dict)
    #: Tests that failed every rerun: node id -> how many reruns they had.
    failed: dict[str, int] = field(default_factory=dict)
    #: Their latest failure that is the firmware's own (an environment failure on a rerun says
    #: nothing of the code): node id -> its record.
    latest: dict[str, TestRecord] = field(default_factory=dict)

    def take(self, number: int, failing: list[str], rerun: IterationResults) -> list[str]:
        """Fold in rerun `number` of `failing`; the tests it did not pass."""
        records = {t.nodeid: t for t in rerun.tests}
        still = []
        for nodeid in failing:
            record = records.get(nodeid)
            if record is not None and record.outcome in ("passed", "xfailed"):
                self.flaky[nodeid] = number
                self.failed.pop(nodeid, None)
                self.latest.pop(nodeid, None)
                continue
            still.append(nodeid)
            self.failed[nodeid] = number
            if record is not None and not_passing(record) and record.env_failure is None:
                self.latest[nodeid] = record
        return still

    def applied(self, record: TestRecord, policy: FlakyPolicy) -> TestRecord:
        """`record`, of the run that was rerun, as the reruns leave it."""
        if record.nodeid in self.flaky:
            return counted(record, self.flaky[record.nodeid], policy)
        if record.nodeid not in self.failed:
            return record
        latest = self.latest.get(record.nodeid, record)
        return latest.model_copy(update={"reruns": record.reruns + self.failed[record.nodeid]})


def counted(record: TestRecord, reruns: int, policy: FlakyPolicy) -> TestRecord:
    """The record of a test that failed and then passed on its `reruns`-th rerun."""
    outcome = {"exclude": "skipped", "pass": "passed", "fail": record.outcome}[policy]
    return record.model_copy(update={"outcome": outcome, "flaky": True, "reruns": reruns})


def with_flaky(results: IterationResults, reruns: Reruns, policy: FlakyPolicy) -> IterationResults:
    """`results` with each flaky test's record counted by `policy`, and each test that failed
    every rerun as its latest failure, its reruns counted."""
    tests = [reruns.applied(t, policy) for t in results.tests]
    return results.model_copy(update={"tests": tests})
