"""`codex` / `codex:MODEL`: the OpenAI Codex CLI, `codex exec --json … -`.

stdout is JSONL events (`thread.started`, `turn.started`, `item.*`, `turn.completed`,
`turn.failed`, `error`); the events decide success, not the exit status. The answer is the text
of the last `agent_message` item. The prompt goes on stdin (`-`), as for claude.

`--output-schema` is not used: Codex sends it as an OpenAI strict structured-output schema,
which needs `additionalProperties: false` and every property required, and rejects `if`/`then`;
the shipped schemas (optional `file`/`line`, the reviewer's rule) are not of that form, so the
schema travels in the prompt and the JSON gate enforces it.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, ValidationError

from pytest_fwloop.agents.base import RawAnswer, find_cli
from pytest_fwloop.agents.command import _exit_description, run_agent_process
from pytest_fwloop.agents.errors import ProviderError, ProviderErrorKind, classify_failure
from pytest_fwloop.agents.model_io import TokenUsage, has_json_object, render_prompt

if TYPE_CHECKING:
    from collections.abc import Mapping

    from pytest_fwloop.agents.command import AgentProcessResult
    from pytest_fwloop.core.records.agent_protocol import AgentRequest


class CodexItem(BaseModel):
    """A thread item; only the fields of the types read here (agent_message, command_execution,
    file_change) are kept."""

    model_config = ConfigDict(extra="ignore")

    type: str
    text: str = ""
    status: str = ""
    command: str = ""
    aggregated_output: str = ""  # command_execution's output


class CodexError(BaseModel):
    model_config = ConfigDict(extra="ignore")

    message: str = ""


class CodexEvent(BaseModel):
    """One line of `codex exec --json`, whatever its `type`."""

    model_config = ConfigDict(extra="ignore")

    type: str
    item: CodexItem | None = None
    usage: TokenUsage | None = None
    error: CodexError | None = None  # turn.failed
    message: str = ""  # error


@dataclass
class CodexTurn:
    """What the events of one `codex exec` run add up to."""

    message: str | None = None  # the last agent_message
    completed: bool = False
    failure: str | None = None  # turn.failed's message
    errors: list[str] = field(default_factory=list)  # `error` events, often retries in flight
    refused: list[str] = field(default_factory=list)  # declined commands, failed file changes
    usage: dict[str, float] = field(default_factory=dict)
    events: int = 0


READ_ONLY = "Read-only file system"
#: What 0.169 prints on stderr, and nowhere else, when its sandbox or approval policy refuses.
SANDBOX_REFUSALS = (
    "writing is blocked by read-only sandbox",
    "approval policy is Never",
    "recorded sandbox violation",
)
#: A shell command its sandbox stopped leaves no event at all in 0.169; only this log target
#: says so, on stderr, when asked (`RUST_LOG`).
VIOLATION_LOG = "codex_sandboxing::violation=warn"


def stderr_refusal(line: str) -> str | None:
    """A stderr line's sandbox refusal, from its words on (a log line's time stamp and level
    say nothing), or None."""
    found = [line.index(refusal) for refusal in SANDBOX_REFUSALS if refusal in line]
    return line[min(found) :].strip() if found else None


def log_filter(user_filter: str) -> str:
    """`RUST_LOG` for a call: the user's filter, else Codex's own default (errors, among them
    apply_patch's refusal), plus the sandbox's violations."""
    return f"{user_filter or 'error'},{VIOLATION_LOG}"


def temp_home_warning(environ: Mapping[str, str]) -> str | None:
    """A warning when Codex's home is under the temp dir: 0.169 then refuses to create its
    helper binaries, and `apply_patch` fails to write any file below the workspace's top."""
    if environ.get("CODEX_HOME"):
        home = Path(environ["CODEX_HOME"])
    else:
        home = Path(environ.get("HOME", "~"), ".codex").expanduser()
    temp = Path(environ.get("TMPDIR") or "/tmp")  # where Rust's env::temp_dir looks
    if not Path(os.path.realpath(home)).is_relative_to(os.path.realpath(temp)):
        return None
    return (
        f"fwloop: warning: Codex's home {home} (CODEX_HOME) is under the temp dir {temp}, where "
        "Codex will not create its helper binaries, so its edits of files in subdirectories "
        f"fail; set CODEX_HOME to a directory outside {temp}"
    )


def read_events(stdout: str) -> CodexTurn:
    """Fold the JSONL events into a CodexTurn; lines that are not events are skipped."""
    turn = CodexTurn()
    for line in stdout.splitlines():
        try:
            event = CodexEvent.model_validate(json.loads(line))
        except (ValueError, ValidationError):
            continue
        turn.events += 1
        if event.type == "item.completed" and event.item is not None:
            item = event.item
            if item.type == "agent_message":
                turn.message = item.text
            elif item.type == "command_execution" and item.status == "declined":
                turn.refused.append(f"command {item.command!r} declined")
            elif item.type == "command_execution" and READ_ONLY in item.aggregated_output:
                # 0.169 shows a write the sandbox stopped as a failed command, never declined.
                turn.refused.append(f"command {item.command!r}: {READ_ONLY}")
            elif item.type == "file_change" and item.status == "failed":
                turn.refused.append("file change failed")
        elif event.type == "turn.completed":
            turn.completed = True
            if event.usage is not None:
                turn.usage = event.usage.report()
        elif event.type == "turn.failed":
            turn.failure = event.error.message if event.error is not None else "no detail"
        elif event.type == "error":
            turn.errors.append(event.message)
    return turn


CODEX_REMEDY = "install the Codex CLI or choose another provider"


def telling_line(stderr: str) -> str:
    """The stderr line that says what went wrong and what to do, not merely its last line:
    Codex ends a config error with where it was (`in model_providers.x.wire_api`) after the
    line that says how to fix it."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    fixes = [line for line in lines if line.lower().startswith("how to fix")]
    errors = [line for line in lines if line.lower().startswith("error")]
    telling = [*errors[-1:], *fixes[-1:]]
    return " ".join(telling) if telling else (lines[-1] if lines else "")


class CodexProvider:
    """Runs `codex exec` in the workspace. A coder's sandbox comes from the user's Codex config
    (read-only unless they set otherwise), so a codex coder normally answers with a patch; a
    reviewer or a tester always runs `--sandbox read-only`: under `workspace-write` a reviewer
    once applied the fix itself, and the coder's patch then no longer applied."""

    def __init__(self, model: str = "") -> None:
        self.spec = f"codex:{model}" if model else "codex"
        self._model = model

    def argv(self, executable: str, role: str = "coder") -> list[str]:
        # The loop snapshots the tree itself, so the workspace need not be a git repository.
        argv = [executable, "exec", "--json", "--skip-git-repo-check"]
        if role != "coder":
            argv += ["--sandbox", "read-only"]
        if self._model:
            argv += ["--model", self._model]
        return [*argv, "-"]

    def preflight(self) -> None:
        """Before the baseline: `codex` is on PATH."""
        find_cli("codex", self.spec, CODEX_REMEDY)

    def preflight_warnings(self) -> list[str]:
        """Before the baseline: what will make Codex fail though it is installed."""
        warning = temp_home_warning(os.environ)
        return [warning] if warning else []

    def call(self, request: AgentRequest, timeout: float) -> RawAnswer:
        executable = find_cli("codex", self.spec, CODEX_REMEDY)
        process = run_agent_process(
            self.argv(executable, request.role),
            stdin=render_prompt(request).encode("utf-8"),
            cwd=request.workspace,
            timeout=timeout,
            provider=self.spec,
            env={"RUST_LOG": log_filter(os.environ.get("RUST_LOG", ""))},
        )
        return self.judge(process)

    def judge(self, process: AgentProcessResult) -> RawAnswer:
        """The answer of a finished run, or the ProviderError its events describe."""
        turn = read_events(process.stdout)
        if turn.failure is not None or not turn.completed:
            if turn.failure is not None:
                reason = f"turn failed: {turn.failure}"
            elif turn.errors:
                reason = f"error: {turn.errors[-1]}"
            else:
                detail = telling_line(process.stderr) or "no stderr"
                reason = (
                    f"{_exit_description(process.returncode)} after {turn.events} event(s) "
                    f"and no turn.completed: {detail}"
                )
            raise ProviderError(
                classify_failure(reason) or ProviderErrorKind.PROVIDER_BAD_OUTPUT,
                self.spec,
                f"codex {reason}",
                stderr=process.stderr,
                usage=turn.usage,
            )
        answer = turn.message or ""
        turn.refused += [r for r in map(stderr_refusal, process.stderr.splitlines()) if r]
        if turn.refused and not has_json_object(answer):
            raise ProviderError(
                ProviderErrorKind.PROVIDER_PERMISSION_DENIED,
                self.spec,
                f"codex gave no JSON answer; its sandbox refused {len(turn.refused)} "
                f"action(s) ({'; '.join(turn.refused[:3])}): have it answer with a patch, or "
                "widen sandbox_mode in the Codex config",
                stderr=process.stderr,
                usage=turn.usage,
            )
        return RawAnswer(text=answer, stderr=process.stderr, usage=turn.usage)
