"""`codex` against a real `codex` executable on PATH that behaves like `codex exec --json`.

The fake takes the real options (`exec`, `--json`, `--model`, `--sandbox`,
`--skip-git-repo-check`, `-` to read the prompt from stdin), refuses to run outside a git
repository without `--skip-git-repo-check` as the real one does, and prints the JSONL events of
the real CLI:
`thread.started`, `turn.started`, `item.completed`, `turn.completed`, `turn.failed`, `error`.
"""

from __future__ import annotations

import json
import os
import sys
from functools import partial
from typing import TYPE_CHECKING

import pytest

from agentkit import FakeCli, command_coder, make_request, role_agent
from loopkit import LoopProject
from pytest_fwloop.agents.codex import CodexProvider, log_filter, temp_home_warning
from pytest_fwloop.agents.errors import ProviderError, ProviderErrorKind, SpecError
from pytest_fwloop.agents.registry import parse_role_specs
from pytest_fwloop.agents.role import CallRecord
from pytest_fwloop.core.records.agent_protocol import CoderAnswer, Failure

if TYPE_CHECKING:
    from pathlib import Path

    from pytest_fwloop.core.records.agent_protocol import Role

CODER_ANSWER: dict[str, object] = {
    "analysis": {"root_cause": "stale FIFO flag", "hypotheses": ["RXNE"], "confidence": 0.6},
    "patch": "--- a/src/uart.c\n+++ b/src/uart.c\n@@ -1 +1 @@\n-x\n+y\n",
    "summary": "wait for RXNE",
}

FAKE_CODEX = """
import json, pathlib, sys

args = sys.argv[1:]
if not args or args.pop(0) != "exec":
    print("fake codex: only `codex exec` is implemented", file=sys.stderr)
    sys.exit(2)
options, prompt = {}, None
while args:
    arg = args.pop(0)
    if arg in ("--json", "--experimental-json", "--skip-git-repo-check"):
        options[arg] = True
    elif arg in ("-m", "--model", "--output-schema", "--sandbox"):
        options["--model" if arg == "-m" else arg] = args.pop(0)
    elif arg == "-":
        prompt = sys.stdin.read()
    elif arg.startswith("-"):
        print(f"error: unexpected argument '{arg}' found", file=sys.stderr)
        sys.exit(2)
    else:
        prompt = arg
if "--skip-git-repo-check" not in options and not pathlib.Path(".git").exists():
    print("Not inside a trusted directory and --skip-git-repo-check was not specified.",
          file=sys.stderr)
    sys.exit(1)
if not prompt:
    print("No prompt provided via stdin.", file=sys.stderr)
    sys.exit(1)

step = next_step(prompt)

def emit(event):
    print(json.dumps(event), flush=True)

def item(number, **fields):
    emit({"type": "item.completed", "item": {"id": f"item_{number}", **fields}})

emit({"type": "thread.started", "thread_id": "0199a213-81c0-7800-8aa1-bbab2a035a53"})
emit({"type": "turn.started"})
for message in step.get("errors", []):
    emit({"type": "error", "message": message})
item(0, type="reasoning", text="**Reading the failing test**")
for n, command in enumerate(step.get("declined", []), start=1):
    item(n, type="command_execution", command=command, aggregated_output="", exit_code=None,
         status="declined")
if step.get("failed_edit"):
    item(9, type="file_change", changes=[{"path": "src/uart.c", "kind": "update"}],
         status="failed")
if "message" in step:
    item(10, type="agent_message", text=step["message"])
elif "answer" in step:
    item(10, type="agent_message", text=json.dumps(step["answer"]))
if "fail" in step:
    emit({"type": "error", "message": step["fail"]})
    emit({"type": "turn.failed", "error": {"message": step["fail"]}})
elif not step.get("cut_short"):
    emit({"type": "turn.completed",  # as 0.169 reports it
          "usage": {"input_tokens": 2400, "cached_input_tokens": 1200,
                    "cache_write_input_tokens": 100, "output_tokens": 310,
                    "reasoning_output_tokens": 40}})
if step.get("stderr"):
    print(step["stderr"], file=sys.stderr)
sys.exit(step.get("exit", 1 if "fail" in step or step.get("cut_short") else 0))
"""

