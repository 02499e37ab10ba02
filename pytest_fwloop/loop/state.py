"""The loop's per-iteration record and the value each state handler returns."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_fwloop.agents.errors import ProviderError, ProviderErrorKind
from pytest_fwloop.agents.rules import triage_line
from pytest_fwloop.core.change.unified_diff import touched_paths
from pytest_fwloop.core.gate.allowlist import CommandCheck
from pytest_fwloop.core.gate.policy import PatchPolicy, test_modules
from pytest_fwloop.core.machine.fsm import ErrorType, IterationKind, LoopEvent, State, StateBound
from pytest_fwloop.core.machine.outcomes import Outcome
from pytest_fwloop.core.machine.recovery import ErrorState
from pytest_fwloop.core.records.agent_protocol import (
    AgentRequest,
    CoderAnswer,
    MustFix,
    TesterAnswer,
)
from pytest_fwloop.core.records.run_records import (
    AnalysisRecord,
    CandidateRound,
    DecisionRecord,
    DeclinedRecord,
    Event,
    LabgridRecord,
    NotificationRecord,
    TimelineEntry,
)
from pytest_fwloop.core.suite.flaky import Reruns
from pytest_fwloop.core.suite.results import IterationResults, TestRecord
from pytest_fwloop.core.suite.signature import signature
from pytest_fwloop.core.verdict.convergence import ConvergenceType
from pytest_fwloop.core.verdict.declines import still_declined
from pytest_fwloop.loop.rundir import utc_now

if TYPE_CHECKING:
    from pytest_fwloop.child.files import Attempt


@dataclass
class Iteration:
    """One pass through the test run, and the patch that led to it."""

    number: int
    kind: IterationKind
    patch: str = ""
    patch_summary: str = ""
    checkpoint: str = ""
    results: IterationResults | None = None
    coder_calls: int = 0
    review_rounds: int = 0
    convergence_type: str | None = None
    reason: str = ""
    score: float | None = None
    states: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: Test executions in this iteration, reruns included (focus reruns leave most out).
    executed: int = 0
    #: The child run of the whole suite whose reports (JUnit XML, HTML) describe this
    #: iteration's tree; None when the iteration ran only a focus.
    full_run: Attempt | None = None
    #: Each coder answer of this iteration as its decision record judged it.
    decisions: list[DecisionRecord] = field(default_factory=list)
    #: The analysis printed after it (seed 001 §6.3).
    analysis: AnalysisRecord | None = None
    #: Each choice among K candidates made in this iteration (DESIGN.md §19).
    candidate_rounds: list[CandidateRound] = field(default_factory=list)

    @property
    def pass_count(self) -> int:
        return self.results.pass_count if self.results else 0

    @property
    def total_count(self) -> int:
        return self.results.total_count if self.results else 0

    def timeline_entry(self) -> TimelineEntry:
        """The iteration as `task-timeline.json` and the report show it: the one conversion."""
        return TimelineEntry(
            iteration=self.number,
            kind=self.kind,
            states=self.states,
            pass_count=self.pass_count,
            total_count=self.total_count,
            counts=self.results.counts() if self.results else None,
            patch_summary=self.patch_summary,
            coder_calls=self.coder_calls,
            review_rounds=self.review_rounds,
            convergence_type=self.convergence_type,
            reason=self.reason,
            score=self.score,
            snapshot=self.checkpoint,
            executed=self.executed,
            notes=self.notes,
            decisions=self.decisions,
            analysis=self.analysis,
        )


@dataclass(frozen=True)
class Step:
    event: LoopEvent
    reason: str
    evidence: tuple[str, ...] = ()


@dataclass(frozen=True)
class Verdict:
    """What a step module decided: the event, and what the loop must remember because of it.

    `must_fix` None keeps the current must-fix list; a list replaces it. `diagnostics` None keeps
    the build diagnostics sent to the coder.
    """

    step: Step
    error: ErrorState | None = None
    must_fix: list[MustFix] | None = None
    diagnostics: str | None = None
    constraints: list[str] | None = None
    note: str = ""


def failed(
    error: ErrorState,
    event: LoopEvent,
    must_fix: list[MustFix] | None = None,
    constraints: list[str] | None = None,
) -> Verdict:
    """The Verdict of a handler that hands `error` to ERROR_RECOVERY."""
    return Verdict(
        Step(event, f"{error.type.value}: {error.reason}"),
        error=error,
        must_fix=must_fix,
        constraints=constraints,
    )


def provider_error(role: str, exc: ProviderError) -> ErrorState:
    """A provider that failed for good: its kind is the outcome if recovery gives up."""
    return ErrorState(
        ErrorType.MODEL_FAILURE,
        f"{role} provider {exc.provider}: {exc.message}",
        LoopEvent.RECOVER_TO_ANALYSIS,
        terminal_outcome=Outcome(exc.kind.value),
    )


def coder_failed(exc: ProviderError, request: AgentRequest, specs: str) -> ErrorState:
    """The coder's provider failed for good. An answer no provider of the list could make
    readable gets the `rules` triage (seed 001 §4.2's last fallback) when the list has no
    `rules` of its own, so the run still ends with a classified reason."""
    error = provider_error("coder", exc)
    listed = {spec.strip() for spec in specs.split(",")}
    if exc.kind is not ProviderErrorKind.PROVIDER_BAD_OUTPUT or "rules" in listed:
        return error
    triage = triage_line(request.failures, request.build_diagnostics)
    return dataclasses.replace(error, reason=f"{error.reason}; rules triage: {triage}")


@dataclass
class TesterRound:
    """The tester's validated plan for the patch under test, and what has become of it."""

    plan: TesterAnswer
    path: Path  # rounds/NN/test-plan.json, handed to the child runs as FWLOOP_TEST_PLAN
    commands: CommandCheck
    done: bool = False  # pre-check and commands run: once per round, never on env reruns
    records: list[TestRecord] = field(default_factory=list)


@dataclass(frozen=True)
class ChildOutput:
    """Where the iteration's child pytest left its results and its log, and how it exited."""

    results: Path
    log: Path
    returncode: int | None


@dataclass
class LoopState:
    """Everything the loop remembers between states, typed, in one place (no handler keeps its
    own copy): the state machine's position, the iterations, the error being recovered, what
    the coder must be told next, and how the run ends."""

    state: State = State.IDLE
    run_id: str = ""
    iterations: list[Iteration] = field(
        default_factory=lambda: [Iteration(1, IterationKind.BASELINE)]
    )
    error: ErrorState | None = None
    retries: dict[ErrorType, int] = field(default_factory=dict)
    outcome: Outcome | None = None
    final_reason: str = ""
    convergence_type: ConvergenceType | None = None
    # What the next coder request carries beyond the failures.
    must_fix: list[MustFix] = field(default_factory=list)
    constraints: list[str] = field(default_factory=list)
    build_diagnostics: str = ""
    coder_answer: CoderAnswer | None = None
    #: With fwloop_candidates > 1: each candidate's coder call (`coder-K`) and answer in
    #: order, None where the call gave no usable answer; empty once the choice is made.
    candidate_answers: list[tuple[str, CoderAnswer | None]] = field(default_factory=list)
    #: The operator said yes to `coder_answer` (at the terminal or by `fwloop confirm`): it
    #: goes to the strict gate without another proposal stop.
    operator_approved: bool = False
    #: The operator followed up on a proposal: an answer with no patch ends the discussion
    #: (`discussion_complete`) instead of going to the gate.
    discussing: bool = False
    #: What the operator said to the loop (follow-ups, confirm notes), for every agent request.
    operator_messages: list[str] = field(default_factory=list)
    #: A continued run's first move out of IDLE (continuation.restore), instead of `start`.
    resumed: Step | None = None
    # The whole-tree snapshot a failing patch is rolled back to; not kept past the next coder
    # call (`Workspace.drop_snapshots`), by when the patch was kept or rolled back.
    pre_patch_checkpoint: str = ""
    # Environment reruns: the tests to run again, and the results they will be merged into.
    env_rerun: list[str] = field(default_factory=list)
    partial_results: IterationResults | None = None
    strategy_switches: int = 0
    #: The labgrid place the loop holds (DESIGN.md §14), None without a board farm.
    labgrid: LabgridRecord | None = None
    #: Tests the coder declined (DESIGN.md §15), by node id.
    declined: dict[str, DeclinedRecord] = field(default_factory=dict)
    #: Tests still failing when the coder's analysis ended INCONCLUSIVE, by node id.
    inconclusive: dict[str, DeclinedRecord] = field(default_factory=dict)
    #: The snapshot of the tree the run leaves in place when it is not its baseline: the fixed
    #: tree, or the best one kept (--fwloop-keep=best); set when the run ends.
    left_tree: str = ""
    test_run_result: ChildOutput | None = None
    # What this iteration's flaky reruns found: the tests that passed on one, and the latest
    # failure of those that failed every one.
    reruns: Reruns = field(default_factory=Reruns)
    review_path: Path | None = None
    tester_due: bool = False
    tester_round: TesterRound | None = None
    # argv of the tester commands that failed in this round and in the round before.
    failed_commands: frozenset[tuple[str, ...]] = frozenset()
    previous_failed_commands: frozenset[tuple[str, ...]] = frozenset()
    #: Tester rounds in a row whose plan failed its schema (fwloop_tester_schema_rounds).
    tester_invalid_rounds: int = 0
    #: Notifications delivered (or not) so far; the end's are added to summary.json after it.
    notifications: list[NotificationRecord] = field(default_factory=list)

    @property
    def current(self) -> Iteration:
        return self.iterations[-1]

    def attempts(self) -> list[tuple[int, IterationResults]]:
        """(number, results) of every iteration whose tests ran, rolled-back ones included."""
        return [(it.number, it.results) for it in self.iterations if it.results is not None]

    def rolled_back(self) -> frozenset[int]:
        return frozenset(it.number for it in self.iterations if it.kind is IterationKind.ROLLBACK)

    def kept(self) -> list[Iteration]:
        """Every iteration whose tests ran on a tree the loop kept, baseline first: a
        rolled-back patch's results describe a tree that is gone."""
        return [
            it
            for it in self.iterations
            if it.results is not None and it.kind is not IterationKind.ROLLBACK
        ]

    def measured(self) -> list[tuple[int, IterationResults]]:
        """(number, results) of each of `kept()`."""
        return [(it.number, it.results) for it in self.kept() if it.results is not None]

    def latest_results(self) -> IterationResults | None:
        """The results of the latest iteration whose tree the loop kept."""
        measured = self.measured()
        return measured[-1][1] if measured else None

    def open_failures(self, root: str) -> list[TestRecord]:
        """The latest failures the coder is to hear about: not flaky, not declined as they fail."""
        latest = self.latest_results()
        failing = [t for t in latest.not_passing() if not t.flaky] if latest else []
        declined = still_declined({t.nodeid: signature(t, root) for t in failing}, self.declined)
        return [t for t in failing if t.nodeid not in declined]

    def timed_out(self, bound: StateBound, limit: float, detail: str) -> Step:
        """The state went over its timeout: resumed where the table says, else the run ends."""
        reason = f"{self.state.value} exceeded fwloop_{bound.option}={limit:g}s: {detail}"
        return self.fail(
            ErrorState(
                ErrorType.TIMEOUT,
                reason,
                bound.resume or LoopEvent.UNRECOVERABLE,
                terminal_outcome=None if bound.resume else Outcome.FAILURE,
            ),
            LoopEvent.STATE_TIMEOUT,
        )

    def transition(self, source: State, target: State, step: Step) -> Event:
        """The decision-trace line of a move; a move out of ERROR_RECOVERY names its retry."""
        recovering = source is State.ERROR_RECOVERY and self.error is not None
        return Event(
            time=utc_now(),
            kind="transition",
            from_state=source.value,
            to_state=target.value,
            event=step.event.value,
            reason=step.reason,
            iteration=self.current.number,
            evidence=list(step.evidence),
            retry_count=self.retries.get(self.error.type, 0) if recovering and self.error else 0,
            retry_reason=self.error.reason if recovering and self.error else None,
        )

    def fail(self, error: ErrorState, event: LoopEvent) -> Step:
        """Hand `error` to ERROR_RECOVERY through `event`: `failed`, taken by the loop at once."""
        self.error = error
        return failed(error, event).step


def best_kept(iterations: list[Iteration]) -> Iteration | None:
    """The earliest kept iteration with the highest pass count, if it beat the baseline: the
    tree `fwloop apply` and `--fwloop-keep=best` put in place."""
    kept = [
        it for it in iterations if it.results is not None and it.kind is not IterationKind.ROLLBACK
    ]
    if len(kept) < 2:
        return None
    best = max(kept, key=lambda it: (it.pass_count, -it.number))
    return best if best.pass_count > kept[0].pass_count else None


def written_by(iterations: Iterable[Iteration]) -> list[str]:
    """The paths the patches of these iterations wrote: what a continuation or `fwloop apply`
    puts back, and checks the operator has not changed since."""
    return sorted({p for it in iterations if it.patch.strip() for p in touched_paths(it.patch)})


def suite_policy(policy: PatchPolicy, iterations: list[Iteration]) -> PatchPolicy:
    """`policy` with every file the baseline collected a test from protected (DESIGN.md §6):
    whatever its name, a module the suite takes tests from is a test file."""
    baseline = iterations[0].results if iterations else None
    if baseline is None:
        return policy
    return policy.with_test_files(test_modules(t.nodeid for t in baseline.tests))


def policy_in_force(policy: PatchPolicy, loop: LoopState) -> PatchPolicy:
    """`suite_policy` of the loop's iterations as they are when asked (a continued run fills
    them after the controller is made)."""
    return suite_policy(policy, loop.iterations)
