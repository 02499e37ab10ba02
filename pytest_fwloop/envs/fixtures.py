"""pytest fixtures for firmware environments: `fwloop_qemu`, `fwloop_serial`, `fwloop_ssh`.

Registered with or without `--fwloop`, and inert until a test requests one of them: the module
only adds ini options, and its report hook returns at once for tests that used none. The
transports are imported inside the fixtures, because paramiko alone takes about 0.2 s to import,
which a run that uses no environment must not pay.

Each environment lives for the whole session (per pytest-xdist worker), because booting or
connecting costs far more than a test; the function-scoped fixture in front of it checks that it
is up, boots QEMU again when the firmware file changed (size and mtime, then hash), and cuts the
test's own segment out of the transcript for `$FWLOOP_CONSOLE_LOG_DIR/<node id>.log` and for the
"fwloop console" section of a failing test's report.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import pytest

from pytest_fwloop.config.env_options import KNOWN_HOSTS_ACCEPT_NEW
from pytest_fwloop.config.options import resolve, spec_of
from pytest_fwloop.envs.pool import CONTROLLER_ID, PoolError, pick_for_worker

if TYPE_CHECKING:
    from collections.abc import Generator, Iterator

    from pytest_fwloop.envs.console import Console, Transcript
    from pytest_fwloop.envs.qemu import QemuMachine
    from pytest_fwloop.envs.serialport import SerialConsole
    from pytest_fwloop.envs.ssh import SshTarget

CONSOLE_LOG_DIR_ENV = "FWLOOP_CONSOLE_LOG_DIR"
REPORT_SECTION = "fwloop console"
REPORT_TAIL_CHARS = 2048
_LOG_NAME_MAX = 200


class _Recorded(Protocol):
    """Anything whose traffic is logged: a Console, an SshTarget."""

    @property
    def name(self) -> str: ...

    @property
    def transcript(self) -> Transcript: ...


@dataclass(frozen=True)
class _Segment:
    source: _Recorded
    start: int

    def text(self) -> str:
        return self.source.transcript.since(self.start)


_SEGMENTS = pytest.StashKey[list[_Segment]]()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    segments = item.stash.get(_SEGMENTS, None)
    if segments is None:
        return report
    if report.failed:
        for segment in segments:
            tail = segment.text()[-REPORT_TAIL_CHARS:]
            report.sections.append((REPORT_SECTION, f"[{segment.source.name}]\n{tail}"))
    log_dir = os.environ.get(CONSOLE_LOG_DIR_ENV)
    if call.when == "teardown" and log_dir:
        _write_console_log(Path(log_dir), item.nodeid, segments)
    return report


def log_file_name(nodeid: str) -> str:
    """A file name for a node id: unsafe characters become `_`, long ids end in a hash."""
    name = re.sub(r"[^\w.-]+", "_", nodeid).strip("_") or "test"
    if len(name) > _LOG_NAME_MAX:
        digest = hashlib.sha256(nodeid.encode()).hexdigest()[:12]
        name = f"{name[: _LOG_NAME_MAX - 13]}-{digest}"
    return f"{name}.log"


def _write_console_log(log_dir: Path, nodeid: str, segments: list[_Segment]) -> None:
    log_dir.mkdir(parents=True, exist_ok=True)
    (log_dir / log_file_name(nodeid)).write_text(
        "".join(f"=== {segment.source.name} ===\n{segment.text()}\n" for segment in segments),
        encoding="utf-8",
    )


@pytest.fixture(scope="session")
def fwloop_qemu_machine(pytestconfig: pytest.Config) -> Iterator[QemuMachine]:
    """The session's QEMU (one per xdist worker, each on its own free port); boots on first use."""
    from pytest_fwloop.envs.qemu import QemuMachine, command_argv

    config = pytestconfig
    command = _required(config, "fwloop_qemu_cmd", "fwloop_qemu")
    firmware = _rooted(config, _required(config, "fwloop_firmware", "fwloop_qemu"))
    try:
        command_argv(command, firmware, 0)
    except ValueError as exc:
        raise pytest.UsageError(f"fwloop: ini {exc}") from exc
    machine = QemuMachine(
        command, firmware, ready=_ready(config), timeout=_timeout(config), cwd=config.rootpath
    )
    try:
        yield machine
    finally:
        machine.stop()


@pytest.fixture
def fwloop_qemu(request: pytest.FixtureRequest, fwloop_qemu_machine: QemuMachine) -> Console:
    """The console of the QEMU running ini fwloop_firmware, booted again if the file changed."""
    _record(request.node, fwloop_qemu_machine.console)
    return fwloop_qemu_machine.ensure_running()


@pytest.fixture(scope="session")
def _fwloop_serial_console(pytestconfig: pytest.Config) -> Iterator[SerialConsole]:
    from pytest_fwloop.envs.serialport import SerialConsole

    config = pytestconfig
    url = _pooled(config, "fwloop_serial_pool", "fwloop_serial_url", "fwloop_serial")
    raw_baudrate = _ini(config, "fwloop_serial_baudrate")
    try:
        baudrate = int(raw_baudrate)
    except ValueError:
        raise pytest.UsageError(_bad_value("fwloop_serial_baudrate", raw_baudrate)) from None
    console = SerialConsole(url, baudrate=baudrate, timeout=_timeout(config))
    try:
        yield console
    finally:
        console.close()