UNAUTHORIZED = (
    "unexpected status 401 Unauthorized: "
    '{"error":{"message":"Incorrect API key provided","code":"invalid_api_key"}}'
)
RATE_LIMITED = "exceeded retry limit, last status: 429 Too Many Requests"


class FakeCodex(FakeCli):
    """The `codex` on PATH."""

    name = "codex"
    body = FAKE_CODEX


@pytest.fixture
def codex(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeCodex:
    return FakeCodex(tmp_path, monkeypatch)


agent = partial(role_agent, "coder", max_retries=1)


def test_success_is_the_last_agent_message(
    codex: FakeCodex, workspace: Path, tmp_path: Path
) -> None:
    codex.steps({"answer": CODER_ANSWER})
    records: list[CallRecord] = []
    failures = [Failure(nodeid="tests/test_uart.py::test_rx", signature="s", excerpt="e")]
    answer = agent("codex:gpt-5-codex", tmp_path, records, []).ask(
        make_request(workspace, failures=failures)
    )
    assert isinstance(answer, CoderAnswer)
    assert answer.summary == "wait for RXNE"
    (call,) = codex.calls()
    assert call.argv == [
        "exec",
        "--json",
        "--skip-git-repo-check",
        "--model",
        "gpt-5-codex",
        "-",
    ]
    assert call.cwd == str(workspace)
    assert "tests/test_uart.py::test_rx" in call.prompt
    assert "JSON Schema of the answer" in call.prompt
    (record,) = records
    assert (record.provider, record.error_kind) == ("codex:gpt-5-codex", None)
    # Cache writes are prompt tokens too; reasoning tokens are already among the output tokens.
    assert record.usage == {"input_tokens": 2500, "cached_input_tokens": 1200, "output_tokens": 310}


def test_error_events_before_a_completed_turn_are_not_failures(
    codex: FakeCodex, workspace: Path
) -> None:
    # Codex reports its own reconnects as `error` events and then carries on.
    codex.steps({"errors": ["Reconnecting... 1/5"], "answer": CODER_ANSWER})
    raw = CodexProvider().call(make_request(workspace), timeout=30)
    assert json.loads(raw.text) == CODER_ANSWER


def test_turn_failed_with_exit_status_0_is_an_error(codex: FakeCodex, workspace: Path) -> None:
    codex.steps({"answer": CODER_ANSWER, "fail": "model produced invalid tool call", "exit": 0})
    with pytest.raises(ProviderError) as caught:
        CodexProvider().call(make_request(workspace), timeout=30)
    assert caught.value.kind is ProviderErrorKind.PROVIDER_BAD_OUTPUT
    assert caught.value.message == "codex turn failed: model produced invalid tool call"


def test_a_stream_cut_short_is_an_error_whatever_came_before(
    codex: FakeCodex, workspace: Path
) -> None:
    codex.steps({"answer": CODER_ANSWER, "cut_short": True, "stderr": "panicked at exec.rs:42"})
    with pytest.raises(ProviderError) as caught:
        CodexProvider().call(make_request(workspace), timeout=30)
    assert caught.value.kind is ProviderErrorKind.PROVIDER_BAD_OUTPUT
    assert caught.value.message == (
        "codex exited with status 1 after 4 event(s) and no turn.completed: panicked at exec.rs:42"
    )
    assert caught.value.stderr == "panicked at exec.rs:42\n"


def test_refused_actions_without_an_answer_are_permission_denied(
    codex: FakeCodex, workspace: Path, tmp_path: Path
) -> None:
    codex.steps(
        {
            "declined": ["sed -i s/7/8/ src/uart.c"],
            "failed_edit": True,
            "message": "I could not write to src/uart.c: the sandbox is read-only.",
        }
    )
    records: list[CallRecord] = []
    with pytest.raises(ProviderError) as caught:
        agent("codex", tmp_path, records, []).ask(make_request(workspace))
    assert caught.value.kind is ProviderErrorKind.PROVIDER_PERMISSION_DENIED
    assert caught.value.message == (
        "codex gave no JSON answer; its sandbox refused 2 action(s) (command 'sed -i s/7/8/ "
        "src/uart.c' declined; file change failed): have it answer with a patch, or widen "
        "sandbox_mode in the Codex config"
    )
    assert len(records) == 1  # neither retried nor re-asked


# 0.169 writes this, and nothing on stdout, when its read-only sandbox stops a shell command.
VIOLATION = (
    "2026-11-23T10:00:00.000000Z  WARN codex_sandboxing::violation: recorded sandbox violation: "
    "resource=filesystem backend=linux_sandbox reason=read_only_file_system path=unknown"
)


@pytest.mark.parametrize("role", ["reviewer", "tester"])
def test_a_shell_write_the_sandbox_logged_is_permission_denied(
    codex: FakeCodex, workspace: Path, role: Role
) -> None:
    codex.steps({"message": "I could not write my notes.", "stderr": VIOLATION})
    with pytest.raises(ProviderError) as caught:
        CodexProvider().call(make_request(workspace, role=role), timeout=30)
    assert caught.value.kind is ProviderErrorKind.PROVIDER_PERMISSION_DENIED
    assert "its sandbox refused 1 action(s) (recorded sandbox violation: resource=filesystem" in (
        caught.value.message
    )


def test_the_sandbox_log_is_asked_for_on_top_of_the_users_filter() -> None:
    assert log_filter("") == "error,codex_sandboxing::violation=warn"  # Codex's default first
    assert log_filter("codex_core=debug") == "codex_core=debug,codex_sandboxing::violation=warn"


@pytest.mark.parametrize(
    ("environ", "warned"),
    [
        ({"TMPDIR": "/scratch", "CODEX_HOME": "/scratch/ci/codex"}, "/scratch/ci/codex"),
        ({"CODEX_HOME": "/tmp/codex"}, "/tmp/codex"),  # no TMPDIR: /tmp, as Codex reads it
        ({"TMPDIR": "/scratch", "HOME": "/scratch/home"}, "/scratch/home/.codex"),
        ({"TMPDIR": "/scratch", "CODEX_HOME": "/tmp/codex"}, None),
        ({"CODEX_HOME": "/srv/codex", "HOME": "/tmp/home"}, None),
    ],
)
def test_a_codex_home_under_the_temp_dir_is_warned_about(
    environ: dict[str, str], warned: str | None
) -> None:
    warning = temp_home_warning(environ)
    if warned is None:
        assert warning is None
        return
    temp = environ.get("TMPDIR", "/tmp")
    assert warning == (
        f"fwloop: warning: Codex's home {warned} (CODEX_HOME) is under the temp dir {temp}, "
        "where Codex will not create its helper binaries, so its edits of files in "
        f"subdirectories fail; set CODEX_HOME to a directory outside {temp}"
    )


@pytest.mark.slow
@pytest.mark.parametrize("under_temp", [True, False])
def test_the_warning_is_one_line_at_the_start_of_the_run(
    project: LoopProject, monkeypatch: pytest.MonkeyPatch, under_temp: bool
) -> None:
    """Once however many roles run Codex; none for a home elsewhere."""
    path = os.environ["PATH"]
    codex = FakeCodex(project.pytester.path, monkeypatch)
    monkeypatch.setenv("PATH", f"{codex.bin}{os.pathsep}{path}")  # and git, for the loop
    project.calc_suite()
    temp = project.pytester.path / "temp"
    temp.mkdir()
    monkeypatch.setenv("TMPDIR", str(temp))
    home = (temp if under_temp else project.pytester.path) / "codex-home"
    monkeypatch.setenv("CODEX_HOME", str(home))
    result = project.run(
        "--fwloop-coder=rules", "--fwloop-reviewer=codex", "--fwloop-tester=codex", "--max-iter=1"
    )
    warnings = [line for line in result.stdout.lines if "fwloop: warning: Codex's home" in line]
    assert warnings == ([temp_home_warning(os.environ)] if under_temp else [])


def test_refused_actions_do_not_matter_when_it_answers(codex: FakeCodex, workspace: Path) -> None:
    codex.steps({"failed_edit": True, "answer": CODER_ANSWER})
    raw = CodexProvider().call(make_request(workspace), timeout=30)
    assert json.loads(raw.text) == CODER_ANSWER


@pytest.mark.parametrize(
    ("failure", "kind", "attempts"),
    [
        pytest.param(UNAUTHORIZED, "provider_auth_error", 1, id="auth-error-fails-over-at-once"),
        pytest.param(
            RATE_LIMITED, "provider_rate_limited", 2, id="rate-limit-is-retried-then-fails-over"
        ),
    ],
)
def test_a_failed_turn_fails_over(
    codex: FakeCodex, workspace: Path, tmp_path: Path, failure: str, kind: str, attempts: int
) -> None:
    codex.steps({"fail": failure})
    records: list[CallRecord] = []
    sleeps: list[float] = []
    answer = agent(f"codex,{command_coder(tmp_path, CODER_ANSWER)}", tmp_path, records, sleeps).ask(
        make_request(workspace)
    )
    assert isinstance(answer, CoderAnswer)
    assert [(r.provider.split(":")[0], r.retry_count, r.error_kind) for r in records] == [
        *[("codex", retry, kind) for retry in range(attempts)],
        ("command", 0, None),
    ]
    assert records[0].errors == [f"codex turn failed: {failure}"]
    assert len(sleeps) == attempts - 1  # only a transient failure is retried
    assert str(records[-1].retry_reason).startswith(
        f"failover from codex: {kind}: codex turn failed: {failure}"
    )


def test_not_installed_fails_over_to_a_command_provider(
    tmp_path: Path, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(workspace))
    records: list[CallRecord] = []
    answer = agent(f"codex,{command_coder(tmp_path, CODER_ANSWER)}", tmp_path, records, []).ask(
        make_request(workspace)
    )
    assert isinstance(answer, CoderAnswer)
    assert [r.error_kind for r in records] == ["provider_not_found", None]
    assert records[0].errors == [
        "the 'codex' executable is not on PATH; install the Codex CLI or choose another provider"
    ]


def test_no_events_at_all_reports_the_stderr(codex: FakeCodex, workspace: Path) -> None:
    # An older CLI without `exec --json`: clap's usage error, no events.
    (codex.bin / "codex").write_text(
        f"#!{sys.executable}\nimport sys\n"
        "print(\"error: unexpected argument '--json' found\", file=sys.stderr)\nsys.exit(2)\n"
    )
    with pytest.raises(ProviderError) as caught:
        CodexProvider().call(make_request(workspace), timeout=30)
    assert caught.value.kind is ProviderErrorKind.PROVIDER_BAD_OUTPUT
    assert caught.value.message == (
        "codex exited with status 2 after 0 event(s) and no turn.completed: "
        "error: unexpected argument '--json' found"
    )


def test_bad_codex_specs_are_refused_at_startup(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="'codex:' has nothing after the colon; write it as "):
        parse_role_specs("codex:", "coder", tmp_path)
    with pytest.raises(SpecError, match="'-c' is not a model name"):
        parse_role_specs("codex:-c", "coder", tmp_path)
    assert [p.spec for p in parse_role_specs("codex,codex:o3", "reviewer", tmp_path)] == [
        "codex",
        "codex:o3",
    ]
