"""The real Claude Code and Codex CLIs (pinned, installed by ./dev.sh test from npm) driving the
loop against scripted model servers on 127.0.0.1 (tests/model_servers.py). Everything between
the plugin and the wire is real; the servers only stand in for the model's judgement."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from loopkit import APPROVE, FIXES, LoopProject, calc_fix_patches, coder_answer
from model_servers import (
    HttpError,
    ModelServer,
    Text,
    ToolCall,
    agent_request,
    tool_outputs,
    tool_results,
)

ROOT = Path(__file__).resolve().parent.parent
CLIS = ROOT / ".tools" / "agent-clis" / "node_modules" / ".bin"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not (CLIS / "claude").exists() or not (CLIS / "codex").exists(),
        reason=f"the real agent CLIs are not installed in {CLIS}: ./dev.sh test installs them "
        "with npm (it says so when npm is missing)",
    ),
]


@pytest.fixture
def cli_project(project: LoopProject, monkeypatch: pytest.MonkeyPatch) -> LoopProject:
    """The project with the pinned real CLIs on PATH, a HOME of its own and their telemetry off."""
    home = project.pytester.path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("PATH", f"{CLIS}{os.pathsep}{os.environ['PATH']}")
    for name in (
        "DISABLE_TELEMETRY",
        "DISABLE_AUTOUPDATER",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC",
    ):
        monkeypatch.setenv(name, "1")
    return project


def claude_server(monkeypatch: pytest.MonkeyPatch, server: ModelServer) -> None:
    monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-scripted-key-for-tests")


def structured(answer: dict[str, Any]) -> ToolCall:
    return ToolCall("StructuredOutput", answer)


def fixing_model(edits: bool = False) -> Any:
    """Coder: one calc fix per iteration, as a diff (or, with `edits`, through Read and Edit);
    reviewer: approve."""
    patches = calc_fix_patches()

    def script(body: dict[str, Any]) -> ToolCall | Text:
        if tool_results(body) and "StructuredOutput" in str(body["messages"][-1]):
            return Text("done")
        request = agent_request(body)
        if request["role"] == "reviewer":
            return structured(APPROVE)
        patch = patches[min(request["iteration"] - 2, len(patches) - 1)]
        return structured(coder_answer(patch, f"fix {request['iteration']}"))

    return script


def test_claude_converges_answering_with_diffs(
    cli_project: LoopProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    cli_project.calc_suite()
    with ModelServer(fixing_model()) as server:
        claude_server(monkeypatch, server)
        result = cli_project.run("--fwloop-coder=claude")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    summary = cli_project.summary()
    assert summary["pass_counts"] == [1, 3, 5, 6, 6]
    assert summary["usage"]["total"]["cost_usd"] > 0  # Claude Code's total_cost_usd is counted
    # The shipped schemas pass the CLI's strict schema validator: no warning on any call.
    [run_dir] = cli_project.run_dirs()
    metas = {p.name: json.loads(p.read_text()) for p in run_dir.glob("rounds/*/*.meta.json")}
    assert {name.split("-")[0] for name in metas} == {"coder", "reviewer"}
    assert [m["stderr_tail"] for m in metas.values() if "strict mode" in m["stderr_tail"]] == []


def editing_turn(body: dict[str, Any], answer: dict[str, Any]) -> ToolCall | Text:
    """Claude Code's way to make the iteration's calc fix itself: Read, Edit, then `answer`."""
    request = agent_request(body)
    calc = str(Path(request["workspace"]) / "fw" / "calc.py")
    old, new = FIXES[min(request["iteration"] - 2, len(FIXES) - 1)]
    steps: list[ToolCall | Text] = [
        ToolCall("Read", {"file_path": calc}),
        ToolCall("Edit", {"file_path": calc, "old_string": old, "new_string": new}),
        structured(answer),
        Text("done"),
    ]
    return steps[min(tool_results(body), len(steps) - 1)]


ANTHROPIC_ERRORS = {
    401: ("authentication_error", "invalid x-api-key"),
    429: ("rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit"),
    500: ("api_error", "Internal server error"),
}


@pytest.mark.parametrize(
    ("status", "kind", "requests"),
    [
        (401, "provider_auth_error", 1),
        (429, "provider_rate_limited", 4),
        (500, "provider_network_error", 4),
    ],
)
def test_claude_api_errors_are_classified_by_status_and_retried_only_by_the_loop(
    cli_project: LoopProject, monkeypatch: pytest.MonkeyPatch, status: int, kind: str, requests: int
) -> None:
    """Claude Code exits 1 with `api_error_status`; its own ten retries are off, so a 401 fails
    at once and a 429 gets the role's three retries, not 4 x 10."""
    cli_project.calc_suite()
    error_type, message = ANTHROPIC_ERRORS[status]
    failing = HttpError(
        status, {"type": "error", "error": {"type": error_type, "message": message}}
    )
    with ModelServer(lambda body: failing) as server:
        claude_server(monkeypatch, server)
        result = cli_project.run("--fwloop-coder=claude")
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    summary = cli_project.summary()
    assert summary["outcome"] == kind, summary["reason"]
    assert len(server.requests) == requests


