"""A unified diff read the way a model means it, not the way `git apply` insists (DESIGN.md §16).

Models get hunk line numbers and counts wrong and drop the `a/` `b/` prefixes. Read leniently,
each hunk is still a quote of the old lines (context and removals) and what replaces them: the
numbers are not needed. Only text changes of regular files are read so; a diff that renames,
deletes, changes a mode or holds binary data is left to `git apply` as it is (None). Pure.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_HEADER_MODE = re.compile(
    r"(?:new file mode|deleted file mode|old mode|new mode|index \S+) ([0-7]{6})\s*"
)
_HUNK_NUMBERS = re.compile(r"@@ -(\d{1,9})(?:,(\d{1,9}))? \+(\d{1,9})(?:,(\d{1,9}))? @@")
#: Extended header lines that make a diff more than text changes of regular files.
_NOT_TEXT = (
    "deleted file mode",
    "old mode",
    "new mode",
    "rename ",
    "copy ",
    "similarity index",
    "dissimilarity index",
    "GIT binary patch",
    "Binary files ",
)


@dataclass(frozen=True)
class LooseHunk:
    """One hunk as `(tag, line)` pairs, tag ` ` `-` or `+`, each line with its `\\n` unless a
    `\\ No newline` marker followed it; `header` is the `@@` line as written."""

    ops: tuple[tuple[str, str], ...]
    header: str

    @property
    def old(self) -> str:
        """The lines the hunk expects: its context and its removals, in order."""
        return "".join(line for tag, line in self.ops if tag != "+")

    @property
    def given(self) -> tuple[int, int] | None:
        """The old start and count the header claims, when it has numbers."""
        numbers = _header_numbers(self.header)
        return None if numbers is None else numbers[:2]


@dataclass(frozen=True)
class LooseFile:
    """One file's section: `path` as meant (prefix dropped), whether it is created
    (`--- /dev/null`), whether the names lacked the `a/` `b/` prefixes, and its hunks."""

    path: str
    created: bool
    unprefixed: bool
    hunks: tuple[LooseHunk, ...]


def read_loose_diff(text: str) -> list[LooseFile] | None:
    """The sections of a diff with `---`/`+++` headers and `@@` hunks; None when it is not one
    (no such header, no hunk) or is more than text changes of regular files."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    files: list[LooseFile] = []
    # A `diff --git` section without ---/+++ (an empty new file, a mode change) is none of ours.
    headless = False
    index = 0
    while index < len(lines):
        line = lines[index].rstrip("\r")
        if line.startswith(_NOT_TEXT) or (headless and line.startswith("diff --git ")):
            return None
        mode = _HEADER_MODE.fullmatch(line)
        if mode is not None and mode[1] not in ("100644", "100755"):
            return None  # a symlink or a submodule: the policy refuses it as written
        headless = headless or line.startswith("diff --git ")
        if _is_header(lines, index):
            names = _names(line[4:], lines[index + 1].rstrip("\r")[4:])
            if names is None:
                return None
            hunks, index = _hunks(lines, index + 2)
            if not hunks:
                return None
            files.append(LooseFile(*names, hunks=tuple(hunks)))
            headless = False
            continue
        if line.startswith("@@"):
            return None  # a hunk before any file header: nothing says which file
        index += 1
    return None if headless or not files else files


def header_modes(text: str) -> list[tuple[str, str]]:
    """(path, mode) for every mode a `diff --git` section's header lines give (`new file mode`,
    `old mode`, `index … MODE`, …), however the rest of the diff is written: the file types a
    patch asks for, named by the section's last name (prefix dropped when it has one)."""
    found: list[tuple[str, str]] = []
    path: str | None = None
    for raw in text.split("\n"):
        line = raw.rstrip("\r")
        if line.startswith("diff --git "):
            name = line[11:].rsplit(" ", 1)[-1]
            path = name[2:] if name.startswith("b/") else name
        elif line.startswith(("@@", "--- ", "+++ ")):
            path = None  # past the header: a hunk's lines are no modes
        elif path is not None and (match := _HEADER_MODE.fullmatch(line)) is not None:
            found.append((path, match[1]))
    return found


