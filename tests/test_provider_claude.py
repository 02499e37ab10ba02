"""`claude` against a real `claude` executable on PATH that behaves like Claude Code headless.

The fake parses its options as the real CLI does (unknown options and bad permission modes are
errors), reads the prompt from stdin, and prints the result object of `--output-format json`
with the real field names; what each call does comes from a script of steps the test writes.
"""

from __future__ import annotations

import json
from functools import partial
from typing import TYPE_CHECKING

import pytest

from agentkit import FakeCli, command_coder, make_request, role_agent
from pytest_fwloop.agents.claude import ClaudeProvider
from pytest_fwloop.agents.errors import ProviderError, ProviderErrorKind, SpecError
from pytest_fwloop.agents.registry import parse_role_specs
from pytest_fwloop.agents.role import CallRecord
from pytest_fwloop.core.records.agent_protocol import (
    CoderAnswer,
    Failure,
    ReviewerAnswer,
)

if TYPE_CHECKING:
    from pathlib import Path

CODER_ANSWER: dict[str, object] = {
    "analysis": {
        "root_cause": "baud divisor off by one",
        "hypotheses": ["UBRR"],
        "confidence": 0.7,
    },
    "patch": "--- a/src/uart.c\n+++ b/src/uart.c\n@@ -1 +1 @@\n-x\n+y\n",
    "summary": "fix the divisor",
}
REVIEWER_ANSWER: dict[str, object] = {
    "decision": "approve",
    "must_fix": [],
    "risk": 0.2,
    "summary": "fine",
}

FAKE_CLAUDE = """
import json, pathlib, sys

MODES = ("acceptEdits", "bypassPermissions", "default", "plan")
VALUED = (
    "--output-format",
    "--json-schema",
    "--model",
    "--max-turns",
    "--permission-mode",
    "--disallowedTools",
)
options, prompt, args = {}, None, sys.argv[1:]
while args:
    arg = args.pop(0)
    if arg in ("-p", "--print"):
        options["print"] = True
    elif arg in VALUED:
        options[arg] = args.pop(0)
    elif arg.startswith("-"):
        print(f"error: unknown option '{arg}'", file=sys.stderr)
        sys.exit(1)
    else:
        prompt = arg
mode = options.get("--permission-mode", "default")
if mode not in MODES:
    print(f"error: option '--permission-mode <mode>' argument '{mode}' is invalid. "
          f"Allowed choices are {', '.join(MODES)}.", file=sys.stderr)
    sys.exit(1)
if prompt is None and not sys.stdin.isatty():
    prompt = sys.stdin.read()
if not options.get("print") or not prompt:
    print("Error: Input must be provided either through stdin or as a prompt argument "
          "when using --print", file=sys.stderr)
    sys.exit(1)

step = next_step(prompt)

result = {
    "type": "result", "subtype": "success", "is_error": False, "duration_ms": 2310,
    "duration_api_ms": 2050, "num_turns": 2, "result": "",
    "session_id": "0b9f1c52-5a3e-4c1e-9d1e-7f3c2a9b8e11", "total_cost_usd": 0.0123,
    "usage": {"input_tokens": 12, "cache_creation_input_tokens": 300,
              "cache_read_input_tokens": 1000, "output_tokens": 150,
              "server_tool_use": {"web_search_requests": 0}, "service_tier": "standard"},
    "permission_denials": [], "uuid": "5d1c9a7e-2f4b-4e8a-9c3d-1a2b3c4d5e6f",
}
edit = step.get("edit")
if edit and mode in ("acceptEdits", "bypassPermissions"):
    pathlib.Path(edit["path"]).write_text(edit["text"])
elif edit:
    # Without the permission the Edit tool is refused, again and again, until the turns run out.
    result.update(subtype="error_max_turns", num_turns=int(options.get("--max-turns", 8)),
                  permission_denials=[{"tool_name": "Edit", "tool_use_id": f"toolu_{n}",
                                       "tool_input": {"file_path": edit["path"]}}
                                      for n in range(3)])
    result.pop("result")
if "answer" in step and result["subtype"] == "success":
    # The model's last tool call, checked by the CLI against --json-schema, lands here.
    json.loads(options["--json-schema"])
    result["structured_output"] = step["answer"]
result.update(step.get("result", {}))
if step.get("stderr"):
    print(step["stderr"], file=sys.stderr)
if step.get("print_result", True):
    print(json.dumps(result))
sys.exit(step.get("exit", 1 if result["is_error"] else 0))
"""

