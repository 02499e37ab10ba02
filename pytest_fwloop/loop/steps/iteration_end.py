"""RESULT_ANALYSIS and CONVERGENCE_CHECK (DESIGN.md §3, §4, §7).

Environment failures are retried without the coder, or, when the patch made the firmware stop
booting, the patch is rolled back; then the convergence checker decides whether the loop goes on,
is confirmed green, or stops, and a plateau is handled by the execution mode.
"""

from __future__ import annotations

import shlex
import sys

from pytest_fwloop.core.machine import recovery
from pytest_fwloop.core.machine.fsm import ErrorType, IterationKind, LoopEvent, State
from pytest_fwloop.core.machine.outcomes import ADVISORY_OUTCOMES, Outcome
from pytest_fwloop.core.machine.recovery import ErrorState
from pytest_fwloop.core.machine.run_limits import circuit_breaker
from pytest_fwloop.core.machine.state_clock import StateClock
from pytest_fwloop.core.records.agent_protocol import MustFix
from pytest_fwloop.core.records.round_records import ConvergenceRecord
from pytest_fwloop.core.records.run_records import Event
from pytest_fwloop.core.suite.history import broken_per_iteration, regressions_between
from pytest_fwloop.core.suite.results import (
    COMMAND_NODEID_PREFIX,
    IterationResults,
    TestRecord,
    collection_errors,
    environment_lost,
    error_line,
    nodeids,
    only_commands_failing,
)
from pytest_fwloop.core.verdict.baseline_gate import BaselineGate, baseline_gate, unconfirmed
from pytest_fwloop.core.verdict.convergence import (
    ConvergenceChecker,
    ConvergenceType,
    PlateauAction,
)
from pytest_fwloop.core.verdict.iteration_advice import Facts, analyse, headline
from pytest_fwloop.core.verdict.metrics import describe
from pytest_fwloop.loop.finish import report_page
from pytest_fwloop.loop.notify import announce_plateau
from pytest_fwloop.loop.rundir import utc_now
from pytest_fwloop.loop.services import Services
from pytest_fwloop.loop.state import Iteration, LoopState, Step
from pytest_fwloop.loop.steps.result_collection import labgrid_stopped
from pytest_fwloop.reports.html import write_html_report

_VERDICT_OUTCOMES = {
    ConvergenceType.SUCCESS: Outcome.SUCCESS,
    ConvergenceType.CONVERGED_WITH_IMPROVEMENT: Outcome.CONVERGED_WITH_IMPROVEMENT,
    ConvergenceType.PLATEAUED: Outcome.PLATEAUED,
    ConvergenceType.FAILURE: Outcome.FAILURE,
    ConvergenceType.TIMEOUT: Outcome.MAX_ITERATIONS_REACHED,
}


