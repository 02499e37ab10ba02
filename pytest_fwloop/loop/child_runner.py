"""Each TEST_RUN's child pytest (DESIGN.md §2): its environment, its log, its records.

The child runs the user's own arguments plus the reporting plugin's, from the directory pytest
was invoked in, in a process of its own (`child_start`: a fork or `python -m pytest`), so
patched code is imported afresh and a crash cannot take the loop down.
"""

from __future__ import annotations

import fnmatch
import functools
import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_fwloop.child.files import Attempt, gcov_folder, next_attempt, progress_path
from pytest_fwloop.child.progress import ProgressWatcher
from pytest_fwloop.child.start import ForkedChild, ForkGuard, fork_pytest
from pytest_fwloop.config.option_table import (
    CHILD_GCOV_FLAG,
    CHILD_JUNIT_FLAG,
    CHILD_QEMU_FLAG,
    CHILD_REPORT_FLAG,
    CHILD_SELECT_FLAG,
    CHILD_SPECTRUM_FLAG,
)
from pytest_fwloop.config.settings import LoopSettings
from pytest_fwloop.core.records.child_env import CONSOLE_LOG_DIR_ENV, REVIEW_ENV, TEST_PLAN_ENV
from pytest_fwloop.core.suite.collection import Collection, collection_paths
from pytest_fwloop.loop.rundir import RunRecorder
from pytest_fwloop.loop.terminal import Terminal
from pytest_fwloop.procs.supervision import (
    ProcessResult,
    Supervised,
    addopts_without_loop,
    spawn_logged,
    stop_group,
    supervise,
)

if TYPE_CHECKING:
    from pytest_fwloop.child.rewrite_cache import RewriteCache
    from pytest_fwloop.core.suite.flaky import Reruns
    from pytest_fwloop.core.suite.results import IterationResults


#: What the tester's pre-check leaves in the round's folder: the selection, the child's log, its
#: results (TESTER_PRECHECK's evidence, each that was written).
PRECHECK_SELECT, PRECHECK_LOG, PRECHECK_RESULTS = (
    "tester-select.txt",
    "precheck.log",
    "precheck-results.json",
)
PRECHECK_FILES = (PRECHECK_SELECT, PRECHECK_LOG, PRECHECK_RESULTS)


def precheck_files(folder: Path) -> list[str]:
    """The files a tester pre-check wrote in a round's folder: its sub-state's evidence."""
    return [name for name in PRECHECK_FILES if (folder / name).is_file()]


def conftest_dirs(collection: Collection, rootdir: Path) -> list[str]:
    """The folders holding a conftest.py that a whole run could load, relative to the rootdir,
    found as pytest walks its roots: hidden folders, `norecursedirs` and virtual environments
    are not entered."""
    found = set()
    for root in collection.roots:
        for folder, subdirs, files in os.walk(root):
            subdirs[:] = [
                name
                for name in subdirs
                if not name.startswith(".")
                and not any(fnmatch.fnmatch(name, p) for p in collection.norecursedirs)
                and not os.path.isfile(os.path.join(folder, name, "pyvenv.cfg"))
            ]
            if "conftest.py" in files:
                found.add(Path(os.path.relpath(folder, rootdir)).as_posix())
    return sorted(found)


def child_env(console: Path) -> dict[str, str]:
    """The environment of a child pytest whose console logs go to `console`: the controller's,
    without the loop's own options or another run's verdict and plan."""
    env = dict(os.environ)
    env[CONSOLE_LOG_DIR_ENV] = str(console)
    # A controller started inside a pytest-xdist worker must not make its child one too.
    for name in (REVIEW_ENV, TEST_PLAN_ENV, "PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT"):
        env.pop(name, None)
    env["PYTEST_ADDOPTS"] = addopts_without_loop(env.get("PYTEST_ADDOPTS", ""))
    env["PYTHONUNBUFFERED"] = "1"  # pytest.log fills as the tests run
    return env


def read_results(path: Path) -> IterationResults:
    """A child's results file, validated. The models are imported on first use: pydantic's
    import is not on the way to a baseline started ahead (`loop_main`), nor does a forked child
    inherit it."""
    from pytest_fwloop.core.suite.results import IterationResults

    return IterationResults.read(path)


