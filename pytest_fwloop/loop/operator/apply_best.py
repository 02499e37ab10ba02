"""`fwloop apply RUN` (DESIGN.md §15): a run's best kept tree put back in place.

A run that ends short of success restores its baseline; its best kept tree (the iteration with
the most passing tests) stays in the shadow repository. This puts it back as a continuation
would: under the run lock, judged again by the patch policy in force, journalled, and refused
(nothing written) when the user changed one of its paths since the run left the tree.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from pytest_fwloop.core.records.run_records import Event, Summary
from pytest_fwloop.core.records.run_state import STATE_FILE, StateError
from pytest_fwloop.loop.operator.continuation import checked_state, saved_iterations
from pytest_fwloop.loop.rundir import RunRecorder, utc_now
from pytest_fwloop.loop.state import Iteration, best_kept, suite_policy, written_by
from pytest_fwloop.workspace import Workspace, WorkspaceError

if TYPE_CHECKING:
    from pytest_fwloop.config.settings import LoopSettings
    from pytest_fwloop.core.gate.policy import PatchPolicy
    from pytest_fwloop.core.records.redaction import Redactor
    from pytest_fwloop.core.records.run_state import RunState
    from pytest_fwloop.loop.operator.continuation import Order
    from pytest_fwloop.loop.terminal import Terminal


def apply_best(settings: LoopSettings, order: Order, terminal: Terminal, redact: Redactor) -> int:
    """Put the run's best kept tree in place; the exit status (4 when refused, one line)."""
    run_dir = settings.runs_root / order.run_id
    workspace = Workspace(settings.rootdir, settings.snapshot_exclude)
    opened = False
    try:
        workspace.lock()
        state = checked_state(order, run_dir)
        iterations = saved_iterations(state, run_dir)
        best = best_kept(iterations)
        if best is None:
            raise StateError(
                f"fwloop: run {state.run_id} kept no tree that passed more tests than its "
                "baseline: there is nothing to apply"
            )
        paths = written_until(iterations, best.number)
        workspace.take_baseline(state.run_id)
        opened = True
        workspace.begin_journal(state.run_id)
        if not set(workspace.shadow.changed_paths(best.checkpoint)) & set(paths):
            terminal.line(f"fwloop: the best tree of run {state.run_id} is already in place")
            workspace.close(keep_tree=True)
            return int(pytest.ExitCode.OK)
        workspace.check_unchanged(state.left_tree, paths, "applying it")
        _check_policy(workspace, suite_policy(settings.policy, iterations), state, best, paths)
        workspace.adopt(best.checkpoint, paths, state.left_tree, paths)
        _record(settings, state, best, redact)
    except (WorkspaceError, StateError) as exc:
        terminal.line(str(exc))
        if opened:  # nothing of the tree was written
            workspace.close(keep_tree=True)
        return int(pytest.ExitCode.USAGE_ERROR)
    workspace.close(keep_tree=True)
    terminal.line(
        f"fwloop: the tree of iteration {best.number} of run {state.run_id} "
        f"({best.pass_count}/{best.total_count} passed) is in place: {', '.join(paths[:5])}"
        + (" …" if len(paths) > 5 else "")
    )
    return int(pytest.ExitCode.OK)


def written_until(iterations: list[Iteration], number: int) -> list[str]:
    """The paths the patches measured up to iteration `number` wrote."""
    return written_by(it for it in iterations if it.number <= number and it.results is not None)


def _check_policy(
    workspace: Workspace,
    policy: PatchPolicy,
    state: RunState,
    best: Iteration,
    paths: list[str],
) -> None:
    """The tree's diff must pass the patch policy in force now (it may be stricter than the
    run's was), the files the run's baseline collected tests from protected too."""
    workspace.touched.update(paths)
    diff = workspace.diff(state.left_tree, best.checkpoint)
    violations = workspace.check_patch(diff, policy)
    if violations:
        raise WorkspaceError(
            f"fwloop: the best tree of run {state.run_id} breaks the patch policy in force: "
            f"{violations[0].message}; nothing was applied"
        )


def _record(settings: LoopSettings, state: RunState, best: Iteration, redact: Redactor) -> None:
    """The trace says so, and the state names the tree left, so a later `fwloop resume` or
    `fwloop apply` checks the user's edits against it."""
    recorder = RunRecorder(settings.runs_root, state.run_id, redact, reopen=True)
    recorder.append_event(
        Event.note(
            utc_now(),
            "applied",
            (state.fsm_state, state.fsm_state),
            "applied",
            f"`fwloop apply` put the tree of iteration {best.number} "
            f"({best.pass_count}/{best.total_count} passed) in place",
            best.number,
        ).to_json()
    )
    saved = state.model_copy(update={"revision": state.revision + 1, "left_tree": best.checkpoint})
    recorder.write_json(STATE_FILE, saved.model_dump(mode="json"))
    try:  # `fwloop show` stops offering the command
        summary = Summary.model_validate_json((recorder.path / "summary.json").read_bytes())
    except (OSError, ValueError):
        return  # a run that ended with no summary (killed while ending) has nothing to update
    if summary.best is not None:
        placed = summary.best.model_copy(update={"in_place": True})
        recorder.write_json(
            "summary.json", summary.model_copy(update={"best": placed}).model_dump(mode="json")
        )
