"""The run directory's records as models (DESIGN.md §8): one source for writers, readers and docs.

Every JSON file the loop writes under `.fwloop/runs/<run-id>/` is one of these models, dumped
with `model_dump(mode="json")`; `docs/run-directory.md` is generated from their fields
(`python -m pytest_fwloop.docgen docs`), and a test fails when it drifts.
Pure: pydantic and the standard library only.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from pytest_fwloop.core.fsm import IterationKind
from pytest_fwloop.core.outcomes import Outcome


def call_files(folder: Path, role: str, suffix: str) -> list[Path]:
    """A round's `ROLE-K.SUFFIX` files (as the call log names them), in call order: K=10 after 9."""
    return sorted(
        folder.glob(f"{role}-*.{suffix}"),
        key=lambda path: int(path.name.split(".")[0].rpartition("-")[2]),
    )


class _Record(BaseModel):
    # Readers (replay, reports) reject a record that is not exactly ours.
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class UsageTotals(_Record):
    """What the providers reported over a set of calls."""

    calls: int = Field(description="calls made, failed ones included")
    unreported_calls: int = Field(description="calls whose provider reports no usage")
    input_tokens: float = Field(description="input tokens, cache reads included")
    cached_input_tokens: float = Field(description="input tokens read from a cache")
    output_tokens: float = Field(description="output tokens")
    cost_usd: float = Field(description="cost in USD, what `--fwloop-budget-usd` counts")
    tokens: float = Field(description="input + output, what `--fwloop-budget-tokens` counts")


class UsageRecord(_Record):
    """`summary.json["usage"]`: per role and in total."""

    roles: dict[str, UsageTotals] = Field(description="per role (`coder`, `reviewer`, `tester`)")
    total: UsageTotals = Field(description="over every call of the run")


class RunContext(_Record):
    """What the run was started with, for an audit: how, on what, from which commit."""

    command_line: list[str] = Field(description="the controller's argv, as started")
    python: str = Field(description="the Python version")
    pytest: str = Field(description="the pytest version")
    fwloop: str = Field(description="the pytest-fwloop version")
    plugins: dict[str, str] = Field(description="every installed pytest plugin's version, by name")
    git_head: str | None = Field(
        description="the commit the tree's own git repository was at (read only), else null"
    )
    randomly_seed: int | None = Field(
        description="the pytest-randomly seed every child run used, when that plugin is active"
    )


class DeclinedRecord(_Record):
    """A test the coder declined (DESIGN.md §15): not sent again while it fails the same way."""

    signature: str = Field(description="its failure signature when declined")
    reason: str = Field(description="the coder's words")
    iteration: int = Field(description="the iteration whose coder call declined it")


DecisionStatus = Literal["usable", "low_confidence", "inconclusive", "declined", "abort"]


class DecisionRecord(_Record):
    """One coder answer as seed 001's decision record (§5.5, §5.14) judges it."""

    confidence: float = Field(description="the coder's confidence, 0..1")
    status: DecisionStatus = Field(
        description="`usable` (goes to the gate), `low_confidence` (below "
        "fwloop_min_confidence: asked once more), `inconclusive` (low twice: the run ends), "
        "`declined` (no patch: not a code defect) or `abort` (the coder asked to stop)"
    )
    reason: str = Field(default="", description="the coder's root cause, bounded")


class HeldPlace(_Record):
    """A labgrid place a run held, from the iteration whose tests first used it."""

    place: str = Field(description="the place's name at the coordinator")
    from_iteration: int = Field(description="the first iteration that ran on it")


class LabgridRecord(_Record):
    """`summary.json["labgrid"]` and `state.json`'s: the board farm's side of a run."""

    place: str | None = Field(description="the place held last, null if none was had")
    tags: list[str] = Field(description="the tags it was reserved by (fwloop_labgrid_reserve)")
    coordinator: str = Field(description="the coordinator's HOST:PORT")
    identity: str = Field(description="`HOST/USER`: the labgrid identity the locks belong to")
    held: list[HeldPlace] = Field(description="every place held, in order (a swap adds one)")


