"""One console for every text transport: a reader thread feeds one buffer that `expect` searches.

Transports (a QEMU's stdio, a pyserial port, an SSH channel) only move bytes. Reading happens on
a thread of its own because a pty or pipe holds only a few KiB: a firmware writing more than that
while the test is not inside `expect` would otherwise block forever. Everything received and sent
goes into one `Transcript`, the log that per-test console files and failure reports are cut from.
"""

from __future__ import annotations

import codecs
import contextlib
import os
import re
import select
import subprocess
import threading
import time
from collections.abc import Callable
from typing import IO, TYPE_CHECKING, Protocol

from pytest_fwloop.envs.errors import ConsoleTimeout, EnvironmentFailure

if TYPE_CHECKING:
    from pathlib import Path
    from types import TracebackType

#: How long one transport read may block, which bounds how late `close()` stops the reader.
POLL_SECONDS = 0.05
READ_CHUNK = 65536
#: Characters of recent output quoted in error messages.
TAIL_CHARS = 200
#: A console nobody reads keeps at most this much unmatched text (pexpect's searchwindowsize idea).
MAX_BUFFER_CHARS = 4 * 1024 * 1024


class _Selectable(Protocol):
    """Anything `select` can wait on: a socket, a paramiko channel."""

    def fileno(self) -> int: ...


class Transport(Protocol):
    """The byte pipe under a console; each implementation is a few lines around a library."""

    @property
    def name(self) -> str:
        """Where the bytes come from, for messages: a URL, a program and its pid."""
        ...

    def read(self) -> bytes:
        """Wait at most POLL_SECONDS; b"" when nothing came. EOFError or OSError when gone."""
        ...

    def write(self, data: bytes) -> None:
        """Send all of `data`; OSError when the other end is gone."""
        ...

    def close(self) -> None:
        """Release the port, pipe or channel; never raises."""
        ...


class Transcript:
    """Append-only text log with absolute offsets, so a test can cut out its own segment.

    Keeps the last `limit` characters in memory; older text is dropped, offsets stay valid.
    """

    def __init__(self, limit: int = 8 * 1024 * 1024) -> None:
        self._limit = limit
        self._text = ""
        self._dropped = 0
        self._lock = threading.Lock()

    @property
    def end(self) -> int:
        """Offset just past the last character, to pass to `since` later."""
        with self._lock:
            return self._dropped + len(self._text)

    def append(self, text: str) -> None:
        with self._lock:
            self._text += text
            if len(self._text) > self._limit:
                cut = len(self._text) - self._limit // 2
                self._text = self._text[cut:]
                self._dropped += cut

    def since(self, offset: int) -> str:
        """Text from `offset` on (what is still kept of it)."""
        with self._lock:
            return self._text[max(0, offset - self._dropped) :]

    def tail(self, chars: int) -> str:
        return self.since(0)[-chars:]

    def write(self, path: Path, since: int = 0) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self.since(since), encoding="utf-8")


