"""`command:PATH`: any executable speaking the wire protocol, one JSON object in and one out.

`run_agent_process` is the part CLI providers share (claude, codex): no shell, the request on
stdin, a deadline for the whole call, bounded output, and nothing left running afterwards.
"""

from __future__ import annotations

import json
import os
import selectors
import shutil
import signal
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_fwloop.agents.base import RawAnswer
from pytest_fwloop.agents.errors import ProviderError, ProviderErrorKind
from pytest_fwloop.procs.supervision import stop_group

if TYPE_CHECKING:
    from collections.abc import Sequence

    from pytest_fwloop.core.records.agent_protocol import AgentRequest

#: An answer is one JSON object; more than this is a runaway process, not an answer.
MAX_STDOUT_BYTES = 4 * 1024 * 1024
#: Only the end of stderr is kept: that is where the reason for a failure usually is.
STDERR_TAIL_BYTES = 64 * 1024
_CHUNK = 64 * 1024


@dataclass(frozen=True)
class AgentProcessResult:
    returncode: int
    stdout: str
    stderr: str


class _OutputTooLarge(Exception):
    pass


def run_agent_process(
    argv: Sequence[str],
    *,
    stdin: bytes,
    cwd: str,
    timeout: float,
    provider: str,
    env: Mapping[str, str] | None = None,
) -> AgentProcessResult:
    """Run `argv` to completion within `timeout` seconds, feeding it `stdin`; `env` is set on
    top of the loop's own environment.

    Raises ProviderError for what is never an answer: cannot start, timeout, too much output,
    stdout that is not UTF-8. A non-zero exit is returned; its meaning is the provider's to judge.
    """
    process = _start(argv, cwd=cwd, provider=provider, env=env)
    with process:  # closes the pipes on every path
        stdout, stderr = _exchange_or_stop(process, stdin, timeout, argv[0], provider)
    return AgentProcessResult(
        returncode=process.returncode,
        stdout=_decode_stdout(stdout, argv[0], provider),
        stderr=stderr.decode("utf-8", errors="replace"),
    )


def _start(
    argv: Sequence[str], *, cwd: str, provider: str, env: Mapping[str, str] | None
) -> subprocess.Popen[bytes]:
    """Start `argv` without a shell; failing to start is a ProviderError, never an answer."""
    program = argv[0]
    try:
        return subprocess.Popen(
            argv,
            cwd=cwd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,  # its own process group, so a timeout stops its children too
            env={**os.environ, **env} if env else None,
        )
    except FileNotFoundError as exc:
        raise ProviderError(
            ProviderErrorKind.PROVIDER_NOT_FOUND,
            provider,
            f"cannot start {program}: {exc.strerror}: {exc.filename}; "
            "check the path, its #! line and the workspace",
        ) from None
    except OSError as exc:
        # EACCES, a directory, or no #! line (ENOEXEC): the file is there but cannot be run.
        raise ProviderError(
            ProviderErrorKind.PROVIDER_PERMISSION_DENIED,
            provider,
            f"cannot execute {program}: {exc.strerror}; make it executable (chmod +x, #! line)",
        ) from None


def _exchange_or_stop(
    process: subprocess.Popen[bytes], stdin: bytes, timeout: float, program: str, provider: str
) -> tuple[bytes, bytes]:
    """`_exchange`, but nothing is left running if it fails: the whole group is stopped."""
    try:
        return _exchange(process, stdin, time.monotonic() + timeout)
    except subprocess.TimeoutExpired:
        stop_group(process)
        raise ProviderError(
            ProviderErrorKind.PROVIDER_TIMEOUT,
            provider,
            f"{program} gave no answer within {timeout:g} s and was stopped; "
            "raise the agent timeout or make it answer sooner",
        ) from None
    except _OutputTooLarge:
        stop_group(process)
        raise ProviderError(
            ProviderErrorKind.PROVIDER_BAD_OUTPUT,
            provider,
            f"{program} wrote more than {MAX_STDOUT_BYTES} bytes to stdout; "
            "an answer is one JSON object, send logs to stderr",
        ) from None
    except BaseException:
        stop_group(process)
        raise


def _decode_stdout(stdout: bytes, program: str, provider: str) -> str:
    """The answer is JSON text; bytes that are not UTF-8 can never be one."""
    try:
        return stdout.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ProviderError(
            ProviderErrorKind.PROVIDER_BAD_OUTPUT,
            provider,
            f"{program} wrote stdout that is not UTF-8 ({exc.reason} at byte {exc.start})",
        ) from None


