"""The providers against real executables and directories: command, scripted, rules, registry."""

from __future__ import annotations

import json
import os
import sys
import textwrap
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from agentkit import make_request
from pytest_fwloop.agents.command import MAX_STDOUT_BYTES, STDERR_TAIL_BYTES, CommandProvider
from pytest_fwloop.agents.errors import (
    AnswerInvalid,
    ProviderError,
    ProviderErrorKind,
    SpecError,
)
from pytest_fwloop.agents.registry import PROVIDER_SYNTAX, PROVIDERS, parse_role_specs
from pytest_fwloop.agents.role import CallRecord, RoleAgent
from pytest_fwloop.agents.rules import RulesProvider
from pytest_fwloop.agents.scripted import ScriptedProvider
from pytest_fwloop.core.records.agent_protocol import (
    AgentRequest,
    CoderAnswer,
    Failure,
    ReviewerAnswer,
    Role,
    TesterAnswer,
    extract_json,
    load_schema,
    validate_answer,
)

if TYPE_CHECKING:
    from collections.abc import Callable

CODER_ANSWER: dict[str, object] = {
    "analysis": {"root_cause": "off by one", "hypotheses": ["index"], "confidence": 0.6},
    "patch": "",
    "summary": "edited src/uart.c in place",
}
REVIEWER_ANSWER: dict[str, object] = {
    "decision": "approve",
    "must_fix": [],
    "risk": 0.2,
    "summary": "fine",
}


