"""The user's tree as the loop sees it: snapshot, journalled edits, recovery (DESIGN.md §6).

`Workspace` is the controller's one handle: it recovers what a killed controller left, snapshots
the baseline, and journals every write before making it. Whatever a restore overwrites or deletes
is snapshotted first, so it stays in `.fwloop/shadow.git` (`git --git-dir .fwloop/shadow.git log`).

The store keeps, for good, each baseline whole and each checkpoint as the paths the loop wrote
over its baseline; a whole-tree snapshot taken to compare the tree with (before a patch, an
agent's call, a command) is dropped once superseded. So a build that rewrites output no ignore
rule covers costs the store that output once per run and once for the current tree, not once
per iteration (docs/ci.md, "Build output and the shadow store").
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pytest_fwloop.core.change.posix_paths import glob_match, normalize_path
from pytest_fwloop.core.change.unified_diff import (
    FileChange,
    PatchParseError,
    parse_patch,
    touched_paths,
)
from pytest_fwloop.core.gate.policy import (
    DEFAULT_PROTECTED,
    GitReading,
    PatchPolicy,
    Violation,
    check_git_reading,
    check_patch,
    path_violations,
    tree_violations,
)
from pytest_fwloop.workspace import snapshot_blobs as tree_reads
from pytest_fwloop.workspace.git_run import WorkspaceError
from pytest_fwloop.workspace.journal import Journal, WorkspaceLocked
from pytest_fwloop.workspace.lock import RunLock
from pytest_fwloop.workspace.shadow import PatchApplyError, PathRefused, ShadowRepo
from pytest_fwloop.workspace.tree_kinds import kinds_on_the_way

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence
    from pathlib import Path

__all__ = [
    "DEFAULT_PROTECTED",
    "FileChange",
    "GitReading",
    "Journal",
    "PatchApplyError",
    "PatchParseError",
    "PatchPolicy",
    "PathRefused",
    "RecoveryReport",
    "ShadowRepo",
    "Violation",
    "Workspace",
    "WorkspaceError",
    "WorkspaceLocked",
    "check_git_reading",
    "check_patch",
    "glob_match",
    "normalize_path",
    "parse_patch",
    "touched_paths",
]


@dataclass(frozen=True)
class RecoveryReport:
    """What `Workspace.open` undid for a controller that died mid-run.

    `salvage` is the snapshot of the tree as the dead run left it, so its edits can be recovered.
    """

    run_id: str
    baseline: str
    restored_paths: tuple[str, ...]
    salvage: str


class Workspace:
    """Snapshots, journalled patching and restore of the tree at `root`."""

    def __init__(self, root: Path, snapshot_exclude: Sequence[str] = ()) -> None:
        self.shadow = ShadowRepo(root, snapshot_exclude)
        self.root = self.shadow.root
        self.journal = Journal(self.shadow.state_dir)
        self._lock = RunLock(self.shadow.state_dir)
        self._baseline: str | None = None
        # Only what the loop wrote is ever diffed or restored: build products and the user's own
        # edits during a run are none of its business. The shadow snapshots these paths even
        # where an ignore rule hides them.
        self.touched: set[str] = self.shadow.written
        #: The last `source_files` listing: the next one reads only what changed since.
        self._listed: tuple[str, dict[str, str]] | None = None

    @property
    def baseline(self) -> str:
        """The snapshot taken by `open()`: what the tree returns to unless the run succeeds."""
        if self._baseline is None:
            raise RuntimeError("Workspace.open() must be called first")
        return self._baseline

    def open(self, run_id: str) -> RecoveryReport | None:
        """Lock the workspace, recover a dead run's leftovers, snapshot the baseline, and start
        this run's journal."""
        report = self.take_baseline(run_id)
        self.begin_journal(run_id)
        return report

    def take_baseline(self, run_id: str) -> RecoveryReport | None:
        """`open` up to the baseline snapshot: what the baseline's tests must wait for.

        The run lock comes first: no git call is made before this process owns the workspace,
        so git's own lock files found then were left by a dead process and are removed.
        """
        self.lock()
        self.journal.check_lock()
        self.shadow.clear_stale_locks()
        self.shadow.ensure()
        report = self._recover()
        self._baseline = self.shadow.snapshot(f"baseline of run {run_id}")
        return report

    def begin_journal(self, run_id: str) -> None:
        """Start this run's journal, naming the baseline: before the loop's first write to the
        tree (the journal refuses any intent until then). Until it exists a dead controller
        leaves nothing to recover, only its children to stop (`children.reap_leftovers`)."""
        if self._baseline is None:
            raise RuntimeError("Workspace.take_baseline() must come before begin_journal()")
        self.journal.begin(run_id, self._baseline)

    def check_patch(self, patch: str, policy: PatchPolicy) -> list[Violation]:
        """Every rule the patch breaks, judged on its headers and on what git would write."""
        violations = check_patch(patch, policy)
        if any(v.rule in ("empty", "parse") for v in violations):
            return violations
        try:
            reading = self.shadow.read_patch(patch)
        except PatchParseError as err:
            return [Violation("", "parse", f"patch: {err}; send a unified diff git can apply")]
        # The refusal names the files git would really write, not only the headers' names.
        violations += check_git_reading(patch, reading, policy)
        # Only a path the policy accepts is looked up in the tree and handed to git: one outside
        # the root would make git fail (or, through the file system, probe beyond the root).
        accepted = [p for p in reading.paths if not path_violations(p, policy)]
        # What the tree holds on the way to every path, git's and the headers': a symlink
        # there would carry the write out of the tree.
        named = dict.fromkeys([*map(normalize_path, accepted), *touched_paths(patch)])
        violations += [
            v
            for p in named
            if not path_violations(p, policy)
            for v in tree_violations(p, kinds_on_the_way(self.root, p))
        ]
        try:
            violations += self._unrestorable(accepted)
        except PathRefused as err:
            violations.append(
                Violation(
                    "",
                    "git_refused",
                    f"patch: git refuses a path it names ({err}); patch only files inside the "
                    "root, by relative path",
                )
            )
        return list(dict.fromkeys(violations))

    def _unrestorable(self, paths: Iterable[str]) -> list[Violation]:
        """Files that exist but are in no snapshot of the baseline (ignored by git, or in
        `fwloop_snapshot_exclude`): a restore could not bring them back, only delete them."""
        # os.path.isfile, not Path.is_file: a name the file system rejects (too long) is no file.
        existing = [
            p
            for p in map(normalize_path, paths)
            if p not in self.touched and os.path.isfile(self.root / p)
        ]
        if not existing or self._baseline is None:
            return []
        kept = self.shadow.paths(self._baseline, existing)
        return [
            Violation(
                p,
                "unsnapshotted",
                f"{p}: the loop does not snapshot this file (ignored by git, or in "
                "fwloop_snapshot_exclude), so it could not restore it; change what it is built "
                "from instead",
            )
            for p in existing
            if p not in kept
        ]

    def lock(self) -> None:
        """Take the run lock (idempotent); `WorkspaceLocked` while another controller holds it."""
        self._lock.acquire()

    def apply(self, patch: str, before: str | None = None) -> list[str]:
        """Apply a patch (paths relative to the root), journalled; the paths it touched.

        The journal names every path the headers or git name before anything is written; after
        `git apply`, a change to any other path is undone and refused (`PatchApplyError`).
        `before` is a snapshot of the tree as it is now, if the caller just took one.
        """
        named = {normalize_path(p) for p in self.shadow.read_patch(patch).paths}
        intended = sorted(named.union(touched_paths(patch)))
        self.journal.intend("apply", intended)
        self.touched.update(intended)
        if before is None:
            before = self.snapshot("before applying a patch")
        try:
            self.shadow.apply(patch)
        except PatchApplyError as exc:
            # git checks each file before writing it, not the whole patch before writing any:
            # what it wrote before the file it failed on is put back now, not at the run's end.
            self._put_back(before, intended)
            raise PatchApplyError(f"{exc} (the tree was put back as before the patch)") from exc
        unnamed = sorted(set(self.shadow.changed_paths(before)) - set(intended))
        if unnamed:
            self.touched.update(unnamed)
            self.journal.intend("restore", [*intended, *unnamed])
            self.shadow.restore(before, [*intended, *unnamed])
            self.journal.done()
            raise PatchApplyError(
                f"fwloop: applying the patch also changed {', '.join(unnamed[:5])}, which it "
                "does not name; the tree was put back: send a plain `git diff`"
            )
        self.journal.done()
        return sorted(named)

    def _put_back(self, before: str, intended: Sequence[str]) -> None:
        """Undo a `git apply` that failed half way: every path it changed, named or not."""
        changed = sorted(set(self.shadow.changed_paths(before)) | set(intended))
        self.touched.update(changed)
        self.journal.intend("restore", changed)
        self.shadow.restore(before, changed)
        self.journal.done()

    def expect_agent_edits(self, label: str) -> str:
        """Snapshot the tree and journal that an agent may now edit it; the snapshot's id.

        A controller killed during the agent's call is recovered by restoring every path that
        differs from this snapshot, so the agent's edits never become the next baseline.
        """
        before = self.snapshot(label)
        self.journal.intend("agent_edit", [], snapshot=before)
        return before

    def take_agent_edits(self, before: str) -> str:
        """The diff of what changed since `expect_agent_edits`, which is then undone."""
        edited = self.shadow.changed_paths(before)
        diff = ""
        if edited:
            # The loop takes charge of these paths: diffed, restored, reverted at the end.
            self.touched.update(edited)
            diff = self.diff(before)
            self.restore(before)
        self.journal.done("agent_edit")
        return diff

    def checkpoint(self, label: str) -> str:
        """Keep the loop's tree under `label`: the baseline with every path the loop wrote as it
        is now; its commit id.

        All that a restore, a diff, `fwloop apply` or a continuation reads of it are the loop's
        paths, so the files a build rewrote are the baseline's here, stored once.
        """
        return self.shadow.snapshot_over(self.baseline, sorted(self.touched), label)

    def snapshot(self, label: str) -> str:
        """The whole tree now, to compare it with soon (what a patch, a build or a command
        changed, protected paths included); its commit id. Not kept: valid until the next
        `drop_snapshots`."""
        return self.shadow.snapshot(label, kept=False)

    def source_files(self) -> tuple[str, dict[str, str]]:
        """A snapshot of the tree now (not kept) and its regular files with their blob ids: what
        the code index follows, reading only the blobs it has not seen (`read_blobs`)."""
        commit = self.snapshot("code index")
        listed = tree_reads.files(self.shadow, commit, self._listed)
        self._listed = (commit, listed)
        return commit, dict(listed)

    def read_blobs(self, ids: Iterable[str]) -> dict[str, bytes]:
        return tree_reads.blobs(self.shadow, ids)

    def patched_files(self, commit: str, patch: str) -> dict[str, str]:
        """The blob ids of every file of snapshot `commit` once `patch` is applied to it in a
        scratch index (the tree untouched); {} when git will not apply it."""
        return tree_reads.patched_files(self.shadow, commit, patch)

    def drop_snapshots(self) -> None:
        """Let the store delete what only the `snapshot`s taken so far hold (a build's output,
        mostly): call when none of them will be read again."""
        self.shadow.drop_unkept()

    def diff_from_baseline(self) -> str:
        """The cumulative diff of the loop's writes, from the baseline to the current tree."""
        return self.diff(self.baseline)

    def diff(self, from_commit: str, to_commit: str | None = None) -> str:
        """The diff of the loop's writes between two snapshots (None: the current tree)."""
        if not self.touched:
            return ""
        return self.shadow.diff(from_commit, to_commit, paths=self.touched)

    def check_apply(self, patch: str) -> str | None:
        """None when the patch would apply to the current tree, else git's one-line reason."""
        return self.shadow.check_apply(patch)

    def restore_baseline(self) -> list[str]:
        """Put what the loop wrote back to the baseline; the paths that changed."""
        return self.restore(self.baseline)

    def restore(self, commit: str) -> list[str]:
        """Put what the loop wrote back to a snapshot, journalled; the paths that changed."""
        if not self.touched:
            return []
        # Kept: it holds the user's version of any path a restore overwrites.
        before = self.checkpoint(f"before restoring {commit}")
        paths = sorted(set(self.shadow.changed_paths(commit, before)) & self.touched)
        self.journal.intend("restore", paths)
        restored = self.shadow.restore(commit, paths)
        self.journal.done()
        return restored

    def adopt(self, commit: str, paths: Sequence[str], left: str, watched: Sequence[str]) -> None:
        """Put `paths` back as snapshot `commit` has them: a continued run takes its kept tree
        again. Refused (`WorkspaceError`, nothing written) when one of `watched` was changed
        since the run left the tree as snapshot `left`: those are the operator's edits."""
        self.check_unchanged(left, watched, "continuing")
        if commit and paths:
            self.touched.update(paths)
            self.restore(commit)

    def check_unchanged(self, left: str, watched: Sequence[str], doing: str) -> None:
        """WorkspaceError (nothing written) when one of `watched` changed since the run left
        the tree as snapshot `left`: those are the operator's edits, not to be overwritten."""
        changed = set(self.shadow.changed_paths(left)) & set(watched)
        if changed:
            raise WorkspaceError(
                f"fwloop: the tree changed since the run stopped ({', '.join(sorted(changed)[:5])}"
                f"); {doing} would overwrite that: commit or stash it, or start a new run "
                "with `fwloop rerun`"
            )

    def close(self, keep_tree: bool) -> None:
        """End the run: keep the tree (success) or restore the baseline, then drop the journal,
        if this run began one (a journal that refused to begin is another controller's)."""
        if not keep_tree:
            self.restore_baseline()
        # `baseline` stays readable for the run's report; further writes need a new open().
        if self.journal.began:
            self.journal.finish()
        self.shadow.pack()
        self._lock.release()

    def _recover(self) -> RecoveryReport | None:
        record = self.journal.pending()
        if record is None:
            return None
        salvage = self.shadow.snapshot(f"tree left by run {record.run_id} (pid {record.pid})")
        written = {path for entry in record.entries for path in entry.paths}
        for entry in record.entries:
            # A finished agent call's edits were undone then, by a journalled restore of their
            # paths, and its snapshot (not kept) may be gone.
            if entry.snapshot is not None and not entry.done:
                written.update(self.shadow.changed_paths(entry.snapshot))
        self.shadow.written.update(written)
        restored = self.shadow.restore(record.baseline, sorted(written))
        # The dead run's journal goes only now: a crash during recovery recovers again.
        self.journal.finish()
        return RecoveryReport(record.run_id, record.baseline, tuple(restored), salvage)
