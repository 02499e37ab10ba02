"""`claude` / `claude:MODEL`: Claude Code in headless mode, `claude -p --output-format json`.

The prompt goes on stdin (a single argv string is capped at 128 KiB on Linux, a request with
failures and a diff can be larger). Success is judged from the result object the CLI prints,
not from its exit status: 2.1.x exits 1 on an API error and still prints the object, with
`is_error: true` and the HTTP status in `api_error_status`, which decides the error's kind.

The CLI's own API retries are turned off (`CLAUDE_CODE_MAX_RETRIES=0`; it would retry every
error ten times, 401 included, for about three minutes a call): the role's retry policy is the
one that retries, with its backoff, inside the call's deadline.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, ValidationError

from pytest_fwloop.agents.base import RawAnswer, find_cli
from pytest_fwloop.agents.command import _exit_description, _last_line, run_agent_process
from pytest_fwloop.agents.errors import (
    ProviderError,
    ProviderErrorKind,
    classify_failure,
    kind_of_status,
)
from pytest_fwloop.agents.model_io import (
    TokenUsage,
    bare_schema,
    has_json_object,
    render_prompt,
)

if TYPE_CHECKING:
    from pytest_fwloop.agents.command import AgentProcessResult
    from pytest_fwloop.core.records.agent_protocol import AgentRequest


class PermissionDenial(BaseModel):
    """A tool call the permission mode refused (`tool_use_id` and `tool_input` are ignored)."""

    model_config = ConfigDict(extra="ignore")

    tool_name: str = "?"


class ClaudeResult(BaseModel):
    """The object `--output-format json` prints when the run ends; fields we do not use are
    ignored, so newer CLI versions with more fields still parse."""

    model_config = ConfigDict(extra="ignore")

    type: Literal["result"]
    subtype: str  # success, error_max_turns, error_during_execution, …
    is_error: bool = False
    result: str | None = None
    structured_output: JsonValue = None  # present when --json-schema was given
    errors: list[JsonValue] = Field(default_factory=list)  # details of the error_* subtypes
    permission_denials: list[PermissionDenial] = Field(default_factory=list)
    usage: TokenUsage | None = None
    total_cost_usd: float | None = None
    api_error_status: int | None = None  # the model API's HTTP status, on an API error

    def answer(self) -> str:
        if self.structured_output is not None:
            return json.dumps(self.structured_output, ensure_ascii=False)
        return self.result or ""

    def failure_reason(self) -> str:
        """What went wrong, for an error result: its text, else its error details."""
        return (
            self.result
            or "; ".join(json.dumps(error, ensure_ascii=False) for error in self.errors)
            or "no detail"
        )

    def usage_report(self) -> dict[str, float]:
        report = self.usage.report() if self.usage is not None else {}
        if self.total_cost_usd is not None:
            report["cost_usd"] = self.total_cost_usd
        return report


def parse_result(stdout: str) -> ClaudeResult | None:
    """The result object of a run, or None when stdout has none (the CLI failed before it).

    With `--verbose` the CLI prints every message as one JSON array; the result is the last.
    """
    try:
        document = json.loads(stdout)
    except ValueError:
        return None
    candidates = document if isinstance(document, list) else [document]
    for candidate in reversed(candidates):
        if isinstance(candidate, dict) and candidate.get("type") == "result":
            try:
                return ClaudeResult.model_validate(candidate)
            except ValidationError:
                return None
    return None


CLAUDE_REMEDY = "install Claude Code or choose another provider"
#: The tools a reviewer or tester is refused.
READ_ONLY_DENIED = "Edit,Write,MultiEdit,NotebookEdit"
_MODES = re.compile(r"--permission-mode\b.*?\(choices:(.*?)\)", re.DOTALL)


def cli_permission_modes(executable: str) -> tuple[str, list[str]]:
    """The CLI's version and the permission modes its `--help` lists ([] when it lists none)."""
    outputs = []
    for flag in ("--version", "--help"):
        try:
            done = subprocess.run(
                [executable, flag],
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired):
            return "?", []
        outputs.append(done.stdout)
    version = (outputs[0].split() or ["?"])[0]
    found = _MODES.search(outputs[1])
    return version, re.findall(r'"([^"]+)"', found.group(1)) if found else []


