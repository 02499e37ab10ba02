"""A private git repository in `.fwloop/` that snapshots and restores the user's tree (DESIGN §6).

Every git call runs with a scrubbed environment that points GIT_DIR at `.fwloop/shadow.git`,
GIT_WORK_TREE at the root and GIT_INDEX_FILE at the shadow's own index, so the user's `.git` (refs,
index, stash, config, hooks) is never written. The one read of it is `git ls-files` with optional
locks off, to keep files the user tracks even though a `.gitignore` matches them.

A snapshot holds the files git would call tracked or untracked-not-ignored, judged by the tree's
`.gitignore` files and the checkout's `.git/info/exclude`; `.git`, `.fwloop` and Python's
`__pycache__` are never in it.
Nested git repositories (submodules, vendored checkouts) are snapshotted as plain files, so edits
inside them are restored like any other; their own `.git` is never touched. Attribute-driven
conversions (eol, filters) are switched off so a restore gives back the exact bytes. Git records
only the executable bit, so other permission bits of a rewritten file follow the umask.

A checkout's first snapshot starts from its index and its objects (`checkout_reads.py`).
Kept snapshots form the `snapshots` branch, each the parent of the next (`git log` lists them);
an unkept one is a commit no ref names, pruned by `drop_unkept` or `pack`. A snapshot taken
`over` another records only the paths it is given, the rest being the other's: build output a
whole-tree snapshot would store again stays out of what is kept.
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pytest_fwloop.core.change.posix_paths import normalize_path
from pytest_fwloop.core.change.unified_diff import PatchParseError, touched_paths
from pytest_fwloop.core.gate.policy import GitReading
from pytest_fwloop.workspace.bytecode import drop_cached_bytecode
from pytest_fwloop.workspace.checkout_reads import seed_index, tracked_despite_ignores
from pytest_fwloop.workspace.git_run import (
    GITLINK,
    STATE_DIR_NAME,
    WorkspaceError,
    encode,
    exclude_file,
    git_env,
    join_z,
    one_line,
    run_git,
    shadow_config,
    split_z,
    start_git,
    user_git_dir,
)
from pytest_fwloop.workspace.pack_links import release_unshared

if TYPE_CHECKING:
    import subprocess
    from collections.abc import Iterable, Sequence
    from pathlib import Path

#: Python's bytecode caches: never the user's content, and dropped as the loop writes a module
#: (`bytecode.py`), so no snapshot holds them, even where the user's git tracks them.
_PYCACHE = "__pycache__/"
_IDENTITY = ("fwloop", "fwloop@localhost")
_MISSING = "000000"
#: Loose objects the end of a run packs before it returns; more are packed in the background.
PACK_AT_ONCE = 5000
# Highest-precedence attributes: store and restore bytes exactly, whatever .gitattributes says.
_ATTRIBUTES = "* -text -eol -filter -ident -working-tree-encoding\n"


class PatchApplyError(WorkspaceError):
    """`git apply` refused the patch; the tree was left unchanged."""


class PathRefused(WorkspaceError):
    """Git would not take a path a patch names (outside the root, say); nothing was written."""


@dataclass(frozen=True)
class _Change:
    old_mode: str
    new_mode: str
    path: str
    #: The entry's id after the change (zeros where it is gone).
    new_id: str


class ShadowRepo:
    """Snapshots of `root` in `<root>/.fwloop/shadow.git`; every method calls `ensure()` first."""

    def __init__(self, root: Path, exclude: Sequence[str] = ()) -> None:
        self.root = root.resolve()
        # Build outputs kept out of every snapshot (gitignore syntax): rewritten by each build,
        # they would be hashed and written again by every whole-tree snapshot.
        self.exclude = tuple(exclude)
        self.state_dir = self.root / STATE_DIR_NAME
        self.git_dir = self.state_dir / "shadow.git"
        self._index = self.git_dir / "fwloop-index"
        # Paths the loop wrote: always snapshotted, even where an ignore rule (perhaps one the loop
        # itself wrote) hides them, so a restore sees and undoes them.
        self.written: set[str] = set()
        self._ready = False

    def ensure(self) -> None:
        """Create the shadow repository and `.fwloop/.gitignore` if missing; idempotent."""
        if self._ready:
            return
        self.state_dir.mkdir(exist_ok=True)
        _write_if_changed(self.state_dir / ".gitignore", "*\n")
        if not (self.git_dir / "HEAD").is_file():
            # An empty template: no sample hooks, nothing we did not ask for.
            self._git("init", "--quiet", "--template=", "--initial-branch=snapshots")
        (self.git_dir / "info").mkdir(exist_ok=True)
        _write_if_changed(
            self.git_dir / "info" / "exclude",
            "".join(f"{line}\n" for line in (f"{STATE_DIR_NAME}/", _PYCACHE, *self.exclude)),
        )
        _write_if_changed(self.git_dir / "info" / "attributes", _ATTRIBUTES)
        self._ready = True

    def paths(self, commit: str, candidates: Iterable[str]) -> set[str]:
        """Those of `candidates` that the snapshot `commit` holds.

        The candidates come from a patch: git refusing one of them (`PathRefused`) is that
        patch's fault, not the workspace's.
        """
        tree = self._commit(commit)
        listed = self._git(
            "ls-tree", "-r", "-z", "--name-only", tree, "--", *candidates, check=False
        )
        if listed.returncode != 0:
            raise PathRefused(one_line(listed.stderr))
        return set(split_z(listed.stdout))

    def read(self, commit: str, path: str) -> bytes | None:
        """The bytes of file `path` in snapshot `commit`; None when the snapshot has none."""
        shown = self._git("cat-file", "blob", f"{self._commit(commit)}:{path}", check=False)
        return shown.stdout if shown.returncode == 0 else None

    def pack(self) -> None:
        """Drop unreachable objects (the index states of snapshots) and pack the loose ones:
        run at the end of a run, under its lock. What `git gc --prune=now` does to such a
        store, in half its time (no refs, reflogs, worktrees or rerere to tidy).

        A store with more than `PACK_AT_ONCE` loose objects (a big tree's first baseline) is
        packed by a `git repack` left running in the background, so the run's end does not
        wait for it; a repack is safe beside a later run's git calls, and one that was cut
        short leaves the loose objects for the next run's end. So is one that takes in a pack
        linked from the user's store that the user's store no longer shares (`pack_links.py`)."""
        if not (self.git_dir / "HEAD").is_file():
            return
        self._git("prune", "--expire=now", check=False)
        counted = self._git("count-objects", "-v", check=False).stdout.decode()
        found = re.search(r"^count: (\d+)", counted, re.MULTILINE)
        loose = int(found[1]) if found else 0
        released = release_unshared(self.git_dir / "objects" / "pack")
        if loose <= PACK_AT_ONCE and not released:
            self._git("repack", "-a", "-d", "-q", check=False)
            return
        env = {**git_env(self.git_dir, self.root), "GIT_INDEX_FILE": str(self._index)}
        every_pack = ["-a"] if released else []
        start_git([*self._config(), "repack", *every_pack, "-d", "-q"], env=env, cwd=self.root)

    def drop_unkept(self) -> None:
        """Delete what only unkept snapshots hold (a build's output, mostly); call under the run
        lock, when none taken so far will be read again.

        `git prune` keeps what the shadow index names (the tree as last snapshotted), so the next
        snapshot still hashes only what changed since. It costs about what counting the loose
        objects first would (5 ms in a small tree, 35 ms with 10,000 files), so it just runs.
        """
        if (self.git_dir / "HEAD").is_file():
            self._git("prune", "--expire=now")

    def clear_stale_locks(self) -> list[str]:
        """Remove git's `*.lock` files from the shadow repository; call only under the run lock.

        Git leaves them when it is killed mid-write and then refuses every later call. Under the
        run lock no other process uses the shadow repository, so any lock found was left by a
        dead one. Returns the removed paths, relative to the shadow repository.
        """
        if not self.git_dir.is_dir():
            return []
        stale = sorted(self.git_dir.rglob("*.lock"))
        for path in stale:
            path.unlink(missing_ok=True)
        return [path.relative_to(self.git_dir).as_posix() for path in stale]

    def snapshot(self, label: str, *, kept: bool = True) -> str:
        """Commit the whole current tree with the message `label`; its id.

        A kept snapshot goes on the `snapshots` branch (parent: the previous kept one) and stays
        as long as the store. An unkept one is named by no ref: it serves to compare the tree
        with soon, until `drop_unkept` or `pack` deletes what only it holds (a build's new
        output, say).
        """
        self.ensure()
        return self._commit_tree(self._current_tree(), label, kept)

    def snapshot_over(self, base: str, paths: Sequence[str], label: str) -> str:
        """Keep a snapshot of `base` with `paths` as the tree has them now (a missing one
        deleted); its id.

        All a restore, a diff or a check of `paths` reads, at the cost of those files alone:
        every other file is `base`'s, so output a build rewrote since is neither hashed nor
        stored again.
        """
        self.ensure()
        base_tree = f"{self._commit(base)}^{{tree}}"
        if not paths:
            tree = self._git("rev-parse", base_tree).stdout.decode().strip()
            return self._commit_tree(tree, label, kept=True)
        index = self.git_dir / "fwloop-over-index"
        present = [p for p in paths if _is_file_or_link(self.root / p)]
        absent = [p for p in paths if not _is_file_or_link(self.root / p)]
        self._git("read-tree", base_tree, index=index)
        if absent:
            removal = ("update-index", "--force-remove", "-z", "--stdin")
            self._git(*removal, stdin=join_z(absent), index=index)
        if present:
            update = ("update-index", "--add", "--remove", "--replace", "-z", "--stdin")
            self._git(*update, stdin=join_z(present), index=index)
        tree = self._git("write-tree", index=index).stdout.decode().strip()
        index.unlink()
        return self._commit_tree(tree, label, kept=True)

    def _commit_tree(self, tree: str, label: str, kept: bool) -> str:
        parent_args: list[str] = []
        if kept:
            parent = self._git("rev-parse", "--quiet", "--verify", "HEAD^{commit}", check=False)
            parent_args = ["-p", parent.stdout.decode().strip()] if parent.returncode == 0 else []
        commit = self._git("commit-tree", tree, *parent_args, stdin=label.encode())
        commit_id = commit.stdout.decode().strip()
        if kept:
            self._git("update-ref", "HEAD", commit_id)
        return commit_id

    def diff(
        self, from_commit: str, to_commit: str | None = None, paths: Iterable[str] | None = None
    ) -> str:
        """Git-format diff from a snapshot to another or (None) to the current tree.

        `paths` (files or directories) limits the diff to them; None means every path.

        Binary changes come as `GIT binary patch` so the diff applies; bytes that are not UTF-8
        are kept as surrogate escapes (write it with `errors="surrogateescape"`).
        """
        self.ensure()
        target = self._commit(to_commit) if to_commit is not None else self._current_tree()
        result = self._git(
            "diff-tree",
            "-r",
            "-p",
            "--binary",
            "--full-index",
            "--no-renames",
            "--no-color",
            "--no-ext-diff",
            "--no-textconv",
            "--src-prefix=a/",
            "--dst-prefix=b/",
            self._commit(from_commit),
            target,
            *(["--", *sorted({normalize_path(p) for p in paths})] if paths is not None else []),
        )
        return result.stdout.decode("utf-8", "surrogateescape")

    def changed_paths(self, from_commit: str, to_commit: str | None = None) -> list[str]:
        """Paths that differ between a snapshot and another or (None) the current tree.

        New and deleted paths are included.
        """
        self.ensure()
        return sorted(change.path for change in self._changes(from_commit, to_commit))

    def restore(self, commit: str, paths: Iterable[str] | None = None) -> list[str]:
        """Make the tree match the snapshot for `paths` (a path may name a directory) or all.

        Rewrites content and mode, recreates deleted files and deletes files the snapshot lacks;
        ignored files and nested repositories' `.git` are left alone. Returns the changed paths.
        """
        self.ensure()
        changes = self._changes(commit)
        if paths is not None:
            wanted = [normalize_path(p) for p in paths]
            changes = [c for c in changes if any(_is_within(c.path, w) for w in wanted)]
        changes = [c for c in changes if GITLINK not in (c.old_mode, c.new_mode)]
        # Deletions first: a file may be coming back where a directory now stands, or vice versa.
        for change in changes:
            if change.old_mode == _MISSING:
                self._remove(change.path)
        rewritten = [c.path for c in changes if c.old_mode != _MISSING]
        if rewritten:
            self._git(
                "checkout",
                self._commit(commit),
                "--pathspec-from-file=-",
                "--pathspec-file-nul",
                stdin=join_z(rewritten),
            )
        changed = sorted(c.path for c in changes)
        drop_cached_bytecode(self.root, changed)
        return changed

    def read_patch(self, patch: str) -> GitReading:
        """The paths `git apply` would write for `patch`, as git reads it (`--numstat`).

        A rename or copy is listed by its new name only: its source is the `rename from` line,
        which `parse_patch` reads as git does.

        Raises `PatchParseError` with git's reason when git cannot read it as a patch.
        """
        self.ensure()
        result = self._git("apply", "--numstat", "-z", "-", stdin=encode(patch), check=False)
        if result.returncode != 0:
            raise PatchParseError(f"git apply cannot read it: {one_line(result.stderr)}")
        paths: list[str] = []
        binary: list[str] = []
        # One "added<TAB>deleted<TAB>path" per file; a rename or copy is named by its new path.
        for entry in result.stdout.split(b"\0"):
            if not entry:
                continue
            added, deleted, name = entry.split(b"\t", 2)
            paths.append(os.fsdecode(name))
            if added == deleted == b"-":
                binary.append(os.fsdecode(name))
        return GitReading(tuple(dict.fromkeys(paths)), tuple(dict.fromkeys(binary)))

    def check_apply(self, patch: str) -> str | None:
        """None when the patch applies cleanly to the tree, else git's reason on one line."""
        self.ensure()
        result = self._git(
            "apply", "--check", "--whitespace=nowarn", "-", stdin=encode(patch), check=False
        )
        return None if result.returncode == 0 else one_line(result.stderr)

    def apply(self, patch: str) -> list[str]:
        """Apply a patch with paths relative to the root; the paths it touches, sorted.

        Raises `PatchParseError` for text that is not a diff and `PatchApplyError` (tree unchanged:
        git checks every hunk before writing) when it does not apply.
        """
        self.ensure()
        paths = touched_paths(patch)
        result = self._git("apply", "--whitespace=nowarn", "-", stdin=encode(patch), check=False)
        if result.returncode != 0:
            raise PatchApplyError(
                f"fwloop: the patch does not apply to {self.root}: {one_line(result.stderr)}; "
                "regenerate it against the current tree"
            )
        drop_cached_bytecode(self.root, paths)
        return paths

    def _current_tree(self) -> str:
        """Stage the current tree into the shadow index; its tree id (first: `seed_index`)."""
        if not self._index.exists():
            seed_index(self.root, self.git_dir, self._index, self._git_quietly)
        untracked = split_z(self._git("ls-files", "-z", "--others", "--exclude-standard").stdout)
        files = [p for p in untracked if not p.endswith("/")]
        # git lists a nested repository it has never seen as "dir/"; take its files one by one.
        nested = [p for p in untracked if p.endswith("/")]
        if nested:
            files += self._not_ignored(self._walk(nested))
        tracked = split_z(self._git("ls-files", "-z", "--cached").stdout)
        caches = [p for p in tracked if _in_pycache(p)]
        if caches:  # held by a shadow store from before bytecode caches were left out
            self._git("update-index", "--force-remove", "-z", "--stdin", stdin=join_z(caches))
        # Tracked paths go first so a file replaced by a directory leaves the index before its
        # new children arrive.
        written = [p for p in sorted(self.written) if _is_file_or_link(self.root / p)]
        listed = [*tracked, *tracked_despite_ignores(self.root, self._config()), *files, *written]
        staged = list(dict.fromkeys(p for p in listed if not _in_pycache(p)))
        self._git(
            "update-index", "--add", "--remove", "--replace", "-z", "--stdin", stdin=join_z(staged)
        )
        return self._git("write-tree").stdout.decode().strip()

    def _git_quietly(
        self, args: list[str], stdin: bytes | None, index: Path
    ) -> subprocess.CompletedProcess[bytes]:
        return self._git(*args, stdin=stdin, index=index, check=False)

    def _changes(self, commit: str, target: str | None = None) -> list[_Change]:
        after = self._commit(target) if target is not None else self._current_tree()
        return self._tree_changes(self._commit(commit), after)

    def _tree_changes(self, before: str, after: str) -> list[_Change]:
        """Every entry that differs between two trees (or commits); WorkspaceError when git
        cannot compare them."""
        raw = self._git("diff-tree", "-r", "-z", "--raw", "--no-renames", before, after).stdout
        fields = split_z(raw)
        changes = []
        for meta, path in zip(fields[::2], fields[1::2], strict=True):
            old_mode, new_mode, _, new_id = meta.lstrip(":").split(" ")[:4]
            changes.append(_Change(old_mode, new_mode, path, new_id))
        return changes

    def _walk(self, directories: list[str]) -> list[str]:
        found: list[str] = []
        for directory in directories:
            for dirpath, dirnames, filenames in os.walk(self.root / directory):
                here = os.path.relpath(dirpath, self.root).replace(os.sep, "/")
                links = [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]
                dirnames[:] = [
                    d for d in dirnames if d not in (".git", STATE_DIR_NAME) and d not in links
                ]
                found += [f"{here}/{name}" for name in [*filenames, *links] if name != ".git"]
        return found

    def _not_ignored(self, paths: list[str]) -> list[str]:
        # check-ignore reads plain path names and rejects the literal-pathspec switch.
        result = self._git(
            "check-ignore", "-z", "--stdin", stdin=join_z(paths), check=False, literal=False
        )
        if result.returncode not in (0, 1):
            raise WorkspaceError(f"fwloop: git check-ignore failed: {one_line(result.stderr)}")
        ignored = set(split_z(result.stdout))
        return [p for p in paths if p not in ignored]

    def _remove(self, path: str) -> None:
        target = self.root / path
        target.unlink(missing_ok=True)
        parent = target.parent
        # Drop directories the deletion emptied, never the root itself.
        while parent != self.root:
            try:
                parent.rmdir()
            except OSError:
                return
            parent = parent.parent

    def _commit(self, commit: str) -> str:
        result = self._git(
            "rev-parse",
            "--quiet",
            "--verify",
            "--end-of-options",
            f"{commit}^{{commit}}",
            check=False,
        )
        if result.returncode != 0:
            raise WorkspaceError(
                f"fwloop: snapshot {commit!r} is not in {self.git_dir}; check the tree by hand, "
                f"then delete {self.state_dir / 'journal.json'} if it names this snapshot"
            )
        return result.stdout.decode().strip()

    def _config(self) -> list[str]:
        checkout = user_git_dir(self.root)
        return shadow_config(exclude_file(checkout) if checkout is not None else os.devnull)

    def _git(
        self,
        *args: str,
        stdin: bytes | None = None,
        check: bool = True,
        literal: bool = True,
        index: Path | None = None,
    ) -> subprocess.CompletedProcess[bytes]:
        env = git_env(self.git_dir, self.root)
        if not literal:
            del env["GIT_LITERAL_PATHSPECS"]
        env["GIT_INDEX_FILE"] = str(index or self._index)
        stamp = f"{int(time.time())} +0000"
        for role in ("AUTHOR", "COMMITTER"):
            env[f"GIT_{role}_NAME"], env[f"GIT_{role}_EMAIL"] = _IDENTITY
            env[f"GIT_{role}_DATE"] = stamp
        result = run_git([*self._config(), *args], env=env, cwd=self.root, stdin=stdin)
        if check and result.returncode != 0:
            raise WorkspaceError(
                f"fwloop: git {args[0]} failed in the shadow repository {self.git_dir}: "
                f"{one_line(result.stderr)}; keep {self.state_dir} (it holds the baseline and "
                f"the journal), fix the cause, then run pytest --fwloop again in {self.root} "
                "to recover the tree"
            )
        return result


def _write_if_changed(path: Path, text: str) -> None:
    if not path.is_file() or path.read_text() != text:
        path.write_text(text)


def _is_file_or_link(path: Path) -> bool:
    return path.is_symlink() or path.is_file()


def _is_within(path: str, prefix: str) -> bool:
    return not prefix or path == prefix or path.startswith(prefix + "/")


def _in_pycache(path: str) -> bool:
    # The substring test first: a snapshot asks it of every path of the tree, twice.
    name = _PYCACHE.rstrip("/")
    return name in path and name in path.split("/")