@pytest.mark.parametrize(
    ("mode", "problem"),
    [
        ("bogus", "'bogus' is not a mode of claude 2.1.330; choose one of *manual*"),
        pytest.param(
            "bypassPermissions",
            "bypassPermissions: Claude Code refuses it to root*",
            marks=pytest.mark.skipif(os.geteuid() != 0, reason="the CLI refuses it to root only"),
        ),
    ],
)
def test_a_permission_mode_the_cli_will_refuse_stops_the_run_before_the_baseline(
    cli_project: LoopProject, monkeypatch: pytest.MonkeyPatch, mode: str, problem: str
) -> None:
    cli_project.calc_suite(f"fwloop_claude_permission_mode = {mode}\n")
    with ModelServer(fixing_model()) as server:
        claude_server(monkeypatch, server)
        result = cli_project.run("--fwloop-coder=claude")
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()
    result.stderr.fnmatch_lines(
        [f"*fwloop: --fwloop-coder: claude: fwloop_claude_permission_mode*{problem}"]
    )
    assert server.requests == []
    assert cli_project.run_dirs() == []


@pytest.fixture
def codex_home() -> Iterator[Path]:
    """Outside /tmp: under it Codex 0.169 will not create the helper binaries its sandbox and
    apply_patch run through, and every edit would fail whatever the sandbox mode."""
    parent = ROOT / ".tools" / "codex-homes"
    parent.mkdir(parents=True, exist_ok=True)
    home = Path(tempfile.mkdtemp(dir=parent))
    yield home
    shutil.rmtree(home, ignore_errors=True)


def codex_server(
    home: Path,
    monkeypatch: pytest.MonkeyPatch,
    server: ModelServer,
    *,
    wire_api: str = "responses",
    sandbox: str = "read-only",
    key: bool = True,
) -> None:
    """A CODEX_HOME whose provider is the scripted server; the CLI's own retries are off, so
    each loop call is one request."""
    (home / "config.toml").write_text(
        'model_provider = "scripted"\n'
        'model = "gpt-5.5"\n'
        f'sandbox_mode = "{sandbox}"\n'
        "[model_providers.scripted]\n"
        'name = "scripted"\n'
        f'base_url = "{server.url}/v1"\n'
        f'wire_api = "{wire_api}"\n'
        'env_key = "SCRIPTED_MODEL_KEY"\n'
        "request_max_retries = 0\n"
        "stream_max_retries = 0\n"
    )
    monkeypatch.setenv("CODEX_HOME", str(home))
    if key:
        monkeypatch.setenv("SCRIPTED_MODEL_KEY", "scripted-key")
    else:
        monkeypatch.delenv("SCRIPTED_MODEL_KEY", raising=False)


def fixing_codex(body: dict[str, Any]) -> Text:
    request = agent_request(body)
    if request["role"] == "reviewer":
        return Text(json.dumps(APPROVE))
    patches = calc_fix_patches()
    patch = patches[min(request["iteration"] - 2, len(patches) - 1)]
    return Text(json.dumps(coder_answer(patch, f"fix {request['iteration']}")))


