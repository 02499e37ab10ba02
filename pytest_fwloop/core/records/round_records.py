"""The records of a round's folder, `rounds/NN/` (DESIGN.md §8): calls, verdicts, panels, commands.

Kept apart from the run-level records of `records.py`; `docs/run-directory.md` is generated from
both. Pure: pydantic and the standard library only.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field

from pytest_fwloop.core.records.run_records import AnalysisRecord, MetricChange, Record


def call_files(folder: Path, role: str, suffix: str) -> list[Path]:
    """A round's `ROLE-K.SUFFIX` files (as the call log names them), in call order: K=10 after 9."""
    return sorted(
        folder.glob(f"{role}-*.{suffix}"),
        key=lambda path: int(path.name.split(".")[0].rpartition("-")[2]),
    )


class CallMeta(Record):
    """`rounds/NN/ROLE-K.meta.json`: how one provider call went."""

    provider: str = Field(description="the provider spec called")
    attempt: int = Field(description="1-based, over every call of one ask and every provider")
    duration_s: float = Field(description="seconds the call took")
    errors: list[str] = Field(description="why the answer was refused, if it was")
    error_kind: str | None = Field(
        description="the provider error kind, `internal_error` for a call that crashed, or null"
    )
    retry_count: int = Field(description="earlier calls of this ask to the same provider")
    retry_reason: str | None = Field(description="why this call was made, when not the first")
    usage: dict[str, float] = Field(description="what the provider reported for this call")
    stderr_tail: str = Field(description="the last 2000 characters of the provider's stderr")


class ConvergenceRecord(Record):
    """`rounds/NN/convergence.json`: the checker's verdict after this iteration."""

    iteration: int = Field(description="1-based iteration number")
    pass_counts: list[int] = Field(description="pass counts so far")
    total_counts: list[int] = Field(description="total counts so far")
    convergence_type: str | None = Field(description="the verdict, or null to continue")
    reason: str = Field(description="the rule that decided, with its values and thresholds")
    score: float = Field(description="the convergence score")
    criteria: dict[str, float] = Field(description="the criteria used")
    max_iter: int | None = Field(
        default=None,
        description="the iteration limit in force (a resumed run may have raised it since); "
        "null in older records",
    )
    metric_tolerance: dict[str, float] | None = Field(
        default=None,
        description="fwloop_metric_tolerance as parsed (`*`: any metric); null in older "
        "records, whose metrics replay does not judge",
    )
    metrics: list[MetricChange] = Field(
        default_factory=list, description="each metric against the baseline (below)"
    )
    mode: Literal["interactive", "ci", "auto"] | None = Field(
        default=None, description="the execution mode, which the recommendation names"
    )
    analysis: AnalysisRecord | None = Field(
        default=None, description="the analysis after this iteration (below)"
    )


class PanelVote(Record):
    """One member's vote in `panel-K.json`."""

    provider: str = Field(description="the member's provider spec")
    call: str = Field(
        description="the call whose answer is the vote, `reviewer-K`: its request, answer and "
        "meta files are `reviewer-K.*` in the same round"
    )
    decision: Literal["approve", "changes_requested"] = Field(description="the member's decision")
    risk: float = Field(description="the member's risk, 0..1")
    must_fix: int = Field(description="how many must-fix items the member named")


class PanelRecord(Record):
    """`rounds/NN/panel-K.json`: the K-th decision of the review panel in this iteration."""

    rule: Literal["all", "majority"] = Field(description="`fwloop_review_rule`")
    needed: int = Field(description="approvals the rule needs for this many members")
    approvals: int = Field(description="members that approved")
    decision: Literal["approve", "changes_requested"] = Field(
        description="the panel's decision, which the gate took"
    )
    split: bool = Field(description="the members did not all decide alike")
    risk: float = Field(description="the highest risk of any member: what fwloop_max_risk bounds")
    max_risk: float = Field(description="`fwloop_max_risk` when the panel decided")
    votes: list[PanelVote] = Field(description="each member's vote, in the panel's order")


class CommandEntry(Record):
    """One tester command in `rounds/NN/commands.json` (written without its null fields)."""

    argv: list[str] = Field(description="the command as proposed")
    reason: str = Field(description="why the tester proposed it")
    status: Literal["passed", "failed", "blocked"] = Field(description="what became of it")
    blocked_because: str | None = Field(
        default=None, description="`blocked` only: the allowlist's reason"
    )
    ended: str | None = Field(default=None, description="ran only: how it ended")
    duration_s: float | None = Field(default=None, description="ran only: seconds it took")
    log: str | None = Field(default=None, description="ran only: `commands/K.log`, its output")


class CommandsRecord(Record):
    """`rounds/NN/commands.json`: the tester's commands of this iteration."""

    commands: list[CommandEntry] = Field(description="in the order proposed")