class ClaudeProvider:
    """Runs `claude -p` in the workspace. `permission_mode` (e.g. `acceptEdits`) is passed to
    coder calls only, letting the coder edit the workspace; reviewers and testers never get it."""

    def __init__(
        self, model: str = "", *, permission_mode: str | None = None, max_turns: int | None = None
    ) -> None:
        self.spec = f"claude:{model}" if model else "claude"
        self._model = model
        self._permission_mode = permission_mode
        self._max_turns = max_turns

    def argv(self, executable: str, request: AgentRequest) -> list[str]:
        argv = [executable, "-p", "--output-format", "json"]
        argv += ["--json-schema", json.dumps(bare_schema(request.schema_), ensure_ascii=False)]
        if self._model:
            argv += ["--model", self._model]
        if self._max_turns is not None:
            argv += ["--max-turns", str(self._max_turns)]
        mode = self._edit_mode(request)
        if mode:
            argv += ["--permission-mode", mode]
        if request.role != "coder":
            # Whatever the user's settings allow: a reviewer or tester must not change the tree.
            argv += ["--disallowedTools", READ_ONLY_DENIED]
        return argv

    def _edit_mode(self, request: AgentRequest) -> str | None:
        """The permission mode of this call: a reviewer or tester must not change the tree."""
        return self._permission_mode if request.role == "coder" else None

    def preflight(self) -> None:
        """Before the baseline: `claude` is on PATH and takes the configured permission mode
        (the modes differ between versions: 2.1.330 lists `manual` where 2.1.197 lists
        `default`; and it refuses `bypassPermissions` to root, as CI containers often run)."""
        executable = find_cli("claude", self.spec, CLAUDE_REMEDY)
        mode = self._permission_mode
        if mode is None:
            return
        if mode == "bypassPermissions" and os.geteuid() == 0:
            raise ProviderError(
                ProviderErrorKind.PROVIDER_PERMISSION_DENIED,
                self.spec,
                "fwloop_claude_permission_mode = bypassPermissions: Claude Code refuses it to "
                "root; use acceptEdits, or run as another user",
            )
        version, modes = cli_permission_modes(executable)
        if modes and mode not in modes:
            raise ProviderError(
                ProviderErrorKind.PROVIDER_BAD_OUTPUT,
                self.spec,
                f"fwloop_claude_permission_mode = {mode!r} is not a mode of claude {version}; "
                f"choose one of {', '.join(modes)}",
            )

    def call(self, request: AgentRequest, timeout: float) -> RawAnswer:
        executable = find_cli("claude", self.spec, CLAUDE_REMEDY)
        prompt = render_prompt(request, may_edit=bool(self._edit_mode(request)))
        process = run_agent_process(
            self.argv(executable, request),
            stdin=prompt.encode("utf-8"),
            cwd=request.workspace,
            timeout=timeout,
            provider=self.spec,
            env={"CLAUDE_CODE_MAX_RETRIES": "0"},
        )
        return self.judge(process)

    def judge(self, process: AgentProcessResult) -> RawAnswer:
        """The answer of a finished run, or the ProviderError its result object describes."""
        outcome = parse_result(process.stdout)
        if outcome is None:
            detail = _last_line(process.stderr) or _last_line(process.stdout) or "no output"
            raise ProviderError(
                classify_failure(f"{process.stderr}\n{process.stdout}")
                or ProviderErrorKind.PROVIDER_BAD_OUTPUT,
                self.spec,
                f"claude {_exit_description(process.returncode)} without a result object: {detail}",
                stderr=process.stderr,
            )
        answer = outcome.answer()
        failed = outcome.is_error or outcome.subtype != "success"
        kind = None
        if failed:
            kind = (
                kind_of_status(outcome.api_error_status, outcome.failure_reason())
                if outcome.api_error_status is not None
                else classify_failure(outcome.failure_reason())
            )
        denied = outcome.permission_denials
        if kind is None and denied and (failed or not has_json_object(answer)):
            # It kept reaching for tools it may not use and never answered: a permission
            # problem, which re-asking would not fix.
            tools = ", ".join(sorted({denial.tool_name for denial in denied}))
            kind = ProviderErrorKind.PROVIDER_PERMISSION_DENIED
            message = (
                f"claude gave no usable answer ({outcome.subtype}) after {len(denied)} denied "
                f"tool call(s) ({tools}); give the coder a permission mode such as acceptEdits, "
                "or have it answer with a patch"
            )
        elif failed:
            message = (
                f"claude reported {outcome.subtype} (is_error={str(outcome.is_error).lower()}): "
                f"{outcome.failure_reason()[:300]}"
            )
        else:
            return RawAnswer(text=answer, stderr=process.stderr, usage=outcome.usage_report())
        raise ProviderError(
            kind or ProviderErrorKind.PROVIDER_BAD_OUTPUT,
            self.spec,
            message,
            stderr=process.stderr,
            usage=outcome.usage_report(),
        )
