"""Where a child run's files go, shared by the child (no pydantic there) and the controller."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


def progress_path(results_path: Path) -> Path:
    """Where the child streams its progress, next to the results file it writes at the end."""
    return results_path.with_suffix(".jsonl")


@dataclass(frozen=True)
class Attempt:
    """The files of one full child run of an iteration. Each attempt keeps its own raw record
    (an environment rerun writes `pytest-2.log`, `results-2.json`, `junit-2.xml`);
    `results.json` is the iteration's merged one."""

    log: Path
    results: Path
    junit: Path
    html: Path
    #: Which lines each test ran (`child/spectra/python_lines.py`), when localization asks for it.
    spectrum: Path


def gcov_folder(spectrum: Path, tool: str = "gcov") -> Path:
    """Where the tests of the attempt writing `spectrum` keep what `tool` recorded until it is read
    (`child/spectra/gcov.py`, `child/spectra/qemu_blocks.py`): `rounds/NN/gcov-K/`,
    `rounds/NN/qemu-K/` (`gcov-run-K/` for the spectrum run's `spectrum-run-K.json`), removed
    once the C spectrum is written."""
    return spectrum.with_name(f"{tool}-{spectrum.stem.removeprefix('spectrum-')}")


def next_attempt(folder: Path) -> Attempt:
    number = len(list(folder.glob("pytest*.log"))) + 1
    suffix = "" if number == 1 else f"-{number}"
    results = folder / f"results-{number}.json"
    results.unlink(missing_ok=True)
    return Attempt(
        folder / f"pytest{suffix}.log",
        results,
        folder / f"junit{suffix}.xml",
        folder / f"report{suffix}.html",
        folder / f"spectrum-{number}.json",
    )
