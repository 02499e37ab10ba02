"""Forked children: decided by plain rules, and indistinguishable from spawned ones where a test
could tell (DESIGN.md §2: patched code imported afresh, a crash cannot take the loop down)."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import ModuleType

import pytest

from loopkit import APPROVE, CALC, LoopProject, calc_fix_patches, coder_answer
from pytest_fwloop.child.files import Attempt
from pytest_fwloop.child.start import (
    COARSE_MTIME_MARGIN_NS,
    MTIME_MARGIN_NS,
    FileStamp,
    ForkGuard,
    ModuleCache,
    changed_since,
    fork_refusal,
)
from pytest_fwloop.config.settings import load_settings
from pytest_fwloop.core.records.redaction import Redactor
from pytest_fwloop.loop.child_runner import ChildRunner
from pytest_fwloop.loop.rundir import RunRecorder
from pytest_fwloop.loop.terminal import Terminal

STARTED = 1_000_000_000_000_000_000
OLD = FileStamp(device=1, inode=7, size=100, mtime_ns=STARTED - 3600 * 10**9)


@pytest.mark.parametrize(
    ("now", "changed"),
    [
        (OLD, False),
        (None, True),  # gone
        (FileStamp(1, 8, 100, OLD.mtime_ns), True),  # replaced: another inode
        (FileStamp(1, 7, 101, OLD.mtime_ns), True),  # rewritten in place, its mtime kept
        (FileStamp(1, 7, 100, STARTED + 5), True),  # touched since the start
    ],
)
def test_a_file_counts_as_changed_when_a_fresh_interpreter_could_read_it_differently(
    now: FileStamp | None, changed: bool
) -> None:
    assert changed_since({"/m.py": OLD}, {"/m.py": now}, STARTED) == (["/m.py"] if changed else [])


@pytest.mark.parametrize(
    ("mtime_ns", "changed"),
    [(STARTED - MTIME_MARGIN_NS + 1, True), (STARTED - MTIME_MARGIN_NS - 1, False)],
)
def test_a_file_first_seen_touched_just_before_the_start_may_have_changed_after_its_import(
    mtime_ns: int, changed: bool
) -> None:
    """Coarse file system clocks round down: the margin keeps such a file out of the fork."""
    seen = FileStamp(1, 7, 100, mtime_ns)
    assert changed_since({"/m.py": seen}, {"/m.py": seen}, STARTED) == (
        ["/m.py"] if changed else []
    )


@pytest.mark.parametrize(
    ("mtime_ns", "changed"),
    [
        (STARTED - 10**9 + 123_456_789, False),  # installed a second before, to the nanosecond
        (STARTED - 10**9, True),  # a second before, on a file system that keeps whole seconds
        (STARTED - COARSE_MTIME_MARGIN_NS - 10**9, False),
    ],
)
def test_the_margin_follows_the_file_systems_clock(mtime_ns: int, changed: bool) -> None:
    seen = FileStamp(1, 7, 100, mtime_ns)
    assert changed_since({"/m.py": seen}, {"/m.py": seen}, STARTED) == (
        ["/m.py"] if changed else []
    )


def test_changed_files_are_named_in_order() -> None:
    loaded = {"/b.py": OLD, "/a.py": OLD, "/c.py": OLD}
    now = {"/b.py": None, "/a.py": None, "/c.py": OLD}
    assert changed_since(loaded, now, STARTED) == ["/a.py", "/b.py"]


@pytest.mark.parametrize(
    ("setting", "linux", "threads", "changed", "why"),
    [
        ("auto", True, 1, [], None),
        ("spawn", True, 1, [], "fwloop_child_start = spawn"),
        ("auto", False, 1, [], "forked children need Linux (/proc and PR_SET_PDEATHSIG)"),
        ("auto", True, 3, [], "the controller runs 3 threads"),
        ("auto", True, 1, ["/x.so"], "/x.so changed since the controller loaded it"),
        (
            "auto",
            True,
            1,
            ["/x.so", "/y.py", "/z.py"],
            "/x.so and 2 more changed since the controller loaded it",
        ),
    ],
)
def test_why_a_child_is_spawned(
    setting: str, linux: bool, threads: int, changed: list[str], why: str | None
) -> None:
    assert fork_refusal(setting=setting, linux=linux, threads=threads, changed=changed) == why


def _module(name: str, file: str | None) -> ModuleType:
    module = ModuleType(name)
    if file is not None:
        module.__file__ = file
    return module


def test_a_fork_drops_the_users_modules_and_keeps_the_rest_checked() -> None:
    modules = {
        "serial": _module("serial", "/site/serial/__init__.py"),
        "conftest": _module("conftest", "/proj/conftest.py"),
        "fw.calc": _module("fw.calc", "/proj/fw/calc.py"),
        # An extension cannot be imported twice in one process: kept, so checked.
        "fw._host": _module("fw._host", "/proj/fw/_host.cpython-311-x86_64-linux-gnu.so"),
        "builtin_like": _module("builtin_like", None),
        "__main__": _module("__main__", "/proj/run.py"),
    }
    cache = ModuleCache.of(modules, ("/site",))
    assert cache.users == ("conftest", "fw.calc")
    assert cache.kept_files == (
        "/proj/fw/_host.cpython-311-x86_64-linux-gnu.so",
        "/site/serial/__init__.py",
    )


def test_the_guard_refuses_a_fork_once_a_kept_module_or_mapped_library_changed(
    tmp_path: Path,
) -> None:
    """Stamped at the first decision, compared at each later one; the start time bounds a
    file touched just before the controller started. A mapping whose file is gone for good
    (libffi's trampolines) cannot be loaded again and is passed over; one whose path holds a
    new file (a rebuilt library) counts."""
    kept = tmp_path / "site" / "lib.py"
    kept.parent.mkdir()
    kept.write_text("A = 1\n")
    long_ago = time.time() - 3600
    os.utime(kept, (long_ago, long_ago))
    library = tmp_path / "site" / "host.so"  # a mapped library, say a ctypes-loaded build
    library.write_bytes(b"\x7fELF")
    os.utime(library, (long_ago, long_ago))
    replaced = tmp_path / "site" / "old.so"  # mapped, then deleted and written again
    replaced.write_bytes(b"\x7fELF")
    gone = tmp_path / "site" / "trampoline"  # mapped, deleted, never written again (libffi)
    mapped = ([str(library)], [str(gone)])
    guard = ForkGuard("auto", installed=(str(tmp_path / "site"),), mapped=lambda: mapped)
    cache = ModuleCache((), (str(kept),))
    assert guard.changed(cache) == []
    kept.write_text("A = 22\n")
    os.utime(kept, (long_ago, long_ago))  # even with its old time: the size tells
    assert guard.changed(cache) == [str(kept)]

    fresh = tmp_path / "site" / "new.py"
    fresh.write_text("B = 1\n")  # written now, after the start: first seen already suspect
    assert guard.changed(ModuleCache((), (str(fresh),))) == [str(fresh)]

    library.write_bytes(b"\x7fELF rebuilt")
    os.utime(library, (long_ago, long_ago))
    mapped = ([str(library)], [str(gone), str(replaced)])
    assert guard.changed(ModuleCache((), ())) == [str(library), str(replaced)]


# A controller in its own process: `installed` was installed just before it started, `edited`
# long before, and edited after the controller imported it.
FRESH_INSTALL = """
import sys
from pathlib import Path
from pytest_fwloop.child.start import ForkGuard, ModuleCache

site = Path(sys.argv[1])
sys.path.insert(0, str(site))
import installed, edited

guard = ForkGuard("auto", installed=(str(site),), mapped=lambda: ([], []))
cache = ModuleCache((), (installed.__file__, edited.__file__))
(site / "edited.py").write_text("A = 2\\n")  # same size: only its time tells
first = guard.changed(cache)
(site / "installed.py").write_text("B = 22\\n")
print([Path(p).name for p in first], [Path(p).name for p in guard.changed(cache)])
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="forks only on Linux")
def test_a_file_installed_before_the_controller_started_does_not_stop_forks(
    tmp_path: Path,
) -> None:
    """`pip install -e .` then `pytest --fwloop`: what pip wrote a moment before is what the
    controller loaded. A file edited after the controller imported it counts, whether before
    the first fork decision (its time says so) or after (its stamp does)."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "edited.py").write_text("A = 1\n")
    long_ago = time.time_ns() - 3600 * 10**9
    os.utime(site / "edited.py", ns=(long_ago, long_ago))
    (site / "installed.py").write_text("B = 1\n")
    moment_ago = time.time_ns() - 700_000_000
    moment_ago += 1 if moment_ago % 10**9 == 0 else 0  # to the nanosecond, as pip's files
    os.utime(site / "installed.py", ns=(moment_ago, moment_ago))
    done = subprocess.run(
        [sys.executable, "-c", FRESH_INSTALL, str(site)], capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "['edited.py'] ['edited.py', 'installed.py']"


JOINS = """
import threading
from pytest_fwloop.child.start import settled_thread_count
counted = []
for _ in range(2000):
    thread = threading.Thread(target=lambda: None)
    thread.start()
    thread.join()
    counted.append(settled_thread_count())
