"""The coordinator's outcomes (seeds 000/003/004): `discussion_complete`, `tester_schema_invalid`
and `test_failed`, in-process (controllerkit) and through real `pytest --fwloop` and `fwloop`.
"""

from __future__ import annotations

import io
import json
import shlex
import sys
from typing import Any

import pytest

from controllerkit import Answer, ControllerKit, FakeProvider, fixing
from loopkit import (
    CALC,
    FIXES,
    LoopProject,
    calc_fix_patches,
    coder_answer,
    tree_state,
    unified_diff,
)
from pytest_fwloop.core.machine.outcomes import Outcome
from pytest_fwloop.core.records.run_state import load_state
from pytest_fwloop.loop.operator.continuation import Action, Order, refusal

WHY = {
    "analysis": {
        "root_cause": "UART0's divisor is shared with the timer",
        "hypotheses": ["the timer reload clobbers it", "the PLL is not locked yet"],
        "confidence": 0.6,
    },
    "patch": "",
    "summary": "the divisor is shared: no safe change without the clock tree",
}


@pytest.fixture
def kit(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> ControllerKit:
    return ControllerKit(pytester, monkeypatch)


def order(kit: ControllerKit, action: Action, text: str = "") -> Order:
    return Order(action=action, run_id="run-1", revision=kit.state()["revision"], text=text)


# -- discussion_complete -------------------------------------------------------------------------


class Operator(io.StringIO):
    """stdin on a terminal, answering one line per question."""

    def isatty(self) -> bool:
        return True


def test_a_followup_answered_without_a_patch_completes_the_discussion(kit: ControllerKit) -> None:
    kit.coder.answers = [fixing("ok bug", "ok ok", "one"), WHY, fixing("ok bug", "ok ok")]
    kit.build("ok bug", "fwloop_propose = first")
    assert kit.run() is Outcome.AWAITING_OPERATOR_CONFIRM
    kit.continue_run(order(kit, Action.FOLLOWUP, "why does the divisor matter for UART0?"))
    assert kit.run() is Outcome.DISCUSSION_COMPLETE
    assert kit.firmware() == "ok bug"
    assert kit.moves()[-1] == ("PATCH_GENERATION", "discussion_complete", "ABORTED")
    run_dir = kit.controller.recorder.path
    assert not (run_dir / "proposal.patch").exists()  # nothing waits to be applied
    text = (run_dir / "proposal.md").read_text()
    assert "- the timer reload clobbers it" in text
    assert "## The reviewer's comment" in text
    assert "nothing waits to be confirmed" in text
    assert kit.reviewer.requests[-1].patch == ""  # the roundtable commented on the answer
    summary = kit.summary()
    assert (summary["outcome"], summary["exit_status"]) == ("discussion_complete", 1)
    assert summary["final_state"] == "ABORTED"
    assert summary["reason"].startswith(
        "the coder answered the operator's follow-up in iteration 2 with no patch (the divisor "
        "is shared"
    )
    # Nothing to confirm; a follow-up goes on with the discussion, and its patch is proposed.
    state = load_state(run_dir)
    assert refusal(state, Action.CONFIRM) == (
        "fwloop: run run-1 ended its discussion with no patch, so there is nothing to confirm: "
        "`fwloop followup run-1 TEXT` asks the coder for one"
    )
    assert refusal(state, Action.RESUME) is None
    kit.continue_run(order(kit, Action.FOLLOWUP, "then propose the clock-tree change"))
    assert kit.run() is Outcome.AWAITING_OPERATOR_CONFIRM
    assert (run_dir / "proposal.patch").read_text() == fixing("ok bug", "ok ok")["patch"]
    assert (
        kit.coder.requests[-1]
        .must_fix[0]
        .issue.startswith("the operator's follow-up on your proposal (the divisor is shared")
    )


def test_outside_a_discussion_an_answer_without_a_patch_goes_to_the_gate(
    kit: ControllerKit,
) -> None:
    kit.coder.answers = [WHY, fixing("ok bug", "ok ok")]
    kit.build("ok bug", "fwloop_propose = first")
    assert kit.run() is Outcome.AWAITING_OPERATOR_CONFIRM  # never discussion_complete
    assert len(kit.coder.requests) == 2


def test_at_a_terminal_the_operator_may_reply_before_the_discussion_ends(
    kit: ControllerKit, monkeypatch: pytest.MonkeyPatch
) -> None:
    kit.coder.answers = [fixing("ok bug", "ok ok", "one"), WHY, WHY]
    kit.build("ok bug", "fwloop_propose = every", "fwloop_mode = interactive")
    replies = "is it the divisor?\nand the PLL?\n\n"
    monkeypatch.setattr(sys, "stdin", Operator(replies))
    assert kit.run() is Outcome.DISCUSSION_COMPLETE
    assert len(kit.coder.requests) == 3
    assert kit.coder.requests[2].must_fix[0].issue == (
        "the operator's follow-up on your proposal: and the PLL?"
    )
    assert "Reply to the coder? [text = ask again / empty = end the discussion]" in (
        kit.terminal.getvalue()
    )
    assert kit.firmware() == "ok bug"


def test_an_interactive_plateau_with_no_one_to_ask_stays_awaiting(kit: ControllerKit) -> None:
    (kit.root / "criteria.toml").write_text(
        "min_iterations_for_plateau = 2\nplateau_improvement_threshold = 1.0\n"
        "slow_improvement_threshold = 1.0\n"
    )
    kit.coder.answers = [fixing("bug bug bug", "ok bug bug")]
    kit.build("bug bug bug", "fwloop_criteria = criteria.toml", "fwloop_mode = interactive")
    assert kit.run() is Outcome.AWAITING_OPERATOR_CONFIRM
    assert kit.moves()[-1] == ("CONVERGENCE_CHECK", "await_operator", "ABORTED")
    assert "awaits a decision on its plateau" in (
        refusal(load_state(kit.controller.recorder.path), Action.CONFIRM) or ""
    )


@pytest.mark.slow
def test_fwloop_followup_that_gets_no_patch_ends_the_discussion(project: LoopProject) -> None:
    project.calc_suite()
    first = calc_fix_patches()[0]
    coder = project.agent("coder", [coder_answer(first, "fix add"), WHY])
    result = project.run(f"--fwloop-coder={coder.spec}", "--fwloop-propose=first")
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    before = tree_state(project.root)
    followed = project.fwloop("followup", "last", "why does scale() add one?")
    assert followed.returncode == 1, followed.stdout + followed.stderr
    assert "outcome: discussion_complete" in followed.stdout
    assert tree_state(project.root) == before
    [run_dir] = project.run_dirs()
    state = json.loads((run_dir / "state.json").read_text())
    assert state["outcome"] == "discussion_complete"
    assert not (run_dir / "proposal.patch").exists()
    refused = project.fwloop("confirm", "last")
    assert refused.returncode == 2
    assert "ended its discussion with no patch, so there is nothing to confirm" in refused.stderr
    assert project.replay().returncode == 0


# -- tester_schema_invalid -----------------------------------------------------------------------

UNKNOWN = {"select": ["tests/test_fw.py::test_nope"], "commands": [], "notes": ""}
EMPTY_PLAN = {"select": [], "commands": [], "notes": "nothing to add"}


class _Tester:
    """The pytest_fwloop_make_provider hook for `fake:tester`."""

    def __init__(self, provider: FakeProvider) -> None:
        self.provider = provider

    @pytest.hookimpl
    def pytest_fwloop_make_provider(self, role: str, spec: str) -> FakeProvider | None:
        return self.provider if spec == self.provider.spec else None


def with_tester(kit: ControllerKit, answers: list[dict[str, Any]], *ini: str) -> FakeProvider:
    tester = FakeProvider("fake:tester", list[Answer](answers))
    kit.coder.answers = [
        fixing("bug bug bug", "ok bug bug"),
        fixing("ok bug bug", "ok ok bug"),
        fixing("ok ok bug", "ok ok ok"),
    ]
    kit.build("bug bug bug", "fwloop_tester = fake:tester", *ini, plugins=(_Tester(tester),))
    return tester


def test_an_invalid_plan_tells_the_coder_and_twice_in_a_row_ends_the_run(
    kit: ControllerKit,
) -> None:
    tester = with_tester(kit, [UNKNOWN])
    assert kit.run() is Outcome.TESTER_SCHEMA_INVALID
    assert len(tester.requests) == 4  # two rounds: asked, re-asked with the errors
    moves = kit.moves()
    assert ("TEST_SETUP", "tester_schema_invalid", "TEST_RUN") in moves
    assert moves[-2:] == [
        ("TEST_SETUP", "tester_schema_invalid_again", "ERROR_RECOVERY"),
        ("ERROR_RECOVERY", "unrecoverable", "FAILURE"),
    ]
    # The first round iterated (seed 004), and the coder was told its patch went unchecked.
    told = kit.coder.requests[1]
    assert told.iteration == 3
    assert told.must_fix[0].issue.startswith(
        "tester_schema_invalid: the tester could not plan tests for your patch of iteration 2 "
        "(its plan failed its schema: $.select[0]: 'tests/test_fw.py::test_nope' is not one of"
    )
    summary = kit.summary()
    assert (summary["outcome"], summary["exit_status"]) == ("tester_schema_invalid", 1)
    assert summary["reason"].startswith(
        "the tester's plan failed its schema in 2 rounds in a row (fwloop_tester_schema_rounds=2)"
    )
    assert summary["pass_counts"] == [0, 1]  # stopped before the second patch's tests
    # The first round said what ran: the focus set, not "the full suite".
    [first] = [e for e in kit.events() if e.get("event") == "tester_schema_invalid"]
    assert first["reason"].endswith(
        "; the iteration's tests run without the tester's picks, the coder is told"
    )
    ran = [e["event"] for e in kit.events() if e["kind"] == "substate" and e["iteration"] == 2]
    assert "FOCUS_RUN" in ran


def test_a_valid_plan_between_invalid_ones_starts_the_count_again(kit: ControllerKit) -> None:
    with_tester(kit, [UNKNOWN, UNKNOWN, EMPTY_PLAN, UNKNOWN])
    assert kit.run() is Outcome.SUCCESS
    invalid = [m for m in kit.moves() if m[1].startswith("tester_schema_invalid")]
    assert invalid == [("TEST_SETUP", "tester_schema_invalid", "TEST_RUN")] * 2


def test_fwloop_tester_schema_rounds_0_only_ever_iterates(kit: ControllerKit) -> None:
    with_tester(kit, [UNKNOWN], "fwloop_tester_schema_rounds = 0")
    assert kit.run() is Outcome.SUCCESS
    invalid = [m for m in kit.moves() if m[1].startswith("tester_schema_invalid")]
    assert invalid == [("TEST_SETUP", "tester_schema_invalid", "TEST_RUN")] * 3


# -- test_failed ---------------------------------------------------------------------------------

FAILING_CHECK = "import sys\nsys.exit('lint: 2 warnings in fw/uart.c')\n"


def checking_tester(kit: ControllerKit, *ini: str) -> None:
    """A suite the coder makes green, and a tester whose command keeps failing."""
    (kit.root / "check.py").write_text(FAILING_CHECK)
    argv = [sys.executable, "check.py"]
    plan = {"select": [], "commands": [{"argv": argv, "reason": "lint"}], "notes": ""}
    tester = FakeProvider("fake:tester", [plan])
    kit.coder.answers = [fixing("ok bug", "ok ok")]
    kit.build(
        "ok bug",
        "fwloop_tester = fake:tester",
        f"fwloop_allowed_commands = {shlex.join(argv)}",
        *ini,
        plugins=(_Tester(tester),),
    )


def test_a_run_that_stops_with_only_the_testers_commands_failing_is_test_failed(
    kit: ControllerKit,
) -> None:
    checking_tester(kit, "fwloop_max_iter = 2")
    assert kit.run() is Outcome.TEST_FAILED
    summary = kit.summary()
    assert summary["exit_status"] == 1
    assert summary["convergence_type"] == "timeout"
    assert summary["reason"] == (
        "TIMEOUT: current_iteration=2 >= max_iterations=2; every test of the suite passes, only "
        f"the tester's command(s) fail: `{shlex.join([sys.executable, 'check.py'])}`"
    )
    assert summary["unresolved"] == [f"tester::{shlex.join([sys.executable, 'check.py'])}"]
    timeline = json.loads((kit.controller.recorder.path / "task-timeline.json").read_text())
    assert (
        "test_failed: tester commands: 0 passed, 1 failed, 0 blocked"
        in (timeline["iterations"][1]["notes"])
    )


def test_a_suite_test_still_failing_keeps_the_verdicts_outcome(kit: ControllerKit) -> None:
    (kit.root / "check.py").write_text(FAILING_CHECK)
    kit.coder.answers = [fixing("ok bug bug", "ok ok bug")]
    kit.build("ok bug bug", "fwloop_max_iter = 2")
    assert kit.run() is Outcome.MAX_ITERATIONS_REACHED


@pytest.mark.parametrize(
    ("terminate_as", "outcome", "status"),
    [("failure", Outcome.TEST_FAILED, 1), ("warning", Outcome.PLATEAUED, 0)],
)
def test_a_softened_plateau_keeps_its_exit_status(
    kit: ControllerKit, terminate_as: str, outcome: Outcome, status: int
) -> None:
    (kit.root / "criteria.toml").write_text(
        "min_iterations_for_plateau = 2\nplateau_improvement_threshold = 1.0\n"
        "slow_improvement_threshold = 1.0\n"
    )
    checking_tester(
        kit, "fwloop_criteria = criteria.toml", f"fwloop_ci_terminate_as = {terminate_as}"
    )
    assert kit.run() is outcome
    assert kit.summary()["convergence_type"] == "plateaued"
    assert kit.summary()["exit_status"] == status


@pytest.mark.slow
def test_pytest_fwloop_ends_test_failed_when_only_the_testers_lint_fails(
    project: LoopProject,
) -> None:
    argv = [sys.executable, "lint.py"]
    project.calc_suite(f"fwloop_allowed_commands = {shlex.join(argv)}\n")
    project.write("lint.py", FAILING_CHECK)
    fixed = CALC
    for old, new in FIXES:
        fixed = fixed.replace(old, new)
    plan = {"select": [], "commands": [{"argv": argv, "reason": "lint"}], "notes": ""}
    agent = project.agent(
        "agent", [coder_answer(unified_diff("fw/calc.py", CALC, fixed))], tester=[plan]
    )
    result = project.run(
        f"--fwloop-coder={agent.spec}", f"--fwloop-tester={agent.spec}", "--max-iter=2"
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    summary = project.summary()
    assert summary["outcome"] == "test_failed"
    assert summary["pass_counts"] == [1, 6]
    assert summary["total_counts"] == [6, 7]
    assert summary["reason"].endswith(f"only the tester's command(s) fail: `{shlex.join(argv)}`")
    result.stdout.fnmatch_lines(["*outcome: test_failed*"])
    assert project.replay().returncode == 0
