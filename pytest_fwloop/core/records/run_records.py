"""The run directory's records as models (DESIGN.md §8): one source for writers, readers and docs.

Every JSON file the loop writes under `.fwloop/runs/<run-id>/` is one of these models, dumped
with `model_dump(mode="json")`; `docs/run-directory.md` is generated from their fields
(`python -m pytest_fwloop.docgen docs`), and a test fails when it drifts.
Pure: pydantic and the standard library only.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from pytest_fwloop.core.machine.fsm import IterationKind
from pytest_fwloop.core.machine.outcomes import Outcome


class Record(BaseModel):
    # Readers (replay, reports) reject a record that is not exactly ours.
    # `model_servers` and the like are ours: no pydantic name is shadowed (old pydantic warns).
    model_config = ConfigDict(extra="forbid", populate_by_name=True, protected_namespaces=())


class UsageTotals(Record):
    """What the providers reported over a set of calls."""

    calls: int = Field(description="calls made, failed ones included")
    unreported_calls: int = Field(description="calls whose provider reports no usage")
    input_tokens: float = Field(description="input tokens, cache reads included")
    cached_input_tokens: float = Field(description="input tokens read from a cache")
    output_tokens: float = Field(description="output tokens")
    cost_usd: float = Field(description="cost in USD, what `--fwloop-budget-usd` counts")
    tokens: float = Field(description="input + output, what `--fwloop-budget-tokens` counts")


class UsageRecord(Record):
    """`summary.json["usage"]`: per role and in total."""

    roles: dict[str, UsageTotals] = Field(description="per role (`coder`, `reviewer`, `tester`)")
    total: UsageTotals = Field(description="over every call of the run")


class RunContext(Record):
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


class DeclinedRecord(Record):
    """A test the coder declined (DESIGN.md §15): not sent again while it fails the same way."""

    signature: str = Field(description="its failure signature when declined")
    reason: str = Field(description="the coder's words")
    iteration: int = Field(description="the iteration whose coder call declined it")


DecisionStatus = Literal["usable", "low_confidence", "inconclusive", "declined", "abort"]


class DecisionRecord(Record):
    """One coder answer as seed 001's decision record (§5.5, §5.14) judges it."""

    confidence: float = Field(description="the coder's confidence, 0..1")
    status: DecisionStatus = Field(
        description="`usable` (goes to the gate), `low_confidence` (below "
        "fwloop_min_confidence: asked once more), `inconclusive` (low twice: the run ends), "
        "`declined` (no patch: not a code defect) or `abort` (the coder asked to stop)"
    )
    reason: str = Field(default="", description="the coder's root cause, bounded")


class HeldPlace(Record):
    """A labgrid place a run held, from the iteration whose tests first used it."""

    place: str = Field(description="the place's name at the coordinator")
    from_iteration: int = Field(description="the first iteration that ran on it")


class LabgridRecord(Record):
    """`summary.json["labgrid"]` and `state.json`'s: the board farm's side of a run."""

    place: str | None = Field(description="the place held last, null if none was had")
    tags: list[str] = Field(description="the tags it was reserved by (fwloop_labgrid_reserve)")
    coordinator: str = Field(description="the coordinator's HOST:PORT")
    identity: str = Field(description="`HOST/USER`: the labgrid identity the locks belong to")
    held: list[HeldPlace] = Field(description="every place held, in order (a swap adds one)")


class ModelServerRecord(Record):
    """`summary.json["model_servers"]` entry: the server behind one role's `openai:` provider as
    the run found it (DESIGN.md §16), so two runs' records say what served them."""

    role: str = Field(description="the role whose provider it served (coder, reviewer, tester)")
    url: str = Field(description="the API's base URL")
    model: str = Field(description="the model id sent")
    kind: str = Field(
        description="llama.cpp, llama-cpp-python, vLLM, Ollama, LM Studio, OpenAI-compatible, "
        "or unknown when it named itself nowhere the loop looks"
    )
    version: str = Field(description="its version or build, where it says; else empty")
    window_tokens: int | None = Field(description="the context window in tokens, null if unknown")
    window_source: str = Field(
        description="where the window came from: the server's endpoint, its refusal, or "
        "fwloop_model_context"
    )
    response_format: str = Field(
        description="the response_format it took last: json_schema, json_object or none"
    )
    tools: str = Field(
        description="`not offered`, `offered` (never used), `taken`, `refused` or `ignored`"
    )
    streaming: bool = Field(description="whether answers were streamed at the end")
    usage_reported: bool = Field(description="whether any answer counted its prompt tokens")
    bytes_per_token: float = Field(
        description="the bytes a prompt token the requests were fitted with"
    )
    bytes_per_token_measured: bool = Field(
        description="true when the server's own counts set it; false: the safe 3 assumed"
    )