print(max(counted))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="forks only on Linux")
def test_a_thread_python_has_joined_no_longer_counts() -> None:
    """`join` returns a moment before the kernel ends the thread: counted from /proc at once it
    is still there after some joins, and the fork would be refused, the warm-up skipped. (In a
    fresh interpreter: pytest's and xdist's own threads would count here.)"""
    done = subprocess.run([sys.executable, "-c", JOINS], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "1"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="forks only on Linux")
def test_the_guard_refuses_a_fork_while_another_thread_runs() -> None:
    guard = ForkGuard("auto")
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait)
    thread.start()
    try:
        threads = len(os.listdir("/proc/self/task"))
        why, _ = guard.refusal()
    finally:
        stop.set()
        thread.join()
    assert why == f"the controller runs {threads} threads"


# What the child itself sees, dumped by the suite's conftest in every child session.
PROBE_CONFTEST = """\
import json, os, signal, stat, sys, threading, time
from pathlib import Path

from fw import calc  # imported by the controller too, when pytest loads this conftest

IMPORTED_BY = os.getpid()


def pytest_sessionfinish(session):
    fds = {}
    for name in os.listdir("/proc/self/fd"):
        try:
            fds[name] = os.readlink(f"/proc/self/fd/{name}")
        except OSError:
            pass
    # The run's watchdog holds the read end of the controller's pipe as its stdin.
    token = os.environ["FWLOOP_RUN_OWNER"]
    watchdog = set()
    for entry in Path("/proc").iterdir():
        try:
            if token in (entry / "cmdline").read_text() and entry.name != str(os.getpid()):
                watchdog.add(os.readlink(entry / "fd" / "0"))
        except OSError:
            pass
    assert watchdog, "the run's watchdog was not found"
    null = os.stat(os.devnull)
    stdin = os.fstat(0)
    record = {
        "pid": os.getpid(),
        "conftest_imported_here": IMPORTED_BY == os.getpid(),
        "calc_add_2_3": calc.add(2, 3),
        "cwd": os.getcwd(),
        "path0": sys.path[0],
        "own_session": os.getsid(0) == os.getpid(),
        "sigint_default": signal.getsignal(signal.SIGINT) is signal.default_int_handler,
        "sigterm_default": signal.getsignal(signal.SIGTERM) == signal.SIG_DFL,
        "stdin_is_devnull": (stdin.st_dev, stdin.st_ino) == (null.st_dev, null.st_ino),
        "console_log_dir": os.environ.get("FWLOOP_CONSOLE_LOG_DIR", ""),
        "addopts": os.environ.get("PYTEST_ADDOPTS"),
        "holds": sorted(
            t for t in fds.values() if t.endswith(("run.lock", "children.json")) or t in watchdog
        ),
        "forked": "pytest_fwloop.loop.entry" in sys.modules,  # only the controller imports it
    }
    with open(Path(__file__).parent / "children.jsonl", "a") as stream:
        stream.write(json.dumps(record) + "\\n")

    # A thread still working at the end: an interpreter's exit waits for it.
    def late():
        time.sleep(0.2)
        (Path(__file__).parent / f"late-{os.getpid()}").write_text("done")

    threading.Thread(target=late).start()
"""


