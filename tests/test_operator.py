"""Proposal mode (DESIGN.md §11): the operator sees the patch before it is applied."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from controllerkit import ControllerKit, firmware_patch, fixing
from loopkit import (
    APPROVE,
    CALC,
    Agent,
    LoopProject,
    calc_fix_patches,
    check_records,
    coder_answer,
    tree_state,
)
from pytest_fwloop.agents.errors import ProviderError, ProviderErrorKind
from pytest_fwloop.core.machine.outcomes import Outcome


@pytest.fixture
def kit(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> ControllerKit:
    return ControllerKit(pytester, monkeypatch)


def proposal_files(kit: ControllerKit) -> tuple[str, str]:
    path = kit.controller.recorder.path
    return (path / "proposal.patch").read_text(), (path / "proposal.md").read_text()


@pytest.mark.parametrize("mode", ["first", "every"])
def test_a_proposal_stops_the_run_with_the_tree_untouched(kit: ControllerKit, mode: str) -> None:
    fix = fixing("ok bug", "ok ok", "reset the divisor")
    kit.coder.answers = [fix]
    kit.build("ok bug", f"fwloop_propose = {mode}")
    assert kit.run() is Outcome.AWAITING_OPERATOR_CONFIRM
    assert kit.firmware() == "ok bug"
    assert kit.moves()[-1] == ("PATCH_GENERATION", "await_operator", "ABORTED")
    patch, text = proposal_files(kit)
    assert patch == fix["patch"]
    assert "**Patch policy:** the patch policy passes it and it applies" in text
    assert "## The reviewer's comment" in text
    assert '"decision": "approve"' in text  # the reviewer's answer, shown as it came
    # The roundtable asked the reviewer once, without a schema; the strict gate never ran.
    [asked] = kit.reviewer.requests
    assert asked.schema_ == {}
    assert asked.patch == fix["patch"]
    summary = kit.summary()
    assert (summary["outcome"], summary["exit_status"]) == ("awaiting_operator_confirm", 1)
    assert "proposal.md" in summary["reason"]


def test_a_proposal_the_gate_would_refuse_says_so(kit: ControllerKit) -> None:
    hostile = coder_answer(firmware_patch("ok bug", "ok ok").replace("fw/state.txt", ".git/config"))
    kit.coder.answers = [hostile]
    kit.build("ok bug", "fwloop_propose = first")
    assert kit.run() is Outcome.AWAITING_OPERATOR_CONFIRM
    assert "**Patch policy:** the patch gate would refuse it: " in proposal_files(kit)[1]
    assert kit.firmware() == "ok bug"


class Operator(io.StringIO):
    """stdin on a terminal, answering one line per question."""

    def isatty(self) -> bool:
        return True


def test_at_a_terminal_yes_applies_and_text_goes_back_to_the_coder(
    kit: ControllerKit, monkeypatch: pytest.MonkeyPatch
) -> None:
    kit.coder.answers = [fixing("ok bug", "ok ok", "first idea"), fixing("ok bug", "ok ok")]
    kit.build("ok bug", "fwloop_propose = first", "fwloop_mode = interactive")
    # After the build: configuring the inner pytest replaces stdin with its capture.
    monkeypatch.setattr(sys, "stdin", Operator("keep the old divisor for UART0\ny\n"))
    assert kit.run() is Outcome.SUCCESS
    assert kit.firmware() == "ok ok"
    [follow_up] = kit.coder.requests[1].must_fix
    assert follow_up.issue == (
        "the operator's follow-up on your proposal: keep the old divisor for UART0"
    )
    assert ("PATCH_GENERATION", "operator_followup", "CODE_ANALYSIS") in kit.moves()
    assert "Apply this patch?" in kit.terminal.getvalue()


def test_at_a_terminal_no_cancels(kit: ControllerKit, monkeypatch: pytest.MonkeyPatch) -> None:
    kit.coder.answers = [fixing("ok bug", "ok ok")]
    kit.build("ok bug", "fwloop_propose = every", "fwloop_mode = interactive")
    monkeypatch.setattr(sys, "stdin", Operator("n\n"))
    assert kit.run() is Outcome.CANCELED
    assert kit.firmware() == "ok bug"


@pytest.mark.slow
def test_pytest_fwloop_propose_leaves_the_tree_byte_for_byte(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = LoopProject(pytester, monkeypatch)
    project.calc_suite()
    before = tree_state(project.root)
    coder = project.agent("coder", [coder_answer(p) for p in calc_fix_patches()])
    result = project.run(f"--fwloop-coder={coder.spec}", "--fwloop-propose=first")
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    assert tree_state(project.root) == before
    assert (project.root / "fw" / "calc.py").read_text() == CALC
    [run_dir] = project.run_dirs()
    assert (run_dir / "proposal.patch").read_text() == calc_fix_patches()[0]
    summary: dict[str, Any] = json.loads((run_dir / "summary.json").read_text())
    assert summary["outcome"] == "awaiting_operator_confirm"
    result.stdout.fnmatch_lines(["*outcome: awaiting_operator_confirm*"])


def test_a_reviewer_that_cannot_comment_leaves_a_note_not_a_failure(kit: ControllerKit) -> None:
    kit.coder.answers = [fixing("ok bug", "ok ok")]
    kit.reviewer.answers = [
        ProviderError(ProviderErrorKind.PROVIDER_TIMEOUT, "fake:reviewer", "no answer in 600 s")
    ]
    kit.build("ok bug", "fwloop_propose = first")
    assert kit.run() is Outcome.AWAITING_OPERATOR_CONFIRM
    assert "(no comment: provider_timeout: no answer in 600 s)" in proposal_files(kit)[1]
    meta = json.loads((kit.controller.recorder.round_path(2) / "reviewer-1.meta.json").read_text())
    assert meta["error_kind"] == "provider_timeout"


def test_an_answer_without_a_patch_is_not_proposed(kit: ControllerKit) -> None:
    fix = fixing("ok bug", "ok ok")
    kit.coder.answers = [coder_answer("", "no idea yet"), fix]
    kit.build("ok bug", "fwloop_propose = first")
    assert kit.run() is Outcome.AWAITING_OPERATOR_CONFIRM
    assert len(kit.coder.requests) == 2  # the empty answer went the gate's way: asked again
    assert proposal_files(kit)[0] == fix["patch"]


# -- the `fwloop` command on recorded runs (real processes) ------------------------------------


def calc_coder(project: LoopProject) -> Agent:
    """The calc suite and a coder fixing one of its bugs per answer (`fix 0`, `fix 1`, …)."""
    project.calc_suite()
    patches = calc_fix_patches()
    return project.agent("coder", [coder_answer(p, f"fix {i}") for i, p in enumerate(patches)])


def state_of(run_dir: Path) -> dict[str, Any]:
    return json.loads((run_dir / "state.json").read_text())  # type: ignore[no-any-return]


@pytest.mark.slow
def test_confirm_applies_the_proposal_and_the_run_goes_on_to_green(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = LoopProject(pytester, monkeypatch)
    coder = calc_coder(project)
    patches = calc_fix_patches()
    first = project.run(f"--fwloop-coder={coder.spec}", "--fwloop-propose=first")
    assert first.ret == pytest.ExitCode.TESTS_FAILED, first.stdout.str()
    [run_dir] = project.run_dirs()
    assert state_of(run_dir)["outcome"] == "awaiting_operator_confirm"

    confirmed = project.fwloop("confirm", "last", "--note", "fine, but keep the names")
    assert confirmed.returncode == 0, confirmed.stdout + confirmed.stderr
    assert project.run_dirs() == [run_dir]  # the same run, continued
    assert "def add(a, b):\n    return a + b" in (project.root / "fw" / "calc.py").read_text()
    summary = project.summary()
    assert summary["outcome"] == "success"
    # The whole run's history: the baseline of the first process, then the confirmed patch on.
    assert summary["pass_counts"][0] == 1
    assert summary["pass_counts"][-1] == summary["total_counts"][-1] == 6
    # The coder was not asked again for the proposal it made: one call for it, then one per bug.
    coder_calls = coder.requests("coder")
    assert [c["iteration"] for c in coder_calls][:2] == [2, 3]
    assert len(coder_calls) == 3
    # The note reached the agents after the confirm; the reviewer judged the proposal strictly.
    reviews = coder.requests("reviewer")
    strict = [r for r in reviews if r["schema"]]
    assert strict[0]["patch"] == patches[0]
    assert strict[0]["operator_messages"] == ["fine, but keep the names"]
    assert coder_calls[1]["operator_messages"] == ["fine, but keep the names"]
    messages = (run_dir / "threads" / "operator" / "messages.jsonl").read_text().splitlines()
    assert [json.loads(m)["kind"] for m in messages] == ["confirm_note"]
    events = project.events()
    assert ("IDLE", "operator_confirmed", "PATCH_GENERATION") in [
        (e["from"], e["event"], e["to"]) for e in events
    ]
    replayed = project.replay()
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    assert check_records(run_dir) > 10


def awaiting_run(project: LoopProject, *extra: str) -> tuple[Agent, Path]:
    """The calc suite stopped on its first proposal; its coder fixes one bug per answer."""
    coder = calc_coder(project)
    result = project.run(f"--fwloop-coder={coder.spec}", "--fwloop-propose=first", *extra)
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    [run_dir] = project.run_dirs()
    return coder, run_dir


@pytest.mark.slow
def test_a_followup_on_a_proposal_gets_a_revised_one_and_nothing_is_built(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = LoopProject(pytester, monkeypatch)
    builds = project.agents_dir / "builds.log"
    build = f"{sys.executable} -c \"open({str(builds)!r}, 'a').write('built\\n')\""
    coder, run_dir = awaiting_run(project, f"--fwloop-build={build}")
    assert builds.read_text() == "built\n"  # the baseline's build
    before = tree_state(project.root)
    followed = project.fwloop("followup", "last", "fix scale first, it feeds the UART divisor")
    assert followed.returncode == pytest.ExitCode.TESTS_FAILED, followed.stdout + followed.stderr
    assert tree_state(project.root) == before
    assert builds.read_text() == "built\n"  # nothing built for the revised proposal
    state = state_of(run_dir)
    assert state["outcome"] == "awaiting_operator_confirm"
    assert state["pending"]["summary"] == "fix 1"  # the coder's revised proposal
    assert (run_dir / "proposal.patch").read_text() == calc_fix_patches()[1]
    revised = coder.requests("coder")[-1]
    assert revised["iteration"] == 2
    assert revised["operator_messages"] == ["fix scale first, it feeds the UART divisor"]
    assert revised["must_fix"][0]["issue"] == (
        "the operator's follow-up on your proposal (fix 0): fix scale first, it feeds the UART "
        "divisor"
    )
    moves = [
        (e["from"], e["event"], e["to"]) for e in project.events() if e["kind"] == "transition"
    ]
    after = moves[moves.index(("IDLE", "resume", "CODE_ANALYSIS")) :]
    assert [m[2] for m in after] == ["CODE_ANALYSIS", "PATCH_GENERATION", "ABORTED"]
    [line] = (run_dir / "threads" / "operator" / "messages.jsonl").read_text().splitlines()
    assert json.loads(line)["author"] == "operator"
    assert project.replay().returncode == 0


@pytest.mark.slow
def test_resume_goes_on_from_the_kept_tree_and_rerun_starts_afresh(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = LoopProject(pytester, monkeypatch)
    coder = calc_coder(project)
    stopped = project.run(f"--fwloop-coder={coder.spec}", "--max-iter=3")
    assert stopped.ret == pytest.ExitCode.TESTS_FAILED, stopped.stdout.str()
    assert project.summary()["outcome"] == "max_iterations_reached"
    assert (project.root / "fw" / "calc.py").read_text() == CALC  # restored at the end
    [run_dir] = project.run_dirs()

    resumed = project.fwloop("resume", "last", "--max-iter", "5")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    summary = project.summary()
    assert summary["outcome"] == "success"
    assert summary["pass_counts"][:3] == [1, 3, 5]  # the first process's iterations, kept
    # No fix already made was asked for again: the coder's next request was iteration 4, on
    # the tree with fixes 0 and 1 back in place, and only clamp was sent as failing.
    requests = coder.requests("coder")
    assert [r["iteration"] for r in requests] == [2, 3, 4]
    assert [f["nodeid"] for f in requests[2]["failures"]] == ["tests/test_calc.py::test_clamp_high"]
    assert "return a + b" in (project.root / "fw" / "calc.py").read_text()
    assert project.replay().returncode == 0

    again = project.fwloop("rerun", run_dir.name)
    assert again.returncode == 0, again.stdout + again.stderr  # the tree is green now
    first, second = project.run_dirs()
    assert first == run_dir
    assert state_of(second)["invocation"] == state_of(run_dir)["invocation"]
    assert json.loads((second / "summary.json").read_text())["pass_counts"] == [6, 6]


@pytest.mark.slow
def test_chat_answers_from_the_role_with_the_run_as_context_and_changes_nothing(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = LoopProject(pytester, monkeypatch)
    coder, run_dir = awaiting_run(project)
    before = tree_state(project.root)
    state = (run_dir / "state.json").read_bytes()
    asked = project.fwloop("chat", "last", "--role", "reviewer", "is fix 0 risky for the UART?")
    assert asked.returncode == 0, asked.stdout + asked.stderr
    assert '"decision": "approve"' in asked.stdout  # the reviewer's own words, printed
    assert tree_state(project.root) == before
    assert (run_dir / "state.json").read_bytes() == state
    request = coder.requests("reviewer")[-1]
    assert request["schema"] == {}
    assert request["chat"]["question"] == "is fix 0 risky for the UART?"
    assert len(request["failures"]) > 0  # the run's records are the context
    again = project.fwloop("chat", "last", "--role", "reviewer", "and for SPI?")
    assert again.returncode == 0
    assert coder.requests("reviewer")[-1]["chat"]["messages"][0]["text"] == (
        "is fix 0 risky for the UART?"
    )
    thread = run_dir / "threads" / "chat-reviewer"
    meta = json.loads((thread / "meta.json").read_text())
    assert (meta["id"], meta["role"], meta["run_id"]) == ("chat-reviewer", "reviewer", run_dir.name)
    assert meta["title"].startswith("chat with the reviewer")
    assert meta["created_at"]
    recorded = json.loads((thread / "calls" / "1.request.json").read_text())
    assert recorded["chat"]["question"] == "is fix 0 risky for the UART?"
    assert '"decision": "approve"' in (thread / "calls" / "1.answer.txt").read_text()
    authors = [
        json.loads(m)["author"] for m in (thread / "messages.jsonl").read_text().splitlines()
    ]
    assert authors == ["operator", "reviewer", "operator", "reviewer"]


@pytest.mark.slow
def test_a_followup_on_a_finished_run_continues_it_with_the_message_to_address(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = LoopProject(pytester, monkeypatch)
    coder = calc_coder(project)
    assert project.run(f"--fwloop-coder={coder.spec}", "--max-iter=2").ret == 1
    followed = project.fwloop("followup", "last", "keep clamp() branch-free", "--max-iter", "5")
    assert followed.returncode == 0, followed.stdout + followed.stderr
    assert project.summary()["outcome"] == "success"
    asked = coder.requests("coder")[1]
    assert asked["iteration"] == 3
    assert {"issue": "the operator asks: keep clamp() branch-free", "file": None, "line": None} in (
        asked["must_fix"]
    )
    assert asked["operator_messages"] == ["keep clamp() branch-free"]


@pytest.mark.slow
def test_bad_operator_commands_say_why_in_one_line_and_change_nothing(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = LoopProject(pytester, monkeypatch)
    _, waiting = awaiting_run(project)
    green = project.run("--fwloop-coder=" + project.agent("fixed", [coder_answer("")]).spec)
    assert green.ret == 1  # nothing fixes the suite: max iterations
    (project.root / "fw" / "calc.py").write_text(CALC.replace("a - b", "a + b"))
    _, finished = project.run_dirs()
    state_file = finished / "state.json"
    finished_state = json.loads(state_file.read_text())
    finished_state["outcome"] = "success"  # as a run that ended green records it
    state_file.write_text(json.dumps(finished_state))

    def everything() -> dict[Path, bytes]:
        """The tree and the run directories (not the loop's snapshot store and lock)."""
        runs = project.root / ".fwloop" / "runs"
        files = [*runs.rglob("*"), *(project.root / p for p in tree_state(project.root))]
        return {p: p.read_bytes() for p in files if p.is_file()}

    def refused(*args: str, says: str) -> None:
        before = everything()
        done = project.fwloop(*args)
        assert done.returncode != 0, done.stdout
        lines = (done.stdout + done.stderr).strip().splitlines()
        assert len(lines) == 1, lines
        assert says in lines[0]
        assert "Traceback" not in lines[0]
        assert everything() == before

    refused("confirm", "nosuchrun", says="no run 'nosuchrun'")
    refused("confirm", "2", says="names 2 runs")
    refused("confirm", finished.name, says="awaits nothing to confirm (it ended success)")
    refused("resume", finished.name, says="ended with success; there is nothing to resume")
    refused("resume", waiting.name, says="waits for your word on its proposal")
    refused("chat", waiting.name, "--role", "tester", "hi", says="has no tester")
    # The tree changed under the proposal since the run stopped: confirming would overwrite it.
    refused("confirm", waiting.name, says="the tree changed since the run stopped (fw/calc.py)")
    (project.root / "fw" / "calc.py").write_text(CALC)
    newer = json.loads((waiting / "state.json").read_text())
    newer["schema_version"] = 2
    (waiting / "state.json").write_text(json.dumps(newer))
    refused("confirm", waiting.name, says="written by a newer pytest-fwloop (state schema 2")
    (waiting / "state.json").write_text("{not json")
    refused("confirm", waiting.name, says="state.json is unreadable")


@pytest.mark.slow
def test_of_two_operators_confirming_at_once_one_goes_on_the_other_is_told(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = LoopProject(pytester, monkeypatch)
    project.calc_suite()
    patches = calc_fix_patches()
    slow_review = {"__sleep__": 3, **APPROVE}  # the winner holds the run while the other tries
    coder = project.agent(
        "coder", [coder_answer(p) for p in patches], [APPROVE, slow_review, APPROVE]
    )
    assert project.run(f"--fwloop-coder={coder.spec}", "--fwloop-propose=first").ret == 1
    command = [sys.executable, "-m", "pytest_fwloop.cli", "confirm", "last"]
    both = [
        subprocess.Popen(
            command, cwd=project.root, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        for _ in range(2)
    ]
    outputs = [(p.communicate(timeout=300)[0], p.returncode) for p in both]
    [winner] = [out for out, code in outputs if code == 0]
    [loser] = [out for out, code in outputs if code != 0]
    [line] = loser.strip().splitlines()
    assert "is running" in line or "another pytest --fwloop" in line or "someone acted" in line
    assert "fwloop: [" not in loser  # it never moved the run
    assert project.summary()["outcome"] == "success", winner
    assert len([r for r in coder.requests("reviewer") if r["schema"]]) == 3  # one strict gate each


@pytest.mark.parametrize(("said", "left"), [("y\n", "ok ok bug"), ("n\n", "ok bug bug")])
def test_at_a_terminal_the_operator_chooses_the_tree_a_short_run_leaves(
    kit: ControllerKit, monkeypatch: pytest.MonkeyPatch, said: str, left: str
) -> None:
    kit.coder.answers = [fixing("ok bug bug", "ok ok bug")]
    kit.build("ok bug bug", "fwloop_mode = interactive", "fwloop_max_iter = 2")
    monkeypatch.setattr(sys, "stdin", Operator(said))
    assert kit.run() is Outcome.MAX_ITERATIONS_REACHED
    assert "keep its best tree (iteration 2: 2/3 passed) in place instead of the baseline?" in (
        kit.terminal.getvalue()
    )
    assert kit.firmware() == left
    summary = json.loads((kit.controller.recorder.path / "summary.json").read_text())
    assert summary["best"]["in_place"] is (said == "y\n")
    loop = kit.controller.loop
    assert loop.left_tree == (loop.iterations[1].checkpoint if said == "y\n" else "")
