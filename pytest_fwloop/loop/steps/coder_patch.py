"""The coder's answer made one unified diff before anything judges it (DESIGN.md §16).

`edits`, or a diff `git apply` would not take as written (hunk numbers, counts, `a/` `b/`), are
rebuilt by `core.answer_diff` from the files as they are now; this module is its edge: it judges
each path the answer names with the patch policy's path checks before any file is read, reads
them through the tree reader, and hands back the answer whose `patch` is the one diff. A diff
it cannot read leniently, or whose paths the policy refuses, goes on as written: the gate
refuses it with its own words.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from pytest_fwloop.core.change.answer_diff import (
    Built,
    Unmatched,
    build_from_diff,
    build_from_edits,
    diff_paths,
    edit_paths,
)
from pytest_fwloop.core.change.loose_diff import read_loose_diff
from pytest_fwloop.core.change.unified_diff import PatchParseError, touched_paths
from pytest_fwloop.core.gate.policy import path_violations
from pytest_fwloop.core.machine.fsm import ErrorType, LoopEvent
from pytest_fwloop.core.machine.recovery import ErrorState
from pytest_fwloop.core.records.agent_protocol import CoderAnswer, MustFix
from pytest_fwloop.core.request.read_tools import path_refusal
from pytest_fwloop.workspace import PathRefused
from pytest_fwloop.workspace.confined_read import read_tree_text

if TYPE_CHECKING:
    from pytest_fwloop.core.gate.policy import PatchPolicy
    from pytest_fwloop.workspace import Workspace


@dataclass(frozen=True)
class Formed:
    """The answer with its one diff in `patch` (and no `edits`); `notes` say what was built or
    repaired, empty when the answer came as git takes it."""

    answer: CoderAnswer
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Refused:
    """An answer no diff could be built from: the error to recover from, and what the coder
    must fix in its next answer."""

    error: ErrorState
    must_fix: list[MustFix]


def form_patch(answer: CoderAnswer, workspace: Workspace, policy: PatchPolicy) -> Formed | Refused:
    """The answer whose `patch` is the one diff the gate, the records and replay will see."""
    if answer.edits and answer.patch.strip():
        return _refused(
            ErrorType.MODEL_FAILURE,
            [
                MustFix(
                    issue="the answer carries both `patch` and `edits`; send one of them: the "
                    "loop will not guess which one you meant"
                )
            ],
        )
    if answer.edits:
        return _from_edits(answer, workspace, policy)
    if answer.patch.strip():
        return _repaired(answer, workspace, policy)
    return Formed(answer)


def _from_edits(answer: CoderAnswer, workspace: Workspace, policy: PatchPolicy) -> Formed | Refused:
    paths = edit_paths(answer.edits)
    violations = [v for path in paths for v in path_violations(path, policy)]
    refused = [MustFix(issue=v.message, file=v.path or None) for v in violations]
    # What is read may come back to the model (the nearest lines of a miss): never a file the
    # read-only tools may not read either (a secret, another version control's folder).
    unreadable = [(path, path_refusal(path)) for path in paths]
    refused += [MustFix(issue=why, file=path) for path, why in unreadable if why is not None]
    if refused:
        return _refused(ErrorType.POLICY_VIOLATION, refused)
    try:
        files = {path: read_tree_text(workspace.root, path) for path in paths}
    except PathRefused as exc:
        return _refused(ErrorType.POLICY_VIOLATION, [MustFix(issue=str(exc))])
    built = build_from_edits(answer.edits, files)
    if isinstance(built, Unmatched):
        return _refused(ErrorType.PATCH_APPLY_FAILURE, list(built.must_fix))
    return Formed(answer.model_copy(update={"patch": built.diff, "edits": []}), built.notes)


def _repaired(answer: CoderAnswer, workspace: Workspace, policy: PatchPolicy) -> Formed:
    """The patch rebuilt where git would not take it as written and its hunks all find their
    place; else as written, for the gate to judge in its order (a repeat before a patch that
    does not apply), naming the nearest lines then (`unplaced`)."""
    placed = _placed(answer.patch, workspace, policy)
    if not isinstance(placed, Built):
        return Formed(answer)
    return Formed(answer.model_copy(update={"patch": placed.diff}), placed.notes)


def unplaced(patch: str, workspace: Workspace, policy: PatchPolicy) -> list[MustFix]:
    """For a patch git would not apply: each hunk that finds no single place, with the nearest
    lines of its file; [] when that cannot be told (a path refused, not a text diff)."""
    placed = _placed(patch, workspace, policy)
    return list(placed.must_fix) if isinstance(placed, Unmatched) else []


def _placed(patch: str, workspace: Workspace, policy: PatchPolicy) -> Built | Unmatched | None:
    """The diff rebuilt from its hunks' places; None when it is git's to judge as written."""
    sections = read_loose_diff(patch)
    if sections is None:
        return None
    paths = diff_paths(sections)
    try:
        strict = touched_paths(patch)
    except PatchParseError:
        strict = None
    # Only paths the policy accepts are looked up, by git or by the reader, and only files
    # the read-only tools could read are read (their lines may go back to the model).
    named = [*paths, *(strict or ())]
    if any(path_violations(p, policy) or path_refusal(p) for p in named):
        return None
    if strict is not None and workspace.check_apply(patch) is None:
        return None
    try:
        files = {path: read_tree_text(workspace.root, path) for path in paths}
    except PathRefused:
        return None
    return build_from_diff(sections, files)


def _refused(kind: ErrorType, must_fix: list[MustFix]) -> Refused:
    """The trace names the first item's first line; the coder gets every item whole."""
    reason = must_fix[0].issue.split("\n", 1)[0]
    if len(must_fix) > 1:
        reason += f" (+{len(must_fix) - 1} more)"
    return Refused(ErrorState(kind, reason, LoopEvent.RECOVER_TO_ANALYSIS), must_fix)