def executable(directory: Path, name: str, body: str, mode: int = 0o755) -> Path:
    """A real program: `body` run by this interpreter, reading the request on stdin."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text(f"#!{sys.executable}\n" + textwrap.dedent(body), encoding="utf-8")
    path.chmod(mode)
    return path


def answering(answer: dict[str, object]) -> str:
    """A script body that reads the request and prints `answer`."""
    return f"""
        import json, sys
        json.load(sys.stdin)
        print(json.dumps({answer!r}))
    """


def agent(
    role: Role, spec: str, rootdir: Path, records: list[CallRecord], invalid_retries: int = 1
) -> RoleAgent:
    providers = parse_role_specs(spec, role, rootdir)
    return RoleAgent(
        role, providers, load_schema(role), records.append, invalid_retries=invalid_retries
    )


# --- command: ---------------------------------------------------------------------------------


def test_command_sends_the_wire_request_on_stdin_and_returns_stdout(
    tmp_path: Path, workspace: Path
) -> None:
    executable(
        tmp_path / "tools",
        "coder.py",
        f"""
        import json, os, sys
        request = json.loads(sys.stdin.read())
        assert request["role"] == "coder", request
        assert request["iteration"] == 2
        assert request["workspace"] == os.getcwd()
        assert request["failures"][0]["nodeid"] == "tests/test_uart.py::test_echo"
        assert request["schema"]["required"] == ["analysis", "patch", "summary"]
        assert request["must_fix"] == [{{"issue": "bounded wait", "file": None, "line": None}}]
        print("thinking…", file=sys.stderr)
        print(json.dumps({CODER_ANSWER!r}))
        """,
    )
    provider = CommandProvider("tools/coder.py", rootdir=tmp_path)
    request = make_request(
        workspace,
        failures=[Failure(nodeid="tests/test_uart.py::test_echo", signature="s", excerpt="e")],
        must_fix=[{"issue": "bounded wait"}],
    )
    answer = provider.call(request, timeout=30)
    assert provider.spec == "command:tools/coder.py"
    assert answer.stderr == "thinking…\n"
    document = extract_json(answer.text)
    assert document == CODER_ANSWER
    assert validate_answer("coder", document, load_schema("coder")) == []


def test_command_by_absolute_path_and_by_bare_name_on_path(
    tmp_path: Path, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    program = executable(tmp_path / "bin", "fw-coder", answering(CODER_ANSWER))
    by_path = CommandProvider(str(program), rootdir=workspace)
    assert extract_json(by_path.call(make_request(workspace), 30).text) == CODER_ANSWER
    monkeypatch.setenv("PATH", f"{program.parent}{os.pathsep}{os.environ['PATH']}")
    by_name = CommandProvider("fw-coder", rootdir=workspace)
    assert extract_json(by_name.call(make_request(workspace), 30).text) == CODER_ANSWER


def test_command_through_the_role_agent(tmp_path: Path, workspace: Path) -> None:
    executable(tmp_path, "coder.py", answering(CODER_ANSWER))
    records: list[CallRecord] = []
    answer = agent("coder", "command:./coder.py", tmp_path, records).ask(make_request(workspace))
    assert isinstance(answer, CoderAnswer)
    assert answer.analysis.root_cause == "off by one"
    (record,) = records
    assert (record.attempt, record.provider, record.error_kind) == (1, "command:./coder.py", None)
    assert record.document == CODER_ANSWER
    assert record.request["schema"] == load_schema("coder")


def test_command_nonzero_exit_is_bad_output_with_the_last_stderr_line(
    tmp_path: Path, workspace: Path
) -> None:
    program = executable(
        tmp_path,
        "coder.py",
        """
        import sys
        print('{"analysis": "partial"')
        print("loading model", file=sys.stderr)
        print("error: model crashed\\n\\n", file=sys.stderr)
        sys.exit(3)
        """,
    )
    with pytest.raises(ProviderError) as caught:
        CommandProvider("./coder.py", tmp_path).call(make_request(workspace), timeout=30)
    assert caught.value.kind is ProviderErrorKind.PROVIDER_BAD_OUTPUT
    assert caught.value.message == f"{program} exited with status 3: error: model crashed"
    assert caught.value.provider == "command:./coder.py"


def test_command_killed_by_a_signal_says_which(tmp_path: Path, workspace: Path) -> None:
    executable(tmp_path, "coder.py", "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n")
    with pytest.raises(ProviderError, match="was killed by SIGKILL: no stderr"):
        CommandProvider("./coder.py", tmp_path).call(make_request(workspace), timeout=30)


def test_command_answer_that_is_not_json_is_bad_output(tmp_path: Path, workspace: Path) -> None:
    executable(tmp_path, "coder.py", "print('I think the UART is broken.')\n")
    records: list[CallRecord] = []
    coder = agent("coder", "command:./coder.py", tmp_path, records, invalid_retries=0)
    with pytest.raises(AnswerInvalid) as caught:
        coder.ask(make_request(workspace))
    assert caught.value.kind is ProviderErrorKind.PROVIDER_BAD_OUTPUT
    assert caught.value.raw == "I think the UART is broken.\n"
    assert caught.value.errors[0].startswith("the answer is not one JSON object")
    (record,) = records
    assert record.document is None
    assert record.error_kind == "provider_bad_output"


def test_schema_invalid_answer_is_re_asked_with_the_errors_and_then_passes(
    tmp_path: Path, workspace: Path
) -> None:
    counter = tmp_path / "calls"
    executable(
        tmp_path,
        "reviewer.py",
        f"""
        import json, pathlib, sys
        request = json.load(sys.stdin)
        counter = pathlib.Path({str(counter)!r})
        calls = int(counter.read_text()) + 1 if counter.exists() else 1
        counter.write_text(str(calls))
        answer = {REVIEWER_ANSWER!r}
        if calls == 1:
            assert request["validation_errors"] == []
            answer["risk"] = 1.5
        else:
            assert request["validation_errors"] == [
                "$.risk: 1.5 is greater than the maximum of 1"
            ], request["validation_errors"]
        print(json.dumps(answer))
        """,
    )
    records: list[CallRecord] = []
    reviewer = agent("reviewer", "command:./reviewer.py", tmp_path, records)
    answer = reviewer.ask(make_request(workspace, "reviewer", patch="--- a/x\n+++ b/x\n"))
    assert isinstance(answer, ReviewerAnswer)
    assert answer.risk == 0.2
    assert counter.read_text() == "2"
    assert [r.attempt for r in records] == [1, 2]
    assert [r.error_kind for r in records] == ["provider_bad_output", None]
    assert records[0].errors == ["$.risk: 1.5 is greater than the maximum of 1"]
    assert records[1].request["validation_errors"] == records[0].errors


def test_schema_invalid_twice_is_answer_invalid(tmp_path: Path, workspace: Path) -> None:
    executable(tmp_path, "reviewer.py", answering({**REVIEWER_ANSWER, "decision": "lgtm"}))
    records: list[CallRecord] = []
    reviewer = agent("reviewer", "command:./reviewer.py", tmp_path, records)
    with pytest.raises(AnswerInvalid) as caught:
        reviewer.ask(make_request(workspace, "reviewer"))
    assert caught.value.errors == [
        "$.decision: 'lgtm' is not one of ['approve', 'changes_requested']"
    ]
    assert json.loads(caught.value.raw)["decision"] == "lgtm"
    assert "failed the JSON gate 2 time(s) in a row: $.decision" in caught.value.message
    assert len(records) == 2


def test_missing_executable_is_provider_not_found(tmp_path: Path, workspace: Path) -> None:
    with pytest.raises(ProviderError) as caught:
        CommandProvider("tools/nope.py", tmp_path).call(make_request(workspace), timeout=30)
    assert caught.value.kind is ProviderErrorKind.PROVIDER_NOT_FOUND
    assert caught.value.message == (
        f"{tmp_path / 'tools/nope.py'} does not exist; create it or fix the path"
    )


def test_bare_name_not_on_path_is_provider_not_found(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(workspace))
    with pytest.raises(ProviderError) as caught:
        CommandProvider("fw-coder", workspace).call(make_request(workspace), timeout=30)
    assert caught.value.kind is ProviderErrorKind.PROVIDER_NOT_FOUND
    assert caught.value.message == (
        "the 'fw-coder' executable is not on PATH; install it or give its path"
    )


def test_bare_name_of_a_file_in_the_tree_says_how_to_run_it(
    tmp_path: Path, workspace: Path
) -> None:
    executable(tmp_path, "coder.py", answering(CODER_ANSWER))
    with pytest.raises(ProviderError) as caught:
        CommandProvider("coder.py", tmp_path).call(make_request(workspace), timeout=30)
    assert caught.value.kind is ProviderErrorKind.PROVIDER_NOT_FOUND
    assert caught.value.message.endswith(
        f"is not on PATH; to run {tmp_path / 'coder.py'} write command:./coder.py"
    )


def test_missing_interpreter_is_provider_not_found(tmp_path: Path, workspace: Path) -> None:
    program = tmp_path / "coder"
    program.write_text("#!/nonexistent/python3\nprint('{}')\n")
    program.chmod(0o755)
    with pytest.raises(ProviderError) as caught:
        CommandProvider("./coder", tmp_path).call(make_request(workspace), timeout=30)
    assert caught.value.kind is ProviderErrorKind.PROVIDER_NOT_FOUND
    assert "#! line" in caught.value.message


@pytest.mark.parametrize(
    "make",
    [
        pytest.param(lambda d: executable(d, "coder.py", "print('{}')\n", mode=0o644), id="no-x"),
        pytest.param(lambda d: d / "firmware", id="directory"),
    ],
)
def test_not_executable_is_provider_permission_denied(
    tmp_path: Path, workspace: Path, make: Callable[[Path], Path]
) -> None:
    target = make(tmp_path)
    with pytest.raises(ProviderError) as caught:
        CommandProvider(str(target), tmp_path).call(make_request(workspace), timeout=30)
    assert caught.value.kind is ProviderErrorKind.PROVIDER_PERMISSION_DENIED
    assert caught.value.message.startswith(f"cannot execute {target}: Permission denied")


def _running(pid: int) -> bool:
    """Alive and not a zombie waiting for whoever inherited it to reap it."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads process state in /proc")
