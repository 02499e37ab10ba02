"""The firmware's commands, reply by reply, against its specification (see README.md)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from conftest import Shell


def test_version(shell: Shell) -> None:
    assert shell.command("version") == "CM3FW 1.0"


def test_help_lists_commands(shell: Shell) -> None:
    assert shell.command("help") == "commands: adc echo fletcher gpio help version"


def test_echo(shell: Shell) -> None:
    assert shell.command("echo hello, cortex-m3") == "hello, cortex-m3"


def test_unknown_command(shell: Shell) -> None:
    assert shell.command("reboot now") == "ERR unknown command: reboot"


def test_crlf_ends_one_line(shell: Shell) -> None:
    shell.console.send("version\r\n")
    shell.console.expect("\n> ")
    assert shell.console.before == "CM3FW 1.0"
    # A stray prompt from the '\n' would show up in front of the next reply.
    assert shell.command("echo after") == "after"


def test_adc_zero_and_midscale(shell: Shell) -> None:
    assert shell.command("adc 0") == "0 mV"
    assert shell.command("adc 2048") == "1650 mV"


def test_adc_full_scale_is_vref(shell: Shell) -> None:
    assert shell.command("adc 4095") == "3300 mV"
    assert shell.command("adc 0xFFF") == "3300 mV"


def test_adc_one_volt(shell: Shell) -> None:
    assert shell.command("adc 1241") == "1000 mV"
    assert shell.command("adc 2482") == "2000 mV"


def test_adc_rejects_bad_input(shell: Shell) -> None:
    assert shell.command("adc 4096") == "ERR range: 4096"
    assert shell.command("adc 12a") == "ERR bad number: 12a"
    assert shell.command("adc") == "ERR usage: adc <raw>"


def test_fletcher_check_value(shell: Shell) -> None:
    assert shell.command("fletcher abcde") == "0xC8F0"


def test_fletcher_longer_inputs(shell: Shell) -> None:
    assert shell.command("fletcher abcdef") == "0x2057"
    assert shell.command("fletcher abcdefgh") == "0x0627"


def test_fletcher_usage(shell: Shell) -> None:
    assert shell.command("fletcher") == "ERR usage: fletcher <text>"


def clear_all_pins(shell: Shell) -> None:
    for pin in range(32):
        assert shell.command(f"gpio clear {pin}") == "OK"


def test_gpio_set_pins(shell: Shell) -> None:
    clear_all_pins(shell)
    for pin in (3, 5):
        assert shell.command(f"gpio set {pin}") == "OK"
    assert shell.command("gpio get") == "0x00000028"


def test_gpio_clear_one_pin(shell: Shell) -> None:
    clear_all_pins(shell)
    assert shell.command("gpio set 1") == "OK"
    assert shell.command("gpio set 2") == "OK"
    assert shell.command("gpio clear 1") == "OK"
    assert shell.command("gpio get") == "0x00000004"


def test_gpio_clear_keeps_the_other_pins(shell: Shell) -> None:
    clear_all_pins(shell)
    assert shell.command("gpio set 0") == "OK"
    assert shell.command("gpio set 31") == "OK"
    assert shell.command("gpio clear 0") == "OK"
    assert shell.command("gpio get") == "0x80000000"


def test_gpio_rejects_bad_pins(shell: Shell) -> None:
    assert shell.command("gpio set 32") == "ERR pin: 32"
    assert shell.command("gpio clear x") == "ERR pin: x"
    assert shell.command("gpio toggle 1") == "ERR usage: gpio set|clear <pin> | gpio get"
