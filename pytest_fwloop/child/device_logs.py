"""The device's own logs as failure evidence (DESIGN.md §7): a failing test's part of every log
a device writes, in its teardown report (which the results recorder folds into the failure the
coder is sent) and whole in `$FWLOOP_CONSOLE_LOG_DIR/<node id>.<log name>.log`.

The logs come from `pytest_fwloop_device_logs`: pytest-embedded's DUT logs (`dut.logfile`, one
file per DUT per test), Zephyr's twister harness logs (`handler.log`, `device.log` in the build
folder) and labgrid's console logs (`--lg-log DIR`, `console_<target>…` files) are built in, as
the hook's last implementations; the last two are appended to by the whole session. With `-s`, as
ESP-IDF runs, pytest captures nothing: these files are all the device said.
"""

from __future__ import annotations

import os
from collections.abc import Generator
from pathlib import Path

import pytest

from pytest_fwloop.core.records.child_env import CONSOLE_LOG_DIR_ENV, log_file_name

#: The report section a failing test's device output goes under.
REPORT_SECTION = "fwloop device log"
#: Characters of each log's tail in the report; the record keeps the sections' tail, bounded.
REPORT_TAIL_CHARS = 2048


class DeviceLogs:
    """Where each test's device logs stood when it started, and its part of them once it ended
    failed: read after its teardown, when the DUTs are closed and their logs complete (a
    device that panics prints its dump after the test gave up on it)."""

    def __init__(self) -> None:
        self.starts: dict[str, dict[Path, int]] = {}
        #: Every log named for the test so far: fixtures torn down no longer name theirs.
        self.logs: dict[str, dict[str, Path]] = {}
        self.failed: set[str] = set()

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        self.logs[item.nodeid] = found = device_logs(item)
        self.starts[item.nodeid] = {path: _size(path) for path in found.values()}

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        report = yield
        logs = self.logs.setdefault(item.nodeid, {})
        for name, path in device_logs(item).items():
            logs.setdefault(name, path)
        if report.failed:
            self.failed.add(item.nodeid)
        if call.when != "teardown":
            return report
        if item.nodeid in self.failed:
            parts = self._parts(item.nodeid)
            for name, text in parts.items():
                report.sections.append((REPORT_SECTION, f"[{name}]\n{text[-REPORT_TAIL_CHARS:]}"))
            log_dir = os.environ.get(CONSOLE_LOG_DIR_ENV)
            if log_dir:
                _write(Path(log_dir), item.nodeid, parts)
        for held in (self.starts, self.logs):
            held.pop(item.nodeid, None)
        self.failed.discard(item.nodeid)
        return report

    def _parts(self, nodeid: str) -> dict[str, str]:
        """Each log's text since the test started; empty ones left out."""
        starts = self.starts.get(nodeid, {})
        parts = {}
        for name, path in self.logs.get(nodeid, {}).items():
            text = _read_from(path, starts.get(path, 0))
            if text.strip():
                parts[name] = text
        return parts


def device_logs(item: pytest.Item) -> dict[str, Path]:
    """Every implementation's logs for `item`, the first to name a path naming it."""
    found: dict[str, Path] = {}
    for answer in item.ihook.pytest_fwloop_device_logs(item=item):
        for name, path in (answer or {}).items():
            resolved = Path(path).absolute()
            if resolved not in found.values():
                found.setdefault(str(name), resolved)
    return found


class BuiltinDeviceLogs:
    """pytest-embedded's, Zephyr's harness's and labgrid's logs, as the hook's last
    implementations."""

    @pytest.hookimpl(trylast=True)
    def pytest_fwloop_device_logs(self, item: pytest.Item) -> dict[str, Path] | None:
        return {**_pytest_embedded(item), **_twister(item), **_labgrid(item)} or None


def _pytest_embedded(item: pytest.Item) -> dict[str, Path]:
    """Each DUT's log (`dut.logfile`): a tuple of DUTs in a multi-DUT test."""
    funcargs = getattr(item, "funcargs", None) or {}
    duts = funcargs.get("dut")
    found = {}
    for dut in duts if isinstance(duts, tuple | list) else [duts]:
        logfile = getattr(dut, "logfile", None)
        if isinstance(logfile, str) and logfile:
            found[Path(logfile).stem] = Path(logfile)
    return found


def _twister(item: pytest.Item) -> dict[str, Path]:
    """Zephyr's pytest-twister-harness: the `dut` (a DeviceAdapter) or the `shell` fixture's
    device writes `handler.log` (and on hardware `device.log`) in the build folder, across the
    session: those of `--build-dir`, and the adapter's `_log_files` (in its first releases its
    `*_log_path` and `*_log_file` attributes)."""
    found: dict[str, Path] = {}
    build_dir = item.config.getoption("build_dir", None)
    if item.config.getoption("twister_harness", None) and isinstance(build_dir, str):
        # Named before the fixtures run, so the test's part starts where its setup began.
        for name in ("handler.log", "device.log"):
            found[name] = Path(build_dir) / name
    funcargs = getattr(item, "funcargs", None) or {}
    for device in (funcargs.get("dut"), getattr(funcargs.get("shell"), "_device", None)):
        if device is None or isinstance(getattr(device, "logfile", None), str):
            continue  # none, or pytest-embedded's DUT
        named = [*(getattr(device, "_log_files", None) or [])]
        for kind in ("handler", "device"):
            named.append(getattr(device, f"{kind}_log_path", None))
            named.append(getattr(getattr(device, f"{kind}_log_file", None), "filename", None))
        for path in named:
            if isinstance(path, str | os.PathLike) and str(path):
                found.setdefault(Path(path).name, Path(path))
    return found


def _labgrid(item: pytest.Item) -> dict[str, Path]:
    """labgrid's console logs: `--lg-log DIR` writes `DIR/console_<target>[_<driver>]`."""
    folder = item.config.getoption("lg_log", None)
    if not isinstance(folder, str) or not folder:
        return {}
    try:
        return {path.name: path for path in sorted(Path(folder).glob("console_*"))}
    except OSError:
        return {}


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _read_from(path: Path, start: int) -> str:
    """The file's text from byte `start` (from its start when it shrank since)."""
    try:
        with path.open("rb") as stream:
            size = os.fstat(stream.fileno()).st_size
            stream.seek(start if start <= size else 0)
            return stream.read().decode("utf-8", "replace")
    except OSError:
        return ""


def _write(log_dir: Path, nodeid: str, parts: dict[str, str]) -> None:
    log_dir.mkdir(parents=True, exist_ok=True)
    for name, text in parts.items():
        (log_dir / log_file_name(nodeid, f".{log_file_name(name, '.log')}")).write_text(
            text, encoding="utf-8"
        )