def _names(minus: str, plus: str) -> tuple[str, bool, bool] | None:
    """(path, created, unprefixed) from the `---` and `+++` names; None for a deletion or two
    different files (a rename, which only git's own headers express)."""
    old, new = _field(minus), _field(plus)
    if new is None or not new:
        return None
    created = old is None
    unprefixed = not new.startswith("b/") or (old is not None and not old.startswith("a/"))
    path = new[2:] if new.startswith("b/") else new
    if old is not None and (old[2:] if old.startswith("a/") else old) != path:
        return None
    return path, created, unprefixed


def _field(name: str) -> str | None:
    """A header's name without the timestamp a plain `diff -u` adds; None for /dev/null."""
    name = name.split("\t", 1)[0].strip()
    if name.startswith('"') and name.endswith('"') and len(name) > 1:
        return None if "\\" in name else name[1:-1]  # C escapes: git's own reader decides
    return None if name == "/dev/null" else name


def _hunks(lines: list[str], index: int) -> tuple[list[LooseHunk], int]:
    """The hunks of one section, from `index`; the index of the first line after them."""
    hunks: list[LooseHunk] = []
    while index < len(lines) and lines[index].startswith("@@"):
        header = lines[index].rstrip("\r")
        ops: list[tuple[str, str]] = []
        trimmed = 0  # how many of the last ops are blank context read from an empty line
        index += 1
        while index < len(lines) and not _ends_hunk(lines, index):
            line = lines[index]
            trimmed = trimmed + 1 if line == "" else 0
            if line.startswith("\\"):
                if ops:  # `\ No newline at end of file`: the line before it has none
                    tag, last = ops[-1]
                    ops[-1] = (tag, last.removesuffix("\n"))
            elif line[:1] in (" ", "-", "+"):
                ops.append((line[0], line[1:] + "\n"))
            else:
                # An empty line is a blank context line whose space was trimmed; any other is
                # context that lost its leading space (found, if at all, with whitespace ignored).
                ops.append((" ", line + "\n"))
            index += 1
        if index >= len(lines) and trimmed and not _counts_fit(header, ops):
            # Empty lines after the last hunk are the answer's, not the file's, unless the
            # header's counts take them in. A ` ` line is context as git reads it: kept.
            del ops[-trimmed:]
        hunks.append(LooseHunk(tuple(ops), header))
    return hunks, index


def _header_numbers(header: str) -> tuple[int, int, int, int] | None:
    """(old start, old count, new start, new count) of an `@@` line, a missing count being 1."""
    match = _HUNK_NUMBERS.match(header)
    if match is None:
        return None
    start, count, new_start, new_count = (match[n] for n in range(1, 5))
    return int(start), int(count or 1), int(new_start), int(new_count or 1)


def _counts_fit(header: str, ops: list[tuple[str, str]]) -> bool:
    """Whether the header's old and new counts are exactly those of `ops`."""
    numbers = _header_numbers(header)
    old = sum(tag != "+" for tag, _ in ops)
    new = sum(tag != "-" for tag, _ in ops)
    return numbers is not None and (numbers[1], numbers[3]) == (old, new)


def _ends_hunk(lines: list[str], index: int) -> bool:
    return lines[index].startswith(("@@", "diff --git ")) or _is_header(lines, index)


def _is_header(lines: list[str], index: int) -> bool:
    """A `---` line followed by a `+++` line: a file header (a removed `-- x` line before an
    added `++ y` line reads the same; git's counts would tell, a model's cannot)."""
    return (
        lines[index].startswith("--- ")
        and index + 1 < len(lines)
        and lines[index + 1].startswith("+++ ")
    )
