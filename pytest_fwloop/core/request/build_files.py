"""What the firmware is built from, as its build says (DESIGN.md §18; pure).

A firmware build compiles a small part of its tree (a Zephyr native_sim build: ~100 files of
~29,000): a defect the failures point at is in a file the build compiles or a header one of
them includes, not in another board's driver that merely shares a name. The build says which
files those are where it writes them down: a compile database (`compile_commands.json`, from
CMake, Zephyr or `bear`), gcc's depfiles (`-MMD`, `*.d`: each object's source and headers), and
ninja's own record (`ninja -t deps`, `ninja -t inputs`). The edge that finds and reads them is
`codemap/build_inputs.py`; this module parses their text and judges the tree's files by them.
"""

from __future__ import annotations

import os
import posixpath
import re
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from pytest_fwloop.core.request.code_symbols import FileSymbols

#: The languages a C build compiles (`codemap/parse.py`'s names): only these are judged by the
#: build's list; Python, scripts and text are not what it compiles.
BUILT_LANGUAGES = frozenset({"c", "cpp"})
#: What a source or header built by the list but not in it is called in a reason.
UNBUILT_REASON = "not in the build's file list"


@dataclass(frozen=True)
class BuildFiles:
    """The tree's files the build uses (paths under the tree's root), and what said so."""

    files: frozenset[str]
    #: Each list read, for the trace: `build/compile_commands.json`, `12 depfile(s)`.
    origins: tuple[str, ...]


def inside(path: str, base: str, root: str) -> str | None:
    """`path` (absolute, or relative to `base`) as a POSIX path under `root`; None outside."""
    joined = posixpath.normpath(posixpath.join(base, path.replace(os.sep, "/")))
    relative = posixpath.relpath(joined, root)
    return None if relative == "." or relative.startswith("../") or relative == ".." else relative


def compile_database(payload: Any) -> list[tuple[str, str]]:
    """`(directory, file)` of each entry of a compile database; malformed entries are skipped
    (a database is the build's output, not ours to reject whole)."""
    if not isinstance(payload, list):
        return []
    found: list[tuple[str, str]] = []
    for entry in payload:
        if isinstance(entry, dict):
            directory, file = entry.get("directory"), entry.get("file")
            if isinstance(directory, str) and isinstance(file, str):
                found.append((directory, file))
    return found


_CONTINUED = re.compile(r"\\\r?\n")
#: A depfile's word: escaped spaces (`\ `) and `$$` belong to it.
_WORD = re.compile(r"(?:\\.|\$\$|[^\s\\])+")


def depfile_inputs(text: str) -> list[str]:
    """The prerequisites of every rule of a make depfile (gcc `-MD`/`-MMD`, with `-MP`'s empty
    rules for headers too): the source and the headers each object was compiled from."""
    found: list[str] = []
    for line in _CONTINUED.sub(" ", text).splitlines():
        target, colon, rest = _split_rule(line)
        if not colon or not target:
            continue
        for word in _WORD.findall(rest):
            found.append(re.sub(r"\\([ #:])", r"\1", word).replace("$$", "$"))
    return found


def _split_rule(line: str) -> tuple[str, bool, str]:
    """A rule's targets and prerequisites, split at its first unescaped colon that is not a
    drive letter's (`C:\\src\\x.c` in a depfile written on Windows)."""
    for match in re.finditer(r"(?<!\\):", line):
        at = match.start()
        if at == 1 and line[0].isalpha() and line[2:3] in ("\\", "/"):
            continue
        return line[:at].strip(), True, line[at + 1 :]
    return line, False, ""


def ninja_deps(text: str) -> list[str]:
    """The dependencies `ninja -t deps` lists, one indented path a line under each target."""
    return [line.strip() for line in text.splitlines() if line.startswith((" ", "\t"))]


def ninja_inputs(text: str) -> list[str]:
    """The paths `ninja -t inputs` lists, one a line (relative to the build directory)."""
    return [line.strip() for line in text.splitlines() if line.strip()]


def build_files(
    listed: Iterable[tuple[str, Iterable[tuple[str, str]]]], root: str, known: Collection[str]
) -> BuildFiles | None:
    """The tree's files the lists name: each list is `(origin, [(base, path), ...])`, a path
    relative to its `base` or absolute. Only files of the tree count (`known`: its source files
    under the root), so a list that names none of them (another checkout's database) says
    nothing, and the ranking stays as without one."""
    files: set[str] = set()
    origins: list[str] = []
    for origin, entries in listed:
        # Each distinct entry once: ninja's deps name each header once per object that
        # includes it (Zephyr native_sim: 10,188 entries, 378 paths).
        here = {
            path
            for base, name in set(entries)
            if (path := inside(name, base, root)) is not None and path in known
        }
        if here:
            files |= here
            origins.append(origin)
    if not files:
        return None
    return BuildFiles(frozenset(files), tuple(origins))


def judged(files: Mapping[str, FileSymbols]) -> list[str]:
    """The tree's files a C build's list judges: its C and C++ sources and headers."""
    return [path for path, symbols in files.items() if symbols.language in BUILT_LANGUAGES]


def unbuilt(path: str, files: Mapping[str, FileSymbols], built: BuildFiles | None) -> bool:
    """Whether `path` is C the build does not use: ranked below all the build uses."""
    if built is None or path in built.files:
        return False
    symbols = files.get(path)
    return symbols is not None and symbols.language in BUILT_LANGUAGES


def build_share(files: Mapping[str, FileSymbols], built: BuildFiles | None) -> str:
    """The trace's words for what the build uses of the tree's C."""
    if built is None:
        return "no build file list (compile_commands.json, depfiles, ninja): every C file ranked"
    judged_files = judged(files)
    used = sum(1 for path in judged_files if path in built.files)
    return (
        f"the build uses {used} of the tree's {len(judged_files)} C/C++ file(s) "
        f"({', '.join(built.origins)})"
    )