AUTH_FAILURE = {
    "result": {"is_error": True, "result": "Invalid API key · Please run /login"},
    "exit": 1,
}
RATE_LIMIT = {
    "result": {
        "is_error": True,
        "result": 'API Error: 429 {"type":"error","error":{"type":"rate_limit_error",'
        '"message":"Number of request tokens has exceeded your per-minute rate limit"}}',
    },
    "exit": 1,
}


class FakeClaude(FakeCli):
    """The `claude` on PATH."""

    name = "claude"
    body = FAKE_CLAUDE


@pytest.fixture
def claude(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeClaude:
    return FakeClaude(tmp_path, monkeypatch)


@pytest.fixture
def uart_workspace(workspace: Path) -> Path:
    """The workspace with one source file, src/uart.c, for a coder to edit."""
    (workspace / "src").mkdir()
    (workspace / "src" / "uart.c").write_text("int divisor = 7;\n")
    return workspace


agent = partial(role_agent, max_retries=2)


def test_success_reads_structured_output_and_usage(
    claude: FakeClaude, uart_workspace: Path, tmp_path: Path
) -> None:
    claude.steps({"answer": CODER_ANSWER})
    records: list[CallRecord] = []
    failures = [Failure(nodeid="tests/test_uart.py::test_echo", signature="s", excerpt="e")]
    answer = agent("coder", "claude:claude-sonnet-4-5", tmp_path, records).ask(
        make_request(uart_workspace, failures=failures)
    )
    assert isinstance(answer, CoderAnswer)
    assert answer.analysis.root_cause == "baud divisor off by one"
    (call,) = claude.calls()
    assert call.argv[:3] == ["-p", "--output-format", "json"]
    assert call.option("--model") == "claude-sonnet-4-5"
    schema = json.loads(call.option("--json-schema"))
    assert "$schema" not in schema
    assert schema["required"] == ["analysis", "patch", "summary"]
    assert "--permission-mode" not in call.argv
    assert call.cwd == str(uart_workspace)
    assert "tests/test_uart.py::test_echo" in call.prompt
    assert "exactly one JSON object" in call.prompt
    assert "edit the files in the workspace" not in call.prompt
    (record,) = records
    assert (record.provider, record.error_kind, record.retry_count) == (
        "claude:claude-sonnet-4-5",
        None,
        0,
    )
    assert record.document == CODER_ANSWER
    assert record.usage == {
        "input_tokens": 1312,
        "cached_input_tokens": 1000,
        "output_tokens": 150,
        "cost_usd": 0.0123,
    }


def test_fenced_answer_in_result_when_there_is_no_structured_output(
    claude: FakeClaude, uart_workspace: Path, tmp_path: Path
) -> None:
    claude.steps({"result": {"result": "```json\n" + json.dumps(REVIEWER_ANSWER) + "\n```"}})
    records: list[CallRecord] = []
    answer = agent("reviewer", "claude", tmp_path, records).ask(
        make_request(uart_workspace, "reviewer")
    )
    assert isinstance(answer, ReviewerAnswer)


def test_an_error_result_with_exit_status_0_is_bad_output(
    claude: FakeClaude, uart_workspace: Path
) -> None:
    claude.steps(
        {
            "result": {
                "subtype": "error_during_execution",
                "is_error": True,
                "result": "Tool execution crashed",
            },
            "exit": 0,
        }
    )
    with pytest.raises(ProviderError) as caught:
        ClaudeProvider().call(make_request(uart_workspace), timeout=30)
    assert caught.value.kind is ProviderErrorKind.PROVIDER_BAD_OUTPUT
    assert caught.value.message == (
        "claude reported error_during_execution (is_error=true): Tool execution crashed"
    )
    assert caught.value.usage["cost_usd"] == 0.0123  # a failed call was still billed


def test_success_subtype_with_is_error_true_is_an_error(
    claude: FakeClaude, uart_workspace: Path
) -> None:
    claude.steps(
        {"answer": CODER_ANSWER, "result": {"is_error": True, "result": "API stream ended"}}
    )
    with pytest.raises(ProviderError, match=r"reported success \(is_error=true\)"):
        ClaudeProvider().call(make_request(uart_workspace), timeout=30)


def test_a_permission_denial_loop_is_permission_denied(
    claude: FakeClaude, uart_workspace: Path, tmp_path: Path
) -> None:
    claude.steps(
        {"edit": {"path": str(uart_workspace / "src/uart.c"), "text": "int divisor = 8;\n"}}
    )
    records: list[CallRecord] = []
    coder = agent("coder", [ClaudeProvider(max_turns=4)], tmp_path, records)
    with pytest.raises(ProviderError) as caught:
        coder.ask(make_request(uart_workspace))
    assert caught.value.kind is ProviderErrorKind.PROVIDER_PERMISSION_DENIED
    assert caught.value.message == (
        "claude gave no usable answer (error_max_turns) after 3 denied tool call(s) (Edit); "
        "give the coder a permission mode such as acceptEdits, or have it answer with a patch"
    )
    # Not transient, and not an answer to re-ask: one call, then give up.
    assert [r.error_kind for r in records] == ["provider_permission_denied"]
    assert claude.calls()[0].option("--max-turns") == "4"
    assert (uart_workspace / "src/uart.c").read_text() == "int divisor = 7;\n"


def test_a_coder_with_a_permission_mode_edits_the_workspace(
    claude: FakeClaude, uart_workspace: Path
) -> None:
    edited = {**CODER_ANSWER, "patch": "", "summary": "edited src/uart.c"}
    claude.steps({"edit": {"path": "src/uart.c", "text": "int divisor = 8;\n"}, "answer": edited})
    provider = ClaudeProvider(permission_mode="acceptEdits")
    raw = provider.call(make_request(uart_workspace), timeout=30)
    assert json.loads(raw.text)["patch"] == ""
    assert (uart_workspace / "src/uart.c").read_text() == "int divisor = 8;\n"
    (call,) = claude.calls()
    assert call.option("--permission-mode") == "acceptEdits"
    assert "edit the files in the workspace" in call.prompt


def test_a_reviewer_never_gets_the_permission_mode(
    claude: FakeClaude, uart_workspace: Path
) -> None:
    claude.steps({"answer": REVIEWER_ANSWER})
    ClaudeProvider(permission_mode="acceptEdits").call(make_request(uart_workspace, "reviewer"), 30)
    assert "--permission-mode" not in claude.calls()[0].argv
    # Nor its edit tools, whatever the user's settings allow.
    assert claude.calls()[0].option("--disallowedTools") == "Edit,Write,MultiEdit,NotebookEdit"


def test_an_auth_error_fails_over_at_once(
    claude: FakeClaude, uart_workspace: Path, tmp_path: Path
) -> None:
    claude.steps(AUTH_FAILURE)
    records: list[CallRecord] = []
    sleeps: list[float] = []
    coder = agent(
        "coder", f"claude,{command_coder(tmp_path, CODER_ANSWER)}", tmp_path, records, sleeps
    )
    assert isinstance(coder.ask(make_request(uart_workspace)), CoderAnswer)
    assert [(r.provider.split(":")[0], r.error_kind) for r in records] == [
        ("claude", "provider_auth_error"),
        ("command", None),
    ]
    assert records[0].errors == [
        "claude reported success (is_error=true): Invalid API key · Please run /login"
    ]
    assert sleeps == []
    assert records[1].retry_reason is not None
    assert records[1].retry_reason.startswith("failover from claude: provider_auth_error")


def test_a_rate_limit_is_retried_then_fails_over(
    claude: FakeClaude, uart_workspace: Path, tmp_path: Path
) -> None:
    claude.steps(RATE_LIMIT)
    records: list[CallRecord] = []
    sleeps: list[float] = []
    coder = agent(
        "coder", f"claude,{command_coder(tmp_path, CODER_ANSWER)}", tmp_path, records, sleeps
    )
    assert isinstance(coder.ask(make_request(uart_workspace)), CoderAnswer)
    assert len(claude.calls()) == 3  # the first call and max_retries=2 retries
    assert [(r.provider.split(":")[0], r.retry_count, r.error_kind) for r in records] == [
        ("claude", 0, "provider_rate_limited"),
        ("claude", 1, "provider_rate_limited"),
        ("claude", 2, "provider_rate_limited"),
        ("command", 0, None),
    ]
    assert len(sleeps) == 2
    assert all(0 <= pause <= 0.002 for pause in sleeps)
    assert "(retry 1 of 2 after" in str(records[1].retry_reason)
    assert str(records[3].retry_reason).endswith("(2 of 2 retries used)")


def test_a_rate_limit_then_success_answers(
    claude: FakeClaude, uart_workspace: Path, tmp_path: Path
) -> None:
    claude.steps(RATE_LIMIT, {"answer": CODER_ANSWER})
    records: list[CallRecord] = []
    assert isinstance(
        agent("coder", "claude", tmp_path, records).ask(make_request(uart_workspace)), CoderAnswer
    )
    assert [r.error_kind for r in records] == ["provider_rate_limited", None]


def test_not_installed_fails_over_to_a_command_provider(
    tmp_path: Path, uart_workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    records: list[CallRecord] = []
    coder = agent("coder", f"claude,{command_coder(tmp_path, CODER_ANSWER)}", tmp_path, records)
    assert isinstance(coder.ask(make_request(uart_workspace)), CoderAnswer)
    assert [r.error_kind for r in records] == ["provider_not_found", None]
    assert records[0].errors == [
        "the 'claude' executable is not on PATH; install Claude Code or choose another provider"
    ]


@pytest.mark.parametrize(
    ("step", "kind", "message"),
    [
        (
            {"stderr": "error: unknown option '--json-schema'", "print_result": False, "exit": 1},
            ProviderErrorKind.PROVIDER_BAD_OUTPUT,
            "claude exited with status 1 without a result object: "
            "error: unknown option '--json-schema'",
        ),
        (
            {"stderr": "Error: Invalid API key. Please run /login", "print_result": False},
            ProviderErrorKind.PROVIDER_AUTH_ERROR,
            "claude exited with status 0 without a result object: "
            "Error: Invalid API key. Please run /login",
        ),
        (
            {"result": {"is_error": True, "result": "API Error: 529 Overloaded"}},
            ProviderErrorKind.PROVIDER_RATE_LIMITED,
            "claude reported success (is_error=true): API Error: 529 Overloaded",
        ),
        (
            # As 2.1.x reports an API error: exit 1, and the HTTP status decides over the text.
            {
                "result": {
                    "is_error": True,
                    "api_error_status": 401,
                    "terminal_reason": "api_error",
                    "result": "API Error: Connection error while refreshing",
                },
                "exit": 1,
            },
            ProviderErrorKind.PROVIDER_AUTH_ERROR,
            "claude reported success (is_error=true): API Error: Connection error while refreshing",
        ),
    ],
)
def test_failures_without_an_answer_are_classified(
    claude: FakeClaude,
    uart_workspace: Path,
    step: dict[str, object],
    kind: ProviderErrorKind,
    message: str,
) -> None:
    claude.steps(step)
    with pytest.raises(ProviderError) as caught:
        ClaudeProvider().call(make_request(uart_workspace), timeout=30)
    assert (caught.value.kind, caught.value.message) == (kind, message)


def test_the_fake_refuses_a_bad_permission_mode_as_the_real_one_does(
    claude: FakeClaude, uart_workspace: Path
) -> None:
    claude.steps({"answer": CODER_ANSWER})
    with pytest.raises(ProviderError) as caught:
        ClaudeProvider(permission_mode="yolo").call(make_request(uart_workspace), timeout=30)
    assert caught.value.kind is ProviderErrorKind.PROVIDER_BAD_OUTPUT
    assert "argument 'yolo' is invalid" in caught.value.message


def test_a_large_request_goes_through_stdin(claude: FakeClaude, uart_workspace: Path) -> None:
    # One argv string is capped at 128 KiB on Linux; the prompt must not be one.
    claude.steps({"answer": CODER_ANSWER})
    excerpt = "E" * 300_000
    failures = [Failure(nodeid="t.py::test_big", signature="s", excerpt=excerpt)]
    ClaudeProvider().call(make_request(uart_workspace, failures=failures), timeout=30)
    assert excerpt in claude.calls()[0].prompt


@pytest.mark.parametrize(
    ("spec", "problem"),
    [
        ("claude:", "'claude:' has nothing after the colon; write it as claude or claude:MODEL"),
        ("claude:--dangerously-skip-permissions", "is not a model name"),
        ("claude:opus 4", "is not a model name"),
    ],
)
def test_bad_claude_specs_are_refused_at_startup(tmp_path: Path, spec: str, problem: str) -> None:
    with pytest.raises(SpecError) as caught:
        parse_role_specs(spec, "coder", tmp_path)
    assert problem in str(caught.value)
    assert "\n" not in str(caught.value)


def test_claude_specs_name_the_provider(tmp_path: Path) -> None:
    providers = parse_role_specs("claude, claude:opus", "coder", tmp_path)
    assert [p.spec for p in providers] == ["claude", "claude:opus"]
    assert all(isinstance(p, ClaudeProvider) for p in providers)
