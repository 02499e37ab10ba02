"""The loop's controller: walks the transition table, one state handler per state.

Each handler does its state's work and returns the event that leaves it; `fsm.next_state` decides
where that leads, and every move is written to the decision trace with its reason and numbers.
The controller never imports the code under test: each TEST_RUN is a child `python -m pytest`.
"""

from __future__ import annotations

import os
import shlex
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from pytest_fwloop import fsm, recovery
from pytest_fwloop.agent_calls import CallLog, role_agent
from pytest_fwloop.agents.errors import AnswerInvalid, ProviderError
from pytest_fwloop.agents.protocol import (
    AgentRequest,
    CoderAnswer,
    HistoryEntry,
    MustFix,
    TesterAnswer,
)
from pytest_fwloop.allowlist import AllowlistRunner, CommandCheck
from pytest_fwloop.budget import BudgetExhausted
from pytest_fwloop.build_step import BuildStep
from pytest_fwloop.child_run import ChildRunner
from pytest_fwloop.context import pack_failures
from pytest_fwloop.convergence import (
    ConvergenceChecker,
    ConvergenceType,
    ExecutionMode,
    PlateauAction,
)
from pytest_fwloop.fsm import ErrorType, State
from pytest_fwloop.loop_state import Iteration, LoopState, Step, Verdict, provider_error
from pytest_fwloop.options import CHILD_REPORT_FLAG, CHILD_SELECT_FLAG
from pytest_fwloop.outcomes import Outcome
from pytest_fwloop.patch_gate import PatchGate
from pytest_fwloop.procs import ProcessResult
from pytest_fwloop.records import (
    ConvergenceRecord,
    Event,
)
from pytest_fwloop.recovery import ErrorState
from pytest_fwloop.redaction import Redactor
from pytest_fwloop.results import IterationResults, TestRecord, nodeids
from pytest_fwloop.rundir import RunRecorder, utc_now
from pytest_fwloop.settings import LoopSettings
from pytest_fwloop.terminal import Terminal
from pytest_fwloop.tester_round import (
    TesterRound,
    ask_tester,
    run_tester_commands,
)
from pytest_fwloop.workspace import (
    Workspace,
)

_VERDICT_OUTCOMES = {
    ConvergenceType.SUCCESS: Outcome.SUCCESS,
    ConvergenceType.CONVERGED_WITH_IMPROVEMENT: Outcome.CONVERGED_WITH_IMPROVEMENT,
    ConvergenceType.PLATEAUED: Outcome.PLATEAUED,
    ConvergenceType.FAILURE: Outcome.FAILURE,
    ConvergenceType.TIMEOUT: Outcome.MAX_ITERATIONS_REACHED,
}


