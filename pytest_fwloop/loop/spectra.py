"""The newest spectrum a whole-suite child wrote, read for localization (DESIGN.md §16).

The edge of `core/spectrum.py`: it finds the run's newest attempt that recorded which lines each
test ran (`rounds/NN/spectrum-K.json`, one file per process that ran tests), reads which of
those tests passed from the same attempt's `results-K.json`, and keeps both until a newer
attempt writes its own.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from pytest_fwloop.child.spectrum import spectrum_paths
from pytest_fwloop.core.spectrum import Spectrum, merged, read_spectrum

#: An attempt's file, or one of its pytest-xdist workers' (`spectrum-1.gw0.json`).
_ATTEMPT = re.compile(r"spectrum-(\d+)(?:\.[\w-]+)?\.json")


@dataclass
class Recorded:
    """One attempt's spectrum and the tests that passed in it."""

    spectrum: Spectrum
    passed: frozenset[str]


@dataclass
class SpectrumReader:
    """Reads `rounds/*/spectrum-K.json` of one run; `root` is the tree's root."""

    rounds: Path
    root: Path
    _read: tuple[tuple[str, ...], Recorded | None] = field(default=((), None))

    def newest(self) -> Recorded | None:
        """The newest attempt's spectrum; None when no attempt recorded one (pytest-cov or a
        debugger measured the run, coverage.py is missing, no whole-suite run yet)."""
        found = self._newest_files()
        if not found:
            return None
        key = tuple(f"{p}:{p.stat().st_mtime_ns}" for p in found)
        if key != self._read[0]:
            self._read = (key, self._load(found))
        return self._read[1]

    def _newest_files(self) -> list[Path]:
        if not self.rounds.is_dir():
            return []
        for folder in sorted(self.rounds.iterdir(), reverse=True):
            numbers = [
                int(m.group(1))
                for m in (_ATTEMPT.fullmatch(p.name) for p in folder.glob("spectrum-*.json"))
                if m is not None
            ]
            if numbers:
                return spectrum_paths(folder / f"spectrum-{max(numbers)}.json")
        return []

    def _load(self, files: list[Path]) -> Recorded | None:
        attempt = files[0].name.split(".", 1)[0].removeprefix("spectrum-")
        results = files[0].with_name(f"results-{attempt}.json")
        try:
            parts = [json.loads(p.read_text(encoding="utf-8")) for p in files]
            outcomes = json.loads(results.read_text(encoding="utf-8"))["tests"]
            passed = frozenset(str(t["nodeid"]) for t in outcomes if t.get("outcome") == "passed")
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None
        spectra: list[Spectrum] = []
        for part in parts:
            prefix = os.path.relpath(str(part.get("root", "")), self.root)
            if prefix.startswith(".."):
                continue  # a rootdir outside the tree: no line of it may be patched
            spectra.append(read_spectrum(part, "" if prefix == "." else f"{prefix}/"))
        spectrum = merged(spectra)
        if spectrum is None:
            return None
        return Recorded(spectrum, passed)
