"""The firmware's console, reached through pytest-fwloop's `fwloop_qemu` fixture.

`fwloop_qemu` boots build/firmware.elf in QEMU once per session (again whenever the file
changes) and waits for the banner in `fwloop_console_ready`; a QEMU that cannot start or a
firmware that never prints its banner is an environment failure, not a test failure.
"""

from __future__ import annotations

import itertools
import re
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pytest_fwloop.envs.console import Console

# Every reply is one line followed by the prompt, so this marks where a reply ends.
REPLY_END = "\n> "
_sync_ids = itertools.count(1)


class Shell:
    """One command line in, its reply line out."""

    def __init__(self, console: Console) -> None:
        self.console = console

    def sync(self) -> None:
        """Skip whatever an earlier test left unread, up to a fresh, unique reply."""
        marker = f"sync-{next(_sync_ids)}"
        self.console.sendline(f"echo {marker}")
        self.console.expect(re.escape(marker + REPLY_END))

    def command(self, line: str) -> str:
        self.console.sendline(line)
        self.console.expect(REPLY_END)
        return self.console.before


@pytest.fixture
def shell(fwloop_qemu: Console) -> Shell:
    shell = Shell(fwloop_qemu)
    shell.sync()
    return shell
