"""The patch gate's decision order (DESIGN.md §3, §6; seed 001 §5.1) as plain decisions.

A patch is refused when it is empty, a repeat (told once), against the policy, or does not apply;
only then is the reviewer asked, whose `changes_requested` is bounded per iteration and whose
risk must not exceed `fwloop_max_risk`. `patch_gate.PatchGate` gathers the facts (git, the
reviewer's call) and records what each refusal leaves behind.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from pytest_fwloop.core.gate.policy import Violation
from pytest_fwloop.core.gate.repeats import RepeatedPatch
from pytest_fwloop.core.gate.risky import raised_risk
from pytest_fwloop.core.machine.decimals import over, written
from pytest_fwloop.core.machine.fsm import ErrorType, LoopEvent
from pytest_fwloop.core.machine.outcomes import Outcome
from pytest_fwloop.core.machine.recovery import ErrorState
from pytest_fwloop.core.records.agent_protocol import (
    CoderAnswer,
    MustFix,
    ReviewerAnswer,
    RiskyChange,
)


@dataclass(frozen=True)
class Refusal:
    """Why a patch stops at the gate: the event, the error for recovery, what the coder is told,
    and the name of its `rejected-K-WHY.diff` (None: not recorded)."""

    event: LoopEvent
    error: ErrorState | None
    must_fix: list[MustFix]
    recorded_as: str | None
    reason: str = ""


def first_refusal(
    patch: str,
    repeat: RepeatedPatch | None,
    repeat_told: bool,
    violations: Callable[[], list[Violation]],
    apply_problem: Callable[[], str | None],
    answer: CoderAnswer,
) -> Refusal | None:
    """The checks before the reviewer, in order; each later one runs only if the earlier pass."""
    if not patch.strip():
        return Refusal(
            LoopEvent.PATCH_REJECTED,
            ErrorState(
                ErrorType.MODEL_FAILURE,
                f"the coder proposed no patch (root cause given: "
                f"{answer.analysis.root_cause[:160]!r})",
                LoopEvent.RECOVER_TO_ANALYSIS,
            ),
            [],
            None,
        )
    if repeat is not None:
        if repeat_told:
            return Refusal(
                LoopEvent.PATCH_REJECTED,
                ErrorState(
                    ErrorType.MODEL_FAILURE,
                    f"the coder proposed {repeat.what} again, after being told once",
                    LoopEvent.RECOVER_TO_ANALYSIS,
                    terminal_outcome=Outcome.REPEATED_PATCH,
                ),
                [],
                "repeat",
            )
        return Refusal(
            LoopEvent.PATCH_REPEATED,
            None,
            [MustFix(issue=repeat.must_fix())],
            "repeat",
            f"{repeat.must_fix()} (the coder is told once)",
        )
    broken = violations()
    if broken:
        return Refusal(
            LoopEvent.PATCH_REJECTED,
            ErrorState(
                ErrorType.POLICY_VIOLATION,
                "; ".join(v.message for v in broken[:3]),
                LoopEvent.RECOVER_TO_ANALYSIS,
            ),
            [MustFix(issue=v.message, file=v.path or None) for v in broken],
            "policy",
        )
    problem = apply_problem()
    if problem is not None:
        error, must_fix = apply_failure(f"git apply --check: {problem}")
        return Refusal(LoopEvent.PATCH_REJECTED, error, must_fix, "apply")
    return None


#: What git says when the tree, not the patch, is at fault.
UNWRITABLE_TREE = ("Permission denied", "Read-only file system", "Operation not permitted")


def apply_failure(message: str) -> tuple[ErrorState, list[MustFix]]:
    """A patch git would not apply: the coder is told and asked again, unless git could not
    read or write the tree itself (a read-only file or mount), which no patch can mend."""
    if any(mark in message for mark in UNWRITABLE_TREE):
        return (
            ErrorState(
                ErrorType.PATCH_APPLY_FAILURE,
                f"the tree cannot be written ({message}); make it writable and rerun: the "
                "coder is not asked to work around it",
                LoopEvent.RECOVER_TO_ANALYSIS,
                terminal_outcome=Outcome.PATCH_APPLY_FAILED,
            ),
            [],
        )
    return (
        ErrorState(ErrorType.PATCH_APPLY_FAILURE, message, LoopEvent.RECOVER_TO_ANALYSIS),
        [MustFix(issue=f"the patch does not apply: {message}")],
    )


def review_refusal(
    review: ReviewerAnswer,
    rounds: int,
    max_rounds: int,
    max_risk: float,
    iteration: int,
    risky: Sequence[RiskyChange] = (),
    who: str = "reviewer",
) -> Refusal | None:
    """The reviewer's word: changes requested (bounded per iteration), then the risk bound on
    the reviewer's risk raised by the patch's `risky` code. `rounds` counts this iteration's
    requests for changes, this one included; `who` is the `reviewer` or the `review panel`
    (whose risk is its members' highest)."""
    if review.decision == "changes_requested":
        must_fix = list(review.must_fix) or [MustFix(issue=review.summary)]
        if rounds >= max_rounds:
            return Refusal(
                LoopEvent.PATCH_REJECTED,
                ErrorState(
                    ErrorType.MODEL_FAILURE,
                    f"the {who} requested changes {rounds} times in iteration {iteration} "
                    f"(fwloop_review_rounds={max_rounds})",
                    LoopEvent.RECOVER_TO_ANALYSIS,
                    terminal_outcome=Outcome.FAILURE,
                ),
                [],
                "review",
            )
        return Refusal(
            LoopEvent.REVIEW_CHANGES_REQUESTED,
            None,
            must_fix,
            "review",
            f"{who} requested changes ({len(must_fix)} must-fix item(s), round "
            f"{rounds}/{max_rounds})",
        )
    risk, said = raised_risk(review.risk, risky)
    if over(risk, max_risk):
        raised = f" and its risky code raised it to {written(risk)}" if risky else ""
        return Refusal(
            LoopEvent.PATCH_REJECTED,
            ErrorState(
                ErrorType.POLICY_VIOLATION,
                f"{who} risk {said} > fwloop_max_risk {written(max_risk)}",
                LoopEvent.RECOVER_TO_ANALYSIS,
            ),
            [
                MustFix(
                    issue=f"the {who} rated the patch's risk {written(review.risk)}{raised}, "
                    f"above fwloop_max_risk={written(max_risk)}; make a smaller, safer change"
                )
            ],
            "risk",
        )
    return None
