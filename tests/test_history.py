"""Per-test history across iterations (DESIGN.md §13), on plain records."""

from __future__ import annotations

from pytest_fwloop.core.suite.history import (
    baseline_regressions,
    broken_per_iteration,
    open_regressions,
    outcomes_by_test,
)
from pytest_fwloop.core.suite.results import IterationResults, TestRecord


def run(**outcomes: str) -> IterationResults:
    return IterationResults(
        exitstatus=1,
        tests=[
            TestRecord.model_validate(
                {
                    "nodeid": f"t.py::{name}",
                    "outcome": outcome,
                    "phase": "call",
                    "crash": "" if outcome == "passed" else f"t.py:3: AssertionError: {name}",
                }
            )
            for name, outcome in outcomes.items()
        ],
    )


HISTORY = [
    (1, run(a="passed", b="failed", c="passed")),
    (2, run(a="failed", b="passed", c="passed")),  # fixes b, breaks a
    (3, run(a="failed", b="passed", c="failed")),  # breaks c
    (4, run(a="passed", b="passed", c="failed")),  # a mended
]


def test_every_test_has_its_outcome_per_iteration() -> None:
    table = outcomes_by_test(HISTORY)
    assert table["t.py::a"] == {"1": "passed", "2": "failed", "3": "failed", "4": "passed"}


def test_each_iteration_names_the_tests_its_patch_broke() -> None:
    assert broken_per_iteration(HISTORY) == {"2": ["t.py::a"], "3": ["t.py::c"]}


def test_open_regressions_name_the_iteration_that_broke_each() -> None:
    assert [(r.nodeid, r.broken_in) for r in open_regressions(HISTORY[:3])] == [
        ("t.py::a", 2),
        ("t.py::c", 3),
    ]
    assert [(r.nodeid, r.broken_in) for r in open_regressions(HISTORY)] == [("t.py::c", 3)]
    # A test that never passed is a failure, not a regression.
    assert open_regressions(HISTORY[:1]) == []


def test_baseline_regressions_are_the_baseline_passes_failing_now() -> None:
    assert baseline_regressions(HISTORY) == ["t.py::c"]
    assert baseline_regressions(HISTORY[:2]) == ["t.py::a"]
    assert baseline_regressions(HISTORY[:1]) == []


def test_after_a_rollback_the_next_iteration_is_compared_with_the_tree_that_stood() -> None:
    attempts = [
        (1, run(a="passed", b="failed")),
        (2, run(a="failed", b="failed")),  # broke a: rolled back
        (3, run(a="passed", b="failed")),  # from the baseline's tree again: nothing broken
        (4, run(a="failed", b="passed")),  # broke a, fixed b: kept
    ]
    assert broken_per_iteration(attempts, frozenset({2})) == {"2": ["t.py::a"], "4": ["t.py::a"]}
