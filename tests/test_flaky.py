"""Flaky tests (DESIGN.md §13): which failures are rerun, and how a flaky one counts."""

from __future__ import annotations

import pytest

from pytest_fwloop.core.suite.flaky import Reruns, rerun_candidates, with_flaky
from pytest_fwloop.core.suite.results import IterationResults, TestRecord


def record(nodeid: str, outcome: str = "failed", **extra: object) -> TestRecord:
    crash = "" if outcome == "passed" else f"t.py:3: AssertionError: {nodeid}"
    return TestRecord.model_validate(
        {"nodeid": nodeid, "outcome": outcome, "phase": "call", "crash": crash, **extra}
    )


def results(*records: TestRecord) -> IterationResults:
    return IterationResults(exitstatus=1, tests=list(records))


def test_new_failures_are_rerun_but_not_the_environments_collection_or_commands() -> None:
    now = results(
        record("t.py::new"),
        record("t.py::ok", "passed"),
        record("t.py::board", env_failure="ConnectionRefusedError: down"),
        TestRecord(nodeid="t.py", outcome="error", phase="collect"),
        record("tester::make check"),
    )
    assert rerun_candidates(now, None) == ["t.py::new"]


def test_a_failure_seen_the_same_way_before_is_not_rerun_unless_it_was_flaky() -> None:
    before = results(record("t.py::same"), record("t.py::was_flaky", flaky=True))
    now = results(record("t.py::same"), record("t.py::was_flaky"))
    assert rerun_candidates(now, before) == ["t.py::was_flaky"]
    changed = results(record("t.py::same", crash="t.py:9: AssertionError: other"))
    assert rerun_candidates(changed, before) == ["t.py::same"]


@pytest.mark.parametrize(
    ("policy", "outcome", "counts"),
    [("exclude", "skipped", (1, 1)), ("pass", "passed", (2, 2)), ("fail", "failed", (1, 2))],
)
def test_a_flaky_test_counts_as_the_policy_says(
    policy: str, outcome: str, counts: tuple[int, int]
) -> None:
    counted = with_flaky(
        results(record("t.py::a", "passed"), record("t.py::flake")),
        Reruns(flaky={"t.py::flake": 1}),
        policy,  # type: ignore[arg-type]
    )
    flake = counted.tests[1]
    assert (flake.outcome, flake.flaky, flake.reruns) == (outcome, True, 1)
    assert (counted.pass_count, counted.total_count) == counts


def test_a_test_failing_every_rerun_keeps_its_latest_own_failure_and_counts_its_reruns() -> None:
    """A hung board's empty buffer first, then the defect, then the environment down: the
    defect is what the coder gets, and both reruns are counted (issue 33)."""
    first = results(record("t.py::a", crash="t.py:3: TIMEOUT: ''"), record("t.py::b"))
    reruns = Reruns()
    failing = reruns.take(
        1, ["t.py::a", "t.py::b"], results(record("t.py::a"), record("t.py::b", "passed"))
    )
    assert failing == ["t.py::a"]
    down = record("t.py::a", crash="", env_failure="ConnectionRefusedError: down")
    assert reruns.take(2, failing, results(down)) == ["t.py::a"]
    a, b = with_flaky(first, reruns, "fail").tests
    assert (a.crash, a.reruns, a.flaky) == ("t.py:3: AssertionError: t.py::a", 2, False)
    assert (b.flaky, b.reruns) == (True, 1)