class IterationEnd:
    """The end of each iteration, over the run's shared `LoopState`."""

    def __init__(self, services: Services, loop: LoopState, clock: StateClock) -> None:
        self.services = services
        self.loop = loop
        self.clock = clock
        self.checker = ConvergenceChecker(services.settings.criteria)

    def analyse(self) -> Step:
        results = self.loop.current.results
        assert results is not None
        if not results.tests:
            return labgrid_stopped(self.loop) or self.loop.fail(
                ErrorState(
                    ErrorType.ARTIFACT_MISSING,
                    f"the child pytest ran no tests (exit {results.exitstatus}); check the "
                    "arguments and testpaths",
                    LoopEvent.RECOVER_TO_TEST_SETUP,
                    terminal_outcome=Outcome.FAILURE,
                ),
                LoopEvent.ENVIRONMENT_FAILED,
            )
        broken = collection_errors(results)
        if broken and self.loop.current.kind is IterationKind.BASELINE:
            return self.loop.fail(
                ErrorState(
                    ErrorType.COLLECTION_ERROR,
                    f"{len(broken)} file(s) of the suite do not collect, so no agent is asked: "
                    + "; ".join(f"{t.nodeid}: {error_line(t.longrepr)}" for t in broken[:3]),
                    LoopEvent.RECOVER_TO_ANALYSIS,
                ),
                LoopEvent.COLLECTION_FAILED,
            )
        env_failed = results.environment_failures()
        if env_failed:
            return self._environment_failed(results, env_failed)
        self.loop.partial_results = None
        repeated = sorted(self.loop.failed_commands & self.loop.previous_failed_commands)
        if repeated:
            return self.loop.fail(
                ErrorState(
                    ErrorType.TEST_COMMAND_FAILURE,
                    f"the tester's command {', '.join(f'`{shlex.join(a)}`' for a in repeated)} "
                    "failed in two consecutive rounds",
                    LoopEvent.RECOVER_TO_ANALYSIS,
                ),
                LoopEvent.REPEATED_TEST_FAILURE,
            )
        return Step(
            LoopEvent.DECISION_PRODUCED,
            f"pass_count={results.pass_count} total_count={results.total_count}",
        )

    def _environment_failed(self, results: IterationResults, env_failed: list[TestRecord]) -> Step:
        """Tests that lost their environment are rerun without asking the coder; once the
        retries are spent, a patch that made the firmware stop booting is rolled back."""
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
            self.services.workspace.restore(self.loop.pre_patch_checkpoint)
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
                    LoopEvent.RECOVER_TO_ANALYSIS,
                ),
                LoopEvent.FIRMWARE_NO_BOOT,
            )
        return self.loop.fail(
            ErrorState(
                ErrorType.TEST_ENV_FAILURE,
                f"{len(env_failed)} test(s) failed on the environment ({first})",
                LoopEvent.RECOVER_TO_TEST_SETUP,
            ),
            LoopEvent.ENVIRONMENT_FAILED,
        )

    def _patch_broke_environment(self, env_failed: list[TestRecord]) -> bool:
        if self.loop.current.kind is not IterationKind.PATCH or len(self.loop.iterations) < 2:
            return False
        return environment_lost(env_failed, self.loop.iterations[-2].results)

    def check(self) -> Step:
        iteration = self.loop.current
        settings = self.services.settings
        self._roll_back_a_regressing_patch()
        self._remember_a_fix()
        # A rolled-back attempt still counts as what it measured: the rules judge the attempts
        # (a coder whose patches keep making things worse plateaus), not the tree that stands.
        self.checker.add_iteration_result(iteration.pass_count, iteration.total_count)
        _, verdict, reason = self.checker.check_convergence(
            iteration.number, settings.options.max_iter
        )
        gate = baseline_gate(self.loop.measured(), settings.options.metric_tolerance)
        if verdict is ConvergenceType.SUCCESS or (verdict is None and self._at_target()):
            # Whatever the target, no test that passed at the baseline may fail (DESIGN.md §13)
            # and no metric may be worse than its tolerance allows (seed 001 §5.15): a green
            # tree is neither confirmed nor declared a success while either holds. Nor is a
            # tree a success before runs with no new patch have confirmed it.
            withheld = gate.withheld()
            if verdict is ConvergenceType.SUCCESS:
                kinds = [it.kind for it in self.loop.iterations if it.results is not None]
                withheld += unconfirmed(kinds, settings.criteria.stable_iterations_required)
            if withheld:
                verdict = None
                reason += withheld
        iteration.convergence_type = verdict.value if verdict else None
        iteration.reason = reason
        iteration.analysis = analyse(
            Facts(
                self.checker.pass_counts,
                self.checker.total_counts,
                settings.criteria,
                iteration.number,
                settings.options.max_iter,
                verdict,
                settings.mode,
                gate.regressions,
                gate.metrics,
            )
        )
        iteration.score = iteration.analysis.score
        self._record_convergence(iteration, reason, gate)
        self.services.terminal.analysis(
            iteration.number,
            headline(iteration.analysis, gate.metrics),
            iteration.analysis.recommendation,
        )
        self._publish_progress(iteration, reason, verdict)
        if verdict is None:
            return self._breaker() or self._next_iteration(reason)
        self.loop.convergence_type = verdict
        self.loop.final_reason = reason
        if verdict is ConvergenceType.PLATEAUED:
            return self._plateau(reason)
        if verdict is ConvergenceType.SUCCESS:
            self.loop.outcome = Outcome.SUCCESS
            return Step(LoopEvent.CONVERGED, reason)
        return self._stop(_VERDICT_OUTCOMES[verdict], reason)

    def _stop(self, outcome: Outcome, reason: str) -> Step:
        """A verdict short of success ends the run: as seed 004's `test_failed` when every test
        of the suite passes and only the tester's commands fail, which says more than the
        verdict; not where ci_terminate_as = warning softens it (its exit status stays)."""
        results = self.loop.current.results
        commands = only_commands_failing(results) if results is not None else []
        softened = self.services.settings.advisory and outcome in ADVISORY_OUTCOMES
        if commands and not softened:
            outcome = Outcome.TEST_FAILED
            named = ", ".join(f"`{c.removeprefix(COMMAND_NODEID_PREFIX)}`" for c in commands[:3])
            reason += (
                f"; every test of the suite passes, only the tester's command(s) fail: {named}"
            )
        self.loop.outcome, self.loop.final_reason = outcome, reason
        return Step(LoopEvent.STOP, reason)

    def _breaker(self) -> Step | None:
        """Seed 001 §5.17: a run whose patches keep being undone or keep breaking what passed
        stops, however the convergence rules judge its counts."""
        tripped = circuit_breaker(
            len(self.loop.rolled_back()),
            broken_per_iteration(self.loop.attempts(), self.loop.rolled_back()),
            self.services.settings.endings.circuit_breaker,
        )
        if tripped is None:
            return None
        self.loop.outcome, self.loop.final_reason = Outcome.CIRCUIT_BREAKER, tripped
        return Step(LoopEvent.CIRCUIT_BREAKER, tripped)

    def _record_convergence(self, iteration: Iteration, reason: str, gate: BaselineGate) -> None:
        """convergence.json: what `fwloop replay` checks the verdict and analysis against."""
        settings = self.services.settings
        record = ConvergenceRecord(
            iteration=iteration.number,
            pass_counts=self.checker.pass_counts,
            total_counts=self.checker.total_counts,
            convergence_type=iteration.convergence_type,
            reason=reason,
            score=iteration.score,
            criteria=settings.criteria.to_dict(),
            max_iter=settings.options.max_iter,
            metric_tolerance=dict(settings.options.metric_tolerance),
            metrics=gate.metrics,
            mode=settings.mode.value,
            analysis=iteration.analysis,
        )
        self.services.recorder.write_json(
            f"{self.services.recorder.relative(self.services.recorder.round_path(iteration.number))}/"
            "convergence.json",
            record.model_dump(mode="json"),
        )

    def _publish_progress(
        self, iteration: Iteration, reason: str, verdict: ConvergenceType | None
    ) -> None:
        """The report and the iteration-done hook, so a person or a plugin can follow the run.
        A run that ends now writes its final report at once (`finish.finalize`): not this one,
        which would be replaced a moment later (a plateau may wait for the operator first)."""
        recorder = self.services.recorder
        if verdict is None or verdict is ConvergenceType.PLATEAUED:
            running = f"after iteration {iteration.number}: {reason}"
            settings = self.services.settings
            page = report_page(self.loop, recorder.run_id, settings, "running", running)
            unwritten = write_html_report(recorder.path, page, recorder.redact)
            iteration.notes += [unwritten] if unwritten else []
        self.services.config.hook.pytest_fwloop_iteration_done(
            config=self.services.config,
            iteration=iteration.number,
            results=iteration.results,
            verdict=iteration.convergence_type,
            reason=reason,
        )

    def _remember_a_fix(self) -> None:
        """A kept patch that raised the pass count goes to the knowledge base (DESIGN.md §12)."""
        measured = self.loop.measured()
        if (
            self.loop.current.kind is not IterationKind.PATCH
            or len(measured) < 2
            or not self.services.settings.knowledge
        ):
            return
        from pytest_fwloop.knowledge.fixes import remember
        from pytest_fwloop.knowledge.store import KnowledgeBase

        answer = self.loop.coder_answer
        note = remember(
            KnowledgeBase(self.services.settings.knowledge),
            self.services.recorder.run_id,
            measured[-2][1],
            self.loop.current,
            answer.analysis.root_cause if answer is not None else "",
            self.services.recorder.redact,
            str(self.services.settings.rootdir),
        )
        if note:
            self.loop.current.notes.append(note)

    def _roll_back_a_regressing_patch(self) -> None:
        """DESIGN.md §13: a patch that breaks tests that passed before it without raising the
        pass count is undone, and the coder is told which and why."""
        current = self.loop.current
        measured = self.loop.measured()  # the kept trees, this iteration's last
        if current.kind is not IterationKind.PATCH or len(measured) < 2 or current.results is None:
            return
        before = measured[-2][1]
        # Only what ran before the patch convicts it: a test the focus left out may have been
        # broken by an earlier patch (focus.py says how such a regression is traced).
        broken = regressions_between(before, current.results, ran_only=True)
        if not broken or current.pass_count > before.pass_count:
            return
        self.services.workspace.restore(self.loop.pre_patch_checkpoint)
        current.kind = IterationKind.ROLLBACK
        why = (
            f"the patch broke {len(broken)} test(s) that passed before it "
            f"({', '.join(broken[:3])}) and raised the pass count no higher "
            f"({before.pass_count} -> {current.pass_count})"
        )
        current.notes.append(f"patch rolled back: {why}")
        self.loop.must_fix = [
            MustFix(issue=f"{why}; it was rolled back: fix the failures without breaking them")
        ]
        self.services.recorder.append_event(
            Event.note(
                utc_now(),
                "rollback",
                (State.CONVERGENCE_CHECK.value, State.CONVERGENCE_CHECK.value),
                "rollback",
                why,
                current.number,
            ).to_json()
        )

    def _at_target(self) -> bool:
        """The tree that stands (after a rollback, the previous iteration's) meets the target."""
        standing = self.loop.latest_results()
        return (
            standing is not None
            and standing.total_count > 0
            and standing.pass_count / standing.total_count
            >= self.services.settings.criteria.target_pass_rate
        )

    def _next_iteration(self, reason: str) -> Step:
        gate = baseline_gate(self.loop.measured(), self.services.settings.options.metric_tolerance)
        green = self._at_target() and gate.holds
        # The coder hears of a metric gone worse as of a test to fix: the tests may all pass.
        self.loop.must_fix = [
            *self.loop.must_fix,
            *(
                MustFix(
                    issue=f"{describe(c)} is worse than at the baseline beyond its tolerance "
                    f"({c.better} is better, tolerance {c.tolerance:.1%}): bring it back"
                )
                for c in gate.metrics
                if c.worse
            ),
        ]
        # Seed §5.19.3's slow signal asks for another strategy; a patch that raised the pass
        # count is progress whatever its size, so only one that did not is told to change tack.
        counts = self.checker.pass_counts
        if reason.startswith("slow improvement") and counts[-1] <= counts[-2]:
            self.loop.constraints = [
                "progress has slowed: prefer a different hypothesis over another variation"
            ]
        self.loop.retries = {}
        self.loop.error = None
        self.loop.tester_round = None
        self.loop.coder_answer = None  # spent: state.json must not offer it as pending
        self.loop.iterations.append(
            Iteration(
                self.loop.current.number + 1,
                IterationKind.CONFIRMATION if green else IterationKind.PATCH,
            )
        )
        if green:
            return Step(LoopEvent.CONFIRM, f"{reason}; green once, confirming with no new patch")
        return Step(LoopEvent.CONTINUE, reason)

    def _plateau(self, reason: str) -> Step:
        rate = self.loop.current.pass_count / max(self.loop.current.total_count, 1)
        action, why = self.services.settings.plateau.handle_plateau(
            rate, self.loop.strategy_switches
        )
        full = f"{reason}; {why}"
        announce_plateau(self.services, self.loop, action, full)
        if action is PlateauAction.STRATEGY_SWITCH:
            self.loop.strategy_switches += 1
            self.loop.constraints = [
                f"the last iterations plateaued ({reason}); abandon the current approach and "
                "try a different root-cause hypothesis"
            ]
            self.loop.convergence_type = None
            return self._next_iteration(f"{full} (switch {self.loop.strategy_switches})")
        if action is PlateauAction.HUMAN_REVIEW:
            with self.clock.paused():
                question = f"{full}. Continue iterating? [y/N] "
                go_on = sys.stdin.isatty() and self.services.terminal.ask(question)
            if go_on:
                self.loop.convergence_type = None
                return self._next_iteration(f"{full}; the operator chose to continue")
            self.loop.outcome = Outcome.AWAITING_OPERATOR_CONFIRM
            self.loop.final_reason = f"{full}; waiting for the operator"
            return Step(LoopEvent.AWAIT_OPERATOR, self.loop.final_reason)
        return self._stop(Outcome.PLATEAUED, full)
