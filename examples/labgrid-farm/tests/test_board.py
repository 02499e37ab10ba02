"""FARMFW's commands, checked reply by reply on the board the place holds."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from conftest import Board


def test_version(board: Board) -> None:
    assert board.command("version") == "FARMFW v1.0"


def test_echo(board: Board) -> None:
    assert board.command("echo hello, farm") == "hello, farm"


def test_unknown_command(board: Board) -> None:
    assert board.command("frobnicate 1") == "ERR unknown command: frobnicate"


def test_sum8_intel_hex_record(board: Board) -> None:
    # The record :0300300002337A1E: its checksum is 0x1E.
    assert board.command("sum8 0300300002337A") == "0x1E"


def test_sum8_of_nothing(board: Board) -> None:
    assert board.command("sum8") == "0x00"


def test_sum8_bad_hex(board: Board) -> None:
    assert board.command("sum8 0g") == "ERR bad hex: 0g"


def test_mv_zero(board: Board) -> None:
    assert board.command("mv 0") == "0"


def test_mv_full_scale(board: Board) -> None:
    assert board.command("mv 4095") == "3300"


def test_mv_out_of_range(board: Board) -> None:
    assert board.command("mv 4096") == "ERR range: 4096"


def test_queue_is_first_in_first_out(board: Board) -> None:
    assert board.command("q clear") == "OK"
    for value in ("7", "8", "9"):
        assert board.command(f"q push {value}") == "OK"
    assert [board.command("q pop") for _ in range(3)] == ["7", "8", "9"]
    assert board.command("q pop") == "ERR empty"


def test_queue_full_refuses_a_push(board: Board) -> None:
    assert board.command("q clear") == "OK"
    for value in range(4):
        assert board.command(f"q push {value}") == "OK"
    assert board.command("q push 4") == "ERR full"
    assert board.command("q len") == "4"