def test_timeout_stops_the_whole_process_group(tmp_path: Path, workspace: Path) -> None:
    pids = tmp_path / "pids"
    executable(
        tmp_path,
        "coder.py",
        f"""
        import os, pathlib, subprocess, sys, time
        helper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
        pathlib.Path({str(pids)!r}).write_text(f"{{os.getpid()}} {{helper.pid}}")
        time.sleep(120)
        """,
    )
    with pytest.raises(ProviderError) as caught:
        CommandProvider("./coder.py", tmp_path).call(make_request(workspace), timeout=0.5)
    assert caught.value.kind is ProviderErrorKind.PROVIDER_TIMEOUT
    assert caught.value.kind.transient
    assert "gave no answer within 0.5 s and was stopped" in caught.value.message
    leader, helper = (int(pid) for pid in pids.read_text().split())
    assert not _running(leader)  # reaped by us
    # The helper got the signal with its group; give the kernel a moment to deliver it.
    for _ in range(1000):
        if not _running(helper):
            break
        time.sleep(0.01)
    assert not _running(helper)


def test_runaway_stdout_is_bad_output(tmp_path: Path, workspace: Path) -> None:
    executable(
        tmp_path,
        "coder.py",
        f"""
        import sys
        chunk = b"x" * 65536
        for _ in range({MAX_STDOUT_BYTES // 65536 + 2}):
            sys.stdout.buffer.write(chunk)
        """,
    )
    with pytest.raises(ProviderError) as caught:
        CommandProvider("./coder.py", tmp_path).call(make_request(workspace), timeout=60)
    assert caught.value.kind is ProviderErrorKind.PROVIDER_BAD_OUTPUT
    assert f"more than {MAX_STDOUT_BYTES} bytes to stdout" in caught.value.message


