"""The pre-check in BUILD_SETUP (seed 001 §5.6): the files an applied patch wrote, checked in
seconds before the build spends minutes on them.

Written Python files are compiled (`core/gate/precheck.py`: never imported, never run); a file that
did not compile before the patch either is left to the build, which knows what it is.
`fwloop_precheck` runs through the allowlist runner (argv, no shell, its timeout, the output's
tail, secret-named variables removed), with the written files that match `fwloop_precheck_files`
appended, each judged as the tool will read it. What it found is `rounds/NN/build-precheck.log`
(`…-2.log` for the iteration's next patch); `BuildStep` rolls a failing patch back and tells the
coder, as for a broken build.
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass
from pathlib import Path

from pytest_fwloop.core.gate.precheck import (
    command_files,
    python_files,
    python_problem,
    written_paths,
)
from pytest_fwloop.core.machine.fsm import ErrorType, IterationKind
from pytest_fwloop.loop.services import Services
from pytest_fwloop.loop.state import Iteration
from pytest_fwloop.procs.allowlist_runner import AllowlistRunner, CommandBlocked, CommandResult

#: The pre-check's record in the round's folder.
PRECHECK_LOG = "build-precheck.log"


@dataclass(frozen=True)
class PrecheckReport:
    """What the pre-check of one patch did: `checked` ("" when nothing was checked), what it
    left unchecked and why (`unchecked`), and, when the patch fails it, why (`failure`) and
    what the coder is shown (`output`)."""

    checked: str = ""
    unchecked: str = ""
    evidence: tuple[str, ...] = ()
    failure: str = ""
    output: str = ""
    error_type: ErrorType = ErrorType.BUILD_FAILURE


def run_precheck(services: Services, current: Iteration, pre_patch: str) -> PrecheckReport:
    """Check the files the iteration's patch wrote; an empty report when there is no patch
    (the baseline, a confirmation run) or nothing to check."""
    if current.kind is not IterationKind.PATCH or not pre_patch or not current.patch.strip():
        return PrecheckReport()
    settings = services.settings.precheck
    root = services.settings.rootdir
    written = [path for path in written_paths(current.patch) if _in_tree(root, path)]
    python = python_files(written)
    files = command_files(written, settings.files)
    command = settings.command if files or not settings.files else None
    unchecked = []
    if settings.command is not None and command is None:
        unchecked.append(
            f"`{shlex.join(settings.command)}` not run: no file the patch wrote matches "
            f"fwloop_precheck_files ({' '.join(settings.files)})"
        )
    if not python and command is None:
        return PrecheckReport(unchecked="; ".join(unchecked))
    log: list[str] = []
    failures: list[str] = []
    broken, unjudged = _uncompilable(services, pre_patch, python, log)
    compiled = len(python) - len(unjudged)
    checked = [f"compiled {compiled} Python file(s)"] if compiled else []
    if unjudged:
        unchecked.append(
            f"{len(unjudged)} Python file(s) left to the build, which did not compile before "
            f"the patch either ({', '.join(unjudged[:3])})"
        )
    if broken:
        failures.append(f"{len(broken)} written Python file(s) do not compile ({broken[0]})")
    timed_out = False
    path = _log_path(services.recorder.round_path(current.number))
    if command is not None:
        shown = shlex.join(command)
        log.append(f"$ {shlex.join((*command, *files))}")
        try:
            result = _runner(services).run_with_paths(command, files, path)
        except CommandBlocked as exc:
            log.append(f"not run: {exc}")
            failures.append(f"the pre-check cannot be given a written file: {exc}")
        else:
            ended = _ended(result, settings.timeout)
            log += [result.output.rstrip("\n"), f"[{ended}]"]
            checked.append(f"`{shown}` on {len(files)} file(s) {ended}")
            timed_out = result.timed_out
            if not result.passed:
                failures.append(f"pre-check `{shown}` {ended}")
    text = services.recorder.redact("\n".join(log) + "\n")
    record = services.recorder.write_text(services.recorder.relative(path), text)
    return PrecheckReport(
        checked="; ".join(checked),
        unchecked="; ".join(unchecked),
        evidence=(services.recorder.relative(record),),
        failure="; ".join(failures),
        output=text if failures else "",
        # A command that only ran out of time is retried as the build's timeout is.
        error_type=ErrorType.TIMEOUT if timed_out and not broken else ErrorType.BUILD_FAILURE,
    )


def _uncompilable(
    services: Services, pre_patch: str, python: list[str], log: list[str]
) -> tuple[list[str], list[str]]:
    """The written Python files that do not compile and did before the patch (or are new),
    each one's error in `log`; and those not judged: they did not compile before either."""
    root = services.settings.rootdir
    broken: list[str] = []
    unjudged: list[str] = []
    for path in python:
        log.append(f"$ compile {path}")
        problem = python_problem(path, (root / path).read_bytes())
        if problem is None:
            log.append("ok")
            continue
        before = services.workspace.shadow.read(pre_patch, path)
        if before is not None and python_problem(path, before) is not None:
            log.append(f"not judged: {path} did not compile before the patch either")
            unjudged.append(path)
            continue
        log.append(problem)
        broken.append(path)
    return broken, unjudged


def _log_path(folder: Path) -> Path:
    """The iteration's first pre-check writes PRECHECK_LOG, a later patch's `…-2.log` on."""
    path = folder / PRECHECK_LOG
    number = 1
    while path.exists():
        number += 1
        path = folder / f"{Path(PRECHECK_LOG).stem}-{number}.log"
    return path


def _runner(services: Services) -> AllowlistRunner:
    """The allowlist runner with the operator's pre-check command as its one line."""
    settings = services.settings
    assert settings.precheck.command is not None
    return AllowlistRunner(
        (settings.precheck.command,),
        cwd=settings.rootdir,
        timeout=settings.precheck.timeout,
        abort=services.abort,
        environ=os.environ,
    )


def _ended(result: CommandResult, timeout: float) -> str:
    """How the command ended, in the words of fwloop_precheck's options."""
    if result.timed_out:
        return f"timed out after fwloop_precheck_timeout={timeout:g}s"
    if result.start_error:
        return f"could not start: {result.start_error}"
    return f"exited {result.returncode} in {result.duration:.1f}s"


def _in_tree(root: Path, path: str) -> bool:
    """`path` is a file that resolves inside the tree: nothing outside it is read or named."""
    full = root / path
    top = os.path.realpath(root)
    return full.is_file() and os.path.realpath(full).startswith(top.rstrip(os.sep) + os.sep)
