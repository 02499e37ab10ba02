"""The controller's lifetime, from `pytest_cmdline_main` to the exit status (DESIGN.md §2, §10).

Takes the run lock, stops what a killed run left running and recovers its tree, starts the
watchdog, builds the controller, runs it, and ends the run: `finalize` on every path, or
`settle_crash` when even that fails. From the controller's construction on, every exception is an
internal error: outcome `internal_error`, exit status 3, the tree restored, the records written.
"""

from __future__ import annotations

import contextlib
import os
import signal
import tempfile
import threading
import time
import traceback
from types import FrameType
from typing import Any

import pytest

from pytest_fwloop import children, run_context
from pytest_fwloop.continuation import Action, Continued, read_order
from pytest_fwloop.controller import Controller
from pytest_fwloop.fsm import State
from pytest_fwloop.loop_state import LoopState
from pytest_fwloop.options import OPERATOR_DEST
from pytest_fwloop.outcomes import Outcome, describe_crash, exit_status
from pytest_fwloop.records import Event
from pytest_fwloop.redaction import Redactor
from pytest_fwloop.run_state import Invocation, StateError, StateKeeper
from pytest_fwloop.rundir import RunRecorder, new_run_id, utc_now
from pytest_fwloop.settings import LoopSettings, load_settings
from pytest_fwloop.terminal import PREFIX, Terminal
from pytest_fwloop.threads import ThreadError
from pytest_fwloop.workspace import RecoveryReport, Workspace, WorkspaceError


def run_loop(config: pytest.Config) -> int:
    """Entry from pytest_cmdline_main: the whole controller lifetime, tree always accounted for.
    An exception before the run exists (a conftest hook that raises while the providers are
    made) is an internal error too: one line, the traceback in a file, exit status 3."""
    try:
        return _run_loop(config)
    except pytest.UsageError:
        raise
    except Exception as exc:
        return _crash_before_the_run(exc)


def _crash_before_the_run(exc: Exception) -> int:
    text = "".join(traceback.format_exception(exc))
    with tempfile.NamedTemporaryFile(
        "w", prefix="fwloop-internal-error-", suffix=".txt", delete=False, encoding="utf-8"
    ) as stream:
        stream.write(text)
    Terminal().line(
        f"{PREFIX} internal error before the run started: {describe_crash(exc)}; the tree was "
        f"not changed; traceback in {stream.name}"
    )
    return int(pytest.ExitCode.INTERNAL_ERROR)


def _run_loop(config: pytest.Config) -> int:
    settings = load_settings(config)
    terminal = Terminal(verbosity=int(config.option.verbose))
    redact = Redactor(os.environ)
    try:
        order = read_order(config.getoption(OPERATOR_DEST))
    except StateError as exc:
        raise pytest.UsageError(str(exc)) from None
    if order is not None and order.action is Action.CHAT:
        from pytest_fwloop.chat import answer_chat

        return answer_chat(config, settings, order, terminal, redact)
    workspace = Workspace(settings.rootdir, settings.snapshot_exclude)
    run_id = order.run_id if order is not None else new_run_id()
    continued: Continued | None = None
    opened = False
    try:
        # The run lock first; then what a killed run left running, before its tree is restored.
        workspace.lock()
        if order is not None:
            continued = Continued.of(order, settings.runs_root / run_id)
        reaped = children.reap_leftovers(workspace.shadow.state_dir)
        recovered = workspace.open(run_id)
        opened = True
        if continued is not None:
            state, resumption = continued.state, continued.resumption
            workspace.adopt(resumption.tree, resumption.paths, state.left_tree, resumption.watched)
        children.install(workspace.shadow.state_dir)
    except (WorkspaceError, StateError, ThreadError) as exc:
        terminal.line(str(exc))
        if opened:  # only the baseline was taken: nothing of the tree was changed
            workspace.close(keep_tree=True)
        return int(pytest.ExitCode.USAGE_ERROR)
    except OSError as exc:
        # Before the baseline nothing of the tree was changed: a setup problem, not a crash.
        terminal.line(
            f"fwloop: cannot keep the loop's state in {workspace.shadow.state_dir}: "
            f"{exc.strerror or exc} ({exc.filename or 'no file'}); the tree and its .fwloop/ "
            "must be writable"
        )
        return int(pytest.ExitCode.USAGE_ERROR)
    if reaped:
        terminal.line(f"fwloop: stopped {reaped} process(es) left running by an interrupted run")
    try:
        return _control(config, settings, workspace, run_id, recovered, terminal, redact, continued)
    finally:
        children.uninstall()