def test_chatty_stderr_keeps_only_its_tail(tmp_path: Path, workspace: Path) -> None:
    executable(
        tmp_path,
        "coder.py",
        f"""
        import json, sys
        json.load(sys.stdin)
        for n in range(40_000):
            print(f"log line {{n}}", file=sys.stderr)
        print(json.dumps({CODER_ANSWER!r}))
        """,
    )
    answer = CommandProvider("./coder.py", tmp_path).call(make_request(workspace), timeout=60)
    assert extract_json(answer.text) == CODER_ANSWER
    assert len(answer.stderr) <= STDERR_TAIL_BYTES
    assert answer.stderr.endswith("log line 39999\n")


def test_a_program_that_ignores_a_large_request_still_answers(
    tmp_path: Path, workspace: Path
) -> None:
    executable(tmp_path, "coder.py", f"print({json.dumps(json.dumps(CODER_ANSWER))})\n")
    request = make_request(workspace, goal="g" * (4 * 1024 * 1024))
    answer = CommandProvider("./coder.py", tmp_path).call(request, timeout=60)
    assert extract_json(answer.text) == CODER_ANSWER


def test_stdout_that_is_not_utf8_is_bad_output(tmp_path: Path, workspace: Path) -> None:
    executable(tmp_path, "coder.py", 'import sys\nsys.stdout.buffer.write(b\'{"a": "\\xff"}\')\n')
    with pytest.raises(ProviderError, match="stdout that is not UTF-8"):
        CommandProvider("./coder.py", tmp_path).call(make_request(workspace), timeout=30)


def test_failover_from_a_missing_executable_to_a_working_one(
    tmp_path: Path, workspace: Path
) -> None:
    executable(tmp_path, "good.py", answering(CODER_ANSWER))
    records: list[CallRecord] = []
    coder = agent("coder", "command:./missing.py, command:./good.py", tmp_path, records)
    answer = coder.ask(make_request(workspace))
    assert isinstance(answer, CoderAnswer)
    assert [(r.provider, r.attempt, r.error_kind) for r in records] == [
        ("command:./missing.py", 1, "provider_not_found"),
        ("command:./good.py", 2, None),
    ]
    assert records[0].errors == [
        f"{tmp_path / './missing.py'} does not exist; create it or fix the path"
    ]


def test_when_every_provider_fails_the_last_error_is_raised(
    tmp_path: Path, workspace: Path
) -> None:
    executable(tmp_path, "locked.py", "print('{}')\n", mode=0o644)
    records: list[CallRecord] = []
    coder = agent("coder", "command:./missing.py,command:./locked.py", tmp_path, records)
    with pytest.raises(ProviderError) as caught:
        coder.ask(make_request(workspace))
    assert caught.value.kind is ProviderErrorKind.PROVIDER_PERMISSION_DENIED
    assert caught.value.provider == "command:./locked.py"
    assert [r.error_kind for r in records] == ["provider_not_found", "provider_permission_denied"]


# --- scripted: --------------------------------------------------------------------------------


def record_answers(directory: Path, role: str, answers: dict[str, str]) -> None:
    (directory / role).mkdir(parents=True, exist_ok=True)
    for name, text in answers.items():
        (directory / role / name).write_text(text)


def summaries(provider: ScriptedProvider, request: AgentRequest, count: int) -> list[object]:
    return [extract_json(provider.call(request, 1).text)["summary"] for _ in range(count)]


