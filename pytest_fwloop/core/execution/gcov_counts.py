"""What gcov says each test's C ran, as the spectrum file holds it (DESIGN.md §18; pure).

`gcov --json-format --stdout` prints one JSON document per `.gcda` file it is given: the
directory the object was compiled in, and per source file (headers with inline code too) every
line that has code with how often it ran. A line counted at least once ran; a file gcov lists
at all was measured, so C of it that no failing test ran did not make them fail (as Python's
spectrum says of the Python it measures). `child/spectra/gcov.py` runs gcov; this module reads it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pytest_fwloop.core.request.build_files import inside


@dataclass
class Executed:
    """One test's (or one group of tests') C: per file under the root, the lines that ran."""

    ran: dict[str, set[int]] = field(default_factory=dict)
    #: Every file gcov listed, ran or not.
    measured: set[str] = field(default_factory=set)


def gcov_documents(text: str) -> Iterator[dict[str, Any]]:
    """The JSON documents of gcov's output, one after another (blank lines between)."""
    decoder = json.JSONDecoder()
    at = 0
    while True:
        while at < len(text) and text[at].isspace():
            at += 1
        if at >= len(text):
            return
        try:
            document, at = decoder.raw_decode(text, at)
        except ValueError:
            return  # a document cut short: what came before it stands
        if isinstance(document, dict):
            yield document


def add_document(
    executed: Executed,
    document: Mapping[str, Any],
    root: str,
    before: Mapping[tuple[str, int], int] | None = None,
) -> dict[tuple[str, int], int]:
    """Count one gcov document into `executed`: its files under `root`, their lines run, and
    return its counts by (path, line). `before` is what the same object's previous document
    said, when its counts add up over the tests (an extension's, never reset: the lines this
    test ran are those whose count grew)."""
    directory = str(document.get("current_working_directory", root))
    counts: dict[tuple[str, int], int] = {}
    for entry in document.get("files", ()):
        if not isinstance(entry, dict) or not isinstance(entry.get("file"), str):
            continue
        path = inside(entry["file"], directory, root)
        if path is None:
            continue
        executed.measured.add(path)
        for line in entry.get("lines", ()):
            if isinstance(line, dict):
                counts[(path, int(line["line_number"]))] = int(line.get("count", 0))
    earlier = before or {}
    for (path, number), count in counts.items():
        if count > earlier.get((path, number), 0):
            executed.ran.setdefault(path, set()).add(number)
    return counts


def encode(
    groups: Sequence[tuple[Sequence[str], Executed]], root: str, tool: str
) -> dict[str, Any]:
    """The spectrum file (`child/spectra/python_lines.py`'s format) of the C each group of tests
    ran: a group is one test, or the tests a firmware process lived through without dumping its
    counts between them (each of them is said to have run all of it). `measured` names every file
    the tool measured, each with the tool."""
    tests: dict[str, int] = {}
    by_line: dict[str, dict[int, set[int]]] = {}
    measured: dict[str, str] = {}
    for names, executed in groups:
        for path in executed.measured:
            measured[path] = tool
        if not names:
            continue  # counts written before any test (an extension's import): no test's
        numbers = {tests.setdefault(name, len(tests)) for name in names}
        for path, lines in executed.ran.items():
            here = by_line.setdefault(path, {})
            for line in lines:
                here.setdefault(line, set()).update(numbers)
    sets: dict[tuple[int, ...], int] = {}
    files = {
        path: {
            str(line): sets.setdefault(tuple(sorted(ran)), len(sets))
            for line, ran in sorted(lines.items())
        }
        for path, lines in sorted(by_line.items())
    }
    return {
        "root": root,
        "tests": list(tests),
        "sets": [list(s) for s in sets],
        "files": files,
        "measured": dict(sorted(measured.items())),
    }
