"""QEMU running a real ARM firmware (built here with arm-none-eabi-gcc) behind the console."""

from __future__ import annotations

import os
import shutil
import signal
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from envs_support import firmware
from envs_support.tools import INNER_ARGS, require
from pytest_fwloop.envs.errors import EnvironmentFailure
from pytest_fwloop.envs.qemu import QemuMachine, command_argv, free_port

if TYPE_CHECKING:
    from collections.abc import Iterator

TIMEOUT = 10.0


@pytest.fixture(scope="session")
def firmware_v1(tmp_path_factory: pytest.TempPathFactory) -> Path:
    gcc = require("arm-none-eabi-gcc", "gcc-arm-none-eabi")
    require("qemu-system-arm", "qemu-system-arm")
    return firmware.build(gcc, tmp_path_factory.mktemp("fw") / "fw-1.0.elf", "1.0")


@pytest.fixture(scope="session")
def firmware_v2(firmware_v1: Path) -> Path:
    gcc = require("arm-none-eabi-gcc", "gcc-arm-none-eabi")
    return firmware.build(gcc, firmware_v1.with_name("fw-2.0.elf"), "2.0")


def our_qemus() -> list[int]:
    """QEMU processes started by this pytest process, zombies included."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            name, _, rest = (entry / "stat").read_text().partition(" (")[2].partition(") ")
        except (OSError, ValueError):
            continue
        if name.startswith("qemu-system") and int(rest.split()[1]) == os.getpid():
            found.append(int(entry.name))
    return found


@pytest.fixture(autouse=True)
def nothing_left_running() -> Iterator[None]:
    yield
    assert our_qemus() == []


@pytest.fixture
def machine(firmware_v1: Path) -> Iterator[QemuMachine]:
    machine = QemuMachine(
        firmware.COMMAND_STDIO, firmware_v1, ready=firmware.BANNER, timeout=TIMEOUT
    )
    machine.start()
    yield machine
    machine.stop()


def answer(machine: QemuMachine, command: str) -> str:
    machine.console.sendline(command)
    return machine.console.expect(rf"([^\n]*)\n{firmware.PROMPT}").group(1)


@pytest.mark.parametrize(
    "command", [firmware.COMMAND_STDIO, firmware.COMMAND_TCP], ids=["stdio", "tcp"]
)
def test_boots_to_banner_and_answers(firmware_v1: Path, command: str) -> None:
    with QemuMachine(command, firmware_v1, ready=firmware.BANNER, timeout=TIMEOUT) as machine:
        assert answer(machine, "ping") == "pong"
        assert answer(machine, "version") == "1.0"
        assert answer(machine, "echo round trip") == "round trip"
        assert answer(machine, "bogus") == "ERR unknown command"
        pid = machine.process.pid if machine.process else None
    assert pid is not None
    assert not Path(f"/proc/{pid}").exists()


def test_killed_qemu_is_environment_failure(machine: QemuMachine) -> None:
    assert machine.process is not None
    os.kill(machine.process.pid, signal.SIGKILL)
    with pytest.raises(EnvironmentFailure, match=r"exited with status -9") as caught:
        machine.console.expect("pong")
    assert "\n" not in str(caught.value)
    with pytest.raises(EnvironmentFailure):
        machine.console.sendline("ping")
    assert not machine.running


def test_missing_qemu_binary(
    firmware_v1: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(EnvironmentFailure) as caught:
        QemuMachine(firmware.COMMAND_STDIO, firmware_v1).start()
    assert str(caught.value) == (
        "fwloop: qemu-system-arm not found on PATH; install it "
        "(apt-get install qemu-system-arm) or fix fwloop_qemu_cmd"
    )


def test_missing_firmware_is_named(tmp_path: Path) -> None:
    missing = tmp_path / "build" / "missing.elf"
    with pytest.raises(EnvironmentFailure, match=f"firmware {missing} not found"):
        QemuMachine(firmware.COMMAND_STDIO, missing).start()


def test_console_port_in_use(firmware_v1: Path, taken_port: int) -> None:
    with pytest.raises(EnvironmentFailure, match=f"port 127.0.0.1:{taken_port} is already in use"):
        QemuMachine(firmware.COMMAND_TCP, firmware_v1, port=taken_port).start()


def test_other_port_in_use_is_reported_from_qemu(firmware_v1: Path, taken_port: int) -> None:
    command = firmware.COMMAND_STDIO + " -gdb tcp:127.0.0.1:{port}"
    machine = QemuMachine(
        command, firmware_v1, ready=firmware.BANNER, timeout=TIMEOUT, port=taken_port
    )
    with pytest.raises(
        EnvironmentFailure, match=r"Address already in use.*free the port"
    ) as caught:
        machine.start()
    assert "\n" not in str(caught.value)
    assert not machine.running


def test_no_banner_is_environment_failure(firmware_v1: Path) -> None:
    machine = QemuMachine(firmware.COMMAND_STDIO, firmware_v1, ready="NEVER", timeout=0.3)
    with pytest.raises(EnvironmentFailure, match=r"no banner matching 'NEVER'.*FWTEST 1\.0 ready"):
        machine.start()
    assert not machine.running
    # The same firmware is not booted again in vain; a new one is.
    with pytest.raises(EnvironmentFailure, match="no banner matching 'NEVER'"):
        machine.ensure_running()
    assert not machine.running


def test_restart_keeps_the_console(machine: QemuMachine) -> None:
    console, first = machine.console, machine.process
    assert machine.restart() is console
    assert machine.process is not first
    assert answer(machine, "ping") == "pong"
    assert console.transcript.since(0).count("FWTEST 1.0 ready") == 2


def test_changed_firmware_is_booted_again(
    firmware_v1: Path, firmware_v2: Path, tmp_path: Path
) -> None:
    image = tmp_path / "fw.elf"
    shutil.copy(firmware_v1, image)
    machine = QemuMachine(firmware.COMMAND_STDIO, image, ready=firmware.BANNER, timeout=TIMEOUT)
    try:
        machine.ensure_running()
        pid = machine.process.pid if machine.process else None
        os.utime(image, ns=(0, 0))  # touched, same bytes: no reboot
        assert not machine.firmware_changed()
        machine.ensure_running()
        assert machine.process is not None
        assert machine.process.pid == pid
        shutil.copy(firmware_v2, image)
        assert machine.firmware_changed()
        machine.ensure_running()
        assert machine.process.pid != pid
        assert answer(machine, "version") == "2.0"
    finally:
        machine.stop()


def test_command_template_is_split_without_a_shell(tmp_path: Path) -> None:
    image = tmp_path / "dir with space" / "fw.elf"
    argv = command_argv("qemu -kernel {firmware} -gdb 'tcp::{port}' ; rm -rf /", image, 1234)
    assert argv == ["qemu", "-kernel", str(image), "-gdb", "tcp::1234", ";", "rm", "-rf", "/"]
    with pytest.raises(ValueError, match="fwloop_qemu_cmd: No closing quotation"):
        command_argv("qemu 'unbalanced", image, None)
    assert 0 < free_port() < 65536


def _qemu_project(pytester: pytest.Pytester, image: Path, ready: str = firmware.BANNER) -> None:
    pytester.makeini(
        f"""
        [pytest]
        fwloop_qemu_cmd = {firmware.COMMAND_STDIO}
        fwloop_firmware = {image.name}
        fwloop_console_ready = {ready}
        fwloop_console_timeout = 5
        """
    )


def test_fwloop_qemu_fixture(
    pytester: pytest.Pytester,
    firmware_v1: Path,
    firmware_v2: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    image = pytester.path / "fw.elf"
    shutil.copy(firmware_v1, image)
    _qemu_project(pytester, image)
    pytester.makepyfile(
        f"""
        import shutil

        def ask(console, command):
            console.sendline(command)
            return console.expect(r"([^\\n]*)\\n> ").group(1)

        def test_v1(fwloop_qemu):
            assert ask(fwloop_qemu, "version") == "1.0"

        def test_swap_firmware(fwloop_qemu):
            shutil.copy({str(firmware_v2)!r}, "fw.elf")

        def test_v2(fwloop_qemu):
            assert ask(fwloop_qemu, "version") == "2.0"

        def test_wrong_answer(fwloop_qemu):
            fwloop_qemu.sendline("echo marker")
            fwloop_qemu.expect("something else", timeout=0.2)
        """
    )
    logs = tmp_path / "logs"
    monkeypatch.setenv("FWLOOP_CONSOLE_LOG_DIR", str(logs))
    result = pytester.runpytest(*INNER_ARGS)
    result.assert_outcomes(passed=3, failed=1)
    result.stdout.fnmatch_lines(["*ConsoleTimeout*", "*- fwloop console -*", "*marker*"])
    assert "FWTEST 2.0 ready" in (logs / "test_fwloop_qemu_fixture.py_test_v2.log").read_text()
    assert "FWTEST" not in (logs / "test_fwloop_qemu_fixture.py_test_swap_firmware.log").read_text()


def test_fwloop_qemu_fixture_without_banner_errors(
    pytester: pytest.Pytester, firmware_v1: Path
) -> None:
    image = pytester.path / "fw.elf"
    shutil.copy(firmware_v1, image)
    _qemu_project(pytester, image, ready="NEVER")
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.parametrize("n", range(3))
        def test_it(fwloop_qemu, n):
            pass
        """
    )
    result = pytester.runpytest(*INNER_ARGS, "-o", "fwloop_console_timeout=0.3")
    result.assert_outcomes(errors=3)
    result.stdout.fnmatch_lines(["*EnvironmentFailure: fwloop: no banner matching 'NEVER'*"])


def test_fwloop_qemu_fixture_needs_its_ini(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_it(fwloop_qemu): pass")
    result = pytester.runpytest(*INNER_ARGS)
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        [
            "*UsageError: fwloop: the fwloop_qemu fixture needs ini fwloop_qemu_cmd; "
            "e.g. fwloop_qemu_cmd = qemu-system-arm -M mps2-an385 *-kernel {firmware}"
        ]
    )