class BestTree(Record):
    """The best tree a run kept short of success (DESIGN.md §15)."""

    iteration: int = Field(description="the earliest iteration with the most passing tests")
    pass_count: int = Field(description="its pass count")
    total_count: int = Field(description="its total count")
    in_place: bool = Field(
        description="left in the tree (--fwloop-keep=best, or the operator said so); else the "
        "baseline is, and `apply` puts this tree back"
    )
    apply: str = Field(description="the command that puts it in place: `fwloop apply RUN`")


class CandidateRound(Record):
    """One iteration whose coder was asked for K candidates (`fwloop_candidates`)."""

    iteration: int = Field(description="the iteration")
    k: int = Field(description="candidates asked for")
    chosen: int | None = Field(description="the candidate applied, or null when none survived")
    pass_at_1: bool = Field(
        description="the first candidate alone fixed every failing test without a regression"
    )
    pass_at_k: bool = Field(description="some candidate did")
    fixed_by_first: int = Field(description="failing tests the first candidate fixed")
    fixed_by_chosen: int = Field(description="failing tests the chosen one fixed")
    build_s: float = Field(description="seconds the candidates' builds took, in all")
    tests_s: float = Field(description="seconds the candidates' test runs took, in all")


class CandidatesSummary(Record):
    """`summary.json["candidates"]`: what K candidates per iteration bought (DESIGN.md §19)."""

    k: int = Field(description="`fwloop_candidates`")
    jobs: int = Field(description="`fwloop_candidate_jobs`: candidates checked side by side")
    rounds: list[CandidateRound] = Field(description="each iteration that asked for K (below)")
    pass_at_1: int = Field(description="rounds the first candidate alone would have solved")
    pass_at_k: int = Field(description="rounds some candidate solved")
    chosen_not_first: int = Field(
        description="rounds whose applied candidate was not the first: where K changed the tree"
    )


class MetricSeries(Record):
    """One metric over the run (`summary.json["metrics"]`, docs/metrics.md)."""

    better: Literal["lower", "higher"] = Field(description="which way is an improvement")
    tolerance: float = Field(
        description="how much worse than at the baseline it may get, relative "
        "(fwloop_metric_tolerance)"
    )
    values: dict[str, float] = Field(
        default_factory=dict, description="its value per iteration (number) that measured it"
    )


class MetricChange(Record):
    """One metric of an iteration against the baseline, as the SUCCESS gate judged it."""

    name: str = Field(description="the metric's name (`coverage`: pytest-cov's total)")
    better: Literal["lower", "higher"] = Field(description="which way is an improvement")
    baseline: float | None = Field(description="its value at the baseline, null if new")
    value: float | None = Field(description="its value now, null if no longer measured")
    change: float | None = Field(
        description="(value - baseline) / |baseline|; null when either is missing or 0"
    )
    tolerance: float = Field(description="the relative worsening allowed")
    worse: bool = Field(
        description="worse than the tolerance allows, or no longer measured: SUCCESS waits"
    )


Trend = Literal["improving", "stable", "declining", "mixed", "insufficient_data"]


class AnalysisRecord(Record):
    """The analysis after an iteration (seed 001 §6.3), a pure function of the numbers recorded
    beside it (`core/verdict/iteration_advice.py`, docs/metrics.md)."""

    score: float = Field(description="the convergence score, 0..1")
    trend: Trend = Field(
        description="the pass rate's direction over the window: `improving`, `stable`, "
        "`declining`, `mixed`, or `insufficient_data` (one iteration)"
    )
    slope: float = Field(description="pass-rate change per iteration over the window (fit)")
    window: int = Field(description="iterations the trend was fitted over")
    reasons: list[str] = Field(description="the facts behind it, with their numbers")
    recommendation: str = Field(description="what to do next, in one line")


class NotificationRecord(Record):
    """One delivery of a notification (`fwloop_notify`): where it went and how it fared."""

    event: Literal["plateau", "finished"] = Field(description="what was announced")
    channel: str = Field(
        description="`command:PATH`, or the webhook's `scheme://host:port/…` (its path and "
        "query, which may hold a token, are never recorded)"
    )
    delivered: bool = Field(
        description="the command exited 0, or the webhook answered 2xx, in time"
    )
    detail: str = Field(description='why it failed (one line), or `""`')


