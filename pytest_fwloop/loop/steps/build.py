"""BUILD_SETUP and BUILD_RUN (DESIGN.md §3): the firmware rebuilt after each patch.

A build broken by the coder's patch is rolled back and the compiler's diagnostics go to the coder
as must-fix items; so is a patch whose files fail the pre-check before the build (`precheck`).
A patched Makefile or build script is source that runs, so the tree is checked after the build:
a patch whose build changed protected paths (a planted `conftest.py`) is rolled back too
(docs/security.md).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from pytest_fwloop.config.preflight import missing_build_program
from pytest_fwloop.core.execution.c_coverage import build_variables
from pytest_fwloop.core.gate.policy import PatchPolicy, protection
from pytest_fwloop.core.machine.fsm import ErrorType, IterationKind, LoopEvent
from pytest_fwloop.core.machine.outcomes import Outcome
from pytest_fwloop.core.machine.recovery import ErrorState
from pytest_fwloop.core.records.agent_protocol import MustFix
from pytest_fwloop.loop.services import Services
from pytest_fwloop.loop.state import Iteration, Step, Verdict, failed
from pytest_fwloop.loop.steps.precheck import PrecheckReport, run_precheck
from pytest_fwloop.procs.sandbox import bwrap_argv
from pytest_fwloop.procs.supervision import run_logged

if TYPE_CHECKING:
    import threading
    from collections.abc import Mapping
    from pathlib import Path

    from pytest_fwloop.config.settings import LoopSettings
    from pytest_fwloop.procs.supervision import ProcessResult

#: Diagnostics kept from a failed build for the coder.
BUILD_DIAGNOSTICS_BYTES = 6000


class BuildStep:
    """The build of one run; remembers which protected paths the baseline's own build writes."""

    def __init__(self, services: Services) -> None:
        self.services = services
        # Protected paths the baseline's own build changes: build products, not tampering.
        self.baseline_build_products: set[str] = set()
        # The clean command ran once for a baseline that did not build (fwloop_build_clean).
        self.cleaned = False

    def setup(self, current: Iteration, pre_patch: str) -> Verdict:
        """The pre-check of the patch just applied (seed 001 §5.6), then the build tool."""
        checked = run_precheck(self.services, current, pre_patch)
        if checked.failure:
            return self._rolled_back(
                pre_patch,
                Step(LoopEvent.PRECHECK_FAILED, checked.failure, checked.evidence),
                ErrorState(checked.error_type, checked.failure, LoopEvent.RECOVER_TO_ANALYSIS),
                checked.output,
                f"its pre-check failed before the build: {checked.failure}",
            )
        build = self.services.settings.build
        if build is None:
            return Verdict(
                _checked(Step(LoopEvent.NO_BUILD, "no build command configured"), checked)
            )
        program = missing_build_program(build, self.services.settings.rootdir)
        if program is not None:
            return failed(
                ErrorState(
                    ErrorType.BUILD_FAILURE,
                    f"build tool '{program}' not found on PATH; install it or fix --fwloop-build",
                    LoopEvent.RECOVER_TO_BUILD,
                    terminal_outcome=Outcome.BUILD_FAILED,
                ),
                LoopEvent.TOOLCHAIN_MISSING,
            )
        name = "/bin/sh" if isinstance(build, str) else build[0]
        return Verdict(_checked(Step(LoopEvent.BUILD_READY, f"build tool '{name}' found"), checked))

    def run(self, current: Iteration, pre_patch: str) -> Verdict:
        """Run the build; a patch that breaks it, or whose build changes protected paths, is
        rolled back to `pre_patch` and the coder gets the diagnostics."""
        build = self.services.settings.build
        assert build is not None
        log = self.services.recorder.round_path(current.number, "build.log")
        try:
            result = self._run(build, log)
        except OSError as exc:
            return failed(
                ErrorState(
                    ErrorType.BUILD_FAILURE,
                    f"cannot start the build: {exc}",
                    LoopEvent.RECOVER_TO_BUILD,
                    terminal_outcome=Outcome.BUILD_FAILED,
                ),
                LoopEvent.BUILD_FAILED,
            )
        self.services.recorder.scrub(log)
        evidence = (self.services.recorder.relative(log),)
        if result.returncode == 0 and not result.timed_out:
            tampered = self._protected_changed_by_build(current, pre_patch)
            if tampered:
                return self._reject_tampering_build(tampered, evidence, pre_patch)
            return Verdict(
                Step(LoopEvent.BUILD_OK, f"build exited 0 in {result.duration:.1f}s", evidence)
            )
        return self._failed_build(current, pre_patch, result, log, evidence)

    def _run(self, command: list[str] | str, log: Path) -> ProcessResult:
        """A build command (the build, or its clean) in the tree, with the counting build's
        variables when one is asked for; OSError if it cannot start."""
        settings = self.services.settings
        coverage = build_variables(settings.options.c_coverage)
        return run_build(settings, self.services.abort, command, settings.rootdir, log, coverage)

    def _failed_build(
        self,
        current: Iteration,
        pre_patch: str,
        result: ProcessResult,
        log: Path,
        evidence: tuple[str, ...],
    ) -> Verdict:
        """Who mends a failed build: the coder if its patch broke it (rolled back), a retry if
        it timed out without a new patch, nobody if the tree does not build before any patch."""
        text = log.read_text(encoding="utf-8", errors="replace")
        diagnostics = build_diagnostics(text)
        if result.timed_out:
            limit = self.services.settings.options.build_timeout
            what = f"build exceeded fwloop_build_timeout={limit:g}s"
            error_type, event = ErrorType.TIMEOUT, LoopEvent.STATE_TIMEOUT
        else:
            what = f"build exited {result.returncode}"
            error_type, event = ErrorType.BUILD_FAILURE, LoopEvent.BUILD_FAILED
        if current.kind is IterationKind.PATCH and pre_patch:
            return self._rolled_back(
                pre_patch,
                Step(event, what, evidence),
                ErrorState(error_type, what, LoopEvent.RECOVER_TO_ANALYSIS),
                text,
                what,
            )
        if result.timed_out:
            return Verdict(
                Step(event, f"{what} without a new patch; retrying the build", evidence),
                error=ErrorState(error_type, what, LoopEvent.RECOVER_TO_BUILD),
            )
        # The tree as the user gave it does not build: no agent is asked to mend what it did
        # not break. A stale build directory may be the cause: cleaned once, then rebuilt.
        first = first_error(diagnostics)
        cleaned = self._clean(current)
        if cleaned is not None:
            return Verdict(
                Step(
                    event, f"the tree does not build without any patch: {what}; {cleaned}", evidence
                ),
                error=ErrorState(error_type, f"{what}; {cleaned}", LoopEvent.RECOVER_TO_BUILD),
            )
        after = " after fwloop_build_clean" if self.cleaned else ""
        return Verdict(
            Step(event, f"the tree does not build without any patch{after}: {what}", evidence),
            error=ErrorState(
                error_type,
                f"the tree does not build before any patch{after} ({what}): {first}; see "
                f"{self.services.recorder.relative(log)}",
                LoopEvent.RECOVER_TO_BUILD,
                terminal_outcome=Outcome.BUILD_FAILED,
            ),
        )

    def _rolled_back(
        self, pre_patch: str, step: Step, error: ErrorState, output: str, why: str
    ) -> Verdict:
        """Undo a patch that broke the build (or its pre-check): the coder gets the errors of
        `output` as must-fix items and build diagnostics, `why` saying what failed."""
        self.services.workspace.restore(pre_patch)
        diagnostics = build_diagnostics(output)
        return Verdict(
            Step(
                step.event,
                f"{step.reason}; patch rolled back, diagnostics go to the coder",
                step.evidence,
            ),
            error=error,
            must_fix=[
                MustFix(
                    issue=f"the previous patch broke the build ({why}); fix these errors:\n"
                    f"{diagnostics}"
                )
            ],
            diagnostics=diagnostics,
            note=f"patch rolled back: {error.reason}",
        )

    def _clean(self, current: Iteration) -> str | None:
        """Run fwloop_build_clean once (seed 001 §4.2: clean, then rebuild); what it did, or
        None when there is no clean command or it already ran."""
        clean = self.services.settings.endings.build_clean
        if clean is None or self.cleaned:
            return None
        self.cleaned = True
        log = self.services.recorder.round_path(current.number, "build-clean.log")
        try:
            result = self._run(clean, log)
        except OSError as exc:
            return f"fwloop_build_clean could not start ({exc}); retrying the build once"
        self.services.recorder.scrub(log)
        return f"fwloop_build_clean exited {result.returncode}; retrying the build once"

    def _protected_changed_by_build(self, current: Iteration, pre_patch: str) -> list[str]:
        """Protected paths the build changed. A patched Makefile or build script is source that
        runs, and could rewrite the tests or their configuration; the patch policy never sees
        that, so the tree is checked after the build (and after each tester command). Protected
        paths the baseline's own build changes are its products, not tampering."""
        if current.kind is not IterationKind.PATCH or not pre_patch:
            self.baseline_build_products = set(
                protected_paths(
                    self.services.workspace.shadow.changed_paths(self.services.workspace.baseline),
                    self.services.policy(),
                )
            )
            return []
        return self.protected_changed_since(pre_patch)

    def protected_changed_since(self, snapshot: str) -> list[str]:
        """Protected paths that differ from `snapshot`, the baseline build's products aside."""
        changed = self.services.workspace.shadow.changed_paths(snapshot)
        return sorted(
            set(protected_paths(changed, self.services.policy())) - self.baseline_build_products
        )

    def _reject_tampering_build(
        self, tampered: list[str], evidence: tuple[str, ...], pre_patch: str
    ) -> Verdict:
        """Undo the patch and whatever its build did to protected paths; the coder is told."""
        shown = ", ".join(tampered[:5]) + (f" and {len(tampered) - 5} more" if tampered[5:] else "")
        self.services.workspace.touched.update(tampered)
        self.services.workspace.restore(pre_patch)
        error = ErrorState(
            ErrorType.POLICY_VIOLATION,
            f"the build changed protected path(s) {shown}; patch rolled back",
            LoopEvent.RECOVER_TO_ANALYSIS,
        )
        return Verdict(
            Step(LoopEvent.BUILD_FAILED, error.reason, evidence),
            error=error,
            must_fix=[
                MustFix(
                    issue=f"the build of the previous patch changed protected files ({shown}); a "
                    "build may not write tests, test configuration or CI files"
                )
            ],
            note="patch rolled back: its build changed protected files",
        )


