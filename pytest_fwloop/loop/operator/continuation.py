"""How a recorded run goes on (DESIGN.md §11): the operator's order, and where the loop resumes.

`fwloop confirm|followup|resume|chat` write an `Order` to a temporary file and start pytest with
the run's recorded arguments and `--fwloop-operator=FILE`. The controller checks the order again
once it holds the run lock (`Continued.of`), against the state revision the command judged: of
two operators acting on one state, the second is refused. What a state allows is decided here,
pure, for the command and the controller alike; `restore` fills a fresh `LoopState` from the
state, and `Continued.prepare` gives the new controller the run's past.
"""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel

from pytest_fwloop.core.change.unified_diff import PatchParseError, touched_paths
from pytest_fwloop.core.machine.agent_budget import UsageLedger
from pytest_fwloop.core.machine.fsm import IterationKind, LoopEvent, State
from pytest_fwloop.core.machine.outcomes import Outcome
from pytest_fwloop.core.records.agent_protocol import CoderAnswer, MustFix, Role
from pytest_fwloop.core.records.run_records import Event
from pytest_fwloop.core.records.run_state import (
    SAVED_FIELDS,
    STATE_FILE,
    STATE_SCHEMA,
    Invocation,
    RunState,
    SavedIteration,
    StateError,
    load_state,
)
from pytest_fwloop.core.suite.results import IterationResults
from pytest_fwloop.loop.operator.threads import OPERATOR_THREAD, Thread, chat_title
from pytest_fwloop.loop.rundir import utc_now
from pytest_fwloop.loop.state import Iteration, LoopState, Step, written_by

if TYPE_CHECKING:
    from pytest_fwloop.core.records.redaction import Redactor
    from pytest_fwloop.loop.rundir import RunRecorder


class Action(str, enum.Enum):
    CONFIRM = "confirm"
    FOLLOWUP = "followup"
    RESUME = "resume"
    CHAT = "chat"
    APPLY = "apply"


class Order(BaseModel):
    """What an operator asked of one run, written by the `fwloop` command."""

    action: Action
    run_id: str
    #: The state revision the command judged; another one means someone acted first.
    revision: int
    text: str = ""
    #: `chat`: the roles asked; a follow-up handed over from a chat: the roles of its thread.
    roles: list[Role] = []
    #: `chat`: the thread it goes on; a follow-up handed over from a chat (`fwloop chat
    #: --start`): the thread whose conversation the coder is told with the task.
    thread: str = ""


def read_order(path: str) -> Order | None:
    """The order a `--fwloop-operator` file holds (None without one); StateError if unusable."""
    if not path:
        return None
    try:
        return Order.model_validate_json(Path(path).read_bytes())
    except (OSError, ValueError) as exc:
        raise StateError(
            f"fwloop: --fwloop-operator={path}: not an order of the fwloop command ("
            f"{type(exc).__name__}); use `fwloop confirm|followup|resume|chat` instead"
        ) from None


def refusal(state: RunState, action: Action) -> str | None:
    """Why the run cannot take `action` (one line), or None when it can."""
    name = state.run_id
    if action is Action.CHAT:
        return None
    if action is Action.APPLY:
        return _cannot_apply(state)
    if state.outcome is None:
        if action is Action.RESUME:
            return None  # a killed controller: the command has made sure it is not running
        return (
            f"fwloop: run {name} has not ended (its controller was killed at {state.fsm_state}): "
            f"`fwloop resume {name}` continues it"
        )
    awaiting = state.outcome == Outcome.AWAITING_OPERATOR_CONFIRM.value
    if action is Action.CONFIRM:
        if awaiting and state.pending is not None:
            return None
        if awaiting:
            return (
                f"fwloop: run {name} awaits a decision on its plateau, not a proposal: "
                f"`fwloop resume {name}` continues it"
            )
        if state.outcome == Outcome.DISCUSSION_COMPLETE.value:
            return (
                f"fwloop: run {name} ended its discussion with no patch, so there is nothing to "
                f"confirm: `fwloop followup {name} TEXT` asks the coder for one"
            )
        return (
            f"fwloop: run {name} awaits nothing to confirm (it ended {state.outcome}); "
            f"`fwloop show {name}` says why"
        )
    if action is Action.RESUME:
        if state.outcome == Outcome.SUCCESS.value:
            return (
                f"fwloop: run {name} ended with success; there is nothing to resume "
                f"(`fwloop rerun {name}` starts a new run on the current tree)"
            )
        if awaiting and state.pending is not None:
            return (
                f"fwloop: run {name} waits for your word on its proposal: `fwloop confirm "
                f"{name}` applies it, `fwloop followup {name} TEXT` asks for another"
            )
    return None


