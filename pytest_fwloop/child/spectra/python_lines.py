"""Which lines of the tree each test ran: the spectrum localization reads (DESIGN.md §16).

A failing test's traceback often names no line of the defect: a value comes out wrong and the
assertion fails in the test. The lines the failing tests ran and the passing ones did not are
then the best lead an engineer has (spectrum-based fault localization, `core/request/ochiai.py`).

Recorded with coverage.py (its C tracer, one dynamic context per test) in a loop child only,
and never over a measurement already running: pytest-cov, a debugger or any other tracer keeps
the process to itself, and the run goes on without a spectrum. What it writes, per process that
ran tests (each pytest-xdist worker its own file):

    {"root": "/abs/rootdir", "tests": [nodeid, ...], "sets": [[test index, ...], ...],
     "files": {"path/under/root.py": {"line": set index, ...}}}

Lines that ran the same tests share one set: most of a function's lines do.
"""

from __future__ import annotations

import json
import os
import sys
import warnings
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest

#: Folders under the root whose code is not the tree's own.
_NOT_OURS = ("site-packages", "dist-packages", "node_modules")


def spectrum_paths(path: Path) -> list[Path]:
    """Every file one attempt's processes wrote for `path` (xdist workers add their id)."""
    workers = path.parent.glob(f"{path.stem}.*{path.suffix}")
    return sorted([path, *workers]) if path.is_file() else sorted(workers)


def worker_path(path: Path, config: pytest.Config) -> Path:
    worker = getattr(config, "workerinput", {}).get("workerid")
    return path.with_name(f"{path.stem}.{worker}{path.suffix}") if worker else path


class SpectrumRecorder:
    """Measures each test's call with coverage.py, naming its lines by the test's node id."""

    def __init__(self, path: Path, config: pytest.Config) -> None:
        self.path = worker_path(path, config)
        self.root = config.rootpath
        self.test_globs = [str(g) for g in config.getini("python_files")]
        self.coverage: Any = None
        #: Every test measured, in order, whether or not it ran a line of the tree: a test run
        #: again counts with this run (`core/request/ochiai.overlaid`), lines or none.
        self.ran: dict[str, None] = {}
        self.prefix = f"{self.root}{os.sep}"
        #: Whether a fixture's file is the tree's own, by file name.
        self._ours: dict[str, bool] = {}

    @pytest.hookimpl(trylast=True)
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        if sys.gettrace() is not None:
            return  # pytest-cov, a debugger: their measurement is not ours to take over
        try:
            import coverage
        except ImportError:
            return
        if coverage.Coverage.current() is not None:
            return
        root = str(self.root)
        omit = [
            f"{root}/.*",
            f"{root}/*/.*",
            *(f"*/{folder}/*" for folder in _NOT_OURS),
            *(f"*/{glob}" for glob in self.test_globs),
            "*/conftest.py",
        ]
        self.coverage = coverage.Coverage(
            data_file=None, config_file=False, include=[f"{root}/*"], omit=omit, branch=False
        )

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> Generator[None, None, None]:
        """A test's set-up is measured when a fixture of the tree's own (a conftest's) takes
        part: its code may call the library. Else it is pytest's and the plugins' machinery
        alone, the slowest code to trace, for nothing (1,000 trivial tests: +90%)."""
        if not self._tree_fixtures(item):
            return (yield)
        return (yield from self._measured(item))

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Generator[None, None, None]:
        return (yield from self._measured(item))

    def _measured(self, item: pytest.Item) -> Generator[None, None, None]:
        cov = self.coverage
        if cov is None or sys.gettrace() is not None:  # a debugger the test itself started
            return (yield)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            cov.start()
        cov.switch_context(item.nodeid)
        self.ran[item.nodeid] = None
        try:
            return (yield)
        finally:
            cov.stop()

    def _tree_fixtures(self, item: pytest.Item) -> bool:
        info = getattr(item, "_fixtureinfo", None)
        for definitions in getattr(info, "name2fixturedefs", {}).values():
            for definition in definitions:
                code = getattr(getattr(definition, "func", None), "__code__", None)
                filename = getattr(code, "co_filename", "")
                ours = self._ours.get(filename)
                if ours is None:
                    ours = filename.startswith(self.prefix) and not any(
                        f"/{folder}/" in filename for folder in _NOT_OURS
                    )
                    self._ours[filename] = ours
                if ours:
                    return True
        return False

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self) -> None:
        cov, self.coverage = self.coverage, None
        if cov is None or not self.ran:
            return
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            data = cov.get_data()
        payload = encode(data, self.root, list(self.ran))
        self.path.parent.mkdir(parents=True, exist_ok=True)
        partial = self.path.with_suffix(".partial")
        partial.write_text(json.dumps(payload, separators=(",", ":")), encoding="utf-8")
        os.replace(partial, self.path)


def encode(data: Any, root: Path, measured: list[str]) -> dict[str, Any]:
    """coverage.py's data as the spectrum file holds it: lines by the tests that ran them;
    `measured` lists every test measured, those that ran no line of the tree too."""
    tests = {test: number for number, test in enumerate(measured)}
    sets: dict[tuple[int, ...], int] = {}
    files: dict[str, dict[str, int]] = {}
    for filename in sorted(data.measured_files()):
        try:
            relative = Path(filename).relative_to(root).as_posix()
        except ValueError:
            continue
        lines: dict[str, int] = {}
        for line, contexts in sorted(data.contexts_by_lineno(filename).items()):
            ran = tuple(sorted({tests.setdefault(c, len(tests)) for c in contexts if c}))
            if ran:
                lines[str(line)] = sets.setdefault(ran, len(sets))
        if lines:
            files[relative] = lines
    return {
        "root": str(root),
        "tests": list(tests),
        "sets": [list(s) for s in sets],
        "files": files,
    }
