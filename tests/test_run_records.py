"""What the run records hold and leave out: secrets, retries and failovers, agent usage."""

from __future__ import annotations

import secrets
import shlex
import sys

import pytest

from loopkit import (
    APPROVE,
    CALC,
    FIXES,
    LoopProject,
    calc_fix_patches,
    check_records,
    coder_answer,
    unified_diff,
)
from pytest_fwloop.core.machine import fsm
from pytest_fwloop.core.machine.fsm import State

pytestmark = pytest.mark.slow


def test_secrets_never_reach_the_run_directory_or_the_terminal(
    project: LoopProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = f"sk-test-{secrets.token_hex(16)}"
    token = secrets.token_urlsafe(24)
    monkeypatch.setenv("OPENAI_API_KEY", key)
    monkeypatch.setenv("MY_SERVICE_TOKEN", token)
    check = [sys.executable, "tools/envcheck.py"]
    project.calc_suite(f"fwloop_allowed_commands = {shlex.join(check)}\n")
    project.write(
        "tests/test_env.py",
        "import os\n\n"
        "def test_prints_the_credentials():\n"
        "    print('key', os.environ['OPENAI_API_KEY'], 'token', os.environ['MY_SERVICE_TOKEN'])\n"
        "    assert False, os.environ['MY_SERVICE_TOKEN']\n",
    )
    project.write(
        "tools/envcheck.py",
        "import os\nprint('token in env:', os.environ.get('MY_SERVICE_TOKEN', 'absent'))\n",
    )
    # The coder echoes both back: in its analysis, its summary, and the patch itself.
    leaky = CALC.replace(*FIXES[0]) + f"# {key} {token}\n"
    answer = coder_answer(unified_diff("fw/calc.py", CALC, leaky), f"saw {key} and {token}")
    tester = {"select": [], "commands": [{"argv": check, "reason": token}], "notes": key}
    agent = project.agent("agent", [answer], tester=[tester])
    result = project.run(
        f"--fwloop-coder={agent.spec}", f"--fwloop-tester={agent.spec}", "--max-iter=2"
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    assert agent.requests("coder")  # the loop did reach the coder, with the child's output
    [run_dir] = project.run_dirs()
    files = [path for path in run_dir.rglob("*") if path.is_file()]
    assert len(files) > 20
    for path in files:
        data = path.read_bytes()
        assert key.encode() not in data, path
        assert token.encode() not in data, path
    output = result.stdout.str() + result.stderr.str()
    assert key not in output
    assert token not in output
    # Redacted, not merely absent: each path really carried them.
    rounds = run_dir / "rounds"
    assert "[redacted:MY_SERVICE_TOKEN]" in (rounds / "01" / "pytest.log").read_text()
    assert "[redacted:MY_SERVICE_TOKEN]" in (rounds / "01" / "junit.xml").read_text()
    assert "[redacted:OPENAI_API_KEY]" in (rounds / "02" / "coder-1.answer.txt").read_text()
    assert "[redacted:MY_SERVICE_TOKEN]" in (run_dir / "best.patch").read_text()
    assert "[redacted:OPENAI_API_KEY]" in output
    # The tester's command ran without them in its environment.
    assert "token in env: absent" in (rounds / "02" / "commands" / "1.log").read_text()
    assert check_records(run_dir) > 10


def test_every_retry_and_failover_is_an_event_and_transitions_follow_the_table(
    project: LoopProject,
) -> None:
    project.calc_suite()
    coder = project.agent("coder", [coder_answer(p) for p in calc_fix_patches()])
    reviewer = project.agent("reviewer", [], ["this is not JSON", APPROVE])
    result = project.run(
        f"--fwloop-coder=command:/no/such/agent,{coder.spec}",
        f"--fwloop-reviewer={reviewer.spec}",
    )
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    events = project.events()
    calls = [e for e in events if e["kind"] == "agent_call"]
    failovers = [e for e in calls if e["role"] == "coder"]
    assert len(failovers) == 3  # every coder ask failed over from the missing executable
    for event in failovers:
        assert event["from"] == event["to"] == "CODE_ANALYSIS"
        assert event["event"] == "agent_retry"
        assert event["provider"] == coder.spec
        assert event["retry_count"] == 0
        assert event["retry_reason"].startswith(
            "failover from command:/no/such/agent: provider_not_found:"
        )
    [reask] = [e for e in calls if e["role"] == "reviewer"]
    assert reask["from"] == reask["to"] == "PATCH_GENERATION"
    assert reask["retry_count"] == 1
    assert reask["retry_reason"].startswith("re-asked with the validation errors")
    [run_dir] = project.run_dirs()
    assert (run_dir / reask["evidence"][0]).name == "reviewer-2.meta.json"
    assert check_records(run_dir) > 20
    # Transitions stay exactly the table's moves; the call and sub-state lines sit between them.
    transitions = [e for e in events if e["kind"] == "transition"]
    substates = [e for e in events if e["kind"] == "substate"]
    assert len(transitions) + len(calls) + len(substates) == len(events)
    for event in transitions:
        assert fsm.next_state(State(event["from"]), event["event"]) is State(event["to"])
    result.stdout.fnmatch_lines(
        ["*[[]2] CODE_ANALYSIS: coder call 2 to command:*failover from command:/no/such/agent*"]
    )


def test_usage_is_summed_per_role_even_when_providers_report_none(project: LoopProject) -> None:
    project.calc_suite()
    coder = project.agent("coder", [coder_answer(p) for p in calc_fix_patches()])
    result = project.run(f"--fwloop-coder={coder.spec}", "--fwloop-budget-usd=0.01")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    usage = project.summary()["usage"]
    assert usage["roles"]["coder"]["calls"] == 3
    assert usage["roles"]["reviewer"]["unreported_calls"] == 3
    assert usage["total"] == {
        "calls": 6,
        "unreported_calls": 6,
        "input_tokens": 0,
        "cached_input_tokens": 0,
        "output_tokens": 0,
        "cost_usd": 0,
        "tokens": 0,
    }
    result.stdout.fnmatch_lines(["*agent usage: 6 call(s)*(6 call(s) reported no usage)*"])
