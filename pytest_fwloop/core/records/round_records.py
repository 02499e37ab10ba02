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


#: What became of a ranked symbol: its code sent, its signature only, or nothing.
Sent = Literal["source", "repo_map", "no"]


class RankedCandidate(Record):
    """One symbol in `rounds/NN/coder-K.ranking.json`: where it is, what it scored by each kind
    of evidence, and what became of it."""

    path: str = Field(description="the file, relative to the rootdir")
    symbol: str = Field(description="the symbol's name (`lines A-B` for a window of a file)")
    start_line: int = Field(description="its first line")
    end_line: int = Field(description="its last line")
    rank: int | None = Field(
        description="1-based place in the ranking the request was packed from; null: withheld"
    )
    score: float = Field(description="what it was ranked by: the signals' sum times `factor`")
    signals: dict[str, float] = Field(
        description="points by kind of evidence, before the factor (docs/providers.md, "
        '"Why a function was sent")'
    )
    factor: float = Field(
        description="what the spectrum multiplied the points by (Python code no failing test "
        "ran keeps a tenth); 1.0 where the spectrum said nothing"
    )
    reasons: list[str] = Field(description="its three strongest reasons, as the request says")
    sent: Sent = Field(
        description="`source`: its code was in `sources`; `repo_map`: only its signature, in "
        "`repo_map`; `no`: neither"
    )
    why_not: str | None = Field(
        default=None,
        description="`sent` short of `source`: `budget` (ranked below what "
        "fwloop_source_bytes held), `sent earlier in this iteration`, `hidden` (a file no model "
        "is shown), or the patch policy's rule for a file a patch may not change",
    )


class RankingRecord(Record):
    """`rounds/NN/coder-K.ranking.json`: every candidate the localizer ranked for the coder's
    request first sent in call K, and whether it was sent (DESIGN.md §18)."""

    iteration: int = Field(description="the iteration of the request")
    files_indexed: int = Field(description="files of the tree the index held")
    ranked: int = Field(description="symbols ranked in files a patch may change")
    withheld: int = Field(description="symbols some evidence pointed at in other files")
    left_out: int = Field(
        description="ranked or withheld symbols past the record's bound (`MAX_AUDITED`), in "
        "neither list: all ranked below every candidate listed"
    )
    candidates: list[RankedCandidate] = Field(
        description="the ranked, best first, then the withheld, best first"
    )


class CandidateEntry(Record):
    """One candidate in `rounds/NN/candidates.json`: its checks, its scores, its verdict."""

    number: int = Field(description="1-based, in the order the coder was asked")
    call: str = Field(description="the coder call that answered it, `coder-K` (its files)")
    patch: str | None = Field(
        description="`candidates/K/patch.diff`, the one diff judged; null for an answer with none"
    )
    summary: str = Field(description="the coder's summary of it")
    same_as: int | None = Field(
        description="the earlier candidate making the same change (checked once), or null"
    )
    agreement: int = Field(description="candidates that made this change, itself included")
    risk: float | None = Field(description="the risk the gate summed, once it approved; or null")
    build: Literal["ok", "failed", "not_run"] = Field(description="its build in its own tree")
    build_s: float = Field(description="seconds its build took (0 when none ran)")
    fixed: list[str] | None = Field(
        description="failing tests its focus run passed; null when its tests did not run"
    )
    still_failing: list[str] = Field(description="failing tests its focus run left failing")
    broke: list[str] | None = Field(
        description="passing tests its whole-suite run did not pass; null when none ran"
    )
    tests_s: float = Field(description="seconds its test runs took")
    verdict: Literal["chosen", "lost", "dropped"] = Field(description="what became of it")
    why: str = Field(description="why it won or lost, with the rule that decided")


class CandidatesRecord(Record):
    """`rounds/NN/candidates.json`: the K candidates of this iteration and the choice among
    them (DESIGN.md §19); `fwloop replay` derives the choice again from these facts."""

    iteration: int = Field(description="the iteration")
    k: int = Field(description="`fwloop_candidates`")
    jobs: int = Field(description="`fwloop_candidate_jobs` in force")
    failing: list[str] = Field(description="the failing tests every candidate was tried on")
    chosen: int | None = Field(description="the candidate applied, or null when none survived")
    pass_at_1: bool = Field(description="the first candidate alone solved the iteration")
    pass_at_k: bool = Field(description="some candidate did")
    candidates: list[CandidateEntry] = Field(description="every candidate, in order")
