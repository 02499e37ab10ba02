"""The environments the fixtures hand out, built from their options (the last section of
`config/option_table.json`).

Each is checked here, when a test first asks for it: a missing or bad option is a one-line
usage error naming an example. The transports are imported inside, because paramiko alone takes
about 0.2 s to import, which a test that uses only the serial port must not pay.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from pytest_fwloop.config.options import KNOWN_HOSTS_ACCEPT_NEW, resolve, spec_of
from pytest_fwloop.envs.pool import CONTROLLER_ID, PoolError, pick_for_worker

if TYPE_CHECKING:
    from pytest_fwloop.envs.qemu import QemuMachine
    from pytest_fwloop.envs.serialport import SerialConsole
    from pytest_fwloop.envs.ssh import SshTarget


def qemu_machine(config: pytest.Config) -> QemuMachine:
    """The session's QEMU (one per xdist worker, each on its own free port), not yet booted."""
    from pytest_fwloop.envs.qemu import QemuMachine, command_argv

    command = _required(config, "fwloop_qemu_cmd", "fwloop_qemu")
    firmware = _rooted(config, _required(config, "fwloop_firmware", "fwloop_qemu"))
    try:
        command_argv(command, firmware, 0)
    except ValueError as exc:
        raise pytest.UsageError(f"fwloop: ini {exc}") from exc
    return QemuMachine(
        command, firmware, ready=ready(config), timeout=_timeout(config), cwd=config.rootpath
    )


def serial_console(config: pytest.Config) -> SerialConsole:
    """The console on this worker's serial port, not yet opened."""
    from pytest_fwloop.envs.serialport import SerialConsole

    url = _pooled(config, "fwloop_serial_pool", "fwloop_serial_url", "fwloop_serial")
    raw_baudrate = _ini(config, "fwloop_serial_baudrate")
    try:
        baudrate = int(raw_baudrate)
    except ValueError:
        raise pytest.UsageError(_bad_value("fwloop_serial_baudrate", raw_baudrate)) from None
    return SerialConsole(url, baudrate=baudrate, timeout=_timeout(config))


def ssh_target(config: pytest.Config) -> SshTarget:
    """This worker's SSH target, not yet connected."""
    from pytest_fwloop.envs.ssh import SshTarget, parse_target

    spec = _pooled(config, "fwloop_ssh_pool", "fwloop_ssh_target", "fwloop_ssh", exclusive=False)
    try:
        address = parse_target(spec)
    except ValueError as exc:
        raise pytest.UsageError(f"fwloop: ini {exc}") from exc
    key = _ini(config, "fwloop_ssh_key")
    known_hosts = _ini(config, "fwloop_ssh_known_hosts")
    accept_new = known_hosts == KNOWN_HOSTS_ACCEPT_NEW
    return SshTarget(
        address,
        key=_rooted(config, key) if key else None,
        known_hosts=_rooted(config, known_hosts) if known_hosts and not accept_new else None,
        accept_new=accept_new,
        timeout=_timeout(config),
    )


def ready(config: pytest.Config) -> str | None:
    """`fwloop_console_ready`, checked to be a regex; None when unset."""
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