def _cannot_apply(state: RunState) -> str | None:
    name = state.run_id
    if state.outcome is None:
        return (
            f"fwloop: run {name} has not ended (its controller was killed at {state.fsm_state}): "
            f"`fwloop resume {name}` continues it"
        )
    if state.outcome == Outcome.SUCCESS.value:
        return f"fwloop: run {name} ended with success; its fixed tree is already in place"
    return None


def iteration_limit(state: RunState, action: Action, more: int | None) -> int:
    """`--max-iter` for the continuing controller. A run that ended and goes on gets room for
    `more` iterations (default: as many as it had); a killed one keeps its limit, as if it had
    never stopped, unless `more` is given; a proposal awaiting an answer keeps its limit."""
    last = state.iterations[-1].number if state.iterations else 1
    goes_on = action is Action.RESUME or (action is Action.FOLLOWUP and state.in_flight is None)
    if goes_on and state.outcome is not None:
        return last + (more or state.max_iter)
    if goes_on and more:
        return last + more
    return state.max_iter


@dataclass(frozen=True)
class Resumption:
    """Where a restored loop starts, and what of the tree it takes back."""

    event: LoopEvent
    reason: str
    #: The snapshot of the run's latest kept tree, and the paths its patches wrote there.
    tree: str
    paths: tuple[str, ...]
    #: Paths the continuation will write: the operator must not have changed them since.
    watched: tuple[str, ...]


#: Endings whose pending coder answer a follow-up revises, with nothing applied.
_ANSWERED_BY_A_FOLLOWUP = frozenset(
    {Outcome.AWAITING_OPERATOR_CONFIRM.value, Outcome.DISCUSSION_COMPLETE.value}
)

#: States a patch has passed the strict gate in: a killed run applies it again without asking.
_PAST_THE_GATE = frozenset(
    {
        State.PATCH_APPLY,
        State.BUILD_SETUP,
        State.BUILD_RUN,
        State.TEST_SETUP,
        State.TEST_RUN,
        State.RESULT_COLLECTION,
        State.RESULT_ANALYSIS,
    }
)


def restore(loop: LoopState, state: RunState, run_dir: Path, order: Order) -> Resumption:
    """Fill `loop` (a fresh one) from `state` for `order`; StateError if a record is missing."""
    loop.iterations = saved_iterations(state, run_dir)
    loop.must_fix = list(state.must_fix)
    loop.constraints = list(state.constraints)
    loop.build_diagnostics = state.build_diagnostics
    loop.strategy_switches = state.strategy_switches
    loop.labgrid = state.labgrid
    loop.declined = dict(state.declined)
    kept = loop.kept()
    written = written_by(kept)
    pending = state.pending
    if state.in_flight is None:
        loop.iterations.append(Iteration(loop.current.number + 1, IterationKind.PATCH))
    number = loop.current.number
    pending = _take_followup(loop, state, run_dir, order, pending)
    if pending is not None and (
        order.action is Action.CONFIRM or State(state.fsm_state) in _PAST_THE_GATE
    ):
        loop.coder_answer = pending
        loop.operator_approved = True
        event, reason = (
            LoopEvent.OPERATOR_CONFIRMED,
            f"the pending patch of iteration {number} goes to the strict gate "
            f"({'confirmed by the operator' if order.action is Action.CONFIRM else 'resumed'})",
        )
    elif pending is not None and State(state.fsm_state) is State.PATCH_GENERATION:
        loop.coder_answer = pending
        event, reason = (
            LoopEvent.OPERATOR_CONFIRMED,
            f"the coder's answer of iteration {number} goes to the gate again",
        )
    else:
        pending = None  # a refused or spent answer: the coder is asked again
        if loop.current.kind is IterationKind.CONFIRMATION:
            event, reason = LoopEvent.RESUME_TESTS, f"iteration {number} confirms the green tree"
        else:
            event, reason = LoopEvent.RESUME, f"iteration {number}: the coder is asked for a patch"
    watched = set(written) | set(_paths(pending.patch) if pending else ())
    return Resumption(
        event,
        f"run {state.run_id} continued by `fwloop {order.action.value}` at revision "
        f"{state.revision}: {reason}",
        kept[-1].checkpoint if kept else "",
        tuple(written),
        tuple(sorted(watched)),
    )


