"""The build's own file lists, found in the tree and read (DESIGN.md §18): the edge of
`core/request/build_files.py`.

Found by one walk of the tree's folders (hidden ones, `node_modules`, `__pycache__` and
`site-packages` skipped, as deep as `MAX_DEPTH`): every `compile_commands.json`, every depfile
(`*.d`), every ninja build directory (`build.ninja` beside `.ninja_deps`, asked with `ninja -t
deps` and `ninja -t inputs`). What was read is kept while no list changes; once lists are
found, the tree is not walked again (a list a later build adds to those is not seen).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path

from pytest_fwloop.core.request.build_files import (
    BuildFiles,
    build_files,
    compile_database,
    depfile_inputs,
    ninja_deps,
    ninja_inputs,
)

#: Folders below the root a build's lists are looked for in (Zephyr: `build/zephyr/...`).
MAX_DEPTH = 8
#: Depfiles read at most: a tree with more is read by its first ones in walk order.
MAX_DEPFILES = 20_000
_SKIPPED = frozenset({"node_modules", "__pycache__", "site-packages", "dist-packages"})
#: The longest a `ninja -t` query may take.
_NINJA_SECONDS = 20.0


@dataclass
class _Found:
    databases: list[Path] = field(default_factory=list)
    depfiles: list[Path] = field(default_factory=list)
    ninja_dirs: list[Path] = field(default_factory=list)

    def key(self) -> tuple[str, ...]:
        paths = [*self.databases, *self.depfiles]
        paths += [d / ".ninja_deps" for d in self.ninja_dirs]
        return tuple(f"{p}:{_mtime(p)}" for p in paths)


def _mtime(path: Path) -> int:
    try:
        return path.stat().st_mtime_ns
    except OSError:
        return 0


@dataclass
class BuildInputs:
    """The lists of one tree, read again only when one of them changed."""

    root: Path
    _read: tuple[tuple[str, ...], BuildFiles | None] | None = None
    #: The lists found by the last walk: walked again only while none was found (a tree of
    #: 30,000 files takes 0.4 s to walk, each request).
    _found: _Found | None = None

    def files(self, known: Collection[str]) -> BuildFiles | None:
        """What the build uses of `known` (the tree's source files); None when no list of the
        build names any of them."""
        if self._found is None or not self._found.key():
            self._found = _walk(self.root)
        found = self._found
        key = found.key()
        if self._read is None or self._read[0] != key:
            self._read = (key, self._parse(found, known))
        return self._read[1]

    def _parse(self, found: _Found, known: Collection[str]) -> BuildFiles | None:
        root = str(self.root)
        listed: list[tuple[str, list[tuple[str, str]]]] = []
        for database in found.databases:
            try:
                payload = json.loads(database.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            listed.append((self._name(database), compile_database(payload)))
        entries: list[tuple[str, str]] = []
        for depfile in found.depfiles:
            try:
                text = depfile.read_text(encoding="utf-8", errors="replace")
            except OSError:
                continue
            bases = [root, *(str(p) for p in _ancestors(depfile.parent, self.root))]
            entries += [(base, name) for name in depfile_inputs(text) for base in bases]
        if entries:
            listed.append((f"{len(found.depfiles)} depfile(s)", entries))
        for directory in found.ninja_dirs:
            names = _ninja(directory, "deps") + _ninja(directory, "inputs")
            listed.append(
                (f"ninja -C {self._name(directory)}", [(str(directory), n) for n in names])
            )
        return build_files(listed, root, frozenset(known))

    def _name(self, path: Path) -> str:
        return path.relative_to(self.root).as_posix()


def _ancestors(folder: Path, root: Path) -> list[Path]:
    """`folder` and its parents up to (not including) `root`."""
    found: list[Path] = []
    while folder != root and folder.is_relative_to(root):
        found.append(folder)
        folder = folder.parent
    return found


def _walk(root: Path) -> _Found:
    found = _Found()
    top = len(root.parts)
    for folder, dirs, names in os.walk(root):
        here = Path(folder)
        depth = len(here.parts) - top
        dirs[:] = [
            d for d in dirs if not d.startswith(".") and d not in _SKIPPED and depth < MAX_DEPTH
        ]
        if "compile_commands.json" in names:
            found.databases.append(here / "compile_commands.json")
        if "build.ninja" in names and ".ninja_deps" in names:
            found.ninja_dirs.append(here)
        for name in names:
            if name.endswith(".d") and len(found.depfiles) < MAX_DEPFILES:
                found.depfiles.append(here / name)
    return found


def _ninja(directory: Path, tool: str) -> list[str]:
    """What `ninja -C DIR -t TOOL` lists, or nothing when ninja is missing or refuses."""
    program = shutil.which("ninja")
    if program is None:
        return []
    try:
        done = subprocess.run(
            [program, "-C", str(directory), "-t", tool],
            capture_output=True,
            timeout=_NINJA_SECONDS,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return []
    if done.returncode != 0:
        return []
    text = done.stdout.decode("utf-8", "replace")
    return ninja_deps(text) if tool == "deps" else ninja_inputs(text)
