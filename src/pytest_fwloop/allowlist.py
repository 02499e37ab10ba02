"""The allowlist runner (DESIGN.md §6): the only way a tester's command is ever run.

A command is an argv list; it runs only when its first tokens equal one of the allowed prefixes
(`fwloop_allowed_commands`, each line split like a shell would split it), never through a shell,
in the rootdir, within a timeout, with variables named like secrets removed from its environment,
and with only the tail of its output kept. The matching and the environment are pure functions;
`AllowlistRunner.run` is the one edge that starts a process.
"""

from __future__ import annotations

import shlex
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from pytest_fwloop.options import addopts_without_loop
from pytest_fwloop.procs import run_logged
from pytest_fwloop.redaction import SECRET_NAME

#: Output kept of one command, on disk and for the coder: the end is where the verdict is.
OUTPUT_TAIL_BYTES = 64 * 1024

Argv = tuple[str, ...]


def parse_prefixes(lines: Iterable[str]) -> tuple[Argv, ...]:
    """The allowlist from its ini lines; ValueError naming a line that does not split."""
    prefixes = []
    for line in lines:
        try:
            tokens = tuple(shlex.split(line))
        except ValueError as exc:
            raise ValueError(f"{line!r}: {exc}") from None
        if tokens:
            prefixes.append(tokens)
    return tuple(prefixes)


def blocked_reason(argv: Sequence[str], prefixes: Sequence[Argv]) -> str | None:
    """Why `argv` may not run, in one line; None when it starts with an allowed prefix."""
    if any(token == "--fwloop" or token.startswith("--fwloop-") for token in argv):
        return f"{shlex.join(argv)} would start a nested fwloop run"
    if any(tuple(argv[: len(prefix)]) == prefix for prefix in prefixes):
        return None
    allowed = ", ".join(shlex.join(prefix) for prefix in prefixes) or "nothing (empty allowlist)"
    return f"{shlex.join(argv)} starts with no allowed prefix (fwloop_allowed_commands: {allowed})"


@dataclass(frozen=True)
class BlockedCommand:
    argv: Argv
    reason: str


@dataclass(frozen=True)
class CommandCheck:
    """A tester's commands split into those that may run and those the allowlist refuses."""

    runnable: tuple[Argv, ...]
    blocked: tuple[BlockedCommand, ...]

    @property
    def only_blocked(self) -> bool:
        """Seed 004's `tester_command_blocked` condition: no runnable command, some blocked."""
        return not self.runnable and bool(self.blocked)


def check_commands(commands: Iterable[Sequence[str]], prefixes: Sequence[Argv]) -> CommandCheck:
    runnable: list[Argv] = []
    blocked: list[BlockedCommand] = []
    for argv in commands:
        reason = blocked_reason(argv, prefixes)
        if reason is None:
            runnable.append(tuple(argv))
        else:
            blocked.append(BlockedCommand(tuple(argv), reason))
    return CommandCheck(tuple(runnable), tuple(blocked))


def command_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """`environ` without variables named like secrets, and without `--fwloop` in
    PYTEST_ADDOPTS, so a `pytest` command neither sees a key nor starts another loop."""
    env = {name: value for name, value in environ.items() if not SECRET_NAME.search(name)}
    if "PYTEST_ADDOPTS" in env:
        env["PYTEST_ADDOPTS"] = addopts_without_loop(env["PYTEST_ADDOPTS"])
    return env


def output_tail(data: bytes, limit: int = OUTPUT_TAIL_BYTES) -> str:
    """The last `limit` bytes as text, marked when the head was cut."""
    if len(data) <= limit:
        return data.decode("utf-8", errors="replace")
    kept = data[-limit:].decode("utf-8", errors="replace")
    return f"[… {len(data) - limit} bytes cut …]\n{kept}"


class CommandBlocked(Exception):
    """A command outside the allowlist was handed to the runner; it did not run."""


@dataclass(frozen=True)
class CommandResult:
    argv: Argv
    returncode: int | None
    timed_out: bool
    duration: float
    output: str  # the tail, see OUTPUT_TAIL_BYTES
    start_error: str = ""  # why the program could not be started, if it could not

    @property
    def passed(self) -> bool:
        return self.returncode == 0 and not self.timed_out and not self.start_error

    def describe(self, timeout: float) -> str:
        """How it ended, in a few words."""
        if self.start_error:
            return f"could not start: {self.start_error}"
        if self.timed_out:
            return f"timed out after fwloop_command_timeout={timeout:g}s"
        return f"exit {self.returncode}"


class AllowlistRunner:
    """Runs allowlisted argv lists in `cwd`, one at a time, with the scrubbed environment."""

    def __init__(
        self,
        prefixes: Sequence[Argv],
        *,
        cwd: Path,
        timeout: float,
        abort: threading.Event,
        environ: Mapping[str, str],
    ) -> None:
        self.prefixes = tuple(prefixes)
        self.cwd = cwd
        self.timeout = timeout
        self.abort = abort
        self.env = command_environment(environ)

    def run(self, argv: Sequence[str], log_path: Path) -> CommandResult:
        """Run one command to completion, its timeout or an abort; its output tail stays in
        `log_path`. CommandBlocked when `argv` is not allowlisted."""
        reason = blocked_reason(argv, self.prefixes)
        if reason is not None:
            raise CommandBlocked(reason)
        try:
            result = run_logged(
                list(argv),
                cwd=self.cwd,
                log_path=log_path,
                timeout=self.timeout,
                abort=self.abort,
                env=self.env,
            )
        except OSError as exc:
            message = f"{exc.strerror or exc}: {argv[0]}"
            log_path.write_text(message + "\n", encoding="utf-8")
            return CommandResult(tuple(argv), None, False, 0.0, message, start_error=message)
        output = output_tail(log_path.read_bytes())
        log_path.write_text(output, encoding="utf-8")
        return CommandResult(
            tuple(argv), result.returncode, result.timed_out, result.duration, output
        )
