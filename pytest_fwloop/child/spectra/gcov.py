"""Which C each test ran, on a host build made with `--coverage` (DESIGN.md §18;
docs/providers.md, the C spectrum): recorded in a loop child beside the Python spectrum and
only when it is (`fwloop_c_coverage = gcov`).

Each test's processes get one folder for their counts: `GCOV_PREFIX` points every process the test
starts at `live/`, where libgcov writes its `.gcda` files when the process exits; when the test ends
its folder is put aside as that test's. A firmware that lives across tests is asked to write its
counts at each test's end: a descendant of this process that carries our `GCOV_PREFIX` and catches
`SIGUSR1` (the handler of docs/providers.md: `__gcov_dump(); __gcov_reset();`) is sent that signal.
One that lives on without such a handler writes its counts when it exits: they are then said of
every test it lived through. At the session's end one `gcov --json-format --stdout` reads every
test's files (`core/execution/gcov_counts.py`), and the spectrum is written as
`spectrum-K.gcov.json` beside the Python one.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Generator
from pathlib import Path

import pytest

from pytest_fwloop.child.spectra.gcov_inprocess import InProcessCounts
from pytest_fwloop.child.spectra.python_lines import worker_path
from pytest_fwloop.core.execution.gcov_counts import Executed, add_document, encode, gcov_documents

#: The signal a firmware living across tests takes as "write your counts now".
DUMP_SIGNAL = signal.SIGUSR1
#: How long a signalled firmware may take to write its counts, and the quiet that says it has.
_DUMP_WAIT = 2.0
_QUIET = 0.01
#: A `.gcda` file by its path under a test's folder and its bytes' digest.
Key = tuple[str, bytes]
#: `.gcda` files one gcov command is given.
_BATCH = 400
_GCOV_SECONDS = 300.0


def gcov_spectrum_path(spectrum: Path) -> Path:
    """`spectrum-K.json` → `spectrum-K.gcov.json` (a worker's: `spectrum-K.gw0.gcov.json`)."""
    return spectrum.with_name(f"{spectrum.stem}.gcov{spectrum.suffix}")


class GcovRecorder:
    """Gives each test's processes their own `GCOV_PREFIX`, and reads the counts at the end."""

    def __init__(self, folder: Path, spectrum: Path, config: pytest.Config) -> None:
        worker = getattr(config, "workerinput", {}).get("workerid")
        self.folder = folder / worker if worker else folder
        self.path = gcov_spectrum_path(worker_path(spectrum, config))
        self.root = config.rootpath
        self.live = self.folder / "live"
        self.gcov = shutil.which("gcov")
        #: Each folder of counts put aside and the tests it belongs to, in order.
        self.groups: list[tuple[list[str], Path | None]] = []
        #: Tests a firmware without a dump handler has lived through so far.
        self.pending: list[str] = []
        self._saved: dict[str, str | None] = {}
        #: C compiled into this process (a Python extension), and the `.gcda` files its dumps
        #: write (relative to a folder): their counts add up over the tests.
        self.in_process = InProcessCounts(self.root)
        self.cumulative: set[str] = set()

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionstart(self) -> None:
        if self.gcov is None:
            return  # no gcov, no C spectrum: the run goes on as without one
        shutil.rmtree(self.folder, ignore_errors=True)
        self.live.mkdir(parents=True)
        for name, value in (("GCOV_PREFIX", str(self.live)), ("GCOV_PREFIX_STRIP", "0")):
            self._saved[name] = os.environ.get(name)
            os.environ[name] = value

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item) -> Generator[None, object, object]:
        if self.gcov is not None and self.in_process.unseen():
            self._baseline()
        try:
            return (yield)
        finally:
            if self.gcov is not None:
                self._close(item.nodeid)

    def _baseline(self) -> None:
        """The counts of an extension loaded since the last test (at its import, at
        collection), written before a test starts: what ran then is no test's."""
        folder = self.folder / f"base{len(self.groups)}"
        os.environ["GCOV_PREFIX"] = str(folder)
        try:
            if self.in_process.dump():
                self.cumulative.update(_relative(folder))
                self.groups.append(([], folder))
        finally:
            os.environ["GCOV_PREFIX"] = str(self.live)

    def _close(self, nodeid: str) -> None:
        """The end of one test: the living firmware's counts asked for, the folder put aside
        unless a firmware that cannot be asked lives on."""
        self.pending.append(nodeid)
        dumpable, mute = _living(str(self.live))
        if dumpable:
            before = _state(self.live)
            for pid in dumpable:
                try:
                    os.kill(pid, DUMP_SIGNAL)
                except OSError:
                    continue
            _settle(self.live, before)
        if mute:
            return
        written = set(_relative(self.live))
        if self.in_process.dump():
            self.cumulative.update(set(_relative(self.live)) - written)
        number = len(self.groups)
        if any(self.live.rglob("*.gcda")):
            kept = self.folder / f"t{number}"
            self.live.rename(kept)
            self.live.mkdir()
            self.groups.append((self.pending, kept))
        else:
            self.groups.append((self.pending, None))
        self.pending = []

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self) -> None:
        if self.gcov is None:
            return
        for name, value in self._saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        if self.pending:
            self.groups.append(
                (self.pending, self.live if any(self.live.rglob("*.gcda")) else None)
            )
            self.pending = []
        if not self.groups:
            return
        executed = self._read([folder for _, folder in self.groups if folder is not None])
        root = str(self.root)
        payload = encode(
            [
                (tests, executed.get(folder, Executed()) if folder else Executed())
                for tests, folder in self.groups
            ],
            root,
            "gcov",
        )
        self.path.parent.mkdir(parents=True, exist_ok=True)
        partial = self.path.with_suffix(".partial")
        partial.write_text(json.dumps(payload, separators=(",", ":")), encoding="utf-8")
        os.replace(partial, self.path)
        shutil.rmtree(self.folder, ignore_errors=True)

    def _read(self, folders: list[Path]) -> dict[Path, Executed]:
        """Each folder's counts (`folders` in the order they were written). A `.gcda` under
        `FOLDER/abs/path/x.gcda` was compiled with its notes at `/abs/path/x.gcno`, linked
        beside it so gcov finds the two together. Files of one object with the same bytes
        (a module no test touched, a command two tests sent alike) are read once: gcov is
        given one of each, `_BATCH` a command."""
        listed: dict[Path, list[tuple[str, Key]]] = {}
        first: dict[Key, str] = {}
        for folder in folders:
            for relative in _relative(folder):
                data = folder / relative
                notes = Path("/", relative).with_suffix(".gcno")
                if not notes.is_file():
                    continue
                try:
                    key = (relative, hashlib.blake2b(data.read_bytes(), digest_size=16).digest())
                except OSError:
                    continue
                listed.setdefault(folder, []).append((relative, key))
                if key not in first:
                    data.with_suffix(".gcno").symlink_to(notes)
                    first[key] = str(data)
        by_name = {name: key for key, name in first.items()}
        documents: dict[Key, dict[str, object]] = {}
        names = sorted(by_name)
        for start in range(0, len(names), _BATCH):
            for document in self._gcov(names[start : start + _BATCH]):
                named = by_name.get(str(document.get("data_file", "")))
                if named is not None:
                    documents[named] = document
        found: dict[Path, Executed] = {}
        last: dict[str, dict[tuple[str, int], int]] = {}
        alone: dict[Key, Executed] = {}
        root = str(self.root)
        for folder in folders:
            executed = found.setdefault(folder, Executed())
            for relative, key in listed.get(folder, ()):
                read = documents.get(key)
                if read is None:
                    continue
                if relative in self.cumulative:
                    last[relative] = add_document(executed, read, root, last.get(relative))
                    continue
                if key not in alone:
                    alone[key] = Executed()
                    add_document(alone[key], read, root)
                executed.measured |= alone[key].measured
                for path, lines in alone[key].ran.items():
                    executed.ran.setdefault(path, set()).update(lines)
        return found

    def _gcov(self, batch: list[str]) -> list[dict[str, object]]:
        assert self.gcov is not None
        try:
            done = subprocess.run(
                [self.gcov, "--json-format", "--stdout", *batch],
                capture_output=True,
                cwd=self.folder,
                timeout=_GCOV_SECONDS,
                check=False,
            )
        except (OSError, subprocess.SubprocessError):
            return []
        return list(gcov_documents(done.stdout.decode("utf-8", "replace")))