def _children(project: LoopProject) -> list[dict[str, object]]:
    lines = (project.root / "tests" / "children.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def _repair(project: LoopProject, coder_name: str) -> list[dict[str, object]]:
    """Repair the calc suite from its seeded bugs; what each child saw."""
    project.write("fw/calc.py", CALC)
    (project.root / "tests" / "children.jsonl").unlink(missing_ok=True)
    coder = project.agent(coder_name, [coder_answer(p) for p in calc_fix_patches()], [APPROVE])
    result = project.run(
        f"--fwloop-coder={coder.spec}", "--fwloop-focus=off", "--fwloop-confirm-runs=0"
    )
    assert result.ret == 0, result.stdout.str()
    return _children(project)


@pytest.mark.slow
def test_a_forked_child_imports_the_patched_code_afresh_and_starts_as_a_spawned_one(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The conftest imports the code under test, so the controller holds the unpatched module:
    each forked child must import conftest and code again, from the patched tree, and find the
    process as `python -m pytest` would have made it: run forked, then spawned, and compare."""
    project = LoopProject(pytester, monkeypatch)
    project.calc_suite("addopts = -p no:randomly\n")
    project.write("tests/conftest.py", PROBE_CONFTEST)

    forked = _repair(project, "coder_a")
    # The baseline and its two flaky reruns of the failures (the last records the spectrum the
    # first coder call needs, issue 41), then a child per patch: the first patch fixed add.
    assert [c["calc_add_2_3"] for c in forked] == [-1, -1, -1, 5, 5, 5]
    assert all(c["forked"] and c["conftest_imported_here"] for c in forked), forked
    assert all(c["holds"] == [] for c in forked), forked  # no lock, registry, watchdog pipe

    monkeypatch.setenv("FWLOOP_CHILD_START", "spawn")
    spawned = _repair(project, "coder_b")
    assert not any(c["forked"] for c in spawned)

    def seen(child: dict[str, object]) -> dict[str, object]:
        same = {k: v for k, v in child.items() if k not in ("pid", "forked")}
        log_dir = Path(str(same["console_log_dir"]))
        same["console_log_dir"] = "/".join(log_dir.parts[-3:])  # rounds/NN/console
        return same

    assert [seen(c) for c in forked] == [seen(c) for c in spawned]
    waited = {c["pid"]: (project.root / "tests" / f"late-{c['pid']}").exists() for c in forked}
    assert waited == dict.fromkeys(waited, True)
    assert forked[0]["cwd"] == str(project.root)
    flags = ("own_session", "stdin_is_devnull", "sigint_default", "sigterm_default")
    assert {flag: forked[0][flag] for flag in flags} == dict.fromkeys(flags, True)


HEAD_START_CONFTEST = """\
import json, sys
from pathlib import Path


def pytest_sessionstart(session):
    # A fork inherits the controller's modules as they were when it forked.
    seen = {
        "controller_loaded": "pytest_fwloop.loop.controller" in sys.modules,
        "models_loaded": "pydantic" in sys.modules,
    }
    (Path(__file__).parent / "seen.json").write_text(json.dumps(seen))
"""


@pytest.mark.slow
@pytest.mark.parametrize(
    ("build", "controller_loaded"), [([], False), (["--fwloop-build=true"], True)]
)
def test_the_baseline_starts_before_the_controller_is_built_unless_a_build_comes_first(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    build: list[str],
    controller_loaded: bool,
) -> None:
    """With no build step nothing comes between the baseline snapshot and the baseline's
    tests, so its child is forked before the controller's machinery is imported, pydantic's
    models included (the run's journal is written after the fork): the imports overlap the
    tests. With a build, the child starts at TEST_RUN, after BUILD_RUN."""
    project = LoopProject(pytester, monkeypatch)
    project.calc_suite()
    project.write("fw/calc.py", "def add(a, b):\n    return a + b\n")
    project.write(
        "tests/test_calc.py",
        "from fw import calc\n\n\ndef test_add():\n    assert calc.add(2, 3) == 5\n",
    )
    project.write("tests/conftest.py", HEAD_START_CONFTEST)
    result = project.run("--fwloop-coder=rules", *build)
    assert result.ret == 0, result.stdout.str()
    seen = json.loads((project.root / "tests" / "seen.json").read_text())
    assert seen == {"controller_loaded": controller_loaded, "models_loaded": controller_loaded}
    assert project.replay().returncode == 0


def test_a_child_started_ahead_that_is_not_the_one_asked_for_is_stopped(
    pytester: pytest.Pytester,
) -> None:
    """Never two children at once: a run asking for another child stops the one started
    ahead (here a whole suite that would sleep for a minute) before starting its own."""
    pytester.makepyfile(
        test_slow="import time\n\ndef test_wait():\n    time.sleep(60)\n",
        test_quick="def test_quick():\n    pass\n",
    )
    pytester.makeini("[pytest]\nfwloop_coder = rules\nfwloop_child_start = spawn\n")
    config = pytester.parseconfigure("--fwloop", "-p", "no:randomly")
    settings = load_settings(config)
    recorder = RunRecorder(settings.runs_root, "run-1", Redactor({}))
    child = ChildRunner(settings, recorder, threading.Event(), Terminal(io.StringIO()))
    child.start_baseline()
    ahead = child.head
    assert ahead is not None
    folder = recorder.round_path(1)
    assert child.head_attempt(folder) == Attempt(
        folder / "pytest.log",
        folder / "results-1.json",
        folder / "junit.xml",
        folder / "report.html",
        folder / "spectrum-1.json",
    )
    other = folder / "other.log"
    result = child.run(1, ["test_quick.py"], other, None, None, timeout=60)
    assert ahead.process.poll() is not None  # stopped, not waited for a minute
    assert result.returncode == 0
    assert child.head is None
    assert "1 passed" in other.read_text()


@pytest.mark.slow
def test_a_run_that_cannot_fork_says_why_once_and_spawns(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A conftest that starts a thread when pytest loads it, in the controller too: no child
    may be forked from a process with threads, so each is spawned, and the trace says why
    once (the baseline and its two flaky reruns are three children). How the loop started its
    children is no news about the user's tests: not in the iteration's notes, nor the report."""
    project = LoopProject(pytester, monkeypatch)
    project.calc_suite()
    project.write(
        "conftest.py",
        "import threading, time\n\n"
        "threading.Thread(target=time.sleep, args=(600,), daemon=True).start()\n",
    )
    result = project.run("--fwloop-coder=rules")
    assert result.ret == 1  # the rules coder writes no patch
    reasons = [e["reason"] for e in project.events() if e["from"] == "TEST_RUN"]
    said = [r for r in reasons if "child pytest spawned, not forked" in r]
    assert len(said) == 1, reasons
    assert "child pytest spawned, not forked: the controller runs 2 threads" in said[0]
    assert "flaky reruns: 5 new failure(s) rerun" in said[0]
    [run_dir] = project.run_dirs()
    timeline = json.loads((run_dir / "task-timeline.json").read_text())
    notes = [note for entry in timeline["iterations"] for note in entry["notes"]]
    assert not [note for note in notes if "not forked" in note], notes
    assert (run_dir / "report.html").read_text().count("not forked") == 1  # its decision trace
