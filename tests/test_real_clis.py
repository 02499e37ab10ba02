"""The real Claude Code and Codex CLIs (pinned, installed by ./dev.sh test from npm) driving the
loop against scripted model servers on 127.0.0.1 (tests/model_servers.py). Everything between
the plugin and the wire is real; the servers only stand in for the model's judgement."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from loopkit import APPROVE, LoopProject, calc_fix_patches, coder_answer
from model_servers import HttpError, ModelServer, Text, ToolCall, agent_request, tool_results

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
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> LoopProject:
    project = LoopProject(pytester, monkeypatch)
    home = pytester.path / "home"
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
    project: LoopProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    project.calc_suite()
    with ModelServer(fixing_model()) as server:
        claude_server(monkeypatch, server)
        result = project.run("--fwloop-coder=claude")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    summary = project.summary()
    assert summary["pass_counts"] == [1, 3, 5, 6, 6]
    assert summary["usage"]["total"]["cost_usd"] > 0  # Claude Code's total_cost_usd is counted
    # The shipped schemas pass the CLI's strict schema validator: no warning on any call.
    [run_dir] = project.run_dirs()
    metas = {p.name: json.loads(p.read_text()) for p in run_dir.glob("rounds/*/*.meta.json")}
    assert {name.split("-")[0] for name in metas} == {"coder", "reviewer"}
    assert [m["stderr_tail"] for m in metas.values() if "strict mode" in m["stderr_tail"]] == []


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
    project: LoopProject, monkeypatch: pytest.MonkeyPatch, status: int, kind: str, requests: int
) -> None:
    """Claude Code exits 1 with `api_error_status`; its own ten retries are off, so a 401 fails
    at once and a 429 gets the role's three retries, not 4 x 10."""
    project.calc_suite()
    error_type, message = ANTHROPIC_ERRORS[status]
    failing = HttpError(
        status, {"type": "error", "error": {"type": error_type, "message": message}}
    )
    with ModelServer(lambda body: failing) as server:
        claude_server(monkeypatch, server)
        result = project.run("--fwloop-coder=claude")
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    summary = project.summary()
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
    project: LoopProject, monkeypatch: pytest.MonkeyPatch, mode: str, problem: str
) -> None:
    project.calc_suite(f"fwloop_claude_permission_mode = {mode}\n")
    with ModelServer(fixing_model()) as server:
        claude_server(monkeypatch, server)
        result = project.run("--fwloop-coder=claude")
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()
    result.stderr.fnmatch_lines(
        [f"*fwloop: --fwloop-coder: claude: fwloop_claude_permission_mode*{problem}"]
    )
    assert server.requests == []
    assert project.run_dirs() == []