def test_codex_converges_answering_with_diffs(
    cli_project: LoopProject, monkeypatch: pytest.MonkeyPatch, codex_home: Path
) -> None:
    cli_project.calc_suite()
    with ModelServer(fixing_codex) as server:
        codex_server(codex_home, monkeypatch, server)
        result = cli_project.run("--fwloop-coder=codex")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    summary = cli_project.summary()
    assert summary["pass_counts"] == [1, 3, 5, 6, 6]
    assert summary["usage"]["total"]["tokens"] > 0


OPENAI_ERRORS = {
    "server": HttpError(500, {"error": {"message": "boom", "type": "server_error"}}),
    "quota": HttpError(
        429,
        {
            "error": {
                "message": "You exceeded your current quota",
                "type": "insufficient_quota",
                "code": "insufficient_quota",
            }
        },
    ),
    "auth": HttpError(401, {"error": {"message": "Incorrect API key", "code": "invalid_api_key"}}),
}


@pytest.mark.parametrize(
    ("error", "kind", "requests"),
    [
        ("server", "provider_network_error", 4),  # "experiencing high demand": retried
        ("quota", "provider_quota_exhausted", 1),  # no wait mends it: not retried
        ("auth", "provider_auth_error", 1),
    ],
)
def test_codex_errors_are_classified(
    cli_project: LoopProject,
    monkeypatch: pytest.MonkeyPatch,
    codex_home: Path,
    error: str,
    kind: str,
    requests: int,
) -> None:
    cli_project.calc_suite()
    with ModelServer(lambda body: OPENAI_ERRORS[error]) as server:
        codex_server(codex_home, monkeypatch, server)
        result = cli_project.run("--fwloop-coder=codex")
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    assert cli_project.summary()["outcome"] == kind, cli_project.summary()["reason"]
    assert len(server.requests) == requests


def test_codex_without_its_key_variable_is_an_auth_error(
    cli_project: LoopProject, monkeypatch: pytest.MonkeyPatch, codex_home: Path
) -> None:
    cli_project.calc_suite()
    with ModelServer(fixing_codex) as server:
        codex_server(codex_home, monkeypatch, server, key=False)
        result = cli_project.run("--fwloop-coder=codex")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    summary = cli_project.summary()
    assert summary["outcome"] == "provider_auth_error", summary["reason"]
    assert "SCRIPTED_MODEL_KEY" in summary["reason"]
    assert server.requests == []


def test_a_codex_config_error_keeps_the_line_that_says_how_to_fix_it(
    cli_project: LoopProject, monkeypatch: pytest.MonkeyPatch, codex_home: Path
) -> None:
    cli_project.calc_suite()
    with ModelServer(fixing_codex) as server:
        codex_server(codex_home, monkeypatch, server, wire_api="chat")
        cli_project.run("--fwloop-coder=codex")
    reason = cli_project.summary()["reason"]
    assert 'How to fix: set `wire_api = "responses"`' in reason, reason


def codex_patch(old: str, new: str) -> str:
    """FIXES' first change in Codex's own apply_patch format."""
    return (
        f"*** Begin Patch\n*** Update File: fw/calc.py\n@@\n-    {old}\n+    {new}\n*** End Patch\n"
    )


def test_a_codex_reviewer_cannot_change_the_tree_even_under_workspace_write(
    cli_project: LoopProject, monkeypatch: pytest.MonkeyPatch, codex_home: Path
) -> None:
    """The reviewer tries to apply the fix itself (as one did under workspace-write, after which
    the coder's patch no longer applied); it runs --sandbox read-only, so its edit is refused
    and the loop goes on with the coder's patch."""
    cli_project.calc_suite()

    def script(body: dict[str, Any]) -> Text | ToolCall:
        request = agent_request(body)
        tried = tool_outputs(body) > 0
        if request["role"] == "reviewer" and not tried:
            old, new = FIXES[request["iteration"] - 2]
            return ToolCall("apply_patch", {"patch": codex_patch(old, new)})
        return fixing_codex(body)

    with ModelServer(script) as server:
        codex_server(codex_home, monkeypatch, server, sandbox="workspace-write")
        result = cli_project.run("--fwloop-coder=codex")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    assert cli_project.summary()["pass_counts"] == [1, 3, 5, 6, 6]


