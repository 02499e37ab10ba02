"""Fixtures that drive the host-built UART console firmware (`build/uartcon`) through pexpect."""

from __future__ import annotations

import errno
import itertools
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pexpect
import pytest

if TYPE_CHECKING:
    from collections.abc import Iterator

FIRMWARE = Path(__file__).resolve().parent.parent / "build" / "uartcon"
BANNER = "UARTCON v1.0 ready"
PROMPT = "> "
# Every reply is one line followed by the prompt, so this marks where a reply ends.
REPLY_END = "\n" + PROMPT
TIMEOUT_S = 2.0


class _CurrentStdout:
    """Writes to whatever sys.stdout is now, so pytest files the console traffic under the
    phase of the test that caused it ("Captured stdout call")."""

    def write(self, text: str) -> int:
        return sys.stdout.write(text)

    def flush(self) -> None:
        sys.stdout.flush()


class UartConsole:
    """One running firmware process and its console, kept up across the tests of a module."""

    def __init__(self, firmware: Path) -> None:
        self.firmware = firmware
        self.child: pexpect.spawn | None = None
        self._sync_ids = itertools.count(1)

    def start(self) -> None:
        """Boot the firmware and wait for its banner; a missing binary is FileNotFoundError."""
        if not self.firmware.is_file():
            raise FileNotFoundError(
                errno.ENOENT,
                f"firmware not built; run `make` in {self.firmware.parent.parent}",
                str(self.firmware),
            )
        # Raw bytes both ways: the firmware puts the pty in raw mode itself, echo=False
        # keeps our own input off the console in the instant before it does.
        child = pexpect.spawn(
            str(self.firmware), [], encoding="utf-8", timeout=TIMEOUT_S, echo=False
        )
        child.delaybeforesend = None  # pexpect's 50 ms per send would dominate the suite
        # What is sent and what comes back, interleaved like a terminal session.
        child.logfile_read = child.logfile_send = _CurrentStdout()
        try:
            child.expect_exact(BANNER + REPLY_END)
        except pexpect.ExceptionPexpect:
            child.close(force=True)
            raise
        self.child = child

    def stop(self) -> None:
        if self.child is not None:
            self.child.close(force=True)
            self.child = None

    def running(self) -> pexpect.spawn:
        """The live child; restarts the firmware if an earlier test left it dead."""
        if self.child is None or not self.child.isalive():
            self.stop()
            self.start()
        assert self.child is not None
        return self.child

    def sync(self) -> None:
        """Discard whatever an earlier test left unread, up to a fresh, unique reply."""
        marker = f"sync-{next(self._sync_ids)}"
        child = self.running()
        # Kept out of the transcript: it says nothing about the test that follows.
        logfile, child.logfile_read, child.logfile_send = child.logfile_read, None, None
        try:
            child.sendline(f"echo {marker}")
            child.expect_exact(marker + REPLY_END)
        finally:
            child.logfile_read = child.logfile_send = logfile

    def command(self, line: str) -> str:
        """Send one command line and return its reply line, without the newline and prompt."""
        return self.send_raw(line + "\n")

    def send_raw(self, data: str) -> str:
        """Send bytes exactly as given (line ending included) and return the next reply."""
        assert self.child is not None
        self.child.send(data)
        self.child.expect_exact(REPLY_END)
        return str(self.child.before)


@pytest.fixture(scope="module")
def uart_console() -> Iterator[UartConsole]:
    """The firmware, booted once per test module (booting costs more than a command)."""
    console = UartConsole(FIRMWARE)
    console.start()
    yield console
    console.stop()


@pytest.fixture
def console(uart_console: UartConsole) -> UartConsole:
    """The module's console, synced for this test."""
    uart_console.sync()
    return uart_console
