"""The loop's controller: walks the transition table, one state handler per state.

Each handler does its state's work and returns the event that leaves it; `fsm.next_state` decides
where that leads, and every move is written to the decision trace with its reason and numbers.
The controller never imports the code under test: each TEST_RUN is a child pytest process.
"""

from __future__ import annotations

import os
import shlex
import threading
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from pytest_fwloop.config.settings import LoopSettings
from pytest_fwloop.core.machine import fsm, recovery
from pytest_fwloop.core.machine.agent_budget import BudgetExhausted, UsageLedger
from pytest_fwloop.core.machine.fsm import ErrorType, LoopEvent, State
from pytest_fwloop.core.machine.outcomes import Outcome
from pytest_fwloop.core.machine.state_clock import DeadlinePassed, StateClock
from pytest_fwloop.core.machine.substates import SubState
from pytest_fwloop.core.records.redaction import Redactor
from pytest_fwloop.loop.agent_calls import CallLog, role_agent
from pytest_fwloop.loop.child_runner import ChildRunner, precheck_files
from pytest_fwloop.loop.operator.continuation import Past
from pytest_fwloop.loop.run_deadline import RunDeadline
from pytest_fwloop.loop.rundir import RunRecorder
from pytest_fwloop.loop.services import Services
from pytest_fwloop.loop.state import (
    ChildOutput,
    LoopState,
    Step,
    TesterRound,
    Verdict,
    policy_in_force,
)
from pytest_fwloop.loop.steps.build import BuildStep
from pytest_fwloop.loop.steps.farm import check_board, farm_hold, swap_board, take_board
from pytest_fwloop.loop.steps.iteration_end import IterationEnd
from pytest_fwloop.loop.steps.result_collection import ResultCollection
from pytest_fwloop.loop.steps.test_run import SuiteRun
from pytest_fwloop.loop.terminal import Terminal
from pytest_fwloop.procs.allowlist_runner import AllowlistRunner
from pytest_fwloop.procs.supervision import ProcessResult
from pytest_fwloop.workspace import Workspace

if TYPE_CHECKING:
    from pytest_fwloop.agents.role import RoleAgent
    from pytest_fwloop.core.records.agent_protocol import Role
    from pytest_fwloop.loop.repair import RepairDesk