def test_scripted_replays_role_files_in_natural_order(tmp_path: Path, workspace: Path) -> None:
    answers = tmp_path / "answers"
    record_answers(
        answers,
        "coder",
        {
            name: json.dumps({**CODER_ANSWER, "summary": name})
            for name in ("10.json", "2.json", "1.json")
        }
        | {"README.md": "not an answer"},
    )
    record_answers(answers, "reviewer", {"a.json": json.dumps(REVIEWER_ANSWER)})
    provider = ScriptedProvider("answers", rootdir=tmp_path)
    assert provider.spec == "scripted:answers"
    coder_request = make_request(workspace)
    assert summaries(provider, coder_request, 2) == ["1.json", "2.json"]
    assert extract_json(provider.call(make_request(workspace, "reviewer"), 1).text)["risk"] == 0.2
    assert summaries(provider, coder_request, 1) == ["10.json"]
    with pytest.raises(ProviderError) as caught:
        provider.call(coder_request, 1)
    assert caught.value.kind is ProviderErrorKind.PROVIDER_BAD_OUTPUT
    assert caught.value.message == (
        "scripted:answers has no coder answer left (3 used); "
        "record more answers or use another provider"
    )
    # Another instance starts from the first answer again.
    assert summaries(ScriptedProvider(str(answers), tmp_path), coder_request, 1) == ["1.json"]


def test_scripted_replays_an_earlier_run_directory(tmp_path: Path, workspace: Path) -> None:
    run = tmp_path / ".fwloop" / "runs" / "20250101-000000-abcd"
    files = {
        "rounds/02/coder-1.answer.txt": json.dumps({**CODER_ANSWER, "summary": "round 2"}),
        "rounds/10/coder-1.answer.txt": json.dumps({**CODER_ANSWER, "summary": "round 10"}),
        "rounds/02/coder-10.answer.txt": json.dumps({**CODER_ANSWER, "summary": "round 2, #10"}),
        "rounds/02/coder-2.answer.txt": json.dumps({**CODER_ANSWER, "summary": "round 2, #2"}),
        "rounds/02/coder-3.answer.txt": "",  # a call that failed before answering
        "rounds/02/coder-1.request.json": "{}",
        "rounds/02/reviewer-1.answer.txt": json.dumps(REVIEWER_ANSWER),
        "summary.json": "{}",
    }
    for relpath, text in files.items():
        (run / relpath).parent.mkdir(parents=True, exist_ok=True)
        (run / relpath).write_text(text)
    provider = ScriptedProvider(str(run.relative_to(tmp_path)), tmp_path)
    assert summaries(provider, make_request(workspace), 4) == [
        "round 2",
        "round 2, #2",
        "round 2, #10",
        "round 10",
    ]
    with pytest.raises(ProviderError, match=r"no coder answer left \(4 used\)"):
        provider.call(make_request(workspace), 1)


def test_scripted_replay_goes_through_the_gate(tmp_path: Path, workspace: Path) -> None:
    record_answers(
        tmp_path / "answers",
        "reviewer",
        {
            "1.json": '{"decision": "approve"}',
            "2.json": f"```json\n{json.dumps(REVIEWER_ANSWER)}\n```",
        },
    )
    records: list[CallRecord] = []
    answer = agent("reviewer", "scripted:answers", tmp_path, records).ask(
        make_request(workspace, "reviewer")
    )
    assert isinstance(answer, ReviewerAnswer)
    assert [r.error_kind for r in records] == ["provider_bad_output", None]


def test_scripted_missing_directory_is_a_spec_error(tmp_path: Path) -> None:
    with pytest.raises(SpecError) as caught:
        ScriptedProvider("recorded", tmp_path)
    assert str(caught.value) == (
        f"{tmp_path / 'recorded'} is not a directory; record answers there or fix the path"
    )


# --- rules ------------------------------------------------------------------------------------


def rules_answer(request: AgentRequest) -> CoderAnswer | ReviewerAnswer | TesterAnswer:
    return agent(request.role, "rules", Path("/"), []).ask(request)