def _take_followup(
    loop: LoopState, state: RunState, run_dir: Path, order: Order, pending: CoderAnswer | None
) -> CoderAnswer | None:
    """An operator's follow-up goes to the coder: as the answer to a pending proposal (which
    the coder then revises: nothing is applied) or as one more thing it must address. The
    pending answer that is left, if any."""
    if order.action is not Action.FOLLOWUP:
        return pending
    asked = order.text
    if order.thread:
        conversation = Thread(run_dir, order.thread).handed_over()
        if conversation:
            asked += f"\n(handed over from chat thread {order.thread}; it said:\n{conversation})"
    if pending is not None and state.outcome in _ANSWERED_BY_A_FOLLOWUP:
        # An answer with no patch will end the discussion (`discussion_complete`).
        loop.discussing = True
        loop.must_fix = [
            MustFix(
                issue=f"the operator's follow-up on your proposal ({pending.summary[:200]}): "
                f"{asked}"
            )
        ]
        return None
    loop.must_fix = [*loop.must_fix, MustFix(issue=f"the operator asks: {asked}")]
    return pending


def _paths(patch: str) -> list[str]:
    """The paths a pending patch names; none when it does not parse (the gate refuses it)."""
    try:
        return touched_paths(patch)
    except PatchParseError:
        return []


def answered(run_dir: Path, role: str) -> int:
    """How many answers to strict (schema) requests of `role` the run's records hold."""
    count = 0
    for request in run_dir.glob(f"rounds/*/{role}-*.request.json"):
        answer = request.with_name(request.name.replace(".request.json", ".answer.txt"))
        try:
            asked = json.loads(request.read_text(encoding="utf-8"))
            count += bool(asked.get("schema")) and answer.stat().st_size > 0
        except (OSError, ValueError):
            continue  # a call whose record is incomplete gave no answer
    return count


def _iteration(saved: SavedIteration, run_dir: Path) -> Iteration:
    results = None
    if saved.measured:
        path = run_dir / "rounds" / f"{saved.number:02d}" / "results.json"
        try:
            results = IterationResults.model_validate_json(path.read_bytes())
        except (OSError, ValueError) as exc:
            raise StateError(
                f"fwloop: {path} is missing or damaged ({type(exc).__name__}); run "
                f"{run_dir.name} cannot be continued"
            ) from None
    # The fields as the models they are (a dump would turn the decision records into dicts).
    return Iteration(results=results, **{name: getattr(saved, name) for name in SAVED_FIELDS})


def checked_state(order: Order, run_dir: Path) -> RunState:
    """The run's state, if `order` still applies to it (read under the run lock); else
    StateError (one line)."""
    state = load_state(run_dir)
    if state.revision != order.revision:
        raise StateError(
            f"fwloop: run {order.run_id} changed since `fwloop {order.action.value}` read it "
            f"(revision {order.revision}, now {state.revision}): someone acted on it first; "
            f"`fwloop show {order.run_id}` says where it stands"
        )
    refused = refusal(state, order.action)
    if refused is not None:
        raise StateError(refused)
    return state


def saved_iterations(state: RunState, run_dir: Path) -> list[Iteration]:
    """The run's iterations with their recorded results; StateError if a record is missing."""
    return [_iteration(saved, run_dir) for saved in state.iterations]


@dataclass(frozen=True)
class Past:
    """What the run's earlier controllers did, for the one that continues it to start from."""

    #: Pass and total counts of every measured run of the suite, in order: convergence judges
    #: the whole series.
    counts: tuple[tuple[int, int], ...]
    #: (iteration, patch) of every patch measured, for stuck detection.
    tried: tuple[tuple[int, str], ...]
    #: The agents' usage so far, as `state.json` keeps it.
    usage: dict[str, object]
    #: Strict answers already recorded per role: replaying providers skip them.
    answered: dict[str, int]
    coder_calls: int


