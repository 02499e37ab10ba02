"""The workspace as the read-only tools read it: regular files inside the root, never through a
symbolic link (DESIGN.md §16). The pure judgement of paths is `core/read_tools.py`'s."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

from pytest_fwloop.core.read_tools import HIDDEN_PARTS, is_secret

#: A larger file is not read whole by a tool (generated tables, images): it is skipped.
MAX_FILE_BYTES = 1024 * 1024


class WorkspaceReader:
    """Reads under `root`; a path given here has passed `path_refusal` already."""

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()

    def _resolve(self, path: str) -> Path | None:
        """The file or folder `path` names, when no part of it is a link and it stays inside."""
        current = self.root
        for part in (p for p in path.split("/") if p):
            current = current / part
            if current.is_symlink():
                return None
        real = current.resolve()
        return real if real == self.root or real.is_relative_to(self.root) else None

    def text(self, path: str) -> str | None:
        target = self._resolve(path)
        if target is None or is_secret(path):
            return None
        try:
            # O_NOFOLLOW: a link put in place after the check is still not followed.
            fd = os.open(target, os.O_RDONLY | os.O_NOFOLLOW)
        except OSError:
            return None
        with os.fdopen(fd, "rb") as handle:
            if not os.path.isfile(target) or os.fstat(handle.fileno()).st_size > MAX_FILE_BYTES:
                return None
            data = handle.read(MAX_FILE_BYTES + 1)
        if b"\0" in data[:8192]:
            return None
        return data.decode("utf-8", "replace")

    def entries(self, path: str) -> list[str] | None:
        target = self._resolve(path) if path else self.root
        if target is None or not target.is_dir():
            return None
        shown = []
        for entry in sorted(os.scandir(target), key=lambda e: e.name):
            if entry.is_symlink() or entry.name in HIDDEN_PARTS:
                continue
            shown.append(f"{entry.name}/" if entry.is_dir() else entry.name)
        return shown

    def files(self) -> Iterator[str]:
        for directory, folders, names in os.walk(self.root):
            here = Path(directory)
            folders[:] = sorted(
                f for f in folders if f not in HIDDEN_PARTS and not (here / f).is_symlink()
            )
            relative = here.relative_to(self.root).as_posix()
            for name in sorted(names):
                if (here / name).is_symlink():
                    continue
                path = name if relative == "." else f"{relative}/{name}"
                if not is_secret(path):
                    yield path
