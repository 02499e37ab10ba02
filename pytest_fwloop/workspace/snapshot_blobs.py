"""What the code index reads of the shadow store (DESIGN.md §16): a snapshot's files with
their blob ids, blobs by id, and what a patch would make of them, without touching the tree."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from pytest_fwloop.workspace.git_run import WorkspaceError, encode, one_line, split_z
from pytest_fwloop.workspace.shadow import ShadowRepo

if TYPE_CHECKING:
    from pathlib import Path


#: The file modes `files` keeps: regular files, executable or not.
_REGULAR = ("100644", "100755")


def files(
    shadow: ShadowRepo, commit: str, since: tuple[str, dict[str, str]] | None = None
) -> dict[str, str]:
    """Every regular file of snapshot `commit` with its blob id: what the code index reads.
    Symbolic links and submodules are left out, so nothing read through them can lie
    outside the tree. `since`, an earlier snapshot and its `files`: only what changed between
    them is read (a Zephyr tree's listing, 29,000 files, is a sixth of a request after a patch);
    the whole listing where git no longer holds that snapshot."""
    if since is not None:
        try:
            changed = shadow._tree_changes(since[0], commit)
        except WorkspaceError:  # that snapshot is gone from the store
            pass
        else:
            found = dict(since[1])
            for change in changed:
                if change.new_mode in _REGULAR:
                    found[change.path] = change.new_id
                else:
                    found.pop(change.path, None)
            return found
    listed = shadow._git("ls-tree", "-r", "-z", "--full-tree", shadow._commit(commit)).stdout
    found = {}
    for entry in split_z(listed):
        meta, _, path = entry.partition("\t")
        mode, kind, blob = meta.split(" ")
        if kind == "blob" and mode in _REGULAR:
            found[path] = blob
    return found


def patched_files(shadow: ShadowRepo, commit: str, patch: str) -> dict[str, str]:
    """The blob ids of the files `patch` writes, as `git apply` makes them over snapshot
    `commit`, in a scratch index: the tree is not touched. {} when git will not apply it."""
    index = shadow.git_dir / "fwloop-patched-index"
    try:
        if patched_index(shadow, commit, patch, index) is not None:
            return {}
        tree = shadow._git("write-tree", index=index).stdout.decode().strip()
    finally:
        index.unlink(missing_ok=True)
    listed = shadow._git("ls-tree", "-r", "-z", "--full-tree", tree).stdout
    found = {}
    for entry in split_z(listed):
        meta, _, path = entry.partition("\t")
        found[path] = meta.split(" ")[2]
    return found


def patched_index(shadow: ShadowRepo, commit: str, patch: str, index: Path) -> str | None:
    """Fill the scratch index `index` with snapshot `commit` and `patch` applied to it; None
    when git applied it, else git's one-line reason (the index then holds the snapshot)."""
    shadow._git("read-tree", f"{shadow._commit(commit)}^{{tree}}", index=index)
    applied = shadow._git("apply", "--cached", "-", stdin=encode(patch), check=False, index=index)
    return None if applied.returncode == 0 else one_line(applied.stderr)


def blobs(shadow: ShadowRepo, ids: Iterable[str]) -> dict[str, bytes]:
    """The contents of blobs by id, in one `git cat-file --batch`; a missing one is left out."""
    wanted = list(dict.fromkeys(ids))
    if not wanted:
        return {}
    shadow.ensure()
    out = shadow._git("cat-file", "--batch", stdin="".join(f"{i}\n" for i in wanted).encode())
    data, found, at = out.stdout, {}, 0
    for blob in wanted:
        end = data.index(b"\n", at)
        header = data[at:end].split(b" ")
        at = end + 1
        if len(header) != 3:  # "<id> missing"
            continue
        size = int(header[2])
        found[blob] = data[at : at + size]
        at += size + 1
    return found
