"""state.json and continuing a run (DESIGN.md §11), in-process: the state the controller keeps,
what each action is allowed, where a continued loop starts, and the whole loop continued.

The real-process stories (`fwloop confirm` / `followup` / `resume` / `chat`, SIGKILL then
resume) are in test_operator.py and test_kill_recovery.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from controllerkit import ControllerKit, fixing
from loopkit import APPROVE
from pytest_fwloop.agents.scripted import ScriptedProvider
from pytest_fwloop.cli.replay import check_transitions
from pytest_fwloop.cli.runs import show_run
from pytest_fwloop.core.machine.fsm import LoopEvent
from pytest_fwloop.core.machine.outcomes import Outcome
from pytest_fwloop.core.records.agent_protocol import AgentRequest
from pytest_fwloop.core.records.redaction import Redactor
from pytest_fwloop.core.records.run_records import Event
from pytest_fwloop.core.records.run_state import STATE_SCHEMA, RunState, StateError, load_state
from pytest_fwloop.loop.operator.continuation import (
    Action,
    Order,
    answered,
    iteration_limit,
    refusal,
    restore,
)
from pytest_fwloop.loop.operator.threads import Thread
from pytest_fwloop.loop.state import LoopState
from pytest_fwloop.workspace import WorkspaceError


@pytest.fixture
def kit(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> ControllerKit:
    return ControllerKit(pytester, monkeypatch)


def order(kit: ControllerKit, action: Action, text: str = "") -> Order:
    return Order(action=action, run_id="run-1", revision=kit.state()["revision"], text=text)


FIRST = fixing("ok bug bug", "ok ok bug", "one")
SECOND = fixing("ok ok bug", "ok ok ok")


def awaiting(kit: ControllerKit) -> dict[str, Any]:
    """Two bugs, a coder fixing one per answer; the run stops on the first proposal."""
    kit.coder.answers = [FIRST, SECOND]
    kit.build("ok bug bug", "fwloop_propose = first")
    assert kit.run() is Outcome.AWAITING_OPERATOR_CONFIRM
    return kit.state()


def test_the_state_is_rewritten_after_every_move_and_holds_the_proposal(
    kit: ControllerKit,
) -> None:
    state = awaiting(kit)
    assert state["schema_version"] == STATE_SCHEMA
    assert state["revision"] == len(kit.moves())  # one write per move
    assert state["outcome"] == "awaiting_operator_confirm"
    assert state["fsm_state"] == "ABORTED"
    assert state["pending"]["patch"] == FIRST["patch"]
    assert [(i["number"], i["kind"], i["measured"]) for i in state["iterations"]] == [
        (1, "baseline", True),
        (2, "patch", False),
    ]
    assert state["left_tree"] == state["baseline"]
    loaded = load_state(kit.controller.recorder.path)
    assert refusal(loaded, Action.CONFIRM) is None
    assert "waits for your word on its proposal" in (refusal(loaded, Action.RESUME) or "")


def test_confirm_continues_the_same_run_with_its_whole_history(kit: ControllerKit) -> None:
    awaiting(kit)
    calls_before = len(kit.coder.requests)
    kit.continue_run(order(kit, Action.CONFIRM, "keep it small"))
    assert kit.run() is Outcome.SUCCESS
    assert kit.firmware() == "ok ok ok"
    assert len(kit.coder.requests) == calls_before + 1  # only the second bug's fix was asked
    assert kit.coder.requests[-1].operator_messages == ["keep it small"]
    strict = [r for r in kit.reviewer.requests if r.schema_]
    assert strict[0].patch == FIRST["patch"]
    summary = kit.summary()
    assert summary["pass_counts"] == [1, 2, 3, 3]  # the baseline of the first controller on
    assert ("IDLE", "operator_confirmed", "PATCH_GENERATION") in kit.moves()
    assert check_transitions([Event.model_validate(e) for e in kit.events()]) is None
    notes = kit.controller.recorder.path / "threads" / "operator" / "messages.jsonl"
    assert json.loads(notes.read_text())["kind"] == "confirm_note"


def test_a_second_confirm_of_the_same_state_is_refused(kit: ControllerKit) -> None:
    awaiting(kit)
    stale = order(kit, Action.CONFIRM)
    kit.continue_run(stale)
    assert kit.run() is Outcome.SUCCESS
    with pytest.raises(StateError, match=r"changed since `fwloop confirm` read it \(revision"):
        kit.continue_run(stale)


def test_a_continuation_refuses_to_overwrite_what_the_operator_changed(
    kit: ControllerKit,
) -> None:
    awaiting(kit)
    firmware = kit.root / "fw" / "state.txt"
    firmware.write_text("ok bug ok\n")
    with pytest.raises(WorkspaceError, match=r"the tree changed since the run stopped \(fw/state"):
        kit.continue_run(order(kit, Action.CONFIRM))
    assert firmware.read_text() == "ok bug ok\n"


def test_resume_puts_the_kept_tree_back_and_asks_only_for_what_is_left(
    kit: ControllerKit,
) -> None:
    kit.coder.answers = [fixing("ok bug bug", "ok ok bug"), fixing("ok ok bug", "ok ok ok")]
    kit.build("ok bug bug", "fwloop_max_iter = 2")
    assert kit.run() is Outcome.MAX_ITERATIONS_REACHED
    assert kit.firmware() == "ok bug bug"  # restored at the end
    kit.continue_run(order(kit, Action.RESUME), "--max-iter=5")  # as `fwloop resume` passes it
    assert kit.firmware() == "ok ok bug"  # the kept fix, back before the loop goes on
    assert kit.run() is Outcome.SUCCESS
    assert len(kit.coder.requests) == 2
    assert kit.coder.requests[1].iteration == 3


def test_a_followup_on_a_proposal_revises_it_without_building(kit: ControllerKit) -> None:
    awaiting(kit)
    kit.continue_run(order(kit, Action.FOLLOWUP, "fix the last one first"))
    assert kit.run() is Outcome.AWAITING_OPERATOR_CONFIRM
    assert kit.child.runs == 0  # the continued controller ran no tests
    assert "BUILD_SETUP" not in [target for *_, target in kit.moves()[-3:]]
    assert kit.firmware() == "ok bug bug"
    [follow_up] = kit.coder.requests[-1].must_fix
    assert (
        follow_up.issue == "the operator's follow-up on your proposal (one): fix the last one first"
    )
    assert kit.state()["pending"]["patch"] == SECOND["patch"]


# -- pure rules ---------------------------------------------------------------------------------


def state(**changes: Any) -> RunState:
    document: dict[str, Any] = {
        "schema_version": STATE_SCHEMA,
        "revision": 3,
        "run_id": "r1",
        "invocation": {"args": ["--fwloop"], "dir": "/x"},
        "rootdir": "/x",
        "max_iter": 5,
        "fsm_state": "FAILURE",
        "outcome": "max_iterations_reached",
        "baseline": "b",
        "left_tree": "b",
        "iterations": [{"number": 1, "kind": "baseline", "measured": False}],
    }
    return RunState.model_validate({**document, **changes})


PENDING = {
    "analysis": {"root_cause": "r", "hypotheses": [], "confidence": 0.5},
    "patch": "",
    "summary": "s",
}


@pytest.mark.parametrize(
    ("changes", "action", "says"),
    [
        ({}, Action.CONFIRM, "awaits nothing to confirm (it ended max_iterations_reached)"),
        ({"outcome": "awaiting_operator_confirm"}, Action.CONFIRM, "a decision on its plateau"),
        ({"outcome": "success"}, Action.RESUME, "ended with success"),
        ({"outcome": None}, Action.CONFIRM, "has not ended (its controller was killed at FAILURE)"),
        ({"outcome": None}, Action.FOLLOWUP, "`fwloop resume r1` continues it"),
        ({"outcome": "awaiting_operator_confirm", "pending": PENDING}, Action.RESUME, "your word"),
    ],
)
def test_what_a_run_refuses(changes: dict[str, Any], action: Action, says: str) -> None:
    assert says in (refusal(state(**changes), action) or "")


@pytest.mark.parametrize(
    ("changes", "action"),
    [
        ({}, Action.RESUME),
        ({}, Action.FOLLOWUP),
        ({"outcome": None}, Action.RESUME),
        ({"outcome": "success"}, Action.FOLLOWUP),
        ({"outcome": "success"}, Action.CHAT),
        ({"outcome": "awaiting_operator_confirm", "pending": PENDING}, Action.CONFIRM),
        ({"outcome": "awaiting_operator_confirm"}, Action.RESUME),
    ],
)
def test_what_a_run_allows(changes: dict[str, Any], action: Action) -> None:
    assert refusal(state(**changes), action) is None


@pytest.mark.parametrize(
    ("fsm_state", "action", "event", "approved"),
    [
        ("ABORTED", Action.CONFIRM, LoopEvent.OPERATOR_CONFIRMED, True),
        ("TEST_RUN", Action.RESUME, LoopEvent.OPERATOR_CONFIRMED, True),  # past the gate
        ("PATCH_GENERATION", Action.RESUME, LoopEvent.OPERATOR_CONFIRMED, False),  # mid-review
        ("CODE_ANALYSIS", Action.RESUME, LoopEvent.RESUME, False),  # a spent answer
        ("ERROR_RECOVERY", Action.RESUME, LoopEvent.RESUME, False),  # a refused answer
        ("ABORTED", Action.FOLLOWUP, LoopEvent.RESUME, False),  # revised, not applied
    ],
)
def test_where_a_continued_loop_starts(
    fsm_state: str, action: Action, event: LoopEvent, approved: bool, tmp_path: Path
) -> None:
    saved = state(
        fsm_state=fsm_state,
        pending=PENDING,
        iterations=[{"number": 1, "kind": "patch", "measured": False}],
    )
    loop = LoopState(run_id="r1")
    found = restore(loop, saved, tmp_path, Order(action=action, run_id="r1", revision=3))
    assert found.event is event
    assert loop.operator_approved is approved
    assert (loop.coder_answer is not None) is (event is LoopEvent.OPERATOR_CONFIRMED)
    assert loop.current.number == 1  # the iteration in flight goes on


def test_an_ended_run_goes_on_with_a_new_iteration_and_a_missing_result_is_refused(
    tmp_path: Path,
) -> None:
    saved = state(iterations=[{"number": 1, "kind": "baseline", "measured": True}])
    with pytest.raises(StateError, match=r"results.json is missing or damaged"):
        restore(LoopState(), saved, tmp_path, Order(action=Action.RESUME, run_id="r1", revision=3))
    folder = tmp_path / "rounds" / "01"
    folder.mkdir(parents=True)
    (folder / "results.json").write_text('{"exitstatus": 1, "tests": []}')
    loop = LoopState()
    found = restore(loop, saved, tmp_path, Order(action=Action.RESUME, run_id="r1", revision=3))
    assert (found.event, loop.current.number, loop.current.kind) == (LoopEvent.RESUME, 2, "patch")


@pytest.mark.parametrize(
    ("text", "says"),
    [
        (None, "has no state.json"),
        ("{not json", "is unreadable"),
        ('{"revision": 1}', "is not a pytest-fwloop state (no schema_version)"),
        ('{"schema_version": 9}', "written by a newer pytest-fwloop (state schema 9; this"),
        ('{"schema_version": 1, "revision": 0}', "is damaged (revision: "),
    ],
)
def test_a_state_that_cannot_be_used_is_refused_whole(
    tmp_path: Path, text: str | None, says: str
) -> None:
    run_dir = tmp_path / "r1"
    run_dir.mkdir()
    if text is not None:
        (run_dir / "state.json").write_text(text)
    with pytest.raises(StateError, match=None) as caught:
        load_state(run_dir)
    assert says in str(caught.value)
    assert len(str(caught.value).splitlines()) == 1


def test_a_state_of_another_run_is_refused(tmp_path: Path) -> None:
    run_dir = tmp_path / "r2"
    run_dir.mkdir()
    (run_dir / "state.json").write_text(state().model_dump_json())
    with pytest.raises(StateError, match="belongs to run r1, not to r2"):
        load_state(run_dir)


def test_answers_a_run_used_are_counted_from_its_strict_calls(tmp_path: Path) -> None:
    folder = tmp_path / "rounds" / "02"
    folder.mkdir(parents=True)
    calls = [("reviewer-1", {}, "a comment"), ("reviewer-2", {"type": "object"}, "{}")]
    calls += [("reviewer-3", {"type": "object"}, ""), ("coder-1", {"type": "object"}, "{}")]
    for stem, schema, answer in calls:
        (folder / f"{stem}.request.json").write_text(json.dumps({"schema": schema}))
        (folder / f"{stem}.answer.txt").write_text(answer)
    assert (answered(tmp_path, "reviewer"), answered(tmp_path, "coder")) == (1, 1)


def test_a_scripted_provider_skips_used_answers_and_spends_none_on_free_text(
    tmp_path: Path,
) -> None:
    (tmp_path / "reviewer").mkdir()
    for number in (1, 2, 3):
        (tmp_path / "reviewer" / f"{number}.json").write_text(json.dumps({**APPROVE, "n": number}))
    provider = ScriptedProvider(str(tmp_path), tmp_path)
    request = AgentRequest(role="reviewer", iteration=2, goal="g", workspace=str(tmp_path))
    comment = provider.call(request, 1.0).text
    assert "has no comment" in comment
    strict = request.model_copy(update={"schema_": {"type": "object"}})
    assert json.loads(provider.call(strict, 1.0).text)["n"] == 1
    provider.skip("reviewer", 2)
    assert json.loads(provider.call(strict, 1.0).text)["n"] == 3


def test_replay_follows_a_continued_trace_and_a_killed_controller() -> None:
    def move(source: str, event: str, target: str, kind: str = "transition") -> Event:
        return Event.model_validate(
            {
                "time": "t",
                "kind": kind,
                "from": source,
                "to": target,
                "event": event,
                "reason": "r",
                "iteration": 1,
                "evidence": [],
                "retry_count": 0,
                "retry_reason": None,
            }
        )

    first = [move("IDLE", "start", "INIT"), move("INIT", "baseline", "BUILD_SETUP")]
    killed = move("BUILD_SETUP", "interrupted", "ABORTED", kind="interrupted")
    resumed = [move("IDLE", "resume", "CODE_ANALYSIS"), move("CODE_ANALYSIS", "abort", "ABORTED")]
    assert check_transitions([*first, killed, *resumed]) is None
    broken = check_transitions([*first, *resumed])
    assert broken is not None
    assert "starts where the trace is not" in broken.detail


@pytest.mark.parametrize(
    ("changes", "action", "more", "limit"),
    [
        ({}, Action.RESUME, None, 6),  # ended at iteration 1: room for its 5 again
        ({}, Action.RESUME, 2, 3),
        ({}, Action.FOLLOWUP, None, 6),
        ({"outcome": None}, Action.RESUME, None, 5),  # killed: the limit it had
        ({"outcome": None}, Action.RESUME, 4, 5),
        ({"outcome": "awaiting_operator_confirm", "pending": PENDING}, Action.CONFIRM, None, 5),
    ],
)
def test_the_iteration_limit_of_a_continued_run(
    changes: dict[str, Any], action: Action, more: int | None, limit: int
) -> None:
    saved = state(
        **{"iterations": [{"number": 1, "kind": "baseline", "measured": True}], **changes}
    )
    assert iteration_limit(saved, action, more) == limit


def test_show_tells_a_killed_run_from_its_state(
    kit: ControllerKit, capsys: pytest.CaptureFixture[str]
) -> None:
    awaiting(kit)
    run_dir = kit.controller.recorder.path
    saved = json.loads((run_dir / "state.json").read_text())
    saved.update(outcome=None, fsm_state="BUILD_RUN")  # as SIGKILL leaves it: no end written
    (run_dir / "state.json").write_text(json.dumps(saved))
    (run_dir / "summary.json").unlink()
    assert show_run(kit.root, Path(".fwloop/runs"), "last", as_json=False) == 0
    out = capsys.readouterr().out
    assert out.startswith(
        "run run-1: unfinished (its controller stopped in BUILD_RUN without ending it: "
        "`fwloop resume run-1` continues it)"
    )
    assert show_run(kit.root, Path(".fwloop/runs"), "last", as_json=True) == 0
    assert json.loads(capsys.readouterr().out)["iterations"] == [
        {"iteration": 1, "kind": "baseline", "verdict": "continue"}
    ]


def test_a_followup_on_an_ended_run_is_not_taken_for_an_answer_to_a_proposal(
    tmp_path: Path,
) -> None:
    """A run that failed with a refused answer still in its state: the message is a new demand,
    and the refused answer is not sent to the gate again."""
    saved = state(
        fsm_state="FAILURE",
        outcome="policy_violation",
        pending=PENDING,
        iterations=[{"number": 1, "kind": "patch", "measured": False}],
    )
    loop = LoopState()
    order = Order(action=Action.FOLLOWUP, run_id="r1", revision=3, text="stay out of tests/")
    found = restore(loop, saved, tmp_path, order)
    assert found.event is LoopEvent.RESUME
    assert loop.coder_answer is None
    assert [m.issue for m in loop.must_fix] == ["the operator asks: stay out of tests/"]


@pytest.mark.parametrize(
    ("outcome", "pending", "starts"),
    [
        ("max_iterations_reached", None, "the operator asks: fix clamp as you said\n"),
        (
            "awaiting_operator_confirm",
            PENDING,
            "the operator's follow-up on your proposal (s): fix clamp as you said\n",
        ),
    ],
)
def test_a_task_handed_over_from_a_chat_brings_the_conversation_to_the_coder(
    tmp_path: Path, outcome: str, pending: dict[str, Any] | None, starts: str
) -> None:
    chat = Thread(tmp_path, "chat-coder")
    chat.append("operator", "chat", "why does clamp fail?", Redactor({}), "coder", "t")
    chat.append("coder", "chat", "it ignores high", Redactor({}), "coder", "t")
    saved = state(outcome=outcome, pending=pending, fsm_state="ABORTED")
    order = Order(
        action=Action.FOLLOWUP,
        run_id="r1",
        revision=3,
        text="fix clamp as you said",
        roles=["coder"],
        thread="chat-coder",
    )
    loop = LoopState()
    restore(loop, saved, tmp_path, order)
    [told] = loop.must_fix
    assert told.issue == (
        f"{starts}(handed over from chat thread chat-coder; it said:\n"
        "operator: why does clamp fail?\ncoder: it ignores high)"
    )
