"""The sensor hub's console, tested as ESP-IDF's examples are: one `pytest_<name>.py` beside the
firmware, a `dut` per test, `expect` with short timeouts."""

from __future__ import annotations

import pytest
from pytest_embedded import Dut

BOOTED = "main_task: Calling app_main()"


def command(dut: Dut, line: str, reply: str) -> None:
    dut.write(line)
    dut.expect_exact(reply, timeout=2)


@pytest.mark.generic
@pytest.mark.parametrize("target", ["linux"], indirect=True)
def test_boot_log(dut: Dut) -> None:
    dut.expect_exact("boot: sensor-hub stand-in v1.0", timeout=5)
    dut.expect_exact(BOOTED, timeout=5)


@pytest.mark.generic
@pytest.mark.parametrize("target", ["linux"], indirect=True)
def test_temperature_above_zero(dut: Dut) -> None:
    dut.expect_exact(BOOTED, timeout=5)
    command(dut, "temp 750", "temp = 25.0 C")
    command(dut, "temp 1234", "temp = 73.4 C")


@pytest.mark.generic
@pytest.mark.parametrize("target", ["linux"], indirect=True)
def test_temperature_below_zero(dut: Dut) -> None:
    dut.expect_exact(BOOTED, timeout=5)
    command(dut, "temp 250", "temp = -25.0 C")
    command(dut, "temp 495", "temp = -0.5 C")


@pytest.mark.generic
@pytest.mark.parametrize("target", ["linux"], indirect=True)
def test_filter_first_samples(dut: Dut) -> None:
    dut.expect_exact(BOOTED, timeout=5)
    command(dut, "filt 10", "filt = 10")
    command(dut, "filt 20", "filt = 15")


@pytest.mark.generic
@pytest.mark.parametrize("target", ["linux"], indirect=True)
def test_filter_window_slides(dut: Dut) -> None:
    dut.expect_exact(BOOTED, timeout=5)
    for sample, mean in ((10, 10), (20, 15), (30, 20), (40, 25), (50, 35), (60, 45)):
        command(dut, f"filt {sample}", f"filt = {mean}")