def _exchange(
    process: subprocess.Popen[bytes], data: bytes, deadline: float
) -> tuple[bytes, bytes]:
    """Write `data` to stdin while reading stdout and stderr, until exit or the deadline.

    Popen.communicate, but with stdout capped and only the tail of stderr kept.
    """
    stdin = process.stdin
    assert stdin is not None
    assert process.stdout is not None
    assert process.stderr is not None
    stdout, stderr = bytearray(), bytearray()
    written = 0
    with selectors.DefaultSelector() as selector:
        os.set_blocking(stdin.fileno(), False)
        selector.register(stdin, selectors.EVENT_WRITE)
        selector.register(process.stdout, selectors.EVENT_READ, stdout)
        selector.register(process.stderr, selectors.EVENT_READ, stderr)
        while selector.get_map():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise subprocess.TimeoutExpired(process.args, 0)
            for key, _ in selector.select(remaining):
                if key.fileobj is stdin:
                    try:
                        written += os.write(key.fd, data[written : written + _CHUNK])
                    except BlockingIOError:
                        continue
                    except BrokenPipeError:
                        written = len(data)  # it stopped reading; its exit status will say why
                    if written >= len(data):
                        selector.unregister(stdin)
                        stdin.close()  # EOF: the request is complete
                    continue
                chunk = os.read(key.fd, _CHUNK)
                if not chunk:
                    selector.unregister(key.fileobj)
                    continue
                buffer: bytearray = key.data
                buffer += chunk
                if buffer is stdout and len(buffer) > MAX_STDOUT_BYTES:
                    raise _OutputTooLarge
                if buffer is stderr:
                    del buffer[:-STDERR_TAIL_BYTES]
    process.wait(max(deadline - time.monotonic(), 0))
    return bytes(stdout), bytes(stderr)


class CommandProvider:
    """`command:PATH`: PATH is relative to the rootdir unless absolute; a bare name is looked
    up on PATH. Paths cannot contain commas (the failover list is comma-separated)."""

    def __init__(self, path: str, rootdir: Path) -> None:
        self.spec = f"command:{path}"
        self._path = path
        self._rootdir = rootdir

    def executable(self) -> str:
        """Resolved at each call, so installing the tool mid-run works and failover stays lazy."""
        if os.sep not in self._path and (os.altsep is None or os.altsep not in self._path):
            found = shutil.which(self._path)
            if found is None:
                # As in a shell, a bare name never runs a file of the tree by accident.
                local = self._rootdir / self._path
                remedy = (
                    f"to run {local} write command:./{self._path}"
                    if local.exists()
                    else "install it or give its path"
                )
                raise ProviderError(
                    ProviderErrorKind.PROVIDER_NOT_FOUND,
                    self.spec,
                    f"the '{self._path}' executable is not on PATH; {remedy}",
                )
            return found
        executable = Path(self._path) if os.path.isabs(self._path) else self._rootdir / self._path
        if not executable.exists():
            raise ProviderError(
                ProviderErrorKind.PROVIDER_NOT_FOUND,
                self.spec,
                f"{executable} does not exist; create it or fix the path",
            )
        return str(executable)

    def preflight(self) -> None:
        """Before the baseline: the program exists and may be executed."""
        executable = self.executable()
        if not os.access(executable, os.X_OK):
            raise ProviderError(
                ProviderErrorKind.PROVIDER_PERMISSION_DENIED,
                self.spec,
                f"{executable} is not executable; chmod +x it",
            )

    def call(self, request: AgentRequest, timeout: float) -> RawAnswer:
        executable = self.executable()
        wire = json.dumps(request.to_wire(), ensure_ascii=False) + "\n"
        result = run_agent_process(
            [executable],
            stdin=wire.encode("utf-8"),
            cwd=request.workspace,
            timeout=timeout,
            provider=self.spec,
        )
        if result.returncode != 0:
            raise ProviderError(
                ProviderErrorKind.PROVIDER_BAD_OUTPUT,
                self.spec,
                f"{executable} {_exit_description(result.returncode)}: "
                f"{_last_line(result.stderr) or 'no stderr'}",
            )
        return RawAnswer(text=result.stdout, stderr=result.stderr)


def _exit_description(returncode: int) -> str:
    if returncode < 0:
        try:
            return f"was killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"was killed by signal {-returncode}"
    return f"exited with status {returncode}"


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1][:200] if lines else ""
