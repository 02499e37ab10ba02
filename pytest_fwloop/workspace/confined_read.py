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

from pytest_fwloop.core.change.posix_paths import normalize_path, show_path
from pytest_fwloop.core.request.hidden_paths import HIDDEN_PARTS, is_secret
from pytest_fwloop.workspace.shadow import PathRefused

if TYPE_CHECKING:
    from collections.abc import Iterator
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


#: A larger file is not shown by a read-only tool (generated tables, images): it reads as missing.
MAX_TOOL_FILE_BYTES = 1024 * 1024


class ToolReader:
    """The tree as an `openai:` coder's read-only tools see it (`core.read_tools.TreeReader`):
    files through `read_tree_text` (no link followed, regular text files only), folders and the
    walk without links, version control, the loop's records or secret-named files."""

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()

    def text(self, path: str) -> str | None:
        if is_secret(path):
            return None
        try:
            text = read_tree_text(self.root, path, MAX_TOOL_FILE_BYTES)
        except PathRefused:
            return None
        # What a model reads is UTF-8; bytes that are not read as U+FFFD.
        return (
            None
            if text is None
            else text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
        )

    def entries(self, path: str) -> list[str] | None:
        target = self.root
        for part in (p for p in path.split("/") if p):
            target = target / part
            if target.is_symlink():
                return None
        if not target.is_dir():
            return None
        found = sorted(os.scandir(target), key=lambda entry: entry.name)
        return [
            f"{entry.name}/" if entry.is_dir() else entry.name
            for entry in found
            if not entry.is_symlink() and entry.name not in HIDDEN_PARTS
        ]

    def files(self) -> Iterator[str]:
        for directory, folders, names in os.walk(self.root):
            here = os.path.relpath(directory, self.root).replace(os.sep, "/")
            folders[:] = sorted(
                f
                for f in folders
                if f not in HIDDEN_PARTS and not os.path.islink(os.path.join(directory, f))
            )
            for name in sorted(names):
                if os.path.islink(os.path.join(directory, name)):
                    continue
                path = name if here == "." else f"{here}/{name}"
                if not is_secret(path):
                    yield path
