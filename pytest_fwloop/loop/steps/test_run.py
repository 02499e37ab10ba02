"""TEST_RUN's child runs for one iteration: the focus, the regression gate, flaky reruns.

What to run is decided by `focus.plan_iteration`; this module starts the runs it asks for and
says which results file the iteration is judged by, and which records stand in for the tests
that were not run (DESIGN.md §13).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from pytest_fwloop.child.files import Attempt, next_attempt
from pytest_fwloop.core.machine.fsm import IterationKind
from pytest_fwloop.core.machine.substates import SubState
from pytest_fwloop.core.suite.flaky import Reruns, with_flaky
from pytest_fwloop.core.suite.focus import WHOLE_SUITE, FocusPlan, gate_due, plan_iteration
from pytest_fwloop.core.suite.known_failures import with_known
from pytest_fwloop.core.suite.results import IterationResults
from pytest_fwloop.loop.child_runner import ChildRunner
from pytest_fwloop.loop.services import Services
from pytest_fwloop.loop.state import LoopState
from pytest_fwloop.procs.supervision import ProcessResult

#: Starts one child pytest: (extra arguments, log path, results path for live progress).
RunChild = Callable[[list[str], Path, Path | None], ProcessResult]


@dataclass
class SuiteOutcome:
    """The run the iteration is judged by, with what completes it."""

    attempt: Attempt
    result: ProcessResult
    #: Records of the tests this iteration did not run (their last full-run outcome).
    carried: IterationResults | None = None
    #: What the flaky reruns found.
    reruns: Reruns = field(default_factory=Reruns)
    notes: list[str] = field(default_factory=list)


class SuiteRun:
    """Runs what an iteration's focus plan asks for."""

    def __init__(self, services: Services, child: ChildRunner) -> None:
        self.services = services
        self.child = child

    def iteration(
        self, folder: Path, loop: LoopState, picked: list[str], run: RunChild
    ) -> SuiteOutcome:
        """The environment's rerun when one is due, else what the focus plan asks for."""
        if loop.env_rerun:
            outcome = self._attempt(folder, folder / "selection.txt", None, run, flaky_reruns=False)
            outcome.carried = loop.partial_results  # the reset is the retry: no flaky reruns
            return outcome
        kind, standing = loop.current.kind, loop.latest_results()
        plan = (
            plan_iteration(kind, standing, loop.attempts(), picked)
            if self.services.settings.options.focus
            else WHOLE_SUITE
        )
        patch = kind is IterationKind.PATCH
        outcome = self.run(folder, plan, standing, run, gate=patch, spectrum=patch)
        if outcome.carried is None and plan.select != []:
            loop.current.full_run = outcome.attempt
        return outcome

    def run(
        self,
        folder: Path,
        plan: FocusPlan,
        previous: IterationResults | None,
        run: RunChild,
        gate: bool,
        spectrum: bool = False,
    ) -> SuiteOutcome:
        """Run the plan; with `gate`, a focus that could end the loop green is followed by the
        whole suite, whose results are then the iteration's. With `spectrum`, the plan's own run
        (a patch's: the tests still failing are expected among its tests) records which lines
        each test ran, when localization reads them; a gate never does (docs/providers.md)."""
        record = spectrum and self.services.settings.options.source_bytes > 0
        if plan.select is None:
            return self._attempt(folder, None, previous, run, spectrum=record)
        if not plan.select:
            return self._nothing_to_rerun(folder, plan)
        selection = self.services.recorder.write_text(
            f"{self.services.recorder.relative(folder)}/focus-select.txt",
            "\n".join(plan.select) + "\n",
        )
        focused = self._attempt(folder, selection, previous, run, spectrum=record)
        focused.carried = plan.carried
        note = f"focus on {plan.why}"
        if focused.result.timed_out:
            return focused
        try:
            raw = IterationResults.read(focused.attempt.results)
        except (OSError, ValueError):
            return focused  # RESULT_COLLECTION reports what the child left
        settings = self.services.settings
        ran = with_known(
            with_flaky(raw, focused.reruns, settings.options.flaky_policy),
            settings.endings.known_failures,
        )
        note += f": {ran.pass_count}/{ran.total_count} passed"
        note += _drop_uncollected(focused, plan, raw)
        assert focused.carried is not None
        estimate = focused.carried.merged(ran)
        recorder = self.services.recorder
        ran_files = [recorder.relative(selection), recorder.relative(focused.attempt.log)]
        if not gate or not gate_due(
            ran, estimate, self.services.settings.criteria.target_pass_rate
        ):
            focused.notes.insert(0, f"{note}; the other tests carry their last full-run outcome")
            self._say(folder, SubState.FOCUS_RUN, focused.notes[0], ran_files)
            return focused
        self._say(folder, SubState.FOCUS_RUN, note, ran_files)
        full = self._attempt(folder, None, previous, run)
        gate_note = f"{note}; the whole suite ran as the regression gate"
        full.notes[:0] = [gate_note, *focused.notes]
        self._say(folder, SubState.GATE_RUN, gate_note, [recorder.relative(full.attempt.log)])
        return full

    def _say(self, folder: Path, name: SubState, reason: str, evidence: list[str]) -> None:
        """A sub-state of TEST_RUN in the trace; `folder` is `rounds/NN`, NN the iteration."""
        self.services.substate(int(folder.name), name, reason, evidence)

    def _attempt(
        self,
        folder: Path,
        selection: Path | None,
        previous: IterationResults | None,
        run: RunChild,
        flaky_reruns: bool = True,
        spectrum: bool = False,
    ) -> SuiteOutcome:
        head = self.child.head_attempt(folder) if selection is None else None
        attempt = head or next_attempt(folder)
        args = self.child.attempt_args(folder, attempt, selection, spectrum)
        result = run(args, attempt.log, attempt.results)
        outcome = SuiteOutcome(attempt, result)
        if flaky_reruns and not result.timed_out:
            trace = not spectrum and self.services.settings.options.source_bytes > 0
            outcome.reruns, note = self.child.rerun_failures(
                folder, attempt, previous, lambda a, log: run(a, log, None), trace
            )
            if note:
                outcome.notes.append(note)
                self._say(folder, SubState.FLAKY_RERUN, note, [])
        return outcome

    def _nothing_to_rerun(self, folder: Path, plan: FocusPlan) -> SuiteOutcome:
        """A confirmation with no test that ever failed: the gate (or the baseline) that made
        the loop green ran every test on this very tree, so its records stand and no child
        starts."""
        assert plan.carried is not None
        attempt = next_attempt(folder)
        self.services.recorder.write_json(
            self.services.recorder.relative(attempt.results),
            plan.carried.model_dump(mode="json"),
            indent=False,
        )
        self.services.recorder.write_text(
            self.services.recorder.relative(attempt.log),
            "no child pytest ran: no test failed or was flaky at any iteration, so the last "
            "full run's records stand (each marked carried)\n",
        )
        result = ProcessResult(returncode=0, timed_out=False, aborted=False, duration=0.0)
        return SuiteOutcome(
            attempt,
            result,
            notes=[f"confirmation: {len(plan.carried.tests)} result(s) carried, none rerun"],
        )


def _drop_uncollected(focused: SuiteOutcome, plan: FocusPlan, raw: IterationResults) -> str:
    """Tests selected but no longer collected (a patch renamed or removed them) lose their
    carried records, which must not stand in for tests that do not exist; a note if any."""
    assert plan.carried is not None
    assert plan.select is not None
    gone = set(plan.select) - {t.nodeid for t in raw.tests}
    if not gone:
        return ""
    kept = [t for t in plan.carried.tests if t.nodeid not in gone]
    focused.carried = plan.carried.model_copy(update={"tests": kept})
    return f"; {len(gone)} focused test(s) no longer collected"