def _relative(folder: Path) -> list[str]:
    """The `.gcda` files under `folder`, as paths relative to it."""
    return [str(p.relative_to(folder)) for p in folder.rglob("*.gcda")]


def _living(live: str) -> tuple[list[int], list[int]]:
    """This process's descendants built with gcov that write their counts under `live`: those
    that catch `DUMP_SIGNAL`, and those that do not."""
    marker = f"GCOV_PREFIX={live}".encode()
    dumpable: list[int] = []
    mute: list[int] = []
    for pid in _descendants(os.getpid()):
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
            status = Path(f"/proc/{pid}/status").read_text(encoding="ascii")
        except OSError:
            continue
        if marker not in environ or "State:\tZ" in status or not _instrumented(pid):
            continue
        caught = next(
            (ln.split()[1] for ln in status.splitlines() if ln.startswith("SigCgt:")), "0"
        )
        (dumpable if int(caught, 16) >> (DUMP_SIGNAL - 1) & 1 else mute).append(pid)
    return dumpable, mute


#: Executables looked at (path, mtime) → whether libgcov is linked into them.
_LINKED: dict[tuple[str, int], bool] = {}


def _instrumented(pid: int) -> bool:
    """Whether the process runs an executable with libgcov in it (its messages, which start
    `profiling:`, are there even when the symbols are stripped): a Python or a shell the test
    started writes no counts, and living on does not hide whose counts are whose."""
    try:
        exe = os.readlink(f"/proc/{pid}/exe")
        key = (exe, os.stat(exe).st_mtime_ns)
    except OSError:
        return False
    known = _LINKED.get(key)
    if known is None:
        try:
            with open(exe, "rb") as binary:
                known = b"profiling:" in binary.read()
        except OSError:
            known = False
        _LINKED[key] = known
    return known


