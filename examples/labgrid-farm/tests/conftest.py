"""The board's console through labgrid: `target` is the place in remote.yaml (under the loop, the
one it reserved and locked), and its ConsoleProtocol is the SerialDriver on the place's
NetworkSerialPort."""

from __future__ import annotations

import itertools
import re
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from labgrid import Target
    from labgrid.protocol import ConsoleProtocol

PROMPT = "> "
# Every reply is one line followed by the prompt, so this marks where a reply ends.
REPLY_END = "\n" + PROMPT
TIMEOUT_S = 10.0
_sync_ids = itertools.count(1)


class Board:
    """The console of the board labgrid attached, one command line and one reply at a time."""

    def __init__(self, console: ConsoleProtocol) -> None:
        self.console = console

    def sync(self) -> None:
        """Skip whatever is unread (the banner, an earlier test's leftovers) up to a fresh reply.
        Never wait for the banner itself: pyserial's open may flush it before we read."""
        marker = f"sync-{next(_sync_ids)}"
        self.console.sendline(f"echo {marker}")
        self.console.expect(re.escape(marker + REPLY_END), timeout=TIMEOUT_S)

    def command(self, line: str) -> str:
        """Send one command line and return its reply, without the newline and prompt."""
        self.console.sendline(line)
        _, before, _, _ = self.console.expect(re.escape(REPLY_END), timeout=TIMEOUT_S)
        reply: str = before.decode(errors="replace")
        print(f"{PROMPT}{line}\n{reply}")  # the traffic, under "Captured stdout call"
        return reply.strip("\r")


@pytest.fixture(scope="session")
def console(target: Target) -> ConsoleProtocol:
    # Getting the driver activates it: labgrid opens the place's serial port here.
    driver: ConsoleProtocol = target.get_driver("ConsoleProtocol")
    return driver


@pytest.fixture
def board(console: ConsoleProtocol) -> Board:
    board = Board(console)
    board.sync()
    return board