class Summary(Record):
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
        "flaky, environment and tester reruns, the spectrum run before its coder call (carried "
        "outcomes are not executions)"
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
    inconclusive: dict[str, DeclinedRecord] = Field(
        default_factory=dict,
        description="node id: the tests still failing when the coder's analysis ended "
        "inconclusive (below fwloop_min_confidence twice), with its root cause",
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
    metrics: dict[str, MetricSeries] = Field(
        default_factory=dict, description="name: each metric the tests recorded, over the run"
    )
    recommendation: str = Field(
        default="", description="the last iteration's analysis: what to do next, in one line"
    )
    goal: str = Field(
        default="",
        description="what the loop was asked to achieve (`--fwloop-goal`), as every agent was told",
    )
    evidence: str | None = Field(
        default=None,
        description="the failure log of an earlier run given to the coder (`--fwloop-evidence`), "
        "as named, or null",
    )
    notifications: list[NotificationRecord] = Field(
        default_factory=list,
        description="every notification delivery of the run (`fwloop_notify`), in order; a "
        "failed one changes nothing else",
    )
    model_servers: list[ModelServerRecord] = Field(
        default_factory=list,
        description="the server behind each role's `openai:` providers (below); empty without one",
    )
    candidates: CandidatesSummary | None = Field(
        default=None,
        description="pass@1 against pass@K per iteration and per run (below); null with "
        "`fwloop_candidates = 1`",
    )


class CrashSummary(Record):
    """`summary.json` of a run whose end itself failed before any summary was written."""

    run_id: str = Field(description="the run's id")
    outcome: Literal["internal_error"] = Field(description="always `internal_error`")
    final_state: Literal["FAILURE"] = Field(description="always `FAILURE`")
    reason: str = Field(description="the exception(s), one line each")
    exit_status: Literal[3] = Field(description="always 3")
    internal_error: Literal["internal-error.txt"] = Field(description="the traceback file")
    finished: str = Field(description="UTC time the run ended")
    duration_s: float = Field(description="wall-clock seconds of the run")
    notifications: list[NotificationRecord] = Field(
        default_factory=list, description="as in `Summary`"
    )


NOTIFICATION_SCHEMA = "fwloop-notification/1"


class Notification(Record):
    """The JSON document each `fwloop_notify` channel gets (docs/ci.md): once when a plateau is
    detected, once when the run ends; one object, UTF-8, redacted."""

    schema_: Literal["fwloop-notification/1"] = Field(
        alias="schema", description="this document's name and version"
    )
    event: Literal["plateau", "finished"] = Field(
        description="`plateau`: a plateau was detected (the run may go on); `finished`: the run "
        "ended, whatever the outcome"
    )
    run_id: str = Field(description="the run's id (`fwloop show RUN`)")
    outcome: str | None = Field(description="`finished`: the outcome; `plateau`: null")
    final_state: str | None = Field(description="`finished`: `SUCCESS`, `FAILURE` or `ABORTED`")
    exit_status: int | None = Field(
        description="`finished`: the exit status of `pytest --fwloop` (0 only when green)"
    )
    reason: str = Field(description="why, with the numbers that decided it")
    plateau_action: str | None = Field(
        description="`plateau`: what the mode does about it: `human_review`, "
        "`strategy_switch`, `failure` or `success_with_warning`; else null"
    )
    iteration: int = Field(description="the iteration the event happened in")
    pass_count: int | None = Field(description="passing tests of the last measured iteration")
    total_count: int | None = Field(description="counted tests of the last measured iteration")
    pass_counts: list[int] = Field(description="pass count per measured iteration")
    total_counts: list[int] = Field(description="total count per measured iteration")
    unresolved: list[str] = Field(description="node ids still not passing (the first 50)")
    unresolved_count: int = Field(description="how many are still not passing")
    mode: str = Field(description="the execution mode (`interactive`, `ci`, `auto`)")
    goal: str = Field(description="what the loop was asked to achieve")
    run_dir: str = Field(description="the run directory, absolute")
    report: str = Field(description="`report.html` in it, absolute")
    summary: str | None = Field(description="`finished`: `summary.json`, absolute; else null")
    best: BestTree | None = Field(
        description='`finished` short of success: the best kept tree (`summary.json["best"]`)'
    )
    apply: str | None = Field(
        description="the command that puts the best tree in place (`fwloop apply RUN`), or null"
    )
    time: str = Field(description="UTC time it was sent (ISO 8601)")


EventKind = Literal[
    "transition",
    "agent_call",
    "substate",
    "internal_error",
    "rollback",
    "interrupted",
    "applied",
    "notification",
]


class Event(Record):
    """One line of `task-events.jsonl`: a step of the decision trace."""

    time: str = Field(description="UTC time (ISO 8601)")
    kind: EventKind = Field(
        description="`transition`, `agent_call`, `substate`, `internal_error`, `rollback`, "
        "`interrupted`, `applied` or `notification` (below)"
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


class TimelineEntry(Record):
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
    snapshot: str | None = Field(
        description="shadow-repository commit of the tested tree: the paths the loop wrote, "
        "over the baseline"
    )
    executed: int = Field(description="test executions in this iteration, reruns included")
    notes: list[str] = Field(description="what else happened (rollbacks, discarded edits)")
    decisions: list[DecisionRecord] = Field(
        default_factory=list, description="each coder answer of this iteration, judged (below)"
    )
    analysis: AnalysisRecord | None = Field(
        default=None, description="the analysis after this iteration (below), null if none"
    )


class Timeline(Record):
    """`task-timeline.json`: the per-iteration view of the run, for replay."""

    run_id: str = Field(description="the run's id")
    iterations: list[TimelineEntry] = Field(description="one entry per iteration (below)")