class Controller:
    def __init__(
        self,
        config: pytest.Config,
        settings: LoopSettings,
        recorder: RunRecorder,
        workspace: Workspace,
        terminal: Terminal,
        abort: threading.Event,
        redact: Redactor,
    ) -> None:
        self.config = config
        self.settings = settings
        self.recorder = recorder
        self.workspace = workspace
        self.terminal = terminal
        self.abort = abort
        self.redact = redact
        self.abort_reason = ""
        self.loop = LoopState()
        self.checker = ConvergenceChecker(settings.criteria)
        self.runner = AllowlistRunner(
            settings.allowed_commands,
            cwd=settings.rootdir,
            timeout=settings.command_timeout,
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
        self.coder = role_agent(config, settings, "coder", settings.coder, self.calls.record)
        self.reviewer = role_agent(
            config, settings, "reviewer", settings.reviewer, self.calls.record
        )
        self.tester = (
            role_agent(config, settings, "tester", settings.tester, self.calls.record)
            if settings.tester
            else None
        )
        self.tester_schema = self.tester.schema if self.tester is not None else {}
        self.child = ChildRunner(settings, recorder, abort)
        self.build = BuildStep(settings, workspace, recorder, abort)
        self.gate = PatchGate(settings, workspace, recorder, self.reviewer)
        self.handlers: dict[State, Callable[[], Step]] = {
            State.IDLE: self.idle,
            State.INIT: self.init,
            State.CODE_ANALYSIS: self.code_analysis,
            State.PATCH_GENERATION: self.patch_generation,
            State.PATCH_APPLY: self.patch_apply,
            State.BUILD_SETUP: self.build_setup,
            State.BUILD_RUN: self.build_run,
            State.TEST_SETUP: self.test_setup,
            State.TEST_RUN: self.test_run,
            State.RESULT_COLLECTION: self.result_collection,
            State.RESULT_ANALYSIS: self.result_analysis,
            State.CONVERGENCE_CHECK: self.convergence_check,
            State.ERROR_RECOVERY: self.error_recovery,
        }

    # -- plumbing -------------------------------------------------------------------------------

    def move(self, step: Step) -> None:
        source = self.loop.state
        target = fsm.next_state(source, step.event)
        recovering = source is State.ERROR_RECOVERY and self.loop.error is not None
        event = Event(
            time=utc_now(),
            kind="transition",
            from_state=source.value,
            to_state=target.value,
            event=step.event,
            reason=step.reason,
            iteration=self.loop.current.number,
            evidence=list(step.evidence),
            retry_count=self.loop.retries.get(self.loop.error.type, 0)
            if recovering and self.loop.error
            else 0,
            retry_reason=self.loop.error.reason if recovering and self.loop.error else None,
        )
        self.recorder.append_event(event.to_json())
        self.loop.current.states.append(target.value)
        self.terminal.transition(self.loop.current.number, source, target, self.redact(step.reason))
        self.loop.state = target

    def run(self) -> Outcome:
        while self.loop.state not in fsm.TERMINAL_STATES:
            if self.abort.is_set():
                self.loop.outcome = Outcome.CANCELED
                self.loop.final_reason = f"aborted by the operator ({self.abort_reason})"
                self.move(Step("abort", self.loop.final_reason))
                break
            try:
                step = self.handlers[self.loop.state]()
            except BudgetExhausted as exc:
                self.loop.outcome = Outcome.BUDGET_EXHAUSTED
                self.loop.final_reason = str(exc)
                step = Step("budget_exhausted", self.loop.final_reason)
            if self.abort.is_set():
                continue
            self.move(step)
        assert self.loop.outcome is not None
        return self.loop.outcome

    # -- states ---------------------------------------------------------------------------------

    def idle(self) -> Step:
        return Step("start", f"run {self.recorder.run_id} in {self.settings.rootdir}")

    def init(self) -> Step:
        return Step(
            "baseline",
            f"baseline snapshot {self.workspace.baseline[:12]}; max_iter={self.settings.max_iter}, "
            f"mode={self.settings.mode.value}",
        )

    def build_setup(self) -> Step:
        return self._take(self.build.setup())

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
        if self.loop.env_rerun:
            self.recorder.write_text(
                self.recorder.relative(selection), "\n".join(self.loop.env_rerun) + "\n"
            )
            return Step(
                "env_ready", f"environment reset; rerunning {len(self.loop.env_rerun)} test(s)"
            )
        selection.unlink(missing_ok=True)
        if self.loop.tester_due:
            self.loop.tester_due = False
            return self._plan_tests()
        return Step("env_ready", "child pytest prepared")

    def _plan_tests(self) -> Step:
        """Ask the tester for the applied patch's test plan (DESIGN.md §5, seed 004)."""
        self.loop.previous_failed_commands, self.loop.failed_commands = (
            self.loop.failed_commands,
            frozenset(),
        )
        try:
            plan, check = self._ask_tester()
        except AnswerInvalid as exc:
            # Not terminal (seed 004: iterate): the tests still run, only without the plan.
            note = f"tester_schema_invalid: {'; '.join(exc.errors[:2])}"
            self.loop.current.notes.append(note)
            return Step("tester_schema_invalid", f"{note}; the full suite runs without a plan")
        except ProviderError as exc:
            return self.loop.fail(provider_error("tester", exc), "tester_failed")
        if check.only_blocked:
            return self.loop.fail(
                ErrorState(
                    ErrorType.POLICY_VIOLATION,
                    f"all {len(check.blocked)} command(s) the tester proposed are blocked: "
                    f"{check.blocked[0].reason}",
                    "recover_to_analysis",
                    terminal_outcome=Outcome.TESTER_COMMAND_BLOCKED,
                ),
                "tester_command_blocked",
            )
        folder = self.recorder.relative(self.recorder.round_path(self.loop.current.number))
        path = self.recorder.write_json(f"{folder}/test-plan.json", plan.model_dump(mode="json"))
        self.loop.tester_round = TesterRound(plan, path, check)
        return Step(
            "test_plan_ready",
            f"tester: {len(plan.select)} test(s) to pre-check, {len(check.runnable)} command(s) "
            f"to run, {len(check.blocked)} blocked",
            (self.recorder.relative(path),),
        )

    def _ask_tester(self) -> tuple[TesterAnswer, CommandCheck]:
        assert self.tester is not None
        allowed = [shlex.join(prefix) for prefix in self.settings.allowed_commands]
        request = self._request(
            "tester", self.loop.current.patch, allowed_commands=allowed, constraints=[]
        )
        return ask_tester(
            self.tester,
            self.tester_schema,
            request,
            self._latest_results(),
            self.runner,
            retry_blocked=self.settings.mode is ExecutionMode.AUTO,
        )

    def test_run(self) -> Step:
        folder = self.recorder.round_path(self.loop.current.number)
        tester = (
            self.loop.tester_round
            if self.loop.tester_round and not self.loop.tester_round.done
            else None
        )
        notes: list[str] = []
        if tester is not None and tester.plan.select:
            notes.append(self._tester_precheck(folder, tester.plan.select))
        attempt = len([p for p in folder.glob("pytest*.log")]) + 1
        suffix = "" if attempt == 1 else f"-{attempt}"
        log = folder / f"pytest{suffix}.log"
        # Each attempt keeps its raw record; results.json is the iteration's merged one.
        results_path = folder / f"results-{attempt}.json"
        results_path.unlink(missing_ok=True)
        args = [
            f"{CHILD_REPORT_FLAG}={results_path}",
            f"--junitxml={folder / f'junit{suffix}.xml'}",
        ]
        if self.loop.env_rerun:
            args.append(f"{CHILD_SELECT_FLAG}={folder / 'selection.txt'}")
        result = self._run_child(args, log)
        self.loop.test_run_result = (results_path, log, result.returncode, result.timed_out)
        if tester is not None:
            tester.done = True
            notes.append(self._run_tester_commands(folder, tester))
        self.child.scrub(folder)
        evidence = (self.recorder.relative(log),)
        if result.timed_out:
            return Step(
                "tests_finished",
                f"test run exceeded fwloop_test_timeout={self.settings.test_timeout:g}s",
                evidence,
            )
        return Step(
            "tests_finished",
            "; ".join(
                [f"child pytest exited {result.returncode} in {result.duration:.1f}s", *notes]
            ),
            evidence,
        )

    def _run_child(self, args: list[str], log: Path) -> ProcessResult:
        plan = self.loop.tester_round.path if self.loop.tester_round is not None else None
        return self.child.run(self.loop.current.number, args, log, self.loop.review_path, plan)

    def _tester_precheck(self, folder: Path, select: list[str]) -> str:
        note = self.child.precheck(folder, select, self._run_child)
        self.loop.current.notes.append(note)
        return note

    def _run_tester_commands(self, folder: Path, tester: TesterRound) -> str:
        done = run_tester_commands(
            folder,
            tester,
            self.runner,
            self.workspace,
            self.recorder,
            self.abort,
            self.settings.command_timeout,
            self.build.protected_changed_since,
        )
        self.loop.failed_commands = frozenset(r.argv for r in done.failed)
        self.loop.must_fix.extend(done.must_fix)
        return done.note

    def result_collection(self) -> Step:
        assert self.loop.test_run_result is not None
        path, log, returncode, timed_out = self.loop.test_run_result
        if timed_out:
            return self.loop.fail(
                ErrorState(
                    ErrorType.TIMEOUT,
                    f"TEST_RUN exceeded fwloop_test_timeout={self.settings.test_timeout:g}s",
                    "recover_to_test_setup",
                ),
                "artifacts_missing",
            )
        try:
            results = IterationResults.model_validate_json(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            tail = log.read_text(encoding="utf-8", errors="replace").strip().splitlines()[-3:]
            return self.loop.fail(
                ErrorState(
                    ErrorType.ARTIFACT_MISSING,
                    f"child pytest exited {returncode} without writing results "
                    f"({' | '.join(tail) or 'no output'})",
                    "recover_to_test_setup",
                ),
                "artifacts_missing",
            )
        if self.loop.partial_results is not None:
            results = self.loop.partial_results.merged(results)
            self.loop.partial_results = None
        if self.loop.tester_round is not None and self.loop.tester_round.records:
            commands = IterationResults(
                exitstatus=results.exitstatus, tests=self.loop.tester_round.records
            )
            results = results.merged(commands)
            self.loop.tester_round.records = []
        self.loop.current.results = results
        self.loop.current.checkpoint = self.workspace.checkpoint(
            f"iteration {self.loop.current.number}"
        )
        self.loop.env_rerun = []
        self.recorder.write_json(
            f"{self.recorder.relative(self.recorder.round_path(self.loop.current.number))}/results.json",
            results.model_dump(mode="json"),
        )
        counts = results.counts()
        return Step(
            "results_normalized",
            ", ".join(f"{count} {name}" for name, count in counts.items() if count)
            or "no tests ran",
            (self.recorder.relative(path),),
        )

    def result_analysis(self) -> Step:
        results = self.loop.current.results
        assert results is not None
        if not results.tests:
            return self.loop.fail(
                ErrorState(
                    ErrorType.ARTIFACT_MISSING,
                    f"the child pytest ran no tests (exit {results.exitstatus}); check the "
                    "arguments and testpaths",
                    "recover_to_test_setup",
                    terminal_outcome=Outcome.FAILURE,
                ),
                "environment_failed",
            )
        env_failed = results.environment_failures()
        if env_failed:
            self.loop.partial_results = results
            self.loop.env_rerun = nodeids(env_failed)
            first = env_failed[0].env_failure
            retries_left = (
                self.loop.retries.get(ErrorType.TEST_ENV_FAILURE, 0)
                < recovery.RULES[ErrorType.TEST_ENV_FAILURE].max_retries
            )
            if not retries_left and self._patch_broke_environment(env_failed):
                self.loop.partial_results = None
                self.loop.env_rerun = []
                self.workspace.restore(self.loop.pre_patch_checkpoint)
                self.loop.must_fix = [
                    MustFix(
                        issue="the firmware no longer boots after the previous patch: the "
                        f"environment check passed before it and fails after it ({first})"
                    )
                ]
                self.loop.current.notes.append("patch rolled back: the firmware no longer boots")
                return self.loop.fail(
                    ErrorState(
                        ErrorType.FIRMWARE_NO_BOOT,
                        f"{len(env_failed)} test(s) lost their environment after the patch "
                        f"({first}); patch rolled back",
                        "recover_to_analysis",
                    ),
                    "firmware_no_boot",
                )
            return self.loop.fail(
                ErrorState(
                    ErrorType.TEST_ENV_FAILURE,
                    f"{len(env_failed)} test(s) failed on the environment ({first})",
                    "recover_to_test_setup",
                ),
                "environment_failed",
            )
        self.loop.partial_results = None
        repeated = sorted(self.loop.failed_commands & self.loop.previous_failed_commands)
        if repeated:
            return self.loop.fail(
                ErrorState(
                    ErrorType.TEST_COMMAND_FAILURE,
                    f"the tester's command {', '.join(f'`{shlex.join(a)}`' for a in repeated)} "
                    "failed in two consecutive rounds",
                    "recover_to_analysis",
                ),
                "repeated_test_failure",
            )
        return Step(
            "decision_produced",
            f"pass_count={results.pass_count} total_count={results.total_count}",
        )

    def _patch_broke_environment(self, env_failed: list[TestRecord]) -> bool:
        """The environment came up for these tests before this iteration's patch and not after."""
        if self.loop.current.kind != "patch" or len(self.loop.iterations) < 2:
            return False
        before = self.loop.iterations[-2].results
        if before is None:
            return False
        previous = {t.nodeid: t for t in before.tests}
        return all(
            t.nodeid in previous and previous[t.nodeid].env_failure is None for t in env_failed
        )

    def convergence_check(self) -> Step:
        iteration = self.loop.current
        self.checker.add_iteration_result(iteration.pass_count, iteration.total_count)
        _, verdict, reason = self.checker.check_convergence(
            iteration.number, self.settings.max_iter
        )
        iteration.convergence_type = verdict.value if verdict else None
        iteration.reason = reason
        iteration.score = round(self.checker.score(), 4)
        record = ConvergenceRecord(
            iteration=iteration.number,
            pass_counts=self.checker.pass_counts,
            total_counts=self.checker.total_counts,
            convergence_type=iteration.convergence_type,
            reason=reason,
            score=iteration.score,
            criteria=self.settings.criteria.to_dict(),
        )
        self.recorder.write_json(
            f"{self.recorder.relative(self.recorder.round_path(iteration.number))}/"
            "convergence.json",
            record.model_dump(mode="json"),
        )
        self.config.hook.pytest_fwloop_iteration_done(
            config=self.config,
            iteration=iteration.number,
            results=iteration.results,
            verdict=iteration.convergence_type,
            reason=reason,
        )
        if verdict is None:
            return self._next_iteration(reason)
        self.loop.convergence_type = verdict
        self.loop.final_reason = reason
        if verdict is ConvergenceType.PLATEAUED:
            return self._plateau(reason)
        self.loop.outcome = _VERDICT_OUTCOMES[verdict]
        if verdict is ConvergenceType.SUCCESS:
            return Step("converged", reason)
        return Step("stop", reason)

    def _next_iteration(self, reason: str) -> Step:
        green = self.loop.current.total_count > 0 and (
            self.loop.current.pass_count / self.loop.current.total_count
            >= self.settings.criteria.target_pass_rate
        )
        if reason.startswith("slow improvement"):
            self.loop.constraints = [
                "progress has slowed: prefer a different hypothesis over another variation"
            ]
        self.loop.retries = {}
        self.loop.error = None
        self.loop.tester_round = None
        self.loop.iterations.append(
            Iteration(self.loop.current.number + 1, "confirmation" if green else "patch")
        )
        if green:
            return Step("confirm", f"{reason}; green once, confirming with no new patch")
        return Step("continue", reason)

    def _plateau(self, reason: str) -> Step:
        rate = self.loop.current.pass_count / max(self.loop.current.total_count, 1)
        action, why = self.settings.plateau.handle_plateau(rate, self.loop.strategy_switches)
        full = f"{reason}; {why}"
        if action is PlateauAction.STRATEGY_SWITCH:
            self.loop.strategy_switches += 1
            self.loop.constraints = [
                f"the last iterations plateaued ({reason}); abandon the current approach and "
                "try a different root-cause hypothesis"
            ]
            self.loop.convergence_type = None
            return self._next_iteration(f"{full} (switch {self.loop.strategy_switches})")
        if action is PlateauAction.HUMAN_REVIEW:
            if sys.stdin.isatty() and self.terminal.ask(f"{full}. Continue iterating? [y/N] "):
                self.loop.convergence_type = None
                return self._next_iteration(f"{full}; the operator chose to continue")
            self.loop.outcome = Outcome.AWAITING_OPERATOR_CONFIRM
            self.loop.final_reason = f"{full}; waiting for the operator"
            return Step("await_operator", self.loop.final_reason)
        self.loop.outcome = Outcome.PLATEAUED
        self.loop.final_reason = full
        return Step("stop", full)

    def _request(self, role: str, patch: str = "", **extra: object) -> AgentRequest:
        """The request for `role`; `extra` adds protocol fields or replaces the defaults."""
        latest = self._latest_results()
        failures = pack_failures(
            latest.not_passing() if latest else [],
            self.settings.context_bytes,
            root=str(self.settings.rootdir),
        )
        history = [
            HistoryEntry(
                iteration=it.number,
                pass_count=it.pass_count,
                total_count=it.total_count,
                patch_summary=it.patch_summary,
                outcome="; ".join([it.kind, *it.notes]),
            )
            for it in self.loop.iterations
            if it.results is not None
        ]
        fields: dict[str, object] = {
            "role": role,
            "iteration": self.loop.current.number,
            "goal": self.settings.goal,
            "workspace": str(self.settings.rootdir),
            "failures": failures,
            "history": history,
            "must_fix": list(self.loop.must_fix),
            "patch": patch,
            "build_diagnostics": self.loop.build_diagnostics,
            "constraints": list(self.loop.constraints),
        }
        return AgentRequest.model_validate({**fields, **extra})

    def _latest_results(self) -> IterationResults | None:
        for it in reversed(self.loop.iterations):
            if it.results is not None:
                return it.results
        return None

    def code_analysis(self) -> Step:
        before = self.workspace.expect_agent_edits(
            f"before the coder's call in iteration {self.loop.current.number}"
        )
        try:
            answer = self.coder.ask(self._request("coder"))
        except ProviderError as exc:
            return self.loop.fail(provider_error("coder", exc), "analysis_failed")
        finally:
            # A CLI coder's edits are a proposed patch like any other (DESIGN.md §5): nothing
            # stays in the tree before the policy and the reviewer have passed it.
            edits = self.workspace.take_agent_edits(before)
        assert isinstance(answer, CoderAnswer)
        reason = f"coder: {answer.summary[:120]} (confidence {answer.analysis.confidence:.2f})"
        if edits and not answer.patch.strip():
            answer = answer.model_copy(update={"patch": edits})
            reason += "; its edits of the workspace are the proposed patch, undone until approved"
        elif edits:
            note = "the coder both edited the workspace and sent a patch: edits undone, patch used"
            self.loop.current.notes.append(note)
            reason += f"; {note}"
        self.loop.coder_answer = answer
        return Step("analysis_ready", reason)

    def patch_generation(self) -> Step:
        assert self.loop.coder_answer is not None
        verdict = self.gate.judge(
            self.loop.coder_answer,
            self.loop.current,
            lambda patch: self._request("reviewer", patch),
        )
        if verdict.constraints is not None:
            self.loop.constraints = verdict.constraints
        if self.gate.review_path is not None:
            self.loop.review_path = self.gate.review_path
        return self._take(verdict)

    def patch_apply(self) -> Step:
        self.loop.pre_patch_checkpoint = self.workspace.checkpoint(
            f"before iteration {self.loop.current.number}"
        )
        verdict = self.gate.apply(self.loop.current)
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
        if decision.outcome is not None:
            self.loop.outcome = decision.outcome
            self.loop.final_reason = decision.reason
        else:
            self.loop.retries[error.type] = used + 1
        return Step(decision.event, decision.reason)