def run_build(
    settings: LoopSettings,
    abort: threading.Event,
    command: list[str] | str,
    root: Path,
    log: Path,
    variables: Mapping[str, str] | None = None,
) -> ProcessResult:
    """A build command as configured, in tree `root` (the user's, or a candidate's scratch
    tree): in the sandbox if one is set, through /bin/sh if it is a shell line; OSError if it
    cannot start."""
    sandbox = settings.build_sandbox
    return run_logged(
        command if sandbox is None else bwrap_argv(sandbox, command, root),
        cwd=root,
        log_path=log,
        timeout=settings.options.build_timeout,
        abort=abort,
        env={**os.environ, **variables} if variables else None,
        shell=sandbox is None and isinstance(command, str),
    )


def _checked(step: Step, checked: PrecheckReport) -> Step:
    """`step` with what the pre-check passed and what it left unchecked, for the trace."""
    said = [f"pre-check passed ({checked.checked})"] if checked.checked else []
    said += [f"pre-check: {checked.unchecked}"] if checked.unchecked else []
    if not said:
        return step
    return Step(step.event, "; ".join([*said, step.reason]), checked.evidence)


def protected_paths(paths: list[str], policy: PatchPolicy) -> list[str]:
    """The paths among `paths` that the policy protects."""
    return [path for path in paths if protection(path, policy) is not None]


#: What marks a line of a build log as an error.
ERROR_MARKS = ("error", "Error", "undefined reference", "fatal")


def first_error(diagnostics: str) -> str:
    """The build's first error line, else its last line: the one line a person reads."""
    lines = [line.strip() for line in diagnostics.splitlines() if line.strip()]
    errors = [line for line in lines if any(mark in line for mark in ERROR_MARKS)]
    return (errors or lines or ["no output"])[0][:300]


def build_diagnostics(log: str) -> str:
    """The compiler's errors first, then the log's tail, within a bound."""
    lines = log.splitlines()
    errors = [line for line in lines if any(mark in line for mark in ERROR_MARKS)]
    head = "\n".join(errors)[: BUILD_DIAGNOSTICS_BYTES // 2]
    tail = "\n".join(lines[-40:])[-(BUILD_DIAGNOSTICS_BYTES - len(head)) :]
    return f"{head}\n--- end of build log ---\n{tail}" if head else tail