@dataclass(frozen=True)
class Continued:
    """A recorded run an operator's order continues: its state, its loop, where it resumes."""

    order: Order
    state: RunState
    loop: LoopState
    resumption: Resumption
    past: Past

    @classmethod
    def of(cls, order: Order, run_dir: Path) -> Continued:
        """Checked under the run lock; StateError (one line) if the order no longer applies."""
        state = checked_state(order, run_dir)
        loop = LoopState(run_id=order.run_id)
        resumption = restore(loop, state, run_dir, order)
        loop.resumed = Step(resumption.event, resumption.reason)
        loop.operator_messages = [m.text for m in Thread(run_dir, OPERATOR_THREAD).messages()]
        past = Past(
            counts=tuple((r.pass_count, r.total_count) for _, r in loop.attempts()),
            tried=tuple(
                (it.number, it.patch)
                for it in loop.iterations
                if it.results is not None and it.patch
            ),
            usage=dict(state.usage),
            answered={role: answered(run_dir, role) for role in ("coder", "reviewer", "tester")},
            coder_calls=sum(it.coder_calls for it in loop.iterations),
        )
        return cls(order, state, loop, resumption, past)

    def record(self, recorder: RunRecorder, redact: Redactor) -> None:
        """Write down how the run goes on: where a killed controller stopped, and the
        operator's text (a follow-up, or a confirm's note), which every agent is told."""
        if self.state.outcome is None:  # the trace of a killed controller ends where it died
            recorder.append_event(
                Event.note(
                    utc_now(),
                    "interrupted",
                    (self.state.fsm_state, State.ABORTED.value),
                    "interrupted",
                    "the controller stopped without ending the run (killed); continued by "
                    "`fwloop resume`",
                    self.state.iterations[-1].number if self.state.iterations else 1,
                ).to_json()
            )
        if self.order.text:
            kind = "followup" if self.order.action is Action.FOLLOWUP else "confirm_note"
            Thread(recorder.path, OPERATOR_THREAD).append(
                "operator",
                kind,
                self.order.text,
                redact,
                "coder",
                "the operator's messages to the loop",
            )
            self.loop.operator_messages.append(redact(self.order.text))
        if self.order.thread and self.order.action is not Action.CHAT:
            # A chat handed its task over (`fwloop chat --start`): the thread says so.
            roles = list(self.order.roles) or ["coder"]
            Thread(recorder.path, self.order.thread).append(
                "operator",
                "task",
                self.order.text,
                redact,
                ",".join(roles),
                chat_title(roles, self.order.run_id),
            )


class StateKeeper:
    """Rewrites `state.json` after every move; what the loop cannot tell itself is given once."""

    def __init__(
        self,
        recorder: RunRecorder,
        invocation: Invocation,
        rootdir: Path,
        max_iter: int,
        baseline: str,
        usage: UsageLedger,
        revision: int = 0,
    ) -> None:
        self.recorder = recorder
        self.invocation = invocation
        self.rootdir = rootdir
        self.max_iter = max_iter
        self.baseline = baseline
        self.left_tree = baseline
        self.usage = usage
        self.revision = revision

    def save(self, loop: LoopState) -> None:
        self.revision += 1
        current = loop.current
        answer = loop.coder_answer if current.results is None else None
        state = RunState(
            schema_version=STATE_SCHEMA,
            revision=self.revision,
            run_id=self.recorder.run_id,
            invocation=self.invocation,
            rootdir=str(self.rootdir),
            max_iter=self.max_iter,
            fsm_state=loop.state.value,
            outcome=loop.outcome.value if loop.outcome is not None else None,
            reason=loop.final_reason,
            baseline=self.baseline,
            left_tree=self.left_tree,
            iterations=[
                SavedIteration(
                    measured=it.results is not None,
                    **{name: getattr(it, name) for name in SAVED_FIELDS},
                )
                for it in loop.iterations
            ],
            pending=answer,
            must_fix=loop.must_fix,
            constraints=loop.constraints,
            build_diagnostics=loop.build_diagnostics,
            strategy_switches=loop.strategy_switches,
            labgrid=loop.labgrid,
            declined=loop.declined,
            usage=self.usage.to_dict(),
        )
        self.recorder.write_json(STATE_FILE, state.model_dump(mode="json"))
