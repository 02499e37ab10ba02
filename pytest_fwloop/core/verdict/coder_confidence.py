"""Seed 001's decision record (§5.5, §5.14; DESIGN.md §15), as plain decisions.

Each coder answer carries a confidence and may ask to abort. An answer below
`fwloop_min_confidence` is not applied blind: the coder is asked once more with more evidence,
and a second answer below it is INCONCLUSIVE. An abort, an inconclusive analysis and a run
where only declined tests are left end alike: converged with improvement when the pass count
rose over the baseline (§5.19), else failure, with the coder's words as the reason.
"""

from __future__ import annotations

from collections.abc import Sequence

from pytest_fwloop.core.machine.decimals import under
from pytest_fwloop.core.machine.outcomes import Outcome
from pytest_fwloop.core.records.agent_protocol import CoderAnswer
from pytest_fwloop.core.records.run_records import DecisionRecord, DecisionStatus


def judge(answer: CoderAnswer, minimum: float, asked_again: bool) -> DecisionRecord:
    """The answer's decision record; `asked_again`: an earlier answer of this iteration was
    already below the minimum. The confidence is judged exactly as written (0.599 < 0.6)."""
    confidence = answer.analysis.confidence
    status: DecisionStatus
    if answer.next_action == "abort":
        status = "abort"
    elif not under(confidence, minimum):
        status = "usable"
    else:
        status = "inconclusive" if asked_again else "low_confidence"
    return DecisionRecord(
        confidence=confidence, status=status, reason=answer.analysis.root_cause[:300]
    )


def stopped_short(pass_counts: Sequence[int], why: str) -> tuple[Outcome, str]:
    """The run's end when the coder stops it short of the target (`pass_counts`: the kept
    iterations', baseline first)."""
    if len(pass_counts) >= 2 and pass_counts[-1] > pass_counts[0]:
        return Outcome.CONVERGED_WITH_IMPROVEMENT, (
            f"{why}; pass count {pass_counts[0]} -> {pass_counts[-1]} over the baseline"
        )
    return Outcome.FAILURE, why
