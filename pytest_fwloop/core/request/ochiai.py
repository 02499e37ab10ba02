"""Which lines the failing tests ran and the passing ones did not (pure; DESIGN.md §16).

Spectrum-based fault localization, as debugging research measures it: a line run by every failing
test and by few passing ones is suspicious, and Ochiai's `ef / sqrt(F * (ef + ep))` says how much
(`ef`, `ep`: failing and passing tests that ran it; `F`: the failing tests). When nearly every test
fails, every line they all run scores near 1, so the score is weighed by the share of the tests that
passed. The child records the lines (`child/spectra/python_lines.py`); this module only counts, and
`core/request/suspicion.py` turns lines into symbols.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Spectrum:
    """The tests of one run and, per file of the tree, the tests each line ran in. Lines that
    ran the same tests share one set."""

    tests: tuple[str, ...]
    sets: tuple[frozenset[int], ...]
    #: Path under the tree's root → line → index into `sets`.
    files: Mapping[str, Mapping[int, int]]
    #: The files of a language other than Python that a tool measured (gcov: each test's C
    #: on a host build), by the tool's name; code of them no failing test ran did not fail.
    measured: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Suspicion:
    """How suspicious one line is."""

    #: Ochiai times the square root of the share of the tests that passed.
    score: float
    ochiai: float
    failed: int
    passed: int

    def reason(self, line: int) -> str:
        return (
            f"line {line} run by {self.failed} failing and {self.passed} passing test(s) "
            f"(Ochiai {self.ochiai:.2f})"
        )


@dataclass(frozen=True)
class Suspicions:
    """What a spectrum says of the current failures: each line some failing test ran. Python
    code of the tree that is not among them ran in no failing test (the spectrum measures
    every Python file of the tree a test's process runs)."""

    lines: Mapping[tuple[str, int], Suspicion]
    #: `Spectrum.measured`: the other languages' files measured, by tool.
    measured: Mapping[str, str] = field(default_factory=dict)


def read_spectrum(payload: Mapping[str, Any], prefix: str = "") -> Spectrum:
    """A spectrum file's JSON (`child/spectra/python_lines.py`); `prefix` is the pytest rootdir's
    place under the tree's root ("" when they are one folder), put before every path."""
    sets = tuple(frozenset(int(i) for i in s) for s in payload["sets"])
    files = {
        f"{prefix}{path}": {int(line): int(index) for line, index in lines.items()}
        for path, lines in payload["files"].items()
    }
    measured = {f"{prefix}{path}": str(tool) for path, tool in payload.get("measured", {}).items()}
    return Spectrum(tuple(str(t) for t in payload["tests"]), sets, files, measured)


def overlaid(parts: Sequence[Spectrum]) -> Spectrum | None:
    """One spectrum of several, oldest first: the attempts of a run (a test that ran again,
    after a patch, counts with the lines it ran last). Test indices are renumbered."""
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
    return _merged(list(reversed(kept)))


def joined(parts: Sequence[Spectrum]) -> Spectrum | None:
    """One spectrum of the files one attempt's processes wrote: pytest-xdist's workers (their
    tests disjoint), and the Python and the C each test ran (one test, lines of both)."""
    if len(parts) <= 1:
        return parts[0] if parts else None
    return _merged([(part, dict(enumerate(part.tests))) for part in parts])


def _merged(kept: Sequence[tuple[Spectrum, dict[int, str]]]) -> Spectrum:
    """The lines of `kept`'s parts as their own tests (test index → node id) ran them."""
    tests: dict[str, int] = {}
    sets: dict[frozenset[int], int] = {}
    lines: dict[str, dict[int, set[int]]] = {}
    measured: dict[str, str] = {}
    for part, own in kept:
        measured.update(part.measured)
        number = {i: tests.setdefault(t, len(tests)) for i, t in own.items()}
        ran = [{number[i] for i in s if i in number} for s in part.sets]
        for path, at in part.files.items():
            held = lines.setdefault(path, {})
            for line, index in at.items():
                if ran[index]:
                    held.setdefault(line, set()).update(ran[index])
    files = {
        path: {line: sets.setdefault(frozenset(r), len(sets)) for line, r in at.items()}
        for path, at in lines.items()
    }
    return Spectrum(tuple(tests), tuple(sets), files, measured)


def suspicious_lines(
    spectrum: Spectrum,
    failing: Collection[str],
    passing: Collection[str],
    passed_in_suite: int | None = None,
) -> Suspicions:
    """Every line some failing test ran, with its suspicion. A test the spectrum did not
    record counts for nothing. `passed_in_suite`: how many tests passed in the whole suite,
    when the spectrum measured an even sample of them (`core/request/spectrum_sample.py`):
    each line's count of passing tests is scaled up by the sample's share, as its estimate for
    the suite."""
    index = {test: i for i, test in enumerate(spectrum.tests)}
    failed = frozenset(index[t] for t in failing if t in index)
    passed = frozenset(index[t] for t in passing if t in index) - failed
    scale = 1.0
    if passed and passed_in_suite is not None and passed_in_suite > len(passed):
        scale = passed_in_suite / len(passed)
    suite = len(passed) * scale
    telling = math.sqrt(suite / (len(failed) + suite)) if failed else 0.0
    by_set: dict[int, Suspicion] = {}
    for number, ran in enumerate(spectrum.sets):
        ef = len(ran & failed)
        if ef:
            ep = len(ran & passed)
            ochiai = ef / math.sqrt(len(failed) * (ef + ep * scale))
            by_set[number] = Suspicion(ochiai * telling, ochiai, ef, ep)
    lines = {
        (path, line): by_set[at]
        for path, at_lines in spectrum.files.items()
        for line, at in at_lines.items()
        if at in by_set
    }
    return Suspicions(lines, spectrum.measured)
