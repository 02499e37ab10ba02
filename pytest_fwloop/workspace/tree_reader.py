"""Read one file of the tree for an agent's sake, refusing any way out of it (DESIGN.md §6, §16).

The path has already passed the patch policy's path checks (inside the root, no `..`, not
`.git`, `.fwloop` or a protected file). This reader adds what only the file system can tell:
no component may be a symlink (one could lead out of the tree), the file must be a regular one,
text, and bounded. Nothing is followed, so nothing outside the root is ever opened.
"""

from __future__ import annotations

import os
import stat
from typing import TYPE_CHECKING

from pytest_fwloop.core.posix_paths import normalize_path, show_path
from pytest_fwloop.workspace.shadow import PathRefused

if TYPE_CHECKING:
    from pathlib import Path

#: Largest file read for an edit: a firmware source or generated header, not an image.
MAX_READ_BYTES = 4 * 1024 * 1024


def read_tree_text(root: Path, path: str, limit: int = MAX_READ_BYTES) -> str | None:
    """The text of file `path` under `root` (undecodable bytes kept as surrogate escapes, as
    the shadow repository keeps them), or None when there is no such file.

    `PathRefused` names why a file that is there may not be read.
    """
    parts = normalize_path(path).split("/")
    shown = show_path(path)
    target = root
    for depth, part in enumerate(parts, 1):
        target = target / part
        try:
            info = os.lstat(target)
        except (FileNotFoundError, NotADirectoryError):
            return None
        except OSError as exc:
            raise PathRefused(f"{shown}: cannot be read ({exc.strerror})") from None
        if stat.S_ISLNK(info.st_mode):
            link = "/".join(parts[:depth])
            raise PathRefused(
                f"{shown}: {show_path(link)} is a symlink, which the loop does not follow; "
                "edit the file it names by its own path inside the root"
            )
        if depth < len(parts) and not stat.S_ISDIR(info.st_mode):
            return None
    if not stat.S_ISREG(info.st_mode):
        raise PathRefused(f"{shown}: not a regular file")
    if info.st_size > limit:
        raise PathRefused(
            f"{shown}: {info.st_size} bytes, more than {limit} read for an edit; send a "
            "unified diff of it instead"
        )
    try:
        # O_NOFOLLOW: a symlink swapped in since the check is refused, not followed.
        handle = os.open(target, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        raise PathRefused(f"{shown}: cannot be read ({exc.strerror})") from None
    with os.fdopen(handle, "rb") as stream:
        data = stream.read(limit + 1)
    if len(data) > limit:
        raise PathRefused(f"{shown}: grew past {limit} bytes while being read")
    if b"\0" in data:
        raise PathRefused(f"{shown}: a binary file; the coder may change text files only")
    return data.decode("utf-8", "surrogateescape")
