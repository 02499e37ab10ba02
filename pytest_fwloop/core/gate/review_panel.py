"""A review panel's decision (seed 002's review board; docs/providers.md), as a pure function.

Every member of `fwloop_review_panel` judges the same patch. `fwloop_review_rule` says how many
approvals pass it: `all` (every member) or `majority` (more than half: two of three, both of
two). The panel's word is one reviewer answer for the gate: its decision, the must-fix items of
every member that asked for changes (each naming who raised it, a duplicate once), and the
highest risk any member gave, which is what `fwloop_max_risk` bounds. A decision the members
did not all share is split, and the trace says so. `fwloop replay` recomputes it from the
recorded votes with this same function.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from pytest_fwloop.core.machine.decimals import written
from pytest_fwloop.core.records.agent_protocol import MustFix, ReviewerAnswer

ReviewRule = Literal["all", "majority"]
REVIEW_RULES: tuple[ReviewRule, ...] = ("all", "majority")
#: Characters of each member's summary kept in the panel's.
SUMMARY_CHARS = 300


def approvals_needed(rule: ReviewRule, members: int) -> int:
    """How many members must approve: all of them, or more than half."""
    return members if rule == "all" else members // 2 + 1


@dataclass(frozen=True)
class PanelVerdict:
    """What the panel decided, and the one answer the gate judges."""

    rule: ReviewRule
    needed: int
    approvals: int
    members: int
    #: The members did not all decide alike.
    split: bool
    review: ReviewerAnswer
    #: One line for the trace: split or unanimous, the count, each member's vote.
    line: str


def panel_verdict(rule: ReviewRule, votes: Sequence[tuple[str, ReviewerAnswer]]) -> PanelVerdict:
    """The decision of `votes` (member's provider spec, its validated answer) under `rule`."""
    if not votes:
        raise ValueError("a review panel decides on at least one vote")
    needed = approvals_needed(rule, len(votes))
    approvals = sum(answer.decision == "approve" for _, answer in votes)
    decision: Literal["approve", "changes_requested"] = (
        "approve" if approvals >= needed else "changes_requested"
    )
    split = 0 < approvals < len(votes)
    risk = max(answer.risk for _, answer in votes)
    counted = f"{approvals} of {len(votes)} approve (fwloop_review_rule={rule}: {needed} needed)"
    review = ReviewerAnswer(
        decision=decision,
        must_fix=merged_must_fix(votes),
        risk=risk,
        summary=f"review panel, {counted}: "
        + "; ".join(
            f"{who} {answer.decision} (risk {written(answer.risk)}): "
            f"{answer.summary[:SUMMARY_CHARS]}"
            for who, answer in votes
        ),
    )
    each = ", ".join(
        f"{who} {answer.decision} (risk {written(answer.risk)})" for who, answer in votes
    )
    line = (
        f"{'split' if split else 'unanimous'} decision, {counted}: {decision}; {each}; "
        f"highest risk {risk:.2f}"
    )
    return PanelVerdict(rule, needed, approvals, len(votes), split, review, line)


def merged_must_fix(votes: Sequence[tuple[str, ReviewerAnswer]]) -> list[MustFix]:
    """The must-fix items of every member that asked for changes, in member order; an item two
    members raised (same issue, file and line) comes once, naming both."""
    raisers: dict[tuple[str, str | None, int | None], list[str]] = {}
    items: dict[tuple[str, str | None, int | None], MustFix] = {}
    for who, answer in votes:
        if answer.decision != "changes_requested":
            continue
        for item in answer.must_fix or [MustFix(issue=answer.summary)]:
            key = (" ".join(item.issue.split()).lower(), item.file, item.line)
            items.setdefault(key, item)
            raisers.setdefault(key, [])
            if who not in raisers[key]:
                raisers[key].append(who)
    return [
        item.model_copy(update={"issue": f"{item.issue} (raised by {', '.join(raisers[key])})"})
        for key, item in items.items()
    ]