@pytest.mark.parametrize(
    ("signature", "excerpt", "category"),
    [
        ("call test_uart.py: assert 'OK' == 'ERR'", "E AssertionError", "assertion mismatch"),
        ("call test_boot.py: ConsoleTimeout: 'login:'", "no answer", "timeout/no answer"),
        ("call test_mem.py: HardFault at 0x?", "CFSR=0x?", "crash (segfault / HardFault)"),
        ("call test_sim.py: exit N", "Segmentation fault (core dumped)", "crash"),
        ("setup test_a.py: EnvironmentFailure: port", "Connection refused", "environment"),
        ("call test_x.py: error: 'foo' undeclared", "uart.c:3: error: x", "build/compile"),
        ("call test_y.py: something odd", "", "unclassified failure"),
    ],
)
def test_rules_coder_triages_by_keyword(
    workspace: Path, signature: str, excerpt: str, category: str
) -> None:
    failures = [Failure(nodeid="tests/t.py::test_it", signature=signature, excerpt=excerpt)]
    answer = rules_answer(make_request(workspace, failures=failures))
    assert isinstance(answer, CoderAnswer)
    assert answer.patch == ""
    assert answer.analysis.confidence <= 0.3
    assert category in answer.analysis.root_cause
    assert "tests/t.py::test_it" in answer.analysis.root_cause


def test_rules_coder_names_the_most_common_category(workspace: Path) -> None:
    failures = [
        Failure(nodeid=f"t.py::test_{n}", signature="call t.py: ConsoleTimeout", excerpt="")
        for n in range(7)
    ] + [Failure(nodeid="t.py::test_x", signature="call t.py: assert 1 == 2", excerpt="")]
    answer = rules_answer(make_request(workspace, failures=failures))
    assert isinstance(answer, CoderAnswer)
    assert answer.analysis.root_cause.startswith(
        "7 of 8 failures look like a timeout/no answer (t.py::test_0, t.py::test_1, "
        "t.py::test_2, t.py::test_3, t.py::test_4 and 2 more)"
    )
    assert [h.split(" in ")[0] for h in answer.analysis.hypotheses] == [
        "timeout/no answer",
        "assertion mismatch",
    ]
    assert answer.analysis.confidence == 0.26


def test_rules_coder_puts_a_broken_build_first(workspace: Path) -> None:
    diagnostics = "make: Entering\nsrc/uart.c:12:5: error: 'baud' undeclared\nmake: *** [all]"
    answer = rules_answer(make_request(workspace, build_diagnostics=diagnostics))
    assert isinstance(answer, CoderAnswer)
    assert answer.analysis.root_cause == (
        "the build is broken: src/uart.c:12:5: error: 'baud' undeclared"
    )


def test_rules_coder_without_failures_has_no_confidence(workspace: Path) -> None:
    answer = rules_answer(make_request(workspace))
    assert isinstance(answer, CoderAnswer)
    assert answer.analysis.confidence == 0.0


def diff(path: str, removed: int, added: int, text: str = "value") -> str:
    lines = [f"--- a/{path}", f"+++ b/{path}", f"@@ -1,{removed} +1,{added} @@"]
    return "\n".join(
        lines
        + [f"-old {text} {n}" for n in range(removed)]
        + [f"+new {text} {n}" for n in range(added)]
    )


def review(workspace: Path, patch: str) -> ReviewerAnswer:
    answer = rules_answer(make_request(workspace, "reviewer", patch=patch))
    assert isinstance(answer, ReviewerAnswer)
    return answer


def test_rules_reviewer_requests_changes_for_an_empty_patch(workspace: Path) -> None:
    answer = review(workspace, "")
    assert answer.decision == "changes_requested"
    assert answer.must_fix[0].issue.startswith("the patch is empty")


def test_rules_reviewer_scores_risk_by_size_and_what_is_touched(workspace: Path) -> None:
    small = review(workspace, diff("src/uart.c", 1, 1))
    bigger = review(workspace, diff("src/uart.c", 40, 40))
    startup = review(workspace, diff("src/startup_stm32.s", 1, 1))
    linker = review(workspace, diff("board/app.ld", 1, 1))
    deleting = review(workspace, diff("src/uart.c", 30, 2))
    assert {a.decision for a in (small, bigger, startup, linker, deleting)} == {"approve"}
    assert small.risk < bigger.risk < 0.5
    assert startup.risk > small.risk + 0.25
    assert linker.risk == startup.risk
    assert deleting.risk > bigger.risk
    assert "mostly deletes (30 lines removed, 2 added)" in deleting.summary


