"""The controller's lifetime, from `pytest_cmdline_main` to the exit status (DESIGN.md §2, §10).

Takes the run lock, stops what a killed run left running and recovers its tree, starts the
watchdog, and hands the run to `loop_control`, which builds the controller, runs it and ends the
run. A new run with no build step starts its baseline's child first: nothing comes between the
baseline snapshot and those tests, so the controller's imports and set-up overlap them. This
module therefore imports only what that takes; the rest comes with `loop_control`.
"""

from __future__ import annotations

import gc
import os
import threading
from typing import TYPE_CHECKING

import pytest

from pytest_fwloop.child.rewrite_cache import RewriteCache
from pytest_fwloop.config.option_table import OPERATOR_DEST
from pytest_fwloop.config.settings import LoopSettings, load_settings
from pytest_fwloop.core.records.redaction import Redactor
from pytest_fwloop.loop.child_runner import ChildRunner
from pytest_fwloop.loop.rundir import RunRecorder, new_run_id
from pytest_fwloop.loop.terminal import Terminal
from pytest_fwloop.procs import reaper
from pytest_fwloop.workspace import RecoveryReport, Workspace, WorkspaceError

if TYPE_CHECKING:
    from pytest_fwloop.loop.operator.continuation import Continued, Order


def run_loop(config: pytest.Config) -> int:
    """Entry from pytest_cmdline_main: the whole controller lifetime, tree always accounted for.
    An exception before the run exists (a conftest hook that raises while the providers are
    made) is an internal error too: one line, the traceback in a file, exit status 3."""
    try:
        return _run_loop(config)
    except pytest.UsageError:
        raise
    except Exception as exc:
        from pytest_fwloop.loop.crash import crash_before_the_run  # records: off the fork's way

        return crash_before_the_run(exc)
    finally:
        # The process ends with the run: what the loop holds is never collected again, so
        # the interpreter's collections at exit pass over its heap (~30 ms of each run).
        gc.freeze()


def _run_loop(config: pytest.Config) -> int:
    settings = load_settings(config)
    terminal = Terminal(verbosity=int(config.option.verbose))
    redact = Redactor(os.environ)
    order = _read_order(config)
    setup_errors: tuple[type[Exception], ...] = (WorkspaceError,)
    if order is not None:
        # An order of the fwloop command: a chat, or a run continued from its recorded state.
        from pytest_fwloop.core.records.run_state import StateError
        from pytest_fwloop.loop.operator.continuation import Action, Continued
        from pytest_fwloop.loop.operator.threads import ThreadError

        if order.action is Action.CHAT:
            from pytest_fwloop.loop.operator.chat import answer_chat

            return answer_chat(config, settings, order, terminal, redact)
        if order.action is Action.APPLY:
            from pytest_fwloop.loop.operator.apply_best import apply_best

            return apply_best(settings, order, terminal, redact)
        setup_errors = (WorkspaceError, StateError, ThreadError)
    workspace = Workspace(settings.rootdir, settings.snapshot_exclude)
    run_id = order.run_id if order is not None else new_run_id()
    # A new run with no build step starts its baseline's tests before it writes its journal
    # (not with a board farm: the tests wait for the place the controller locks first).
    head_start = order is None and settings.build is None and settings.farm is None
    continued: Continued | None = None
    opened = False
    try:
        # The run lock first; then what a killed run left running, before its tree is restored.
        workspace.lock()
        if order is not None:
            continued = Continued.of(order, settings.runs_root / run_id)
        reaped = reaper.reap_leftovers(workspace.shadow.state_dir)
        recovered = workspace.take_baseline(run_id)
        opened = True
        if not head_start:
            workspace.begin_journal(run_id)
        if continued is not None:
            state, resumption = continued.state, continued.resumption
            workspace.adopt(resumption.tree, resumption.paths, state.left_tree, resumption.watched)
        reaper.install(workspace.shadow.state_dir)
    except setup_errors as exc:
        terminal.line(str(exc))
        if opened:  # only the baseline was taken: nothing of the tree was changed
            workspace.close(keep_tree=True)
        return int(pytest.ExitCode.USAGE_ERROR)
    except OSError as exc:
        # Before the baseline nothing of the tree was changed: a setup problem, not a crash.
        terminal.line(_unwritable(workspace, exc))
        return int(pytest.ExitCode.USAGE_ERROR)
    if reaped:
        terminal.line(f"fwloop: stopped {reaped} process(es) left running by an interrupted run")
    try:
        return _start(
            config, settings, workspace, run_id, recovered, terminal, redact, continued, head_start
        )
    finally:
        reaper.uninstall()


def _read_order(config: pytest.Config) -> Order | None:
    path = config.getoption(OPERATOR_DEST)
    if not path:
        return None
    from pytest_fwloop.core.records.run_state import StateError
    from pytest_fwloop.loop.operator.continuation import read_order

    try:
        return read_order(path)
    except StateError as exc:
        raise pytest.UsageError(str(exc)) from None


def _start(
    config: pytest.Config,
    settings: LoopSettings,
    workspace: Workspace,
    run_id: str,
    recovered: RecoveryReport | None,
    terminal: Terminal,
    redact: Redactor,
    continued: Continued | None,
    head_start: bool,
) -> int:
    recorder = RunRecorder(settings.runs_root, run_id, redact, reopen=continued is not None)
    if recovered is not None:
        terminal.line(
            f"fwloop: recovered the tree of interrupted run {recovered.run_id}: restored "
            f"{len(recovered.restored_paths)} path(s) to its baseline"
        )
        recorder.write_json(
            "recovered.json",
            {
                "run_id": recovered.run_id,
                "baseline": recovered.baseline,
                "restored_paths": recovered.restored_paths,
            },
        )
    child = ChildRunner(settings, recorder, threading.Event(), terminal, RewriteCache(config))
    if head_start:
        child.start_baseline()
        # The journal's schema (pydantic) is imported while the tests run; the loop writes
        # nothing to the tree before they end.
        try:
            workspace.begin_journal(run_id)
        except (WorkspaceError, OSError) as exc:
            child.stop_head_start()
            terminal.line(
                str(exc) if isinstance(exc, WorkspaceError) else _unwritable(workspace, exc)
            )
            workspace.close(keep_tree=True)
            return int(pytest.ExitCode.USAGE_ERROR)
    try:
        # Imported now, while the baseline's tests may already run.
        from pytest_fwloop.loop.lifetime import announce, control

        status = control(config, settings, workspace, recorder, terminal, redact, continued, child)
        announce(settings, recorder, terminal)
        return status
    finally:
        child.stop_head_start()


def _unwritable(workspace: Workspace, exc: OSError) -> str:
    return (
        f"fwloop: cannot keep the loop's state in {workspace.shadow.state_dir}: "
        f"{exc.strerror or exc} ({exc.filename or 'no file'}); the tree and its .fwloop/ "
        "must be writable"
    )