def test_a_claude_reviewer_cannot_edit_even_when_the_users_settings_allow_it(
    cli_project: LoopProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    cli_project.calc_suite()
    settings = Path(os.environ["HOME"]) / ".claude" / "settings.json"
    settings.parent.mkdir(parents=True, exist_ok=True)
    settings.write_text(json.dumps({"permissions": {"allow": ["Edit", "Write", "Read"]}}))
    coder = fixing_model()

    def script(body: dict[str, Any]) -> ToolCall | Text:
        request = agent_request(body)
        if request["role"] != "reviewer":
            return coder(body)  # type: ignore[no-any-return]
        return editing_turn(body, APPROVE)

    with ModelServer(script) as server:
        claude_server(monkeypatch, server)
        result = cli_project.run("--fwloop-coder=claude")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    assert cli_project.summary()["pass_counts"] == [1, 3, 5, 6, 6]


def test_claude_converges_editing_the_tree_itself(
    cli_project: LoopProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With acceptEdits the coder fixes through Read and Edit and answers with no patch; its
    edits are taken as the proposed patch, undone, reviewed and applied like any diff."""
    cli_project.calc_suite("fwloop_claude_permission_mode = acceptEdits\n")

    def script(body: dict[str, Any]) -> ToolCall | Text:
        request = agent_request(body)
        if request["role"] == "reviewer":
            return structured(APPROVE) if not tool_results(body) else Text("done")
        return editing_turn(body, coder_answer("", "edited fw/calc.py"))

    with ModelServer(script) as server:
        claude_server(monkeypatch, server)
        result = cli_project.run("--fwloop-coder=claude")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    assert cli_project.summary()["pass_counts"] == [1, 3, 5, 6, 6]
    [run_dir] = cli_project.run_dirs()
    assert "+    return a + b" in (run_dir / "rounds" / "02" / "patch.diff").read_text()


def test_a_codex_coder_whose_writes_the_sandbox_refuses_is_a_permission_denial(
    cli_project: LoopProject, monkeypatch: pytest.MonkeyPatch, codex_home: Path
) -> None:
    """0.169 says so only on stderr ("patch rejected: writing is blocked by read-only
    sandbox"); a coder that then gives up without JSON is provider_permission_denied."""
    cli_project.calc_suite()

    def script(body: dict[str, Any]) -> ToolCall | Text:
        request = agent_request(body)
        tried = tool_outputs(body) > 0
        if request["role"] == "coder" and not tried:
            return ToolCall("apply_patch", {"patch": codex_patch(*FIXES[0])})
        if request["role"] == "coder":
            return Text("I could not write the fix: the sandbox is read-only.")
        return fixing_codex(body)

    with ModelServer(script) as server:
        codex_server(codex_home, monkeypatch, server, sandbox="read-only")
        result = cli_project.run("--fwloop-coder=codex")
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    summary = cli_project.summary()
    assert summary["outcome"] == "provider_permission_denied", summary["reason"]
    assert "writing is blocked by read-only sandbox" in summary["reason"]


@pytest.mark.parametrize("role", ["reviewer", "tester"])
def test_a_codex_reviewer_or_tester_whose_shell_write_is_refused_is_a_permission_denial(
    cli_project: LoopProject, monkeypatch: pytest.MonkeyPatch, codex_home: Path, role: str
) -> None:
    """0.169 prints no event for a shell command its read-only sandbox stopped; only its
    `codex_sandboxing::violation` log line tells, which the provider asks for."""
    cli_project.calc_suite()
    calc = (cli_project.root / "fw" / "calc.py").read_text()

    def script(body: dict[str, Any]) -> ToolCall | Text:
        request = agent_request(body)
        if request["role"] != role:
            return fixing_codex(body)
        if not tool_outputs(body):
            return ToolCall("exec_command", {"cmd": "echo 'return a + b' > fw/calc.py"})
        return Text("I could not write my notes: the file system is read-only.")

    with ModelServer(script) as server:
        codex_server(codex_home, monkeypatch, server, sandbox="read-only")
        result = cli_project.run("--fwloop-coder=codex", f"--fwloop-{role}=codex")
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    summary = cli_project.summary()
    assert summary["outcome"] == "provider_permission_denied", summary["reason"]
    assert "sandbox violation" in summary["reason"]
    assert (cli_project.root / "fw" / "calc.py").read_text() == calc
