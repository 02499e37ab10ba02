"""bmcctl on the BMC, command by command, against its specification (see README.md)."""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path

    from conftest import Bmc


def test_the_installed_binary_is_this_build(bmc: Bmc, local_build: Path) -> None:
    local = hashlib.sha256(local_build.read_bytes()).hexdigest()
    assert bmc.ssh.run(f"sha256sum {bmc.binary}").stdout.split()[0] == local


def test_version(bmc: Bmc) -> None:
    assert bmc.reply("version") == "bmcctl 1.0\n"


def test_power_on_and_off(bmc: Bmc) -> None:
    assert bmc.reply("power", "on") == ""
    assert bmc.reply("power", "status") == "Chassis Power is on\n"
    assert bmc.reply("power", "off") == ""
    assert bmc.reply("power", "status") == "Chassis Power is off\n"


def test_unknown_command_is_a_usage_error(bmc: Bmc) -> None:
    result = bmc.ctl("reboot")
    assert result.exit_status == 2
    assert result.stdout == ""
    assert result.stderr.startswith("usage: bmcctl ")


def test_temperature_above_zero(bmc: Bmc) -> None:
    assert bmc.reply("sensor", "temp", "0x190") == "25.0000 C\n"
    assert bmc.reply("sensor", "temp", "0x001") == "0.0625 C\n"
    assert bmc.reply("sensor", "temp", "0x7FF") == "127.9375 C\n"


def test_temperature_below_zero(bmc: Bmc) -> None:
    assert bmc.reply("sensor", "temp", "0xE70") == "-25.0000 C\n"
    assert bmc.reply("sensor", "temp", "0xFFF") == "-0.0625 C\n"
    assert bmc.reply("sensor", "temp", "0x800") == "-128.0000 C\n"


def test_temperature_rejects_bad_readings(bmc: Bmc) -> None:
    result = bmc.ctl("sensor", "temp", "0x1000")
    assert (result.exit_status, result.stderr) == (
        1,
        "ERR raw reading out of range 0..0xFFF: 0x1000\n",
    )
    assert bmc.ctl("sensor", "temp", "hot").exit_status == 1


def test_fan_off_and_full_speed(bmc: Bmc) -> None:
    bmc.reply("fan", "set", "0")
    assert bmc.reply("fan", "get") == "pwm 0/255\n"
    bmc.reply("fan", "set", "100")
    assert bmc.reply("fan", "get") == "pwm 255/255\n"


def test_fan_partial_speed(bmc: Bmc) -> None:
    bmc.reply("fan", "set", "40")
    assert bmc.reply("fan", "get") == "pwm 102/255\n"
    bmc.reply("fan", "set", "75")
    assert bmc.reply("fan", "get") == "pwm 191/255\n"


def test_fan_rejects_more_than_100_percent(bmc: Bmc) -> None:
    bmc.reply("fan", "set", "50")
    result = bmc.ctl("fan", "set", "101")
    assert (result.exit_status, result.stderr) == (1, "ERR percent out of range 0..100: 101\n")
    assert bmc.reply("fan", "get") == "pwm 127/255\n"


def test_event_log_keeps_the_last_eight(bmc: Bmc) -> None:
    bmc.reply("sel", "clear")
    for n in range(1, 11):
        bmc.reply("sel", "add", "fan", "fault", str(n))
    assert bmc.reply("sel", "list").splitlines() == [
        f"{i}: fan fault {n}" for i, n in enumerate(range(3, 11), 1)
    ]


def test_event_log_clear(bmc: Bmc) -> None:
    bmc.reply("sel", "add", "power button pressed")
    bmc.reply("sel", "clear")
    assert bmc.reply("sel", "list") == ""