@pytest.fixture
def fwloop_serial(
    request: pytest.FixtureRequest, _fwloop_serial_console: SerialConsole
) -> SerialConsole:
    """The console on ini fwloop_serial_url (or this worker's fwloop_serial_pool entry),
    opened on first use and again after the port dropped."""
    console = _fwloop_serial_console
    _record(request.node, console)
    if not console.alive:
        console.open(_ready(request.config))
    return console


@pytest.fixture(scope="session")
def _fwloop_ssh_target(pytestconfig: pytest.Config) -> Iterator[SshTarget]:
    from pytest_fwloop.envs.ssh import SshTarget, parse_target

    config = pytestconfig
    spec = _pooled(config, "fwloop_ssh_pool", "fwloop_ssh_target", "fwloop_ssh", exclusive=False)
    try:
        address = parse_target(spec)
    except ValueError as exc:
        raise pytest.UsageError(f"fwloop: ini {exc}") from exc
    key = _ini(config, "fwloop_ssh_key")
    known_hosts = _ini(config, "fwloop_ssh_known_hosts")
    accept_new = known_hosts == KNOWN_HOSTS_ACCEPT_NEW
    target = SshTarget(
        address,
        key=_rooted(config, key) if key else None,
        known_hosts=_rooted(config, known_hosts) if known_hosts and not accept_new else None,
        accept_new=accept_new,
        timeout=_timeout(config),
    )
    try:
        yield target
    finally:
        target.close()


@pytest.fixture
def fwloop_ssh(request: pytest.FixtureRequest, _fwloop_ssh_target: SshTarget) -> SshTarget:
    """The SSH target of ini fwloop_ssh_target (or this worker's fwloop_ssh_pool entry),
    connected and checked with `true` on first use and again after the connection dropped."""
    target = _fwloop_ssh_target
    _record(request.node, target)
    if not target.connected:
        target.connect()
    return target


def _record(node: pytest.Item, source: _Recorded) -> None:
    node.stash.setdefault(_SEGMENTS, []).append(_Segment(source, source.transcript.end))


def _ini(config: pytest.Config, name: str) -> str:
    """An environment option's raw value, by the options' precedence (environment, then ini)."""
    return str(resolve(config, name.removeprefix("fwloop_"))).strip()


def _example(name: str) -> str:
    return spec_of(name.removeprefix("fwloop_")).example


def _required(config: pytest.Config, name: str, fixture: str) -> str:
    value = _ini(config, name)
    if not value:
        raise pytest.UsageError(
            f"fwloop: the {fixture} fixture needs ini {name}; e.g. {name} = {_example(name)}"
        )
    return value


def _bad_value(name: str, value: str) -> str:
    return f"fwloop: ini {name} = {value!r} is not valid; e.g. {name} = {_example(name)}"


def _rooted(config: pytest.Config, value: str) -> Path:
    return config.rootpath / Path(value).expanduser()


def _timeout(config: pytest.Config) -> float:
    raw = _ini(config, "fwloop_console_timeout")
    try:
        timeout = float(raw)
    except ValueError:
        timeout = 0.0
    if timeout <= 0:
        raise pytest.UsageError(_bad_value("fwloop_console_timeout", raw))
    return timeout


def _ready(config: pytest.Config) -> str | None:
    pattern = _ini(config, "fwloop_console_ready")
    if not pattern:
        return None
    try:
        re.compile(pattern)
    except re.error as exc:
        raise pytest.UsageError(
            f"fwloop: ini fwloop_console_ready = {pattern!r} is not a regex ({exc}); "
            f"e.g. fwloop_console_ready = {_example('fwloop_console_ready')}"
        ) from exc
    return pattern


def _pooled(
    config: pytest.Config, pool: str, single: str, fixture: str, *, exclusive: bool = True
) -> str:
    """This worker's pool entry, else the single value; `exclusive` resources can't be shared."""
    worker_id = os.environ.get("PYTEST_XDIST_WORKER", CONTROLLER_ID)
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    listed = resolve(config, pool.removeprefix("fwloop_"))
    entries = [str(entry).strip() for entry in listed if str(entry).strip()]
    if entries:
        try:
            return pick_for_worker(entries, worker_id, worker_count=workers)
        except PoolError as exc:
            raise pytest.UsageError(
                f"fwloop: ini {pool}: {exc}; list one entry per worker or run fewer (-n)"
            ) from exc
    value = _ini(config, single)
    if not value:
        raise pytest.UsageError(
            f"fwloop: the {fixture} fixture needs ini {single} (or {pool}); "
            f"e.g. {single} = {_example(single)}"
        )
    if exclusive and workers > 1:
        raise pytest.UsageError(
            f"fwloop: ini {single} names one port for {workers} pytest-xdist workers; "
            f"list one per worker in {pool}"
        )
    return value
