"""The spectra the run's children wrote, read for localization (DESIGN.md §16).

The edge of `core/request/ochiai.py`: a run that recorded which lines each test ran wrote them
beside its outcomes, one file per process that ran tests (and the C they ran in
`*.gcov.json` beside it, when gcov measured it; an attempt's files are joined): a patch's test run
`rounds/NN/spectrum-K.json` (with `results-K.json`), the last flaky rerun of a test run that
recorded none `rounds/NN/spectrum-flaky-K.json` (with `flaky-K-results.json`), the spectrum run
before a coder call `rounds/NN/spectrum-run-K.json` (with `spectrum-run-K-results.json`; it comes
before its round's test run). Read oldest first, a test counts with its last run: a focus run
after a patch replaces what the runs before it said of its tests, and keeps the rest.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from pytest_fwloop.child.spectra.python_lines import spectrum_paths
from pytest_fwloop.core.request.ochiai import Spectrum, joined, overlaid, read_spectrum

#: An attempt's file, one of its pytest-xdist workers' (`spectrum-1.gw0.json`), or the C its
#: tests ran (`spectrum-1.gcov.json`, `spectrum-1.gw0.gcov.json`: `child/spectra/gcov.py`).
_ATTEMPT = re.compile(r"spectrum-(\d+)(?:\.[\w.-]+)?\.json")
#: A spectrum run's file, or one of its workers' or its C's (`spectrum-run-1.gw0.gcov.json`).
_SPECTRUM_RUN = re.compile(r"spectrum-run-(\d+)(?:\.[\w.-]+)?\.json")
#: The last flaky rerun of an attempt that recorded no spectrum, which records one
#: (`spectrum-flaky-2.json`: the first attempt's second rerun; `spectrum-flaky-2-2.json`: the
#: second attempt's), or one of its workers' or its C's.
_RERUN = re.compile(r"spectrum-(flaky(?:-(\d+))?-\d+)(?:\.[\w.-]+)?\.json")
#: The stem of a spectrum run's files in its round folder (`spectrum-run-K.log`, ...).
SPECTRUM_RUN = "spectrum-run"
#: Where the outcomes of each kind of recording are, by the name its pattern matched.
_RESULTS = {
    _ATTEMPT: "results-{}.json",
    _SPECTRUM_RUN: "spectrum-run-{}-results.json",
    _RERUN: "{}-results.json",
}


@dataclass
class Recorded:
    """The run's spectra overlaid, and the tests whose last outcome was a pass."""

    spectrum: Spectrum
    passed: frozenset[str]


@dataclass
class SpectrumReader:
    """Reads `rounds/*/spectrum-K.json` of one run; `root` is the tree's root."""

    rounds: Path
    root: Path
    _read: tuple[tuple[str, ...], Recorded | None] = field(default=((), None))

    def newest(self) -> Recorded | None:
        """Every test's lines as it ran them last, and the tests that passed then; None when
        no attempt recorded a spectrum (pytest-cov or a debugger measured the runs, no
        coverage.py, no tests run yet)."""
        found = self._attempts()
        if not found:
            return None
        key = tuple(f"{p}:{p.stat().st_mtime_ns}" for _, files in found for p in files)
        if key != self._read[0]:
            self._read = (key, self._load(found))
        return self._read[1]

    def _attempts(self) -> list[tuple[Path, list[Path]]]:
        """Each recording run's results file and spectrum files, oldest first."""
        if not self.rounds.is_dir():
            return []
        found: list[tuple[Path, list[Path]]] = []
        for folder in sorted(self.rounds.iterdir()):
            found += recorded_in(folder, spectrum_runs=True) + recorded_in(folder)
        return found

    def _load(self, attempts: list[tuple[Path, list[Path]]]) -> Recorded | None:
        spectra: list[Spectrum] = []
        outcomes: dict[str, str] = {}
        for results, files in attempts:
            try:
                tests = json.loads(results.read_text(encoding="utf-8"))["tests"]
                these = {str(t["nodeid"]): str(t["outcome"]) for t in tests}
                parts = [self._part(json.loads(p.read_text(encoding="utf-8"))) for p in files]
            except (OSError, ValueError, KeyError, TypeError, AttributeError):
                continue  # an attempt cut short (its child killed) leaves the others
            outcomes.update(these)
            spectrum = joined([part for part in parts if part is not None])
            if spectrum is not None:
                spectra.append(spectrum)
        spectrum = overlaid(spectra)
        if spectrum is None:
            return None
        passed = frozenset(test for test, outcome in outcomes.items() if outcome == "passed")
        return Recorded(spectrum, passed)

    def _part(self, payload: dict[str, object]) -> Spectrum | None:
        prefix = os.path.relpath(str(payload.get("root", "")), self.root)
        if prefix.startswith(".."):
            return None  # a rootdir outside the tree: no line of it may be patched
        return read_spectrum(payload, "" if prefix == "." else f"{prefix}/")


def recorded_in(folder: Path, spectrum_runs: bool = False) -> list[tuple[Path, list[Path]]]:
    """The (results file, spectrum files) of a round's spectrum runs, or of its test runs (each
    followed by its traced flaky rerun, `spectrum-flaky-K.json`), in the order they ran."""
    if spectrum_runs:
        found = _numbered(folder, _SPECTRUM_RUN, lambda m: (int(m[1]),), "spectrum-run-{}")
    else:
        found = _numbered(folder, _ATTEMPT, lambda m: (int(m[1]), 0), "spectrum-{}")
        found += _numbered(folder, _RERUN, lambda m: (int(m[2] or 1), 1), "spectrum-{}")
    return [(results, files) for _, results, files in sorted(found)]


def _numbered(
    folder: Path,
    pattern: re.Pattern[str],
    order: Callable[[re.Match[str]], tuple[int, ...]],
    stem: str,
) -> list[tuple[tuple[int, ...], Path, list[Path]]]:
    """Each recording `pattern` names in `folder`: its place in the round, results, files."""
    names = {
        m[1]: order(m)
        for m in (pattern.fullmatch(p.name) for p in folder.glob("spectrum-*.json"))
        if m is not None
    }
    found = []
    for name, place in names.items():
        files = spectrum_paths(folder / f"{stem.format(name)}.json")
        if files:
            found.append((place, folder / _RESULTS[pattern].format(name), files))
    return found


def measured_on_tree(rounds: Path, number: int) -> set[str]:
    """The tests whose lines were recorded on the tree iteration `number` starts from: by the
    test run of the latest round before it that ran tests (a patch's run, after its patch), and
    by this round's spectrum runs. An older recording ran an older tree."""
    parts: list[tuple[Path, list[Path]]] = recorded_in(rounds / f"{number:02d}", True)
    earlier = [
        folder
        for folder in (rounds.iterdir() if rounds.is_dir() else [])
        if folder.name.isdigit() and int(folder.name) < number and any(folder.glob("pytest*.log"))
    ]
    if earlier:
        parts += recorded_in(max(earlier, key=lambda folder: int(folder.name)))
    tests: set[str] = set()
    for _, files in parts:
        for path in files:
            try:
                tests.update(str(t) for t in json.loads(path.read_text(encoding="utf-8"))["tests"])
            except (OSError, ValueError, KeyError, TypeError):
                continue
    return tests
