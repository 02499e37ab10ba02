"""How a child pytest starts: a fork of the controller when it would see exactly what a fresh
`python -m pytest` sees, else that command (DESIGN.md §2).

A fresh interpreter imports pytest and every plugin again, 0.2–1 s with a usual set of plugins,
paid by every iteration, focus run, regression gate and flaky rerun. A fork starts with them
imported and runs pytest's own entry point on a new Config, so the child keeps what a fresh
process gives: its own process (a crash or hang cannot take the loop down), its own session and
process group, stdio and environment and working directory as the spawned child gets them, and
the code under test imported afresh:

- every module of the user's (anything not from the interpreter's installation nor this package:
  conftests, test helpers, the code under test, editable installs) is dropped from the fork's
  module cache, so it is imported again from the patched tree;
- what stays cached must be unchanged since the controller loaded it: a module file or mapped
  shared library (a ctypes-loaded host build of the firmware cannot be loaded twice) that changed
  since the controller started makes the child a spawned one;
- the controller's open files are pointed at /dev/null in the fork and its exit handlers never
  run there; the kernel kills the fork if the controller dies (PR_SET_PDEATHSIG), as the watchdog
  does for everything the run starts.

Each fork reports (`child_report`) the installation's modules it imported, which the controller
imports before the next fork (`warm_imports`), so a plugin's lazy imports are paid once per
loop, and the test files it rewrote, which the controller rewrites once for the forks after it
(`rewrite_cache`).

The fork is refused (and the child spawned) off Linux, when the controller runs more than one
thread (a lock held by another thread would stay held in the fork), when something the cache
keeps changed, and with `fwloop_child_start = spawn`.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import gc
import importlib
import io
import os
import signal
import site
import subprocess
import sys
import sysconfig
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from pytest_fwloop.child.fork_pipe import decode, encode
from pytest_fwloop.child.pristine import PRISTINE_SYS_PATH
from pytest_fwloop.child.rewrite_cache import Rewritten, serve
from pytest_fwloop.child.warm_imports import is_extension, is_users, learnable, warm

#: A file changed this close before the controller started may have changed after it loaded the
#: file: the kernel stamps files from a clock that lags by up to a tick (10 ms at most), and the
#: start is known to a tick. Wider, a file installed just before the run would count as changed.
MTIME_MARGIN_NS = 50_000_000
#: The same for a file stamped in whole seconds (ext3; FAT's even seconds): rounded down.
COARSE_MTIME_MARGIN_NS = 2_000_000_000
_PR_SET_PDEATHSIG = 1


@dataclass(frozen=True)
class FileStamp:
    """What tells a file apart from the one loaded: which file it is, its size, its mtime."""

    device: int
    inode: int
    size: int
    mtime_ns: int


def stamp(path: str) -> FileStamp | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return FileStamp(st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


# -- the decision (pure) ---------------------------------------------------------------------


def changed_since(
    loaded: Mapping[str, FileStamp | None],
    now: Mapping[str, FileStamp | None],
    started_ns: int,
) -> list[str]:
    """Files the controller has loaded that a fresh interpreter would read differently: gone,
    replaced, resized, or touched since (or just before) the controller started."""
    return sorted(
        path
        for path, before in loaded.items()
        if (after := now.get(path)) is None
        or (before is not None and after != before)
        or after.mtime_ns >= started_ns - _mtime_margin(after.mtime_ns)
    )


def _mtime_margin(mtime_ns: int) -> int:
    return COARSE_MTIME_MARGIN_NS if mtime_ns % 1_000_000_000 == 0 else MTIME_MARGIN_NS


def fork_refusal(*, setting: str, linux: bool, threads: int, changed: list[str]) -> str | None:
    """Why the next child must be a fresh `python -m pytest`, or None when a fork will do."""
    if setting == "spawn":
        return "fwloop_child_start = spawn"
    if not linux:
        return "forked children need Linux (/proc and PR_SET_PDEATHSIG)"
    if threads > 1:
        return f"the controller runs {threads} threads"
    if changed:
        more = f" and {len(changed) - 1} more" if len(changed) > 1 else ""
        return f"{changed[0]}{more} changed since the controller loaded it"
    return None


# -- what the controller holds (reads only) --------------------------------------------------


def installed_roots() -> tuple[str, ...]:
    """The interpreter's standard library and site-packages, and this package."""
    paths = sysconfig.get_paths()
    roots = {paths[key] for key in ("stdlib", "platstdlib", "purelib", "platlib") if key in paths}
    roots.update(site.getsitepackages())
    roots.add(site.getusersitepackages())
    roots.add(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    both = {form for root in roots for form in (os.path.abspath(root), os.path.realpath(root))}
    return tuple(sorted(both))


def _location(module: ModuleType) -> str | None:
    file = getattr(module, "__file__", None)
    if isinstance(file, str):
        return os.path.abspath(file)
    return None


@dataclass(frozen=True)
class ModuleCache:
    """The controller's modules split in two: the user's, dropped in each fork, and the rest,
    which a fork keeps and which therefore must not change."""

    users: tuple[str, ...]
    kept_files: tuple[str, ...]

    @classmethod
    def of(cls, modules: Mapping[str, ModuleType], installed: tuple[str, ...]) -> ModuleCache:
        users, kept = [], set()
        for name, module in list(modules.items()):
            location = _location(module)
            if location is None or name == "__main__":
                continue
            # An extension module cannot be imported twice in one process: it stays, checked.
            if is_users(location, installed) and not is_extension(location):
                users.append(name)
            else:
                kept.add(location)
        return cls(tuple(users), tuple(sorted(kept)))


#: Mappings that are no file of the tree: memfds, devices, shared memory, the vdso.
_NOT_FILES = ("/memfd:", "/dev/", "/SYSV", "/[")
_DELETED = " (deleted)"


def mapped_files() -> tuple[list[str], list[str]]:
    """Files mapped into the controller (shared libraries, a ctypes-loaded build), and those of
    them whose file was deleted or replaced since it was mapped."""
    try:
        lines = Path("/proc/self/maps").read_text().splitlines()
    except OSError:
        return [], []
    present, deleted = set(), set()
    for line in lines:
        fields = line.split(maxsplit=5)
        if len(fields) < 6 or not fields[5].startswith("/") or fields[5].startswith(_NOT_FILES):
            continue
        path = fields[5]
        if path.endswith(_DELETED):
            deleted.add(path.removesuffix(_DELETED))
        else:
            present.add(path)
    return sorted(present), sorted(deleted)


def thread_count() -> int:
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return 0


#: How long a thread Python has joined may still be counted: `join` returns once the thread's
#: lock is released, just before the kernel ends it (seen after ~3% of joins here).
SETTLE_SECONDS = 0.1


def settled_thread_count() -> int:
    """`thread_count` once the threads Python has already joined are gone from /proc too; a
    thread Python did not start still counts, after SETTLE_SECONDS."""
    deadline = time.monotonic() + SETTLE_SECONDS
    count = thread_count()
    while count > threading.active_count() and time.monotonic() < deadline:
        time.sleep(0.001)
        count = thread_count()
    return count


def process_started_ns() -> int:
    """When the controller's process started, on the clock files are stamped with: its start in
    ticks since boot (/proc) carried over from CLOCK_BOOTTIME. (/proc/stat's boot time is in
    whole seconds: it put the start up to a second early.)"""
    try:
        ticks = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return time.time_ns()
    since_boot = time.clock_gettime_ns(time.CLOCK_BOOTTIME)
    now = time.time_ns()
    return now - (since_boot - ticks * 1_000_000_000 // os.sysconf("SC_CLK_TCK"))


class ForkGuard:
    """Decides, before each child, whether a fork sees what a fresh interpreter would.

    What the fork keeps is stamped at the first decision and compared at each later one, with
    the process's start time as the bound for files touched just before it."""

    def __init__(
        self,
        setting: str,
        installed: tuple[str, ...] | None = None,
        mapped: Callable[[], tuple[list[str], list[str]]] = mapped_files,
    ) -> None:
        self.setting = setting
        self._mapped = mapped
        self.linux = sys.platform.startswith("linux") and hasattr(os, "fork")
        self.started_ns = process_started_ns() if self.linux else 0
        self.installed = installed if installed is not None else installed_roots()
        self._loaded: dict[str, FileStamp | None] = {}
        self._learned: list[str] = []

    @property
    def can_fork(self) -> bool:
        """Whether forks are wanted and possible here at all."""
        return self.linux and self.setting != "spawn"

    def learn(self, names: list[str]) -> None:
        """Modules a fork imported from the installation: imported here before the next fork."""
        self._learned = sorted({*self._learned, *names})

    def refusal(self) -> tuple[str | None, ModuleCache]:
        """Why the next child must be spawned (None: fork), and what a fork would drop."""
        # The progress watcher's thread was joined just now: it may not have ended yet.
        threads = settled_thread_count()
        if self._learned and self.can_fork and threads <= 1:
            warm(self._learned, self.installed, thread_count)
            threads = thread_count()  # a warmed module may have started one
        self._learned = []
        if not self.can_fork:  # nothing to weigh: every child is spawned
            cache, changed = ModuleCache((), ()), []
        else:
            cache = ModuleCache.of(sys.modules, self.installed)
            changed = self.changed(cache)
        why = fork_refusal(setting=self.setting, linux=self.linux, threads=threads, changed=changed)
        return why, cache

    def changed(self, cache: ModuleCache) -> list[str]:
        """What the fork would keep that is no longer what the controller loaded. A mapping
        whose file is gone without a replacement (libffi's trampolines) cannot be loaded
        again by anyone and is passed over."""
        present, deleted = self._mapped()
        files = [*cache.kept_files, *present]
        now = {path: stamp(path) for path in files}
        for path in files:
            self._loaded.setdefault(path, now[path])
        changed = changed_since({p: self._loaded[p] for p in files}, now, self.started_ns)
        return sorted({*changed, *(path for path in deleted if os.path.exists(path))})


# -- the fork --------------------------------------------------------------------------------


class ForkedChild:
    """A forked child pytest, with the part of `subprocess.Popen` the supervisor uses."""

    def __init__(self, pid: int, args: list[str], report: int) -> None:
        self.pid = pid
        self.args = args
        self.returncode: int | None = None
        self._pipe = report
        self._report: dict[str, list[str]] = {}

    def poll(self) -> int | None:
        if self.returncode is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
                self._report = self._read_report()
        return self.returncode

    def learned(self) -> list[str]:
        """The installation's modules the child imported (`warm_imports`), once it has ended."""
        return self._report.get("modules", [])

    def rewritten(self) -> list[str]:
        """The test files the child rewrote itself (`rewrite_cache`), once it has ended."""
        return self._report.get("rewritten", [])

    def _read_report(self) -> dict[str, list[str]]:
        chunks = []
        os.set_blocking(self._pipe, False)  # what a grandchild keeps open must not block
        with contextlib.suppress(BlockingIOError):
            while chunk := os.read(self._pipe, 65536):
                chunks.append(chunk)
        os.close(self._pipe)
        return decode(b"".join(chunks))

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(self.args, timeout or 0)
            time.sleep(0.005)
        assert self.returncode is not None
        return self.returncode


@dataclass(frozen=True)
class _ForkPlan:
    """What the fork does, and where it reports."""

    args: list[str]
    cwd: Path
    env: Mapping[str, str]
    cache: ModuleCache
    installed: tuple[str, ...]
    log: int
    report: int
    controller: int
    codes: Mapping[str, Rewritten]


def fork_pytest(
    args: list[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    log_path: Path,
    cache: ModuleCache,
    installed: tuple[str, ...],
    codes: Mapping[str, Rewritten] | None = None,
) -> ForkedChild:
    """Fork and run `python -m pytest ARGS` in the fork; its stdout and stderr go to `log_path`;
    `codes`: test files already rewritten (`rewrite_cache`)."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()  # else the fork would write the controller's buffered text again
    log = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    reader, writer = os.pipe()
    plan = _ForkPlan(args, cwd, env, cache, installed, log, writer, os.getpid(), codes or {})
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the fork, which never returns here
        code = 3
        try:
            code = _child(plan)
        finally:
            os._exit(code)
    os.close(log)
    os.close(writer)
    return ForkedChild(pid, args, reader)


def _child(plan: _ForkPlan) -> int:  # pragma: no cover - runs in the fork
    _detach(plan)
    _become_python_m_pytest(plan)
    before = set(sys.modules)
    import pytest

    rewritten: list[str] = []
    serve(plan.codes, rewritten, plan.installed)
    try:
        code = pytest.console_main()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    # As an interpreter's exit: its non-daemon threads are waited for, then its exit handlers.
    shutdown = getattr(threading, "_shutdown", None)
    if shutdown is not None:
        shutdown()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    imported = {
        name: _location(module) for name, module in list(sys.modules.items()) if name not in before
    }
    with contextlib.suppress(OSError):
        native = thread_count() > threading.active_count()  # threads Python did not start
        learned = learnable(imported, plan.installed, native_threads=native)
        os.write(plan.report, encode({"modules": learned, "rewritten": rewritten}))
    return int(code)


def _detach(plan: _ForkPlan) -> None:  # pragma: no cover - runs in the fork
    """Leave the controller behind: its session, signals, descriptors and stdio."""
    gc.freeze()  # the controller's objects: never collected here, so never copied by the GC
    os.setsid()  # its own session and process group, as start_new_session gives a spawned one
    _die_with(plan.controller)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(plan.log, 1)
    os.dup2(plan.log, 2)
    for fd in _open_descriptors():
        # The numbers stay taken, so no stale object of the controller can close one the
        # child opens later; the files behind them (the run lock, the watchdog's pipe) are
        # no longer held by the fork.
        if fd > 2 and fd not in (devnull, plan.report):
            with contextlib.suppress(OSError):
                os.dup2(devnull, fd)


def _become_python_m_pytest(plan: _ForkPlan) -> None:  # pragma: no cover - runs in the fork
    """The interpreter state a fresh `python -m pytest` would start with: streams, exit
    handlers, working directory, environment, argv, sys.path and the modules it re-imports."""
    atexit._clear()  # the controller's exit handlers are the controller's
    sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False), encoding="utf-8")
    sys.stdout = io.TextIOWrapper(
        io.FileIO(1, "w", closefd=False), encoding="utf-8", write_through=True
    )
    sys.stderr = io.TextIOWrapper(
        io.FileIO(2, "w", closefd=False),
        encoding="utf-8",
        errors="backslashreplace",
        write_through=True,
    )
    for name in ("stdin", "stdout", "stderr"):  # the controller's would write to the log too
        setattr(sys, f"__{name}__", getattr(sys, name))
    os.chdir(plan.cwd)
    os.environ.clear()
    os.environ.update(plan.env)
    sys.argv = [sys.argv[0], *plan.args]
    # As `python -m pytest` starts in `cwd`: that directory first where the controller had its
    # script's or working directory, unless -P (safe_path) left both out.
    safe_path = getattr(sys.flags, "safe_path", False)  # Python 3.11's -P
    sys.path[:] = PRISTINE_SYS_PATH if safe_path else [str(plan.cwd), *PRISTINE_SYS_PATH[1:]]
    for name in plan.cache.users:
        sys.modules.pop(name, None)
    importlib.invalidate_caches()


def _die_with(controller: int) -> None:  # pragma: no cover - runs in the fork
    """SIGKILL when the controller dies; and at once if it already has."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != controller:
        os._exit(1)


def _open_descriptors() -> Iterator[int]:
    for name in os.listdir("/proc/self/fd"):
        with contextlib.suppress(ValueError):
            yield int(name)
