"""Running an allowlisted command (DESIGN.md §6): the only way a tester's command is ever run.

Never through a shell: in the rootdir, within a timeout, with variables named like secrets removed
from its environment, and with only the tail of its output kept. Each command is judged again by
`core/gate/allowlist.py` right before it starts; `AllowlistRunner.run` is the one edge that starts a
process.
"""

from __future__ import annotations

import os
import shlex
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from pytest_fwloop.core.gate.allowlist import (
    Argv,
    CommandCheck,
    blocked_reason,
    check_commands,
    path_argument_problem,
)
from pytest_fwloop.core.records.redaction import SECRET_NAME
from pytest_fwloop.procs.supervision import addopts_without_loop, run_logged

#: Output kept of one command, on disk and for the coder: the end is where the verdict is.
OUTPUT_TAIL_BYTES = 64 * 1024


def command_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """`environ` without variables named like secrets, without `--fwloop` in PYTEST_ADDOPTS,
    and without relative PATH entries, so a command neither sees a key, nor starts another
    loop, nor is a program the coder wrote into the tree (`''` and `.` search the rootdir).
    Nothing else changes: the environment is the user's, and nothing in it comes from an agent."""
    env = {name: value for name, value in environ.items() if not SECRET_NAME.search(name)}
    if "PYTEST_ADDOPTS" in env:
        env["PYTEST_ADDOPTS"] = addopts_without_loop(env["PYTEST_ADDOPTS"])
    if "PATH" in env:
        entries = env["PATH"].split(os.pathsep)
        env["PATH"] = os.pathsep.join(entry for entry in entries if os.path.isabs(entry))
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
    #: Protected paths the command changed (and the loop put back): a failure whatever its exit.
    tampered: tuple[str, ...] = ()

    @property
    def passed(self) -> bool:
        ended_well = self.returncode == 0 and not self.timed_out
        return ended_well and not self.start_error and not self.tampered

    def describe(self, timeout: float) -> str:
        """How it ended, in a few words."""
        if self.start_error:
            return f"could not start: {self.start_error}"
        if self.tampered:
            return f"changed protected files ({', '.join(self.tampered[:5])}), which were put back"
        if self.timed_out:
            return f"timed out after fwloop_command_timeout={timeout:g}s"
        return f"exit {self.returncode}"


class AllowlistRunner:
    """Runs allowlisted argv lists in `cwd` (the rootdir, the tree their paths must stay in),
    one at a time, with the scrubbed environment."""

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

    def check(self, commands: Iterable[Sequence[str]]) -> CommandCheck:
        """The tester's commands judged as `run` will judge them."""
        return check_commands(commands, self.prefixes, self.cwd)

    def run(self, argv: Sequence[str], log_path: Path) -> CommandResult:
        """Run one command to completion, its timeout or an abort; its output tail stays in
        `log_path`. CommandBlocked when `argv` is not allowed; judged again here, since the
        tree may have changed (a symlink, a config file) since the plan was checked."""
        reason = blocked_reason(argv, self.prefixes, self.cwd)
        if reason is not None:
            raise CommandBlocked(reason)
        return self._start(argv, log_path)

    def run_with_paths(self, prefix: Argv, paths: Sequence[str], log_path: Path) -> CommandResult:
        """Run the allowlisted `prefix` as written (the operator's line, which may end with any
        option) with `paths` appended, each judged as a file to read inside the tree;
        CommandBlocked naming the first one that is not (a name the tool would read as an
        option, a response file or a variable)."""
        if prefix not in self.prefixes:
            raise CommandBlocked(f"{shlex.join(prefix)} is not an allowed command")
        for path in paths:
            problem = path_argument_problem(path, self.cwd)
            if problem is not None:
                raise CommandBlocked(problem)
        return self._start((*prefix, *paths), log_path)

    def _start(self, argv: Sequence[str], log_path: Path) -> CommandResult:
        """Start `argv` (judged already) and wait for it, its timeout or an abort."""
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
