"""The board stand-in: `build/sensor-hub` behind a pseudo-terminal, as a USB-serial adapter
presents a board.

pytest-embedded's serial service opens the port this conftest names (its `port` fixture,
overridden); the board is powered on once the DUT is attached, as pytest-embedded resets an
ESP32 after opening its port, so its boot log is not lost. Each test gets a freshly booted board.
"""

from __future__ import annotations

import errno
import os
import pty
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from collections.abc import Iterator

FIRMWARE = Path(__file__).resolve().parent / "build" / "sensor-hub"


@pytest.fixture
def board_pty() -> Iterator[tuple[int, str]]:
    """A pseudo-terminal: the board's end (the master) and the port's device path."""
    board, port = pty.openpty()
    try:
        yield board, os.ttyname(port)
    finally:
        os.close(port)
        os.close(board)


@pytest.fixture
def port(board_pty: tuple[int, str]) -> str:
    """pytest-embedded's `--port`, here the pty's device: the board's serial line."""
    return board_pty[1]


@pytest.fixture(autouse=True)
def board(dut: object, board_pty: tuple[int, str]) -> Iterator[subprocess.Popen[bytes]]:
    """Power the board on once its DUT is attached, and off after the test."""
    if not FIRMWARE.is_file():
        raise FileNotFoundError(
            errno.ENOENT, f"firmware not built; run `make` in {FIRMWARE.parent.parent}", str(FIRMWARE)
        )
    line = board_pty[0]
    process = subprocess.Popen([FIRMWARE], stdin=line, stdout=line, stderr=line)
    yield process
    process.kill()
    process.wait()