class BestTree(_Record):
    """The best tree a run kept short of success (DESIGN.md §15)."""

    iteration: int = Field(description="the earliest iteration with the most passing tests")
    pass_count: int = Field(description="its pass count")
    total_count: int = Field(description="its total count")
    in_place: bool = Field(
        description="left in the tree (--fwloop-keep=best, or the operator said so); else the "
        "baseline is, and `apply` puts this tree back"
    )
    apply: str = Field(description="the command that puts it in place: `fwloop apply RUN`")


class Summary(_Record):
    """`summary.json`: the final record of a run."""

    run_id: str = Field(description="the run's id, also its directory name")
    outcome: Outcome = Field(description="why the run ended, in the outcome vocabulary")
    final_state: Literal["SUCCESS", "FAILURE", "ABORTED"] = Field(
        description="the terminal state of the state machine"
    )
    iterations: int = Field(description="iterations whose tests ran, the baseline included")
    convergence_type: str | None = Field(description="seed §5.19 verdict, or null")
    reason: str = Field(description="why the run ended, with the numbers that decided it")
    pass_counts: list[int] = Field(description="pass count per measured iteration")
    total_counts: list[int] = Field(description="total count per measured iteration")
    executed_counts: list[int] = Field(
        description="test executions per measured iteration: the focus, the regression gate, "
        "flaky, environment and tester reruns (carried outcomes are not executions)"
    )
    coder_calls: int = Field(description="coder calls made, retries included")
    usage: UsageRecord = Field(description="agent usage (below)")
    unresolved: list[str] = Field(description="node ids still not passing in the last iteration")
    patch: Literal["final.patch", "best.patch"] | None = Field(
        description="the patch file this run left, if any"
    )
    exit_status: int = Field(description="the exit status of `pytest --fwloop` (DESIGN.md §10)")
    mode: Literal["interactive", "ci", "auto"] = Field(description="the execution mode")
    criteria: dict[str, float] = Field(description="the convergence criteria used, by field")
    max_iter: int = Field(description="the iteration limit")
    rootdir: str = Field(description="the tree the loop worked on")
    baseline_snapshot: str = Field(description="shadow-repository commit of the baseline tree")
    internal_error: str | None = Field(
        description="`internal-error.txt` when the outcome is `internal_error`, else null"
    )
    finished: str = Field(description="UTC time the run ended (ISO 8601)")
    duration_s: float = Field(description="wall-clock seconds of the run")
    context: RunContext = Field(description="what the run was started with (below)")
    tests: dict[str, dict[str, str]] = Field(
        description="per test (node id): its outcome in each measured iteration, by number"
    )
    regressions: dict[str, list[str]] = Field(
        description="per iteration (number): the tests that passed in the iteration before it "
        "and do not pass in it"
    )
    flaky: dict[str, list[str]] = Field(
        description="per iteration (number): the tests that failed and then passed on a rerun "
        "with no code change (counted by fwloop_flaky_policy, never sent to the coder)"
    )
    labgrid: LabgridRecord | None = Field(
        default=None, description="the labgrid place the loop held (below), null without a farm"
    )
    declined: dict[str, DeclinedRecord] = Field(
        default_factory=dict, description="node id: the tests the coder declined, and why"
    )
    best: BestTree | None = Field(
        default=None,
        description="the best kept tree of a run that ended short of success (below), or null",
    )
    known_failures: dict[str, str] = Field(
        default_factory=dict,
        description="node id: the last outcome of each test named in --fwloop-known-failures "
        "(`passed`: it can leave the file)",
    )


class CrashSummary(_Record):
    """`summary.json` of a run whose end itself failed before any summary was written."""

    run_id: str = Field(description="the run's id")
    outcome: Literal["internal_error"] = Field(description="always `internal_error`")
    final_state: Literal["FAILURE"] = Field(description="always `FAILURE`")
    reason: str = Field(description="the exception(s), one line each")
    exit_status: Literal[3] = Field(description="always 3")
    internal_error: Literal["internal-error.txt"] = Field(description="the traceback file")
    finished: str = Field(description="UTC time the run ended")
    duration_s: float = Field(description="wall-clock seconds of the run")


EventKind = Literal[
    "transition", "agent_call", "substate", "internal_error", "rollback", "interrupted", "applied"
]