class Console:
    """`sendline`/`expect`/`before` over any Transport; `attach` swaps it after a reset.

    The transcript and the console object outlive the transport, so a fixture can hand the same
    console to every test while the machine behind it restarts.
    """

    def __init__(
        self,
        transport: Transport | None = None,
        *,
        name: str = "console",
        timeout: float = 10.0,
        newline: str = "\n",
        encoding: str = "utf-8",
    ) -> None:
        self.name = name
        self.timeout = timeout
        self.newline = newline
        self.encoding = encoding
        self.transcript = Transcript()
        self._changed = threading.Condition()
        self._buffer = ""
        self._before = ""
        self._failure: str | None = "not attached to a transport"
        self._transport: Transport | None = None
        self._reader: threading.Thread | None = None
        self._stop_reading = threading.Event()
        if transport is not None:
            self.attach(transport)

    def __enter__(self) -> Console:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    @property
    def before(self) -> str:
        """The text between the previous match and the last one."""
        return self._before

    @property
    def alive(self) -> bool:
        """True while the transport delivers; False after EOF, an error, or `close()`."""
        with self._changed:
            return self._failure is None

    def attach(self, transport: Transport) -> None:
        """Read from `transport` from now on; the old one is closed, unmatched text dropped."""
        self.close()
        decoder = codecs.getincrementaldecoder(self.encoding)(errors="replace")
        stop = threading.Event()
        with self._changed:
            self._transport = transport
            self._stop_reading = stop
            self._buffer = ""
            self._failure = None
        self.name = transport.name
        self._reader = threading.Thread(
            target=self._read_loop,
            args=(transport, decoder, stop),
            name=f"fwloop-console-{transport.name}",
            daemon=True,
        )
        self._reader.start()

    def close(self) -> None:
        """Stop the reader and release the transport; `attach` may follow."""
        self._stop_reading.set()
        if self._reader is not None:
            self._reader.join()
        self._reader = None
        with self._changed:
            transport, self._transport = self._transport, None
            if self._failure is None:
                self._failure = "closed"
            self._changed.notify_all()
        if transport is not None:
            transport.close()

    def send(self, text: str) -> None:
        """Write `text` as is; a dead transport is an EnvironmentFailure."""
        with self._changed:
            transport, failure = self._transport, self._failure
        if transport is None or failure is not None:
            raise EnvironmentFailure(
                f"fwloop: console {self.name}: cannot send ({failure}); "
                "check that the target is still running"
            )
        self.transcript.append(text)
        try:
            transport.write(text.encode(self.encoding))
        except OSError as exc:
            raise EnvironmentFailure(
                f"fwloop: console {self.name}: sending failed ({exc}); "
                "check that the target is still running"
            ) from exc

    def sendline(self, text: str = "") -> None:
        self.send(text + self.newline)

    def expect(self, pattern: str | re.Pattern[str], timeout: float | None = None) -> re.Match[str]:
        """Wait for `pattern` in what arrived since the last match and consume up to its end.

        ConsoleTimeout when it does not appear in time (the firmware's fault); EnvironmentFailure
        when the transport ends first (the rig's fault).
        """
        regex = re.compile(pattern) if isinstance(pattern, str) else pattern
        limit = self.timeout if timeout is None else timeout
        deadline = time.monotonic() + limit
        with self._changed:
            while True:
                match = regex.search(self._buffer)
                if match is not None:
                    self._before = self._buffer[: match.start()]
                    self._buffer = self._buffer[match.end() :]
                    return match
                if self._failure is not None:
                    raise EnvironmentFailure(
                        f"fwloop: console {self.name}: {self._failure} while waiting for "
                        f"{regex.pattern!r}; last output: {self._tail()!r}; "
                        "check that the target is still running"
                    )
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise ConsoleTimeout(
                        f"fwloop: console {self.name}: {regex.pattern!r} did not appear within "
                        f"{limit:g} s; last {TAIL_CHARS} chars seen: {self._tail()!r}"
                    )
                self._changed.wait(remaining)

    def _tail(self) -> str:
        return self.transcript.tail(TAIL_CHARS)

    def _read_loop(
        self, transport: Transport, decoder: codecs.IncrementalDecoder, stop: threading.Event
    ) -> None:
        failure = "closed"
        try:
            while not stop.is_set():
                data = transport.read()
                if data:
                    self._received(decoder.decode(data))
        except EOFError as exc:
            failure = str(exc) or "end of file"
        except Exception as exc:  # any death must reach `expect`, or it would wait in vain
            failure = f"{type(exc).__name__}: {exc}"
        with self._changed:
            if not stop.is_set():
                self._failure = failure
            self._changed.notify_all()

    def _received(self, text: str) -> None:
        if not text:
            return
        self.transcript.append(text)
        with self._changed:
            self._buffer += text
            if len(self._buffer) > MAX_BUFFER_CHARS:
                self._buffer = self._buffer[-MAX_BUFFER_CHARS // 2 :]
            self._changed.notify_all()


class ProcessTransport:
    """A child process's stdin/stdout, e.g. QEMU with `-serial stdio`.

    The process belongs to the caller (who starts and stops it); EOF reports its exit status and
    the end of its stderr when that was sent to a file.
    """

    def __init__(
        self, process: subprocess.Popen[bytes], name: str, stderr: IO[bytes] | None = None
    ) -> None:
        if process.stdin is None or process.stdout is None:
            raise ValueError("ProcessTransport needs a process started with stdin/stdout=PIPE")
        self._process = process
        self._stdin = process.stdin
        self._stdout_fd = process.stdout.fileno()
        self._stderr = stderr
        self._name = name

    @property
    def name(self) -> str:
        return self._name

    def read(self) -> bytes:
        return poll_read(
            self._stdout_fd,
            lambda size: os.read(self._stdout_fd, size),
            lambda: f"{self._name} {self.exit_reason()}",
        )

    def write(self, data: bytes) -> None:
        self._stdin.write(data)
        self._stdin.flush()

    def close(self) -> None:
        for stream in (self._process.stdin, self._process.stdout):
            if stream is not None:
                # A broken pipe on the final flush changes nothing.
                with contextlib.suppress(OSError):
                    stream.close()

    def exit_reason(self) -> str:
        """'exited with status N (last stderr line)' or 'closed its output', for messages."""
        try:
            status = self._process.wait(timeout=POLL_SECONDS * 10)
        except subprocess.TimeoutExpired:
            return "closed its output"
        reason = f"exited with status {status}"
        detail = stderr_tail(self._stderr)
        return f"{reason} ({detail})" if detail else reason


def poll_read(
    source: int | _Selectable, receive: Callable[[int], bytes], closed: Callable[[], str]
) -> bytes:
    """One `Transport.read` over anything `select` can wait on: b"" when nothing came within
    POLL_SECONDS, the bytes that did, or EOFError saying why (`closed()`) at end of stream."""
    ready, _, _ = select.select([source], [], [], POLL_SECONDS)
    if not ready:
        return b""
    data = receive(READ_CHUNK)
    if not data:
        raise EOFError(closed())
    return data


def stderr_tail(stderr: IO[bytes] | None, chars: int = TAIL_CHARS) -> str:
    """The last non-empty lines of a process's stderr file, joined into one line."""
    if stderr is None:
        return ""
    fd = stderr.fileno()
    size = os.fstat(fd).st_size
    data = os.pread(fd, chars, max(0, size - chars)).decode("utf-8", "replace")
    return " / ".join(line.strip() for line in data.splitlines() if line.strip())
