"""The fixtures the plugin gives every suite, with or without `--fwloop` (docs/environments.md,
docs/metrics.md, DESIGN.md §5 and §7).

Plain pytest loads this module and nothing behind it: each fixture imports what it needs when a
test first asks for it. Pytest rewrites the asserts of every module of an installed plugin, and
where it cannot cache the result (`PYTHONDONTWRITEBYTECODE`, a read-only site-packages) it
compiles them again in each process, so what plain pytest loads is kept this small.

The environments live for the whole session (per pytest-xdist worker), because booting or
connecting costs far more than a test; the function-scoped fixture in front of each checks that it
is up (QEMU boots again when the firmware file changed) and cuts the test's own part out of its
transcript for the report and the console log (`envs/console_report.py`).
"""

from __future__ import annotations

from contextlib import closing
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from collections.abc import Iterator

    from pytest_fwloop.child.metrics import MetricRecorder
    from pytest_fwloop.core.records.agent_protocol import ReviewerAnswer, TesterAnswer
    from pytest_fwloop.envs.console import Console
    from pytest_fwloop.envs.qemu import QemuMachine
    from pytest_fwloop.envs.serialport import SerialConsole
    from pytest_fwloop.envs.ssh import SshTarget


@pytest.fixture
def fwloop_review() -> ReviewerAnswer | None:
    """The reviewer's validated verdict on the patch under test, or None."""
    from pytest_fwloop.child.verdicts import review

    return review()


@pytest.fixture
def fwloop_test_plan() -> TesterAnswer | None:
    """The tester's validated plan for this iteration, or None."""
    from pytest_fwloop.child.verdicts import tester_plan

    return tester_plan()


@pytest.fixture
def fwloop_metric(request: pytest.FixtureRequest) -> MetricRecorder:
    """Record a number of this test (boot time, image size, throughput): under `--fwloop` the
    loop keeps it per iteration and withholds SUCCESS while it is worse than at the baseline."""
    from pytest_fwloop.child.metrics import recorder

    return recorder(request.node)


@pytest.fixture(scope="session")
def fwloop_qemu_machine(pytestconfig: pytest.Config) -> Iterator[QemuMachine]:
    """The session's QEMU (one per xdist worker, each on its own free port); boots on first use."""
    from pytest_fwloop.envs.setup import qemu_machine

    with closing(qemu_machine(pytestconfig)) as machine:
        yield machine


@pytest.fixture
def fwloop_qemu(request: pytest.FixtureRequest, fwloop_qemu_machine: QemuMachine) -> Console:
    """The console of the QEMU running ini fwloop_firmware, booted again if the file changed."""
    from pytest_fwloop.envs.console_report import record

    record(request.node, fwloop_qemu_machine.console)
    return fwloop_qemu_machine.ensure_running()


@pytest.fixture(scope="session")
def _fwloop_serial_console(pytestconfig: pytest.Config) -> Iterator[SerialConsole]:
    from pytest_fwloop.envs.setup import serial_console

    with closing(serial_console(pytestconfig)) as console:
        yield console


@pytest.fixture
def fwloop_serial(
    request: pytest.FixtureRequest, _fwloop_serial_console: SerialConsole
) -> SerialConsole:
    """The console on ini fwloop_serial_url (or this worker's fwloop_serial_pool entry),
    opened on first use and again after the port dropped."""
    from pytest_fwloop.envs.console_report import record
    from pytest_fwloop.envs.setup import ready

    console = _fwloop_serial_console
    record(request.node, console)
    if not console.alive:
        console.open(ready(request.config))
    return console


@pytest.fixture(scope="session")
def _fwloop_ssh_target(pytestconfig: pytest.Config) -> Iterator[SshTarget]:
    from pytest_fwloop.envs.setup import ssh_target

    with closing(ssh_target(pytestconfig)) as target:
        yield target


@pytest.fixture
def fwloop_ssh(request: pytest.FixtureRequest, _fwloop_ssh_target: SshTarget) -> SshTarget:
    """The SSH target of ini fwloop_ssh_target (or this worker's fwloop_ssh_pool entry),
    connected and checked with `true` on first use and again after the connection dropped."""
    from pytest_fwloop.envs.console_report import record

    target = _fwloop_ssh_target
    record(request.node, target)
    if not target.connected:
        target.connect()
    return target