class Controller:
    """Walks the transition table: each state's handler returns the event that leaves it; the
    step modules decide, `LoopState` remembers, and every move goes to the decision trace."""

    def __init__(
        self,
        config: pytest.Config,
        settings: LoopSettings,
        recorder: RunRecorder,
        workspace: Workspace,
        terminal: Terminal,
        abort: threading.Event,
        redact: Redactor,
        clock: StateClock | None = None,
        loop: LoopState | None = None,
        child: ChildRunner | None = None,
        past: Past | None = None,
    ) -> None:
        """`past`: what the earlier controllers of a continued run did, taken over here."""
        self.config = config
        self.settings = settings
        self.recorder = recorder
        self.workspace = workspace
        self.terminal = terminal
        self.abort = abort
        self.redact = redact
        self.abort_reason = ""
        self.loop = loop or LoopState(run_id=recorder.run_id)
        #: Called after every move with the loop as it stands (state.json is written so).
        self.on_move: Callable[[LoopState], None] = lambda loop: None
        self.clock = clock or StateClock()
        self.deadline = RunDeadline(self.clock, settings.endings.timeout_s)
        self.runner = AllowlistRunner(
            settings.allowed_commands,
            cwd=settings.rootdir,
            timeout=settings.options.command_timeout,
            abort=abort,
            environ=os.environ,
        )
        self.calls = CallLog(
            recorder,
            terminal,
            redact,
            settings.budget,
            lambda: (self.loop.current, self.loop.state),
        )
        self.coder = self._agent("coder")
        self.reviewer = self._agent("reviewer")
        self.tester = self._agent("tester") if settings.tester else None
        self.child = child or ChildRunner(settings, recorder, abort, terminal)
        policy = partial(policy_in_force, settings.policy, self.loop)
        self.services = services = Services(
            config, settings, recorder, workspace, terminal, abort, policy
        )
        self.suite = SuiteRun(services, self.child)
        self.build = BuildStep(services)
        #: What only a coder call needs, built when the first is due (`repair`).
        self._repair: RepairDesk | None = None
        self._tried: list[tuple[int, str]] = []
        self.end = IterationEnd(services, self.loop, self.clock)
        self.farm = farm_hold(services)
        self.handlers = self._handlers(ResultCollection(services, self.loop))
        if past is not None:
            self._take_over(past)

    # -- plumbing -------------------------------------------------------------------------------

    def _agent(self, role: Role) -> RoleAgent:
        return role_agent(self.config, self.settings, role, self.calls.record, self.clock.remaining)

    def _handlers(self, collection: ResultCollection) -> dict[State, Callable[[], Step]]:
        return {
            State.IDLE: self.idle,
            State.INIT: self.init,
            State.CODE_ANALYSIS: self.code_analysis,
            State.PATCH_GENERATION: self.patch_generation,
            State.PATCH_APPLY: self.patch_apply,
            State.BUILD_SETUP: self.build_setup,
            State.BUILD_RUN: self.build_run,
            State.TEST_SETUP: self.test_setup,
            State.TEST_RUN: self.test_run,
            State.RESULT_COLLECTION: collection.collect,
            State.RESULT_ANALYSIS: self.end.analyse,
            State.CONVERGENCE_CHECK: self.end.check,
            State.ERROR_RECOVERY: self.error_recovery,
        }

    def _take_over(self, past: Past) -> None:
        """What the earlier controllers of a continued run counted, asked and were answered."""
        for passed, total in past.counts:
            self.end.checker.add_iteration_result(passed, total)
        self._tried = list(past.tried)
        self.calls.usage = UsageLedger.from_dict(past.usage)
        self.calls.coder_calls = past.coder_calls
        for agent in filter(None, [self.coder, self.reviewer, self.tester]):
            agent.skip(past.answered[agent.role])

    @property
    def repair(self) -> RepairDesk:
        """The requests, patch gate, proposals and localizer: imported and built at the first
        coder call, so a green run loads none of them (`loop/repair.py`)."""
        if self._repair is None:
            from pytest_fwloop.loop.repair import RepairDesk

            agents = (self.reviewer, self.tester)
            left = self.clock.remaining
            self._repair = RepairDesk(
                self.services, self.loop, agents, self.calls.record, left, self.redact
            )
            self._repair.gate.tried = self._tried
        return self._repair

    def move(self, step: Step) -> None:
        source = self.loop.state
        target = fsm.next_state(source, step.event)
        self.recorder.append_event(self.loop.transition(source, target, step).to_json())
        self.loop.current.states.append(target.value)
        self.loop.state = target
        self.on_move(self.loop)  # saved before it is shown: what the operator saw is on disk
        self.terminal.transition(self.loop.current.number, source, target, self.redact(step.reason))

    def run(self) -> Outcome:
        while self.loop.state not in fsm.TERMINAL_STATES:
            if self.abort.is_set():
                self.loop.outcome = Outcome.CANCELED
                self.loop.final_reason = f"aborted by the operator ({self.abort_reason})"
                self.move(Step(LoopEvent.ABORT, self.loop.final_reason))
                break
            over = self.deadline.passed(self.loop)
            if over is not None:
                self.move(over)
                break
            bound = fsm.STATE_TIMEOUTS[self.loop.state]
            limit = float(getattr(self.settings.options, bound.option))
            self.clock.start(self.deadline.cap(limit) if bound.resume else limit)
            try:
                step = self.handlers[self.loop.state]()
            except BudgetExhausted as exc:
                self.loop.outcome = Outcome.BUDGET_EXHAUSTED
                self.loop.final_reason = str(exc)
                step = Step(LoopEvent.BUDGET_EXHAUSTED, self.loop.final_reason)
            except DeadlinePassed as exc:
                step = self.deadline.passed(self.loop) or self.loop.timed_out(
                    bound, self.clock.limit, str(exc)
                )
            else:
                if bound.resume is None and self.clock.expired():
                    ended = f"it took that long to end with {step.event.value}"
                    step = self.loop.timed_out(bound, self.clock.limit, ended)
            if not self.abort.is_set():
                self.move(step)
        assert self.loop.outcome is not None
        return self.loop.outcome

    def stop_background(self) -> None:
        """What runs beside the loop ends with it: the code index's background reading."""
        if self._repair is not None:
            self._repair.localizer.background.stop()

    # -- states ---------------------------------------------------------------------------------

    def idle(self) -> Step:
        started = Step(LoopEvent.START, f"run {self.recorder.run_id} in {self.settings.rootdir}")
        step = self.loop.resumed or started
        if self.farm is None:
            return step
        return self._take(take_board(self.farm, self.loop, self.abort.is_set, step))

    def init(self) -> Step:
        return Step(
            LoopEvent.BASELINE,
            f"baseline snapshot {self.workspace.baseline[:12]}; "
            f"max_iter={self.settings.options.max_iter}, "
            f"mode={self.settings.mode.value}",
        )

    def build_setup(self) -> Step:
        verdict = self.build.setup(self.loop.current, self.loop.pre_patch_checkpoint)
        if self._repair is not None:  # else no patch was ever tried
            self._repair.gate.forget_if_timed_out(verdict, self.loop.current)
        return self._take(verdict)

    def build_run(self) -> Step:
        return self._take(self.build.run(self.loop.current, self.loop.pre_patch_checkpoint))

    def _take(self, verdict: Verdict) -> Step:
        """Adopt what a step module decided: its error, must-fix items, diagnostics, note."""
        if verdict.error is not None:
            self.loop.error = verdict.error
        if verdict.must_fix is not None:
            self.loop.must_fix = verdict.must_fix
        if verdict.diagnostics is not None:
            self.loop.build_diagnostics = verdict.diagnostics
        if verdict.note:
            self.loop.current.notes.append(verdict.note)
        return verdict.step

    def test_setup(self) -> Step:
        folder = self.recorder.round_path(self.loop.current.number)
        selection = folder / "selection.txt"
        error, board = self.loop.error, ""
        if self.farm and error is not None and error.type is ErrorType.TEST_ENV_FAILURE:
            checked = check_board(self.farm, self.loop, self.abort.is_set)
            if isinstance(checked, Verdict):
                return self._take(checked)
            board = f"; {checked}" if checked else ""
        if self.loop.env_rerun:
            path = self.recorder.write_text(
                selection.relative_to(self.recorder.path), "\n".join(self.loop.env_rerun) + "\n"
            )
            why = error.reason if error is not None else "tests lost their environment"
            self.services.substate(
                self.loop.current.number,
                SubState.HEALTH_CHECK,
                f"{why}: a new child pytest sets it up afresh for them (its fixtures check its "
                f"health again){board}",
                (self.recorder.relative(path),),
            )
            return Step(
                LoopEvent.ENV_READY,
                f"environment reset{board}; rerunning {len(self.loop.env_rerun)} test(s)",
            )
        selection.unlink(missing_ok=True)
        if self.loop.tester_due:
            self.loop.tester_due = False
            return self._plan_tests()
        return Step(LoopEvent.ENV_READY, f"child pytest prepared{board}")

    def _plan_tests(self) -> Step:
        """Ask the tester for the applied patch's test plan (DESIGN.md §5, seed 004)."""
        from pytest_fwloop.loop.steps.tester import plan_tests

        assert self.tester is not None
        allowed = [shlex.join(prefix) for prefix in self.settings.allowed_commands]
        request = self.repair.request(
            "tester", self.loop.current.patch, allowed_commands=allowed, constraints=[]
        )
        return plan_tests(self.services, self.loop, self.tester, request, self.runner)

    def test_run(self) -> Step:
        number = self.loop.current.number
        folder = self.recorder.round_path(number)
        pending = self.loop.tester_round
        tester = pending if pending and not pending.done else None
        notes: list[str] = []
        if tester is not None and tester.plan.select:
            notes.append(self.child.precheck(folder, tester.plan.select, self._run_child))
            self.loop.current.notes.append(notes[-1])
            written = [self.recorder.relative(folder / n) for n in precheck_files(folder)]
            self.services.substate(number, SubState.TESTER_PRECHECK, notes[-1], written)
        picked = tester.plan.select if tester is not None else []
        outcome = self.suite.iteration(folder, self.loop, picked, self._run_child)
        result = outcome.result
        notes += [*outcome.notes, *self.child.take_notes()]  # how children started: trace only
        self.loop.current.notes += outcome.notes
        self.loop.reruns, self.loop.partial_results = outcome.reruns, outcome.carried
        self.loop.test_run_result = ChildOutput(
            outcome.attempt.results, outcome.attempt.log, result.returncode
        )
        if tester is not None:
            tester.done = True
            if not result.timed_out:
                notes.append(self._run_tester_commands(folder, tester))
        self.child.scrub(folder)
        evidence = (self.recorder.relative(outcome.attempt.log),)
        if result.timed_out:
            bound = fsm.STATE_TIMEOUTS[State.TEST_RUN]
            timeout = self.loop.timed_out(bound, self.clock.limit, "the child pytest was stopped")
            return Step(timeout.event, timeout.reason, evidence)
        return Step(
            LoopEvent.TESTS_FINISHED,
            "; ".join(
                [f"child pytest exited {result.returncode} in {result.duration:.1f}s", *notes]
            ),
            evidence,
        )

    def _run_child(self, args: list[str], log: Path, results: Path | None = None) -> ProcessResult:
        plan = self.loop.tester_round.path if self.loop.tester_round is not None else None
        return self.child.run(
            self.loop.current.number,
            args,
            log,
            self.loop.review_path,
            plan,
            self.clock.remaining(),
            results,
        )

    def _run_tester_commands(self, folder: Path, tester: TesterRound) -> str:
        from pytest_fwloop.loop.steps.tester import run_tester_commands

        done = run_tester_commands(
            self.services,
            folder,
            tester,
            self.runner,
            self.build.protected_changed_since,
            self.clock.remaining,
        )
        self.loop.failed_commands = frozenset(r.argv for r in done.failed)
        self.loop.must_fix.extend(done.must_fix)
        self.loop.current.notes.append(done.note)
        commands = self.recorder.relative(folder / "commands.json")
        number = self.loop.current.number
        self.services.substate(number, SubState.TESTER_COMMANDS, done.note, (commands,))
        return done.note

    def code_analysis(self) -> Step:
        return self.repair.analyse(self.coder, self.child)

    def patch_generation(self) -> Step:
        judged = self.repair.judge(self.child)
        return judged if isinstance(judged, Step) else self._take(judged)

    def patch_apply(self) -> Step:
        self.loop.pre_patch_checkpoint = self.workspace.snapshot(
            f"before iteration {self.loop.current.number}"
        )
        verdict = self.repair.gate.apply(self.loop.current, self.loop.pre_patch_checkpoint)
        if verdict.error is None:
            self.loop.tester_due = self.tester is not None
            self.loop.tester_round = None
            self.loop.constraints = []
        return self._take(verdict)

    def error_recovery(self) -> Step:
        error = self.loop.error
        assert error is not None
        used = self.loop.retries.get(error.type, 0)
        decision = recovery.decide(error, used)
        sick = decision.outcome is Outcome.ENV_UNAVAILABLE and error.terminal_outcome is None
        swapped = swap_board(self.farm, self.loop, self.abort.is_set) if sick and self.farm else ""
        if swapped:  # another board: the environment's retries start again on it
            self.loop.retries[error.type] = 0
            return Step(error.resume_event, f"{decision.reason}; {swapped}")
        if decision.outcome is not None:
            self.loop.outcome = decision.outcome
            self.loop.final_reason = decision.reason
        else:
            self.loop.retries[error.type] = used + 1
        return Step(decision.event, decision.reason)
