"""The spectra the run's children wrote, read for localization (DESIGN.md §16).

The edge of `core/spectrum.py`: each attempt that ran tests recorded which lines each test ran
(`rounds/NN/spectrum-K.json`, one file per process that ran tests, and the C they ran in
`spectrum-K.gcov.json` when gcov measured it) beside its outcomes (`results-K.json`). An
attempt's files are joined; the attempts are overlaid, oldest first, so a test counts with its
last run: a focus run after a patch replaces what the whole-suite run before it said of its
tests, and keeps the rest.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from pytest_fwloop.child.spectrum import spectrum_paths
from pytest_fwloop.core.spectrum import Spectrum, joined, overlaid, read_spectrum

#: An attempt's file, one of its pytest-xdist workers' (`spectrum-1.gw0.json`), or the C its
#: tests ran (`spectrum-1.gcov.json`, `spectrum-1.gw0.gcov.json`: `child/gcov.py`).
_ATTEMPT = re.compile(r"spectrum-(\d+)(?:\.[\w.-]+)?\.json")


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
        """Each attempt's results file and spectrum files, oldest first."""
        if not self.rounds.is_dir():
            return []
        found: list[tuple[Path, list[Path]]] = []
        for folder in sorted(self.rounds.iterdir()):
            numbers = {
                int(m.group(1))
                for m in (_ATTEMPT.fullmatch(p.name) for p in folder.glob("spectrum-*.json"))
                if m is not None
            }
            for number in sorted(numbers):
                files = spectrum_paths(folder / f"spectrum-{number}.json")
                if files:
                    found.append((folder / f"results-{number}.json", files))
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
