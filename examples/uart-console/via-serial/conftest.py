"""The stdio suite's `console` fixture again, over pytest-fwloop's `fwloop_serial`.

`fwloop_serial` opens `fwloop_serial_url` once per session (again after the line dropped) and
checks the board with a newline and `fwloop_console_ready`; a port that cannot be opened or a
board that does not answer is an environment failure, not a test failure.
"""

from __future__ import annotations

import itertools
import re
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pytest_fwloop.envs.serialport import SerialConsole

PROMPT = "> "
# Every reply is one line followed by the prompt, so this marks where a reply ends.
REPLY_END = "\n" + PROMPT
_sync_ids = itertools.count(1)


class SerialUart:
    """The same `command`/`send_raw` as tests/conftest.py's UartConsole, on a serial console."""

    def __init__(self, port: SerialConsole) -> None:
        self.port = port

    def sync(self) -> None:
        """Skip whatever an earlier test (or the banner) left unread, up to a fresh reply."""
        marker = f"sync-{next(_sync_ids)}"
        self.port.sendline(f"echo {marker}")
        self.port.expect(re.escape(marker + REPLY_END))

    def command(self, line: str) -> str:
        """Send one command line and return its reply line, without the newline and prompt."""
        return self.send_raw(line + "\n")

    def send_raw(self, data: str) -> str:
        """Send bytes exactly as given (line ending included) and return the next reply."""
        self.port.send(data)
        self.port.expect(re.escape(REPLY_END))
        return self.port.before


@pytest.fixture
def console(fwloop_serial: SerialConsole) -> SerialUart:
    uart = SerialUart(fwloop_serial)
    uart.sync()
    return uart
