"""What the tree holds on the way to each path a patch writes, as `lstat` sees it: the facts
the policy's `tree_violations` judges, so a patch never writes through a symlink already in the
tree, nor into something that is not a plain file."""

from __future__ import annotations

import os
import stat
from typing import TYPE_CHECKING

from pytest_fwloop.core.change.posix_paths import normalize_path

if TYPE_CHECKING:
    from pathlib import Path

    from pytest_fwloop.core.gate.policy import TreeKind


def kinds_on_the_way(root: Path, path: str) -> list[tuple[str, TreeKind]]:
    """Each parent of `path` inside the root, outermost first, then `path` itself, with its
    kind; below a parent that is no directory nothing exists (`missing`)."""
    parts = normalize_path(path).split("/")
    kinds: list[tuple[str, TreeKind]] = []
    for depth in range(1, len(parts)):
        name = "/".join(parts[:depth])
        kinds.append((name, _kind(root / name)))
        if kinds[-1][1] != "dir":
            return [*kinds, (normalize_path(path), "missing")]
    return [*kinds, (normalize_path(path), _kind(root / normalize_path(path)))]


def _kind(target: Path) -> TreeKind:
    try:
        mode = os.lstat(target).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return "missing"
    except OSError:  # too long a name, say: git's own check names it
        return "missing"
    if stat.S_ISLNK(mode):
        return "symlink"
    if stat.S_ISDIR(mode):
        return "dir"
    return "file" if stat.S_ISREG(mode) else "other"