def test_rules_reviewer_does_not_approve_a_large_patch(workspace: Path) -> None:
    answer = review(workspace, diff("src/uart.c", 150, 150))
    assert answer.decision == "changes_requested"
    assert "changes 300 lines" in answer.must_fix[0].issue


def test_rules_tester_proposes_nothing(workspace: Path) -> None:
    answer = rules_answer(make_request(workspace, "tester"))
    assert isinstance(answer, TesterAnswer)
    assert (answer.select, answer.commands) == ([], [])
    assert answer.notes


@pytest.mark.parametrize("role", ["coder", "reviewer", "tester"])
def test_rules_answers_are_json_text_that_passes_the_schema(workspace: Path, role: Role) -> None:
    raw = RulesProvider().call(make_request(workspace, role, patch="+x\n"), timeout=1)
    assert validate_answer(role, extract_json(raw.text), load_schema(role)) == []


# --- registry ---------------------------------------------------------------------------------


def test_registry_builds_the_failover_list_in_order(tmp_path: Path) -> None:
    (tmp_path / "recorded").mkdir()
    providers = parse_role_specs(
        " command:tools/agent.py , scripted:recorded,rules ", "coder", tmp_path
    )
    assert [type(p) for p in providers] == [CommandProvider, ScriptedProvider, RulesProvider]
    assert [p.spec for p in providers] == ["command:tools/agent.py", "scripted:recorded", "rules"]


def test_provider_syntax_lists_what_is_registered() -> None:
    assert list(PROVIDER_SYNTAX) == [
        "claude",
        "codex",
        "openai:MODEL@URL",
        "command:PATH",
        "scripted:DIR",
        "rules",
    ]
    assert [syntax.partition(":")[0] for syntax in PROVIDER_SYNTAX] == list(PROVIDERS)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "bogus",
            "fwloop: --fwloop-coder=bogus: unknown provider 'bogus'; "
            "choose from claude, codex, openai:MODEL@URL, command:PATH, scripted:DIR, rules",
        ),
        (
            "rules,gemini",
            "fwloop: --fwloop-coder=rules,gemini: unknown provider 'gemini'; "
            "choose from claude, codex, openai:MODEL@URL, command:PATH, scripted:DIR, rules",
        ),
        (
            "  ",
            "fwloop: --fwloop-coder=  : no provider given; "
            "choose from claude, codex, openai:MODEL@URL, command:PATH, scripted:DIR, rules",
        ),
        (
            "rules,,rules",
            "fwloop: --fwloop-coder=rules,,rules: empty entry in the failover list; "
            "remove the extra comma",
        ),
        (
            "command:",
            "fwloop: --fwloop-coder=command:: 'command:' needs an argument; "
            "write it as command:PATH",
        ),
        (
            "rules:fast",
            "fwloop: --fwloop-coder=rules:fast: 'rules' takes no argument; write it as rules",
        ),
    ],
)
def test_registry_errors_are_one_line_and_name_the_choices(
    tmp_path: Path, text: str, message: str
) -> None:
    with pytest.raises(SpecError) as caught:
        parse_role_specs(text, "coder", tmp_path)
    assert str(caught.value) == message


def test_registry_reports_a_provider_that_cannot_work_with_its_option(tmp_path: Path) -> None:
    with pytest.raises(SpecError) as caught:
        parse_role_specs("rules,scripted:gone", "reviewer", tmp_path)
    assert str(caught.value) == (
        f"fwloop: --fwloop-reviewer=rules,scripted:gone: {tmp_path / 'gone'} is not a "
        "directory; record answers there or fix the path"
    )


# --- errors -----------------------------------------------------------------------------------


def test_only_timeouts_network_errors_and_rate_limits_are_transient() -> None:
    assert {kind.value for kind in ProviderErrorKind if kind.transient} == {
        "provider_timeout",
        "provider_network_error",
        "provider_rate_limited",
    }


def test_provider_error_message_is_one_line() -> None:
    error = ProviderError(
        ProviderErrorKind.PROVIDER_RATE_LIMITED,
        "openai:m@u",
        "slow down\n  try later",
        retry_after=3,
    )
    assert error.message == "slow down try later"
    assert str(error) == "openai:m@u: slow down try later"
    assert error.retry_after == 3