@dataclass(frozen=True)
class Running:
    """A child pytest started and not yet waited for."""

    args: list[str]
    log: Path
    process: Supervised
    started: float


class ChildRunner:
    """Starts child runs for one loop run; every file they write is redacted afterwards.

    The baseline's child may be started before the controller is built (`start_baseline`), so
    that the controller's own imports and set-up overlap the tests; the run that asks for
    exactly that child then takes it over instead of starting one."""

    def __init__(
        self,
        settings: LoopSettings,
        recorder: RunRecorder,
        abort: threading.Event,
        terminal: Terminal,
        rewrites: RewriteCache | None = None,
    ) -> None:
        self.settings = settings
        self.recorder = recorder
        self.abort = abort
        self.terminal = terminal
        self.rewrites = rewrites
        self.fork_guard = ForkGuard(settings.options.child_start)
        self._head: tuple[Attempt, Running] | None = None
        self._said: set[str] = set()
        self._notes: list[str] = []
        #: The folders holding a conftest.py a whole run could load (`conftest_dirs`), once.
        self._conftests: list[str] | None = None

    def attempt_args(
        self, folder: Path, attempt: Attempt, selection: Path | None, spectrum: bool = False
    ) -> list[str]:
        """The reporting arguments of one attempt: its records, JUnit XML and HTML report.
        The JUnit XML is pytest's own when the user asked for one (it is delivered to them),
        else the child writes it from its records, for a fraction of the cost. With `spectrum`
        it also records which lines each test ran (DESIGN.md §16), for localization."""
        junit = CHILD_JUNIT_FLAG if self.settings.reports.junit is None else "--junitxml"
        args = [
            f"{CHILD_REPORT_FLAG}={attempt.results}",
            f"{junit}={attempt.junit}",
            *self.settings.reports.child_args(
                attempt.html,
                self.recorder.run_id,
                int(folder.name),  # rounds/NN
            ),
        ]
        if spectrum:
            args += self.spectrum_args(attempt.spectrum)
        if selection is not None:
            args += self.selection_args(selection)
        return args

    def spectrum_args(self, spectrum: Path) -> list[str]:
        """The arguments of a child that records which lines each test ran into `spectrum`:
        the Python's, and the C's by the tools `fwloop_c_coverage` names."""
        args = [f"{CHILD_SPECTRUM_FLAG}={spectrum}"]
        tools = self.settings.options.c_coverage.split("+")
        if "gcov" in tools:
            args.append(f"{CHILD_GCOV_FLAG}={gcov_folder(spectrum)}")
        if "qemu" in tools:
            args.append(f"{CHILD_QEMU_FLAG}={gcov_folder(spectrum, 'qemu')}")
        return args

    def selection_args(self, selection: Path) -> list[str]:
        """The arguments of a child that runs only the node ids listed in `selection`: the list
        and, where the user's arguments allow (`core.collection`), the selected tests' files,
        so that pytest collects those modules alone; where not, the trace says why, once."""
        args = [f"{CHILD_SELECT_FLAG}={selection}"]
        rootdir, collection = self.settings.rootdir, self.settings.collection
        wanted = [n for n in selection.read_text(encoding="utf-8").split("\n") if n]
        # A selected test whose file is gone is collected by neither way (`no longer collected`).
        present = [n for n in wanted if (rootdir / n.partition("::")[0]).is_file()]
        if self._conftests is None:
            self._conftests = conftest_dirs(collection, rootdir)
        files, why = collection_paths(present, collection, self._conftests)
        if why:
            self._say_once(f"a child running selected tests collects as a whole run: {why}")
        if not files or collection.inifile is None:
            return args
        pinned = [f"--rootdir={rootdir}", "-c", collection.inifile]
        return [*args, *pinned, *(str(rootdir / file) for file in files)]

    def _say_once(self, note: str) -> None:
        if note not in self._said:
            self._said.add(note)
            self._notes.append(note)

    def start_baseline(self) -> None:
        """Start iteration 1's whole-suite child now, as TEST_RUN will ask for it: for a new run
        with no build step nothing comes between the baseline snapshot and these tests."""
        folder = self.recorder.round_path(1)
        attempt = next_attempt(folder)
        args = self.attempt_args(folder, attempt, None)
        try:
            self._head = (attempt, self._start(1, args, attempt.log, None, None))
        except OSError:
            self._head = None  # TEST_RUN starts it, and reports what stops it

    @property
    def head(self) -> Running | None:
        """The child started ahead that no TEST_RUN has taken over yet."""
        return self._head[1] if self._head is not None else None

    def head_attempt(self, folder: Path) -> Attempt | None:
        """The files of the child started ahead for this round, if one is waiting."""
        if self._head is not None and self._head[0].log.parent == folder:
            return self._head[0]
        return None

    def take_notes(self) -> list[str]:
        """What the child runs since the last call want said in the trace."""
        notes, self._notes = self._notes, []
        return notes

    def stop_head_start(self) -> None:
        """Stop a child started ahead that no TEST_RUN took over (the run ended before it)."""
        if self._head is not None:
            stop_group(self._head[1].process)
            self._head = None

    def run(
        self,
        iteration: int,
        args: list[str],
        log: Path,
        review: Path | None,
        plan: Path | None,
        timeout: float,
        results: Path | None = None,
    ) -> ProcessResult:
        """One child pytest with the user's arguments plus `args` (`child_start`: forked or
        spawned); with `results`, its progress stream is shown live on the terminal."""
        running = self._take_head(args, log, review, plan)
        if running is None:
            running = self._start(iteration, args, log, review, plan)
        if results is None:
            result = supervise(running.process, running.started, timeout, self.abort)
        else:
            # The watcher's thread starts after the child: a fork must find one thread only.
            show = functools.partial(self.terminal.progress, iteration)
            try:
                with ProgressWatcher(progress_path(results), show):
                    result = supervise(running.process, running.started, timeout, self.abort)
            finally:
                self.terminal.end_progress()
        if isinstance(running.process, ForkedChild):
            self.fork_guard.learn(running.process.learned())
            if self.rewrites is not None:
                self.rewrites.learn(running.process.rewritten())
        return result

    def _take_head(
        self, args: list[str], log: Path, review: Path | None, plan: Path | None
    ) -> Running | None:
        if self._head is None:
            return None
        running = self._head[1]
        if (running.args, running.log, review, plan) != (args, log, None, None):
            self.stop_head_start()  # not the child asked for: never two at once
            return None
        self._head = None
        return running

    def _start(
        self, iteration: int, args: list[str], log: Path, review: Path | None, plan: Path | None
    ) -> Running:
        folder = self.recorder.round_path(iteration)
        env = child_env(folder / "console")
        if review is not None:
            env[REVIEW_ENV] = str(review)
        if plan is not None:
            env[TEST_PLAN_ENV] = str(plan)
        argv = [*self.settings.child_args, *args]
        cwd = self.settings.invocation_dir
        refusal, cache = self.fork_guard.refusal()  # may first import what the last one did
        if refusal is not None and self.fork_guard.can_fork:
            # A run that could fork and does not is slower: the trace says why, once.
            self._say_once(f"child pytest spawned, not forked: {refusal}")
        started = time.monotonic()
        process: Supervised
        if refusal is None:
            log.parent.mkdir(parents=True, exist_ok=True)
            installed = self.fork_guard.installed
            codes = self.rewrites.codes if self.rewrites is not None else None
            process = fork_pytest(
                argv,
                cwd=cwd,
                env=env,
                log_path=log,
                cache=cache,
                installed=installed,
                codes=codes,
            )
            if self.rewrites is not None:  # while the child runs: for the forks after it
                self.rewrites.fill(stop=lambda: process.poll() is not None)
        else:
            command = [sys.executable, "-m", "pytest", *argv]
            process = spawn_logged(command, cwd=cwd, log_path=log, env=env)
        return Running(args, log, process, started)

    def run_tree(self, tree: Path, args: list[str], log: Path, timeout: float) -> ProcessResult:
        """One child pytest in another copy of the tree (a candidate's scratch tree): spawned,
        never forked, from the folder there that pytest was started in, with the user's
        arguments pointed at that copy and its rootdir and ini file pinned to it."""
        root = self.settings.rootdir
        inifile = self.settings.collection.inifile
        pinned = [f"--rootdir={tree}"]
        if inifile is not None and Path(inifile).is_relative_to(root):
            pinned += ["-c", str(tree / Path(inifile).relative_to(root))]
        user = [arg.replace(str(root), str(tree)) for arg in self.settings.child_args]
        cwd = self.settings.invocation_dir
        cwd = tree / cwd.relative_to(root) if cwd.is_relative_to(root) else tree
        command = [sys.executable, "-m", "pytest", *user, *pinned, *args]
        env = child_env(log.parent / "console")
        started = time.monotonic()
        process = spawn_logged(command, cwd=cwd, log_path=log, env=env)
        return supervise(process, started, timeout, self.abort)

    def precheck(
        self,
        folder: Path,
        select: list[str],
        run: Callable[[list[str], Path], ProcessResult],
    ) -> str:
        """Run the tester's selection first, as a quick signal; a one-line note of how it went.
        It never replaces the full run after it, which is the one that counts."""
        selection = self.recorder.write_text(
            f"{self.recorder.relative(folder)}/{PRECHECK_SELECT}", "\n".join(select) + "\n"
        )
        results_path = folder / PRECHECK_RESULTS
        run(
            [f"{CHILD_REPORT_FLAG}={results_path}", *self.selection_args(selection)],
            folder / PRECHECK_LOG,
        )
        try:
            results = read_results(results_path)
        except (OSError, ValueError):
            return "tester pre-check wrote no results (see precheck.log)"
        return (
            f"tester pre-check: {results.pass_count}/{results.total_count} selected test(s) passed"
        )

    def rerun_failures(
        self,
        folder: Path,
        attempt: Attempt,
        previous: IterationResults | None,
        run: Callable[[list[str], Path], ProcessResult],
        trace: bool = False,
    ) -> tuple[Reruns, str]:
        """Rerun the attempt's new failures up to `fwloop_flaky_reruns` times with no code change
        (`flaky-K.log`, `flaky-K-select.txt`, `flaky-K-results.json`, `flaky-2-K…` for a second
        attempt): what the reruns found, and a note. With `trace` (an attempt that recorded no
        spectrum), the last rerun allowed also runs a sample of the attempt's passing tests and
        records which lines each test ran (`spectrum-flaky-K.json`): the spectrum the coder's
        localization needs, in a child that starts anyway (docs/providers.md)."""
        from pytest_fwloop.core.suite.flaky import (  # pydantic: `read_results`
            Reruns,
            rerun_candidates,
        )

        reruns = Reruns()
        try:
            first = read_results(attempt.results)
        except (OSError, ValueError):
            return reruns, ""
        known = self.settings.endings.known_failures
        failing = [
            nodeid
            for nodeid in rerun_candidates(first, previous, str(self.settings.rootdir))
            if nodeid not in known
        ]
        asked, sampled = len(failing), 0
        prefix = "flaky" + attempt.log.stem.removeprefix("pytest")
        last = self.settings.options.flaky_reruns
        for k in range(1, last + 1):
            if not failing:
                break
            args: list[str] = []
            chosen = failing
            if trace and k == last:
                from pytest_fwloop.core.request.spectrum_sample import passing_sample

                passing = [t.nodeid for t in first.tests if t.outcome == "passed"]
                sample = passing_sample(failing, passing)
                chosen, sampled = [*failing, *sample], len(sample)
                args = self.spectrum_args(folder / f"spectrum-{prefix}-{k}.json")
            selection = self.recorder.write_text(
                f"{self.recorder.relative(folder)}/{prefix}-{k}-select.txt",
                "\n".join(chosen) + "\n",
            )
            report = folder / f"{prefix}-{k}-results.json"
            run(
                [f"{CHILD_REPORT_FLAG}={report}", *args, *self.selection_args(selection)],
                folder / f"{prefix}-{k}.log",
            )
            try:
                rerun = read_results(report)
            except (OSError, ValueError):
                break
            failing = reruns.take(k, failing, rerun)
        if not asked:
            return reruns, ""
        note = f"flaky reruns: {asked} new failure(s) rerun, {len(reruns.flaky)} passed (flaky)"
        if sampled:
            note += (
                f"; the last also ran {sampled} passing test(s), recording the lines each test"
                " ran for localization"
            )
        return reruns, note

    def scrub(self, folder: Path) -> None:
        """Redact what the child runs and commands wrote themselves: logs, results, JUnit XML
        and console transcripts carry the tests' own output, which may print a secret."""
        for path in folder.rglob("*"):
            self.recorder.scrub(path)