class Event(_Record):
    """One line of `task-events.jsonl`: a step of the decision trace."""

    time: str = Field(description="UTC time (ISO 8601)")
    kind: EventKind = Field(
        description="`transition`, `agent_call`, `substate`, `internal_error`, `rollback`, "
        "`interrupted` or `applied` (below)"
    )
    from_state: str = Field(alias="from", description="the state before")
    to_state: str = Field(alias="to", description="the state after")
    event: str = Field(
        description="the event of the transition table (`docs/fsm.md`); for `substate`, the "
        "sub-state's name (below)"
    )
    reason: str = Field(description="why, with the numbers that decided it")
    iteration: int = Field(description="1-based iteration number")
    evidence: list[str] = Field(description="paths in the run directory that back the reason")
    retry_count: int = Field(description="retries so far of the error being recovered")
    retry_reason: str | None = Field(description="why this is a retry, or null")
    role: str | None = Field(default=None, description="`agent_call` only: the agent's role")
    provider: str | None = Field(default=None, description="`agent_call` only: the provider spec")

    @classmethod
    def note(
        cls,
        time: str,
        kind: EventKind,
        states: tuple[str, str],
        event: str,
        reason: str,
        iteration: int,
        evidence: list[str] | None = None,
    ) -> Event:
        """A line that is not a retried move (`time` from rundir.utc_now)."""
        return cls(
            time=time,
            kind=kind,
            from_state=states[0],
            to_state=states[1],
            event=event,
            reason=reason,
            iteration=iteration,
            evidence=evidence or [],
            retry_count=0,
            retry_reason=None,
        )

    def to_json(self) -> dict[str, Any]:
        """The line as written: `from`/`to` keys, and no agent fields on other kinds."""
        agent_only = None if self.kind == "agent_call" else {"role", "provider"}
        return self.model_dump(mode="json", by_alias=True, exclude=agent_only)


class TimelineEntry(_Record):
    """One iteration of `task-timeline.json`."""

    iteration: int = Field(description="1-based iteration number")
    kind: IterationKind = Field(description="what the iteration was for")
    states: list[str] = Field(description="the states visited, in order")
    pass_count: int = Field(description="passed + xfailed")
    total_count: int = Field(description="pass count + failed + error + strict xpassed")
    counts: dict[str, int] | None = Field(description="tests per outcome, null if none ran")
    patch_summary: str = Field(description="the applied patch's summary and files")
    coder_calls: int = Field(description="coder calls made in this iteration")
    review_rounds: int = Field(description="reviewer rounds that requested changes")
    convergence_type: str | None = Field(description="the verdict after this iteration")
    reason: str = Field(description="the convergence checker's reason")
    score: float | None = Field(description="the convergence score after this iteration")
    snapshot: str | None = Field(description="shadow-repository commit of the tested tree")
    executed: int = Field(description="test executions in this iteration, reruns included")
    notes: list[str] = Field(description="what else happened (rollbacks, discarded edits)")
    decisions: list[DecisionRecord] = Field(
        default_factory=list, description="each coder answer of this iteration, judged (below)"
    )


class Timeline(_Record):
    """`task-timeline.json`: the per-iteration view of the run, for replay."""

    run_id: str = Field(description="the run's id")
    iterations: list[TimelineEntry] = Field(description="one entry per iteration (below)")


class CallMeta(_Record):
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


class ConvergenceRecord(_Record):
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


class PanelVote(_Record):
    """One member's vote in `panel-K.json`."""

    provider: str = Field(description="the member's provider spec")
    call: str = Field(
        description="the call whose answer is the vote, `reviewer-K`: its request, answer and "
        "meta files are `reviewer-K.*` in the same round"
    )
    decision: Literal["approve", "changes_requested"] = Field(description="the member's decision")
    risk: float = Field(description="the member's risk, 0..1")
    must_fix: int = Field(description="how many must-fix items the member named")


class PanelRecord(_Record):
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


class CommandEntry(_Record):
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


class CommandsRecord(_Record):
    """`rounds/NN/commands.json`: the tester's commands of this iteration."""

    commands: list[CommandEntry] = Field(description="in the order proposed")
