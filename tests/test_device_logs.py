"""The device's own logs as failure evidence (child/device_logs.py, issue 33): a failing test's
part of each log, in its record and whole in the round's `console/` folder, from
pytest-embedded's DUT logs, labgrid's console logs and the `pytest_fwloop_device_logs` hook."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pytest_fwloop.child.device_logs import REPORT_SECTION
from pytest_fwloop.config.option_table import CHILD_REPORT_FLAG
from pytest_fwloop.core.records.child_env import CONSOLE_LOG_DIR_ENV

#: A pytest-embedded suite on a pyserial loopback: what the test writes, the "device" says.
EMBEDDED_SUITE = """
def test_boot(dut):
    dut.write("E (312) uart: assert failed: uart_init uart.c:88 (reg 0x3ff40000)\\n")
    dut.expect("main_task: Calling app_main", timeout=0.5)


def test_ready(dut):
    dut.write("ready\\n")
    dut.expect("ready", timeout=5)
"""

#: labgrid's `--lg-log` layout without labgrid: a console log the whole session appends to, and
#: a BMC log a fixture writes and hands over through the hook.
HOOK_CONFTEST = """
from pathlib import Path

import pytest


def pytest_addoption(parser):
    parser.addoption("--lg-log", dest="lg_log", nargs="?", const=".")  # labgrid's own option


@pytest.fixture
def console(request):
    folder = Path(request.config.getoption("lg_log"))
    folder.mkdir(exist_ok=True)
    def say(text):
        with (folder / "console_board").open("a") as log:
            log.write(text + "\\n")
    return say


@pytest.fixture
def bmc(tmp_path):
    log = tmp_path / "bmc.log"
    log.write_text("bmc: power on\\n")
    return log


def pytest_fwloop_device_logs(item):
    bmc = (getattr(item, "funcargs", None) or {}).get("bmc")
    return {"bmc": bmc} if bmc is not None else None
"""

HOOK_SUITE = """
def test_boots(console):
    console("U-Boot 2024.01: boot A")


def test_panics(console, bmc):
    console("Kernel panic - not syncing: B")
    with bmc.open("a") as log:
        log.write("bmc: watchdog reset\\n")
    assert False, "no login prompt"
"""


def child_records(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, *args: str
) -> dict[str, dict[str, Any]]:
    """Run the suite as a loop child does (its results file, its console folder)."""
    monkeypatch.setenv(CONSOLE_LOG_DIR_ENV, str(pytester.path / "console"))
    pytester.runpytest_subprocess(f"{CHILD_REPORT_FLAG}=results.json", *args)
    results = json.loads((pytester.path / "results.json").read_text(encoding="utf-8"))
    return {t["nodeid"].rpartition("::")[2]: t for t in results["tests"]}


def console_logs(pytester: pytest.Pytester) -> dict[str, str]:
    folder = pytester.path / "console"
    return (
        {p.name: p.read_text(encoding="utf-8") for p in folder.glob("*")} if folder.is_dir() else {}
    )


def test_pytest_embedded_dut_logs_are_a_failures_evidence(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ESP-IDF runs with `-s`: nothing is captured, the DUT log is all the device said."""
    monkeypatch.setenv("PYTEST_ADDOPTS", "-p no:randomly")  # pytest-embedded loads
    pytester.makepyfile(pytest_uart=EMBEDDED_SUITE)
    pytester.makeini("[pytest]\npython_files = pytest_*.py\n")
    records = child_records(
        pytester, monkeypatch, "-s", "--embedded-services", "serial", "--port", "loop://"
    )
    failed, passed = records["test_boot"], records["test_ready"]
    assert (failed["outcome"], passed["outcome"]) == ("failed", "passed")
    assert f"--- {REPORT_SECTION} ---\n[dut]\n" in failed["sections"]
    assert "assert failed: uart_init uart.c:88" in failed["sections"]
    assert "sections" not in passed
    [(name, text)] = console_logs(pytester).items()
    assert name == "pytest_uart.py_test_boot.dut.log"
    assert "assert failed: uart_init uart.c:88" in text


def test_labgrid_console_logs_and_the_hook_give_each_failing_test_its_own_part(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makeconftest(HOOK_CONFTEST)
    pytester.makepyfile(test_board=HOOK_SUITE)
    records = child_records(pytester, monkeypatch, "-p", "no:labgrid", "--lg-log", "lg-logs")
    sections = records["test_panics"]["sections"]
    assert "[console_board]\nKernel panic - not syncing: B\n" in sections
    assert "boot A" not in sections  # the session's log before this test is another's
    assert "[bmc]\nbmc: power on\nbmc: watchdog reset\n" in sections
    assert "sections" not in records["test_boots"]
    logs = console_logs(pytester)
    assert logs == {
        "test_board.py_test_panics.console_board.log": "Kernel panic - not syncing: B\n",
        "test_board.py_test_panics.bmc.log": "bmc: power on\nbmc: watchdog reset\n",
    }


def test_no_device_log_no_hook_in_a_plain_run(pytester: pytest.Pytester) -> None:
    """Without `--fwloop` nor a child's flags, the device logs are nobody's business."""
    pytester.makeconftest(HOOK_CONFTEST)
    pytester.makepyfile(test_board=HOOK_SUITE)
    result = pytester.runpytest_subprocess("-p", "no:labgrid", "--lg-log", "lg-logs")
    result.assert_outcomes(passed=1, failed=1)
    assert REPORT_SECTION not in result.stdout.str()
    assert not Path(pytester.path / "console").exists()


#: The device adapters of Zephyr's pytest-twister-harness, as its releases shape them: the
#: newer ones list their logs in `_log_files`, the first ones name `handler_log_path`.
TWISTER_CONFTEST = """
from pathlib import Path

import pytest


def pytest_addoption(parser):
    parser.addoption("--twister-harness", action="store_true")
    parser.addoption("--build-dir")


class Adapter:
    def __init__(self, build_dir, newer):
        self.handler_log_path = Path(build_dir) / "handler.log"
        if newer:
            self._log_files = [self.handler_log_path]

    def say(self, text):
        with self.handler_log_path.open("a") as log:
            log.write(text + "\\n")


class Shell:
    def __init__(self, device):
        self._device = device


@pytest.fixture
def dut(request):
    return Adapter(request.config.getoption("build_dir"), newer=True)


@pytest.fixture
def shell(request):
    return Shell(Adapter(request.config.getoption("build_dir"), newer=False))
"""

TWISTER_SUITE = """
def test_dut_boots(dut):
    dut.say("*** Booting Zephyr OS build v3.4.99 ***")


def test_dut_faults(dut):
    dut.say("E: ***** USAGE FAULT *****")
    assert False


def test_shell_faults(shell):
    shell._device.say("<err> os: r0/a1:  0x00000004")
    assert False
"""


def test_the_zephyr_harness_handler_log_is_a_failures_evidence(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makeconftest(TWISTER_CONFTEST)
    pytester.makepyfile(test_zephyr=TWISTER_SUITE)
    (pytester.path / "build").mkdir()
    records = child_records(pytester, monkeypatch, "--twister-harness", "--build-dir=build")
    assert "sections" not in records["test_dut_boots"]
    faults = records["test_dut_faults"]["sections"]
    assert "[handler.log]\nE: ***** USAGE FAULT *****\n" in faults
    assert "Booting" not in faults  # the session's log before this test is another's
    assert (
        "[handler.log]\n<err> os: r0/a1:  0x00000004\n" in records["test_shell_faults"]["sections"]
    )
