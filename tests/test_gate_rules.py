"""The patch gate's decision order as plain decisions (seed 001 §5.1), in-process."""

from __future__ import annotations

from collections.abc import Callable
from typing import NoReturn

import pytest

from pytest_fwloop.core.gate.gate_rules import Refusal, apply_failure, first_refusal, review_refusal
from pytest_fwloop.core.gate.policy import Violation
from pytest_fwloop.core.gate.repeats import RepeatedPatch
from pytest_fwloop.core.machine.fsm import ErrorType
from pytest_fwloop.core.machine.outcomes import Outcome
from pytest_fwloop.core.records.agent_protocol import CoderAnswer, MustFix, ReviewerAnswer

ANSWER = CoderAnswer.model_validate(
    {
        "analysis": {"root_cause": "off by one", "hypotheses": ["h"], "confidence": 0.5},
        "patch": "diff",
        "summary": "fix",
    }
)
VIOLATION = Violation("tests/t.py", "protected", "tests/t.py: protected path")


def never() -> NoReturn:
    raise AssertionError("checked out of order")


def refuse(
    patch: str = "diff",
    repeat: RepeatedPatch | None = None,
    told: bool = False,
    violations: Callable[[], list[Violation]] = list,
    problem: Callable[[], str | None] = lambda: None,
) -> Refusal:
    refusal = first_refusal(patch, repeat, told, violations, problem, ANSWER)
    assert refusal is not None
    return refusal


def test_an_empty_patch_stops_before_anything_is_checked() -> None:
    refusal = refuse("  \n", violations=never, problem=never)
    assert refusal.error is not None
    assert refusal.error.type is ErrorType.MODEL_FAILURE
    assert refusal.recorded_as is None


def test_a_repeat_is_told_once_then_ends_the_run() -> None:
    first = refuse(repeat=RepeatedPatch(2), violations=never, problem=never)
    assert (first.event, first.error, first.recorded_as) == (
        "patch_repeated",
        None,
        "repeat",
    )
    second = refuse(repeat=RepeatedPatch(2), told=True, violations=never, problem=never)
    assert second.error is not None
    assert second.error.terminal_outcome is Outcome.REPEATED_PATCH


def test_the_policy_comes_before_git_apply_check() -> None:
    refusal = refuse(violations=lambda: [VIOLATION], problem=never)
    assert refusal.recorded_as == "policy"
    assert refusal.must_fix == [MustFix(issue=VIOLATION.message, file="tests/t.py")]
    applied = refuse(problem=lambda: "patch does not apply")
    assert applied.error is not None
    assert applied.error.type is ErrorType.PATCH_APPLY_FAILURE
    assert first_refusal("diff", None, False, list, lambda: None, ANSWER) is None


def review(decision: str, risk: float = 0.1) -> ReviewerAnswer:
    return ReviewerAnswer.model_validate(
        {"decision": decision, "must_fix": [], "risk": risk, "summary": "look again"}
    )


@pytest.mark.parametrize(
    ("answer", "rounds", "event", "terminal"),
    [
        (review("changes_requested"), 1, "review_changes_requested", None),
        (review("changes_requested"), 3, "patch_rejected", Outcome.FAILURE),
        (review("approve", risk=0.9), 1, "patch_rejected", None),
    ],
)
def test_the_reviewer_bounds_rounds_then_risk(
    answer: ReviewerAnswer, rounds: int, event: str, terminal: Outcome | None
) -> None:
    refusal = review_refusal(answer, rounds, 3, 0.7, iteration=2)
    assert refusal is not None
    assert refusal.event == event
    assert (refusal.error.terminal_outcome if refusal.error else None) is terminal
    assert review_refusal(review("approve"), 1, 3, 0.7, iteration=2) is None


@pytest.mark.parametrize(
    "message",
    [
        "error: unable to write file 'src/uart.c' mode 100644: Permission denied",
        "error: src/uart.c: Read-only file system",
    ],
)
def test_a_tree_git_cannot_write_ends_the_run_without_the_coder(message: str) -> None:
    error, must_fix = apply_failure(message)
    assert error.terminal_outcome is Outcome.PATCH_APPLY_FAILED
    assert must_fix == []


def test_a_patch_that_does_not_fit_goes_back_to_the_coder() -> None:
    error, must_fix = apply_failure("error: patch failed: src/uart.c:12")
    assert error.terminal_outcome is None
    assert [m.issue for m in must_fix] == [
        "the patch does not apply: error: patch failed: src/uart.c:12"
    ]
