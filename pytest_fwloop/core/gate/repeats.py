"""Stuck detection: a coder proposing a change it already tried, or undoing and redoing one (pure).

Two patches are the same change when they carry the same set of hunks, compared by file and by
the old and new text of each hunk with whitespace at line ends ignored; line numbers are not
compared, so the same edit made against a shifted file still counts as a repeat.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

_HUNK_HEADER = re.compile(r"@@ -\d{1,9}(?:,(\d{1,9}))? \+\d{1,9}(?:,(\d{1,9}))? @@")

Hunk = tuple[str, tuple[str, ...], tuple[str, ...]]  # (path, old side, new side)


def hunks(patch: str) -> frozenset[Hunk]:
    """The hunks of a unified diff; empty for a diff without text hunks (binary, mode only).

    Each hunk is read for as many lines as its `@@` header counts, as `git apply` does, so a
    removed line that itself starts with `-- ` is never taken for a file header.
    """
    found: set[Hunk] = set()
    lines = patch.splitlines()
    path = ""
    index = 0
    while index < len(lines):
        line = lines[index]
        index += 1
        header = _HUNK_HEADER.match(line)
        if header is None:
            if line.startswith(("--- ", "+++ ")):
                path = _header_path(line) or path
            continue
        old_left, new_left = int(header.group(1) or 1), int(header.group(2) or 1)
        old: list[str] = []
        new: list[str] = []
        while index < len(lines) and (old_left > 0 or new_left > 0):
            tag, body = lines[index][:1], lines[index][1:].rstrip()
            if tag in (" ", ""):
                old.append(body)
                new.append(body)
                old_left, new_left = old_left - 1, new_left - 1
            elif tag == "-":
                old.append(body)
                old_left -= 1
            elif tag == "+":
                new.append(body)
                new_left -= 1
            elif tag != "\\":  # "\ No newline at end of file" says nothing about the change
                break
            index += 1
        if old != new:
            found.add((path, tuple(old), tuple(new)))
    return frozenset(found)


def _header_path(line: str) -> str | None:
    """The path of a `--- a/x` or `+++ b/x` line; None for /dev/null."""
    name = line[4:].split("\t", 1)[0].strip()
    if name == "/dev/null":
        return None
    return name[2:] if name.startswith(("a/", "b/")) else name


def reverted(change: frozenset[Hunk]) -> frozenset[Hunk]:
    """The hunks of the patch that undoes `change`."""
    return frozenset((path, new, old) for path, old, new in change)


@dataclass(frozen=True)
class RepeatedPatch:
    """A proposed patch that iteration `iteration` already tried; `undone_by` is set when the
    patch tried right after it reverted it, so proposing it again alternates A, B, A."""

    iteration: int
    undone_by: int | None = None

    @property
    def what(self) -> str:
        if self.undone_by is not None:
            return (
                f"the change of iteration {self.iteration}, which iteration {self.undone_by} "
                "reverted (an A/B alternation)"
            )
        return f"the change iteration {self.iteration} already tried"

    def must_fix(self) -> str:
        """What the coder is told, the one time it is told."""
        return f"this patch repeats {self.what}; it was not applied: propose a different fix"


def find_repeat(patch: str, tried: Sequence[tuple[int, str]]) -> RepeatedPatch | None:
    """Whether `patch` is a change of `tried` ((iteration, patch) in the order applied)."""
    proposed = hunks(patch)
    if not proposed:
        return None
    changes = [(iteration, hunks(text)) for iteration, text in tried]
    for index in range(len(changes) - 1, -1, -1):
        iteration, change = changes[index]
        if change != proposed:
            continue
        following = changes[index + 1] if index + 1 < len(changes) else None
        if following is not None and following[1] == reverted(change):
            return RepeatedPatch(iteration, undone_by=following[0])
        return RepeatedPatch(iteration)
    return None
