"""Which lines the failing tests ran and the passing ones did not (pure; DESIGN.md §16).

Spectrum-based fault localization, as debugging research measures it: a line run by every
failing test and by few passing ones is suspicious, and Ochiai's `ef / sqrt(F * (ef + ep))`
says how much (`ef`, `ep`: failing and passing tests that ran it; `F`: the failing tests). Two
views are taken, each line keeping its best: all failures at once (a defect most failures share),
and each kind of failure on its own (three seeded bugs are three kinds: over all failures a line
only one kind runs scores low, over its own kind it scores as high as a defect can). The child
records the lines (`child/spectrum.py`); this module only counts.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

#: Kinds of failure that get a view of their own: the first ones, as the request shows them.
MAX_VIEWS = 24


@dataclass(frozen=True)
class Spectrum:
    """The tests of one run and, per file of the tree, the tests each line ran in. Lines that
    ran the same tests share one set."""

    tests: tuple[str, ...]
    sets: tuple[frozenset[int], ...]
    #: Path under the tree's root → line → index into `sets`.
    files: Mapping[str, Mapping[int, int]]


@dataclass(frozen=True)
class Suspicion:
    """How suspicious one line is, in the view that found it most so."""

    #: Ochiai in the view, times the square roots of the share of the failures the view holds
    #: and of the share of the tests that passed.
    score: float
    ochiai: float
    failed: int
    passed: int
    #: "all failures", or the first failing test of the kind whose view it is.
    view: str

    def reason(self, line: int) -> str:
        return (
            f"line {line} run by {self.failed} failing and {self.passed} passing test(s) "
            f"({self.view}, Ochiai {self.ochiai:.2f})"
        )


@dataclass(frozen=True)
class Suspicions:
    """What a spectrum says of the current failures: each line some failing test ran. Python
    code of the tree that is not among them ran in no failing test (the spectrum measures
    every Python file of the tree a test's process runs)."""

    lines: Mapping[tuple[str, int], Suspicion]


def read_spectrum(payload: Mapping[str, Any], prefix: str = "") -> Spectrum:
    """A spectrum file's JSON (`child/spectrum.py`); `prefix` is the pytest rootdir's place under
    the tree's root ("" when they are one folder), put before every path."""
    sets = tuple(frozenset(int(i) for i in s) for s in payload["sets"])
    files = {
        f"{prefix}{path}": {int(line): int(index) for line, index in lines.items()}
        for path, lines in payload["files"].items()
    }
    return Spectrum(tuple(str(t) for t in payload["tests"]), sets, files)


def overlaid(parts: Sequence[Spectrum]) -> Spectrum | None:
    """One spectrum of several, oldest first: the files an attempt's processes wrote
    (pytest-xdist's workers ran disjoint tests), and the attempts of a run (a test that ran
    again, after a patch, counts with the lines it ran last). Test indices are renumbered."""
    if not parts:
        return None
    if len(parts) == 1:
        return parts[0]
    claimed: set[str] = set()
    kept: list[tuple[Spectrum, dict[int, str]]] = []
    for part in reversed(parts):
        own = {i: t for i, t in enumerate(part.tests) if t not in claimed}
        claimed.update(own.values())
        kept.append((part, own))
    tests: dict[str, int] = {}
    sets: dict[frozenset[int], int] = {}
    lines: dict[str, dict[int, set[int]]] = {}
    for part, own in reversed(kept):
        number = {i: tests.setdefault(t, len(tests)) for i, t in own.items()}
        ran = [{number[i] for i in s if i in number} for s in part.sets]
        for path, at in part.files.items():
            joined = lines.setdefault(path, {})
            for line, index in at.items():
                if ran[index]:
                    joined.setdefault(line, set()).update(ran[index])
    files = {
        path: {line: sets.setdefault(frozenset(r), len(sets)) for line, r in at.items()}
        for path, at in lines.items()
    }
    return Spectrum(tuple(tests), tuple(sets), files)


def suspicious_lines(
    spectrum: Spectrum, kinds: Sequence[Sequence[str]], passing: Collection[str]
) -> Suspicions:
    """Every line some failing test ran, with its best view's Ochiai. `kinds` are the failing
    tests grouped by kind of failure (the first `MAX_VIEWS` kinds get a view of their own);
    `passing` the tests that passed. A test the spectrum did not record counts in no view."""
    index = {test: i for i, test in enumerate(spectrum.tests)}
    groups = [
        (group[0], frozenset(index[t] for t in group if t in index)) for group in kinds if group
    ]
    views = [("all failures", frozenset().union(*(g for _, g in groups)))]
    if len(groups) > 1:
        views += [(f"as {first} fails", g) for first, g in groups[:MAX_VIEWS]]
    views = [(name, tests) for name, tests in views if tests]
    passed = frozenset(index[t] for t in passing if t in index)
    by_set: dict[int, Suspicion] = {}
    for number, ran in enumerate(spectrum.sets):
        best = _best(ran, views, passed)
        if best is not None:
            by_set[number] = best
    lines = {
        (path, line): by_set[at]
        for path, at_lines in spectrum.files.items()
        for line, at in at_lines.items()
        if at in by_set
    }
    return Suspicions(lines)


def _best(
    ran: frozenset[int], views: Iterable[tuple[str, frozenset[int]]], passed: frozenset[int]
) -> Suspicion | None:
    ep = len(ran & passed)
    best: Suspicion | None = None
    total = max(len(failing) for _, failing in views)
    # When nearly every test fails, every line they all run scores near 1: worth little.
    telling = math.sqrt(len(passed) / (total + len(passed)))
    for name, failing in views:
        ef = len(ran & failing)
        if ef:
            ochiai = ef / math.sqrt(len(failing) * (ef + ep))
            score = ochiai * math.sqrt(len(failing) / total) * telling
            if best is None or score > best.score:
                best = Suspicion(score, ochiai, ef, ep, name)
    return best
