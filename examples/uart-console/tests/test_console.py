"""The console's command set, checked reply by reply against the firmware's specification."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from conftest import UartConsole


def test_version(console: UartConsole) -> None:
    assert console.command("version") == "UARTCON v1.0"


def test_help_lists_commands(console: UartConsole) -> None:
    assert console.command("help") == "commands: add buf crc8 echo help led parse rev version"


def test_echo(console: UartConsole) -> None:
    assert console.command("echo hello, world") == "hello, world"


def test_rev(console: UartConsole) -> None:
    assert console.command("rev abc123") == "321cba"
    assert console.command("rev x") == "x"


def test_unknown_command(console: UartConsole) -> None:
    assert console.command("frobnicate 1 2") == "ERR unknown command: frobnicate"


def test_crlf_line_ending_is_one_line(console: UartConsole) -> None:
    assert console.send_raw("version\r\n") == "UARTCON v1.0"
    # A stray prompt from the '\n' would show up in front of the next reply.
    assert console.command("echo after") == "after"


def test_led(console: UartConsole) -> None:
    assert console.command("led on") == "OK"
    assert console.command("led status") == "LED on"
    assert console.command("led off") == "OK"
    assert console.command("led status") == "LED off"
    assert console.command("led blink") == "ERR usage: led on|off|status"


def test_add(console: UartConsole) -> None:
    assert console.command("add 2 3") == "5"
    assert console.command("add 2147483646 1") == "2147483647"


def test_add_negative(console: UartConsole) -> None:
    assert console.command("add -7 3") == "-4"
    assert console.command("add -1 -1") == "-2"


def test_add_overflow(console: UartConsole) -> None:
    assert console.command("add 2147483647 1") == "ERR overflow"


def test_add_negative_overflow(console: UartConsole) -> None:
    assert console.command("add -2147483648 -1") == "ERR overflow"


def test_add_usage(console: UartConsole) -> None:
    assert console.command("add 1") == "ERR usage: add <a> <b>"
    assert console.command("add 1 x2") == "ERR bad number: x2"


def test_parse_positive(console: UartConsole) -> None:
    assert console.command("parse 42") == "OK 42"
    assert console.command("parse +7") == "OK 7"
    assert console.command("parse 2147483647") == "OK 2147483647"


def test_parse_negative(console: UartConsole) -> None:
    assert console.command("parse -42") == "OK -42"
    assert console.command("parse -2147483648") == "OK -2147483648"


def test_parse_out_of_range(console: UartConsole) -> None:
    assert console.command("parse 2147483648") == "ERR range: 2147483648"
    assert console.command("parse 99999999999999999999") == "ERR range: 99999999999999999999"


def test_parse_rejects_garbage(console: UartConsole) -> None:
    assert console.command("parse 12ab") == "ERR bad number: 12ab"
    assert console.command("parse -") == "ERR bad number: -"


def test_crc8_check_value(console: UartConsole) -> None:
    # The catalogue check value of CRC-8/SMBUS: the CRC of ASCII "123456789".
    assert console.command("crc8 313233343536373839") == "0xF4"


def test_crc8_byte_lists(console: UartConsole) -> None:
    assert console.command("crc8 00") == "0x00"
    assert console.command("crc8 01") == "0x07"
    assert console.command("crc8 DE AD be ef") == "0xCA"


def test_crc8_rejects_bad_hex(console: UartConsole) -> None:
    assert console.command("crc8 0g") == "ERR bad hex: 0g"
    assert console.command("crc8 123") == "ERR bad hex: 123"
    assert console.command("crc8") == "ERR usage: crc8 <hex bytes>"


def test_buf_fifo_order(console: UartConsole) -> None:
    assert console.command("buf clear") == "OK"
    for value in ("10", "20", "30"):
        assert console.command(f"buf push {value}") == "OK"
    assert console.command("buf len") == "3"
    assert [console.command("buf pop") for _ in range(3)] == ["10", "20", "30"]


def test_buf_pop_empty(console: UartConsole) -> None:
    assert console.command("buf clear") == "OK"
    assert console.command("buf pop") == "ERR empty"
    assert console.command("buf len") == "0"


def test_buf_wraps_around(console: UartConsole) -> None:
    assert console.command("buf clear") == "OK"
    for value in ("1", "2", "3"):
        assert console.command(f"buf push {value}") == "OK"
    assert console.command("buf pop") == "1"
    assert console.command("buf pop") == "2"
    for value in ("4", "5", "6"):
        assert console.command(f"buf push {value}") == "OK"
    assert [console.command("buf pop") for _ in range(4)] == ["3", "4", "5", "6"]


def test_buf_full_rejects_push(console: UartConsole) -> None:
    assert console.command("buf clear") == "OK"
    for value in ("1", "2", "3", "4"):
        assert console.command(f"buf push {value}") == "OK"
    assert console.command("buf push 5") == "ERR full"
    assert console.command("buf pop") == "1"


def test_buf_len_stops_at_capacity(console: UartConsole) -> None:
    assert console.command("buf clear") == "OK"
    for value in range(6):
        console.command(f"buf push {value}")
    assert console.command("buf len") == "4"
    assert [console.command("buf pop") for _ in range(5)] == ["0", "1", "2", "3", "ERR empty"]
