"""One candidate checked in a scratch tree of its own (DESIGN.md §19): exported, built, tested.

The tree is the snapshot the iteration started from with the candidate's patch applied,
written from the shadow store under `.fwloop/candidates/` (`workspace/scratch_tree.py`); its
build runs there (the configured command, sandboxed as configured) and its tests run in a child
pytest started there, so two candidates checked side by side share no file, no build output
and no console log. What each check left is in `rounds/NN/candidates/K/`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pytest_fwloop.config.option_table import CHILD_REPORT_FLAG, CHILD_SELECT_FLAG
from pytest_fwloop.core.suite.history import regressions_between
from pytest_fwloop.core.suite.known_failures import with_known
from pytest_fwloop.core.suite.results import IterationResults, not_passing
from pytest_fwloop.loop.child_runner import ChildRunner
from pytest_fwloop.loop.steps.build import build_diagnostics, first_error, run_build
from pytest_fwloop.workspace import PatchApplyError
from pytest_fwloop.workspace.scratch_tree import export_patched, remove_scratch, scratch_root

if TYPE_CHECKING:
    from collections.abc import Callable

    from pytest_fwloop.loop.services import Services


@dataclass
class TrialReport:
    """What one candidate's checks found; `dropped` says why it left the running, if it did."""

    build: Literal["ok", "failed", "not_run"] = "not_run"
    build_s: float = 0.0
    tests_s: float = 0.0
    dropped: str | None = None
    diagnostics: str = ""
    fixed: tuple[str, ...] | None = None
    still_failing: tuple[str, ...] = ()


class Trials:
    """The scratch trees of one iteration's candidates and the checks run in them."""

    def __init__(
        self,
        services: Services,
        child: ChildRunner,
        time_left: Callable[[], float],
        label: str,
    ) -> None:
        """`label`: what names this iteration's trees (`RUN-NN`), unique under `.fwloop/`."""
        self.services = services
        self.child = child
        self.time_left = time_left
        self.label = label

    def tree(self, number: int) -> Path:
        return scratch_root(self.services.workspace.shadow) / f"{self.label}-{number}"

    def focus(
        self, number: int, patch: str, base: str, failing: list[str], folder: Path
    ) -> TrialReport:
        """Export, build, then run the tests failing now: what it fixed, or why it dropped out.
        Runs in a worker thread when candidates are checked side by side: it writes only in
        its own tree and its own `folder`."""
        report = TrialReport()
        tree = self.tree(number)
        try:
            export_patched(self.services.workspace.shadow, base, patch, tree)
        except PatchApplyError as exc:
            report.dropped = str(exc)
            return report
        build = self.services.settings.build
        if build is not None:
            log = folder / "build.log"
            started = time.monotonic()
            try:
                result = run_build(self.services.settings, self.services.abort, build, tree, log)
            except OSError as exc:
                report.build, report.dropped = "failed", f"its build could not start: {exc}"
                return report
            report.build_s = time.monotonic() - started
            if result.returncode != 0 or result.timed_out:
                text = log.read_text(encoding="utf-8", errors="replace")
                report.build, report.diagnostics = "failed", build_diagnostics(text)
                ended = "timed out" if result.timed_out else f"exited {result.returncode}"
                report.dropped = f"its build {ended}: {first_error(report.diagnostics)}"
                return report
            report.build = "ok"
        selection = folder / "focus-select.txt"
        selection.write_text("".join(f"{nodeid}\n" for nodeid in failing), encoding="utf-8")
        results = self._run(tree, folder / "focus", report, [f"{CHILD_SELECT_FLAG}={selection}"])
        if results is None:
            report.dropped = "its focus run left no results (see candidates/K/focus.log)"
            return report
        ran = {t.nodeid: t for t in results.tests}
        report.fixed = tuple(n for n in failing if n in ran and not not_passing(ran[n]))
        report.still_failing = tuple(n for n in failing if n not in report.fixed)
        return report

    def whole(
        self, number: int, standing: IterationResults, folder: Path, report: TrialReport
    ) -> tuple[str, ...] | None:
        """The whole suite in the candidate's tree, as the regression gate: the tests passing
        now that it does not pass; None when the run left no results."""
        results = self._run(self.tree(number), folder / "gate", report, [])
        if results is None:
            return None
        return tuple(regressions_between(standing, results))

    def _run(
        self, tree: Path, stem: Path, report: TrialReport, args: list[str]
    ) -> IterationResults | None:
        """One child pytest in `tree` writing `STEM-results.json` and `STEM.log`."""
        results_path = stem.with_name(f"{stem.name}-results.json")
        timeout = max(1.0, min(self.services.settings.options.test_timeout, self.time_left()))
        started = time.monotonic()
        self.child.run_tree(
            tree, [f"{CHILD_REPORT_FLAG}={results_path}", *args], stem.with_suffix(".log"), timeout
        )
        report.tests_s += time.monotonic() - started
        try:
            raw = IterationResults.read(results_path)
        except (OSError, ValueError):
            return None
        return with_known(raw, self.services.settings.endings.known_failures)

    def clear(self, numbers: list[int]) -> None:
        """Delete the scratch trees (their logs and records stay in the run directory)."""
        for number in numbers:
            remove_scratch(self.tree(number))
