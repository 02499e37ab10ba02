"""RESULT_COLLECTION (DESIGN.md §3, §7): the child's records become the iteration's results.

Environment reruns, flaky and known failures and the tester's commands are merged in, the tested
tree is snapshotted, and `results.json` is written; a child that died is read from its progress
stream, and one that labgrid stopped is the environment's failure.
"""

from __future__ import annotations

from pathlib import Path

from pytest_fwloop.child.files import progress_path
from pytest_fwloop.core.machine.fsm import ErrorType, LoopEvent
from pytest_fwloop.core.machine.recovery import ErrorState
from pytest_fwloop.core.machine.substates import SubState
from pytest_fwloop.core.suite.env_classify import labgrid_refusal
from pytest_fwloop.core.suite.flaky import Reruns, with_flaky
from pytest_fwloop.core.suite.known_failures import with_known
from pytest_fwloop.core.suite.results import (
    IterationResults,
    executed_in,
    read_progress,
    results_from_progress,
)
from pytest_fwloop.loop.services import Services
from pytest_fwloop.loop.state import LoopState, Step


class ResultCollection:
    """RESULT_COLLECTION over the run's shared `LoopState`."""

    def __init__(self, services: Services, loop: LoopState) -> None:
        self.services = services
        self.loop = loop

    def collect(self) -> Step:
        assert self.loop.test_run_result is not None
        path, log, returncode = (
            self.loop.test_run_result.results,
            self.loop.test_run_result.log,
            self.loop.test_run_result.returncode,
        )
        recorder = self.services.recorder
        try:
            results = IterationResults.read(path)
            fetched = f"{path.name}: {len(results.tests)} test record(s)"
        except (OSError, ValueError):
            tail = log.read_text(encoding="utf-8", errors="replace").strip().splitlines()[-3:]
            died = f"exit {returncode}: {tail[-1] if tail else 'no output'}"
            rebuilt = results_from_progress(read_progress(progress_path(path)), died)
            if rebuilt is None:
                return self._no_results(returncode, tail)
            results = rebuilt
            fetched = (
                f"the child pytest died before writing its results ({died}); they were "
                "rebuilt from its progress stream"
            )
            self.loop.current.notes.append(fetched)
        evidence = [recorder.relative(p) for p in (path, log) if p.is_file()]
        self.services.substate(self.loop.current.number, SubState.FETCH_LOGS, fetched, evidence)
        return self._normalized(results, path)

    def _no_results(self, returncode: int | None, tail: list[str]) -> Step:
        refused = labgrid_stopped(self.loop)
        if refused is not None:
            return refused
        return self.loop.fail(
            ErrorState(
                ErrorType.ARTIFACT_MISSING,
                f"child pytest exited {returncode} without writing results "
                f"({' | '.join(tail) or 'no output'})",
                LoopEvent.RECOVER_TO_TEST_SETUP,
            ),
            LoopEvent.ARTIFACTS_MISSING,
        )

    def _normalized(self, results: IterationResults, path: Path) -> Step:
        """The iteration's results: merged with what an environment rerun or the tester's
        commands add, snapshotted with the tree they describe, and recorded."""
        merged: list[str] = []
        if self.loop.partial_results is not None:
            kept = len(self.loop.partial_results.tests)
            merged.append(f"{kept} record(s) kept from before this run (carried or reset)")
            results = self.loop.partial_results.merged(results)
            self.loop.partial_results = None
        settings = self.services.settings
        results = with_known(
            with_flaky(results, self.loop.reruns, settings.options.flaky_policy),
            settings.endings.known_failures,
        )
        if self.loop.reruns.flaky:
            merged.append(f"{len(self.loop.reruns.flaky)} flaky ({settings.options.flaky_policy})")
        if self.loop.reruns.failed:
            merged.append(f"{len(self.loop.reruns.failed)} failing on every rerun (latest kept)")
        known = sum(t.known_failure for t in results.tests)
        merged += [f"{known} known failure(s) (fwloop_known_failures)"] if known else []
        self.loop.reruns = Reruns()
        if self.loop.tester_round is not None and self.loop.tester_round.records:
            commands = IterationResults(
                exitstatus=results.exitstatus, tests=self.loop.tester_round.records
            )
            merged.append(f"{len(commands.tests)} tester command(s)")
            results = results.merged(commands)
            self.loop.tester_round.records = []
        number = self.loop.current.number
        counted = f"pass_count={results.pass_count} total_count={results.total_count}"
        normalized = f"merged {', '.join(merged)}: {counted}" if merged else counted
        self.services.substate(number, SubState.NORMALIZE, normalized)
        self.loop.current.results = results
        self.loop.current.executed = executed_in(path.parent)
        self.loop.current.checkpoint = self.services.workspace.checkpoint(f"iteration {number}")
        self.loop.env_rerun = []
        recorder = self.services.recorder
        folder = recorder.round_path(number)
        written = recorder.write_json(
            f"{recorder.relative(folder)}/results.json",
            results.model_dump(mode="json"),
            indent=False,
        )
        attached = [written, *sorted(folder.glob("junit*.xml")), folder / "console"]
        snapshot = self.loop.current.checkpoint[:12]
        self.services.substate(
            number,
            SubState.ATTACH_ARTIFACTS,
            f"results.json written; the tested tree is snapshot {snapshot}",
            [recorder.relative(p) for p in attached if p.exists()],
        )
        counts = results.counts()
        return Step(
            LoopEvent.RESULTS_NORMALIZED,
            ", ".join(f"{count} {name}" for name, count in counts.items() if count)
            or "no tests ran",
            (self.services.recorder.relative(path),),
        )


def labgrid_stopped(loop: LoopState) -> Step | None:
    """A child that labgrid's plugin stopped before any test because the place is not this
    loop's: the environment's failure (the lock is checked and taken back), not the suite's."""
    assert loop.test_run_result is not None
    try:
        output = loop.test_run_result.log.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    said = labgrid_refusal(output)
    if said is None:
        return None
    return loop.fail(
        ErrorState(
            ErrorType.TEST_ENV_FAILURE,
            f"labgrid stopped the child pytest before any test: {said}",
            LoopEvent.RECOVER_TO_TEST_SETUP,
        ),
        LoopEvent.ENVIRONMENT_FAILED,
    )
