"""The run once its tree is safe: the controller built, run and ended (DESIGN.md §2, §10).

From the controller's construction on, every exception is an internal error: outcome
`internal_error`, exit status 3, the tree restored, the records written. `loop_main` imports this
module only after the baseline's child may have started, so these imports overlap the tests.
"""

from __future__ import annotations

import contextlib
import signal
import time
from types import FrameType
from typing import Any

import pytest

from pytest_fwloop.config.settings import LoopSettings
from pytest_fwloop.core.machine.outcomes import describe_crash, exit_status
from pytest_fwloop.core.records.redaction import Redactor
from pytest_fwloop.core.records.run_state import Invocation
from pytest_fwloop.loop import run_context
from pytest_fwloop.loop.child_runner import ChildRunner
from pytest_fwloop.loop.controller import Controller
from pytest_fwloop.loop.crash import settle_crash, stop_on_internal_error
from pytest_fwloop.loop.finish import finalize
from pytest_fwloop.loop.notify import announce_end
from pytest_fwloop.loop.operator.continuation import Continued, StateKeeper
from pytest_fwloop.loop.rundir import RunRecorder
from pytest_fwloop.loop.state import LoopState
from pytest_fwloop.loop.terminal import PREFIX, Terminal
from pytest_fwloop.procs import reaper
from pytest_fwloop.workspace import Workspace


def control(
    config: pytest.Config,
    settings: LoopSettings,
    workspace: Workspace,
    recorder: RunRecorder,
    terminal: Terminal,
    redact: Redactor,
    continued: Continued | None,
    child: ChildRunner,
) -> int:
    """Build the controller, run it and end the run; the exit status."""
    # From here on every exception is an internal error (DESIGN.md §10): outcome
    # internal_error, exit status 3, the tree restored, the records written, no traceback.
    started = time.monotonic()
    try:
        context = run_context.gather(config, settings.rootdir, settings.randomly_seed)
        controller, keeper = _build(
            config, settings, workspace, recorder, terminal, redact, continued, child
        )
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
        pointer = stop_on_internal_error(controller.loop, controller.recorder, exc)
    finally:
        controller.stop_background()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if controller.farm is not None:  # no child runs from here: the board goes back now
            for problem in controller.farm.release():
                terminal.line(f"{PREFIX} labgrid: {problem}")
    reaper.release()  # its sweep overlaps the records written below
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


def _build(
    config: pytest.Config,
    settings: LoopSettings,
    workspace: Workspace,
    recorder: RunRecorder,
    terminal: Terminal,
    redact: Redactor,
    continued: Continued | None,
    child: ChildRunner,
) -> tuple[Controller, StateKeeper]:
    """The controller, with a continued run's past handed over, and the keeper of its
    `state.json`, saved once before the first move."""
    if continued is not None:
        continued.record(recorder, redact)
    controller = Controller(
        config,
        settings,
        recorder,
        workspace,
        terminal,
        child.abort,
        redact,
        loop=continued.loop if continued is not None else None,
        child=child,
        past=continued.past if continued is not None else None,
    )
    keeper = StateKeeper(
        recorder,
        continued.state.invocation if continued is not None else _invocation(config),
        settings.rootdir,
        settings.options.max_iter,
        workspace.baseline,
        controller.calls.usage,
        continued.state.revision if continued is not None else 0,
    )
    controller.on_move = keeper.save
    keeper.save(controller.loop)
    terminal.header(settings, recorder)
    return controller, keeper


def announce(settings: LoopSettings, recorder: RunRecorder, terminal: Terminal) -> None:
    """Tell the notification channels how the run ended; a failure is a line, nothing more."""
    try:
        announce_end(settings, recorder, terminal)
    except Exception as exc:  # the run has ended as it ended; a notification cannot change that
        terminal.line(f"{PREFIX} notifications not sent: {describe_crash(exc)}")


def _invocation(config: pytest.Config) -> Invocation:
    params = config.invocation_params
    return Invocation(args=[str(arg) for arg in params.args], dir=str(params.dir))


def _left(keeper: StateKeeper, loop: LoopState) -> None:
    """The state's last word: how the run ended and the tree it left (the fixed one on success,
    the best one kept with --fwloop-keep=best, else its baseline), which a continuation checks
    the operator has not changed since."""
    if loop.left_tree:
        keeper.left_tree = loop.left_tree
    with contextlib.suppress(OSError):  # the records are written; a full disk loses only this
        keeper.save(loop)


def _install_abort_handlers(controller: Controller) -> dict[int, Any]:
    def on_signal(signum: int, frame: FrameType | None) -> None:
        controller.abort_reason = signal.Signals(signum).name
        controller.abort.set()

    previous: dict[int, Any] = {}
    for sig in (signal.SIGINT, signal.SIGTERM):
        previous[sig] = signal.signal(sig, on_signal)
    return previous