def _control(
    config: pytest.Config,
    settings: LoopSettings,
    workspace: Workspace,
    run_id: str,
    recovered: RecoveryReport | None,
    terminal: Terminal,
    redact: Redactor,
    continued: Continued | None,
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
    from pytest_fwloop.report import finalize, settle_crash

    # From here on every exception is an internal error (DESIGN.md §10): outcome
    # internal_error, exit status 3, the tree restored, the records written, no traceback.
    started = time.monotonic()
    try:
        context = run_context.gather(config, settings.rootdir, settings.randomly_seed)
        controller = Controller(
            config,
            settings,
            recorder,
            workspace,
            terminal,
            threading.Event(),
            redact,
            loop=continued.loop if continued is not None else None,
        )
        if continued is not None:
            continued.prepare(controller)
        keeper = StateKeeper(
            recorder,
            continued.state.invocation if continued is not None else _invocation(config),
            settings.rootdir,
            settings.max_iter,
            workspace.baseline,
            controller.calls.usage,
            continued.state.revision if continued is not None else 0,
        )
        controller.on_move = keeper.save
        keeper.save(controller.loop)
        terminal.header(settings, recorder)
    except Exception as exc:
        return settle_crash(
            workspace, recorder, terminal, redact, [exc], time.monotonic() - started
        )
    previous = _install_abort_handlers(controller)
    crashes: list[Exception] = []
    pointer = ""
    try:
        controller.run()
    except Exception as exc:
        crashes.append(exc)
        pointer = _stop_on_internal_error(controller, exc)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    try:
        finalize(
            controller.loop,
            controller.calls,
            settings=settings,
            recorder=recorder,
            workspace=workspace,
            terminal=terminal,
            redact=redact,
            duration=time.monotonic() - started,
            context=context,
        )
    except Exception as exc:
        return settle_crash(
            workspace, recorder, terminal, redact, [*crashes, exc], time.monotonic() - started
        )
    if crashes:
        terminal.line(f"{PREFIX} internal error: {pointer}")
    assert controller.loop.outcome is not None
    _left(keeper, controller.loop)
    return int(exit_status(controller.loop.outcome, advisory=settings.advisory))


def _invocation(config: pytest.Config) -> Invocation:
    params = config.invocation_params
    return Invocation(args=[str(arg) for arg in params.args], dir=str(params.dir))


def _left(keeper: StateKeeper, loop: LoopState) -> None:
    """The state's last word: how the run ended and the tree it left (the fixed one on success,
    else its baseline), which a continuation checks the operator has not changed since."""
    kept = loop.kept()
    if loop.outcome is Outcome.SUCCESS and kept:
        keeper.left_tree = kept[-1].checkpoint
    with contextlib.suppress(OSError):  # the records are written; a full disk loses only this
        keeper.save(loop)


def _stop_on_internal_error(controller: Controller, exc: Exception) -> str:
    """End the run where an exception left it: outcome internal_error, the traceback in the run
    directory and the move to FAILURE in the trace. Where the traceback is, for the terminal."""
    from pytest_fwloop.report import INTERNAL_ERROR_FILE, record_internal_error

    controller.loop.outcome = Outcome.INTERNAL_ERROR
    controller.loop.final_reason = f"internal error: {describe_crash(exc)}"
    pointer = record_internal_error(controller.recorder, [exc])
    with contextlib.suppress(OSError):  # finalize will meet a failing disk too, and settle it
        event = Event.note(
            utc_now(),
            "internal_error",
            (controller.loop.state.value, State.FAILURE.value),
            "internal_error",
            controller.loop.final_reason,
            controller.loop.current.number,
            [INTERNAL_ERROR_FILE],
        )
        controller.recorder.append_event(event.to_json())
    controller.loop.state = State.FAILURE
    return pointer


def _install_abort_handlers(controller: Controller) -> dict[int, Any]:
    def on_signal(signum: int, frame: FrameType | None) -> None:
        controller.abort_reason = signal.Signals(signum).name
        controller.abort.set()

    previous: dict[int, Any] = {}
    for sig in (signal.SIGINT, signal.SIGTERM):
        previous[sig] = signal.signal(sig, on_signal)
    return previous