def _descendants(pid: int) -> list[int]:
    """Every process below `pid`, through `/proc/PID/task/TID/children`."""
    found: list[int] = []
    todo = [pid]
    while todo:
        parent = todo.pop()
        try:
            tasks = os.listdir(f"/proc/{parent}/task")
        except OSError:
            continue
        for task in tasks:
            try:
                children = Path(f"/proc/{parent}/task/{task}/children").read_text(encoding="ascii")
            except OSError:
                continue
            for child in children.split():
                found.append(int(child))
                todo.append(int(child))
    return found


def _state(folder: Path) -> dict[str, tuple[int, int]]:
    state: dict[str, tuple[int, int]] = {}
    for data in folder.rglob("*.gcda"):
        try:
            info = data.stat()
        except OSError:
            continue
        state[str(data)] = (info.st_size, info.st_mtime_ns)
    return state


def _settle(folder: Path, before: dict[str, tuple[int, int]]) -> None:
    """Wait until the signalled firmware has written its counts: the folder changed, then
    stayed as it is for `_QUIET` seconds; at most `_DUMP_WAIT`."""
    deadline = time.monotonic() + _DUMP_WAIT
    last = before
    quiet_since: float | None = None
    while time.monotonic() < deadline:
        time.sleep(_QUIET / 4)
        now = _state(folder)
        if now != last:
            last, quiet_since = now, time.monotonic()
        elif quiet_since is not None and time.monotonic() - quiet_since >= _QUIET:
            return
