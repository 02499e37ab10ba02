"""Per-test history across iterations (DESIGN.md §13): outcomes, and the regressions a patch made.

Pure: every function takes the measured iterations as (number, results) in order, baseline first.
A regression is a test that passed in one measured iteration and does not pass in a later one;
`broken_in` names the iteration whose patch broke it (the first failing one after its last pass).
"""

from __future__ import annotations

from collections.abc import Sequence

from pytest_fwloop.core.records.agent_protocol import Regression
from pytest_fwloop.core.suite.results import IterationResults, TestRecord, not_passing
from pytest_fwloop.core.suite.signature import excerpt, scrub, signature

Measured = Sequence[tuple[int, IterationResults]]

#: Bytes of failure text each regression carries to the coder and the reviewer.
REGRESSION_EXCERPT_BYTES = 1024


def passes(record: TestRecord) -> bool:
    return record.outcome in ("passed", "xfailed")


def outcomes_by_test(measured: Measured) -> dict[str, dict[str, str]]:
    """`summary.json["tests"]`: node id -> {iteration: outcome}, for every test any run saw."""
    table: dict[str, dict[str, str]] = {}
    for number, results in measured:
        for record in results.tests:
            table.setdefault(record.nodeid, {})[str(number)] = record.outcome
    return table


def broken_per_iteration(
    measured: Measured, rolled_back: frozenset[int] = frozenset()
) -> dict[str, list[str]]:
    """`summary.json["regressions"]`: iteration -> the tests that passed before its patch and do
    not pass after it. Each iteration is compared with the last one whose tree was kept: the
    iterations in `rolled_back` were undone, so the one after them started from the one before."""
    broken: dict[str, list[str]] = {}
    standing: IterationResults | None = None
    for number, results in measured:
        if standing is not None:
            now = regressions_between(standing, results)
            if now:
                broken[str(number)] = now
        if number not in rolled_back:
            standing = results
    return broken


def regressions_between(
    before: IterationResults, after: IterationResults, ran_only: bool = False
) -> list[str]:
    """The tests that pass in `before` and do not pass in `after`; with `ran_only`, only those
    that really ran in `before` (a carried pass says nothing of the patch in between)."""
    was = {t.nodeid for t in before.tests if passes(t) and not (ran_only and t.carried)}
    return [t.nodeid for t in after.tests if not_passing(t) and t.nodeid in was]


def open_regressions(measured: Measured, root: str = "") -> list[Regression]:
    """Tests failing in the latest iteration that passed in an earlier one, each with the
    iteration whose patch broke it: what the coder must mend first, and the reviewer check."""
    if not measured:
        return []
    latest = measured[-1][1]
    # Each iteration's records by node id, once: a lookup per failing test and iteration.
    indexed = [(number, _by_nodeid(results)) for number, results in measured]
    regressions = []
    for record in latest.tests:
        if not not_passing(record):
            continue
        broken_in = _broken_in(indexed, record.nodeid)
        if broken_in is not None:
            regressions.append(
                Regression(
                    nodeid=record.nodeid,
                    signature=signature(record, root),
                    excerpt=excerpt(scrub(record.longrepr, root), REGRESSION_EXCERPT_BYTES),
                    broken_in=broken_in,
                )
            )
    return regressions


def _by_nodeid(results: IterationResults) -> dict[str, TestRecord]:
    """A test's first record by its node id."""
    records: dict[str, TestRecord] = {}
    for record in results.tests:
        records.setdefault(record.nodeid, record)
    return records


def _broken_in(indexed: list[tuple[int, dict[str, TestRecord]]], nodeid: str) -> int | None:
    """The first iteration after the test's last pass, or None if it never passed."""
    broken: int | None = None
    for number, records in indexed:
        record = records.get(nodeid)
        if record is not None and passes(record):
            broken = None
        elif broken is None and record is not None and _passed_before(indexed, number, nodeid):
            broken = number
    return broken


def _passed_before(
    indexed: list[tuple[int, dict[str, TestRecord]]], number: int, nodeid: str
) -> bool:
    return any(
        passes(records[nodeid]) for n, records in indexed if n < number and nodeid in records
    )


def baseline_regressions(measured: Measured) -> list[str]:
    """Tests that passed at the baseline and do not pass in the latest iteration: SUCCESS is
    withheld while there are any, whatever the target pass rate (DESIGN.md §13)."""
    if len(measured) < 2:
        return []
    baseline = {t.nodeid for t in measured[0][1].tests if passes(t)}
    return [t.nodeid for t in measured[-1][1].tests if not_passing(t) and t.nodeid in baseline]


def flaky_per_iteration(measured: Measured) -> dict[str, list[str]]:
    """`summary.json["flaky"]`: iteration -> the tests that passed only on a rerun in it."""
    flaky = {str(n): [t.nodeid for t in results.tests if t.flaky] for n, results in measured}
    return {number: nodeids for number, nodeids in flaky.items() if nodeids}
