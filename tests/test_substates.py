"""Sub-states in the trace (seed 001 §3.2): the work done inside a state is a `substate` line of
`task-events.jsonl`, inside its state, which `fwloop replay` accepts and checks."""

from __future__ import annotations

import json
from typing import Any

import pytest

from controllerkit import ControllerKit, FakeProvider, fixing
from loopkit import LoopProject, calc_fix_patches, coder_answer
from pytest_fwloop.cli.replay import check_transitions
from pytest_fwloop.core.machine.outcomes import Outcome
from pytest_fwloop.core.machine.substates import SUBSTATES, SubState, misplaced
from pytest_fwloop.core.records.run_records import Event


@pytest.fixture
def kit(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> ControllerKit:
    return ControllerKit(pytester, monkeypatch)


def substates(events: list[dict[str, Any]]) -> list[tuple[int, str, str]]:
    """(iteration, state, sub-state) of each sub-state line, in order."""
    return [(e["iteration"], e["from"], e["event"]) for e in events if e["kind"] == "substate"]


def assert_inside_their_states(events: list[dict[str, Any]]) -> None:
    """Each sub-state line sits between the moves into and out of the state it belongs to."""
    state = "IDLE"
    for event in events:
        if event["kind"] == "substate":
            assert event["from"] == event["to"] == state, event
            assert SUBSTATES[SubState(event["event"])].state.value == state, event
        elif event["kind"] == "transition":
            state = event["to"]


def test_the_work_inside_each_state_is_traced_as_sub_states(kit: ControllerKit) -> None:
    kit.coder.answers = [
        fixing("ok flake bug bug", "ok flake ok bug", "fix test_2"),
        fixing("ok flake ok bug", "ok flake ok ok", "fix test_3"),
    ]
    kit.build("ok flake bug bug", "fwloop_max_iter = 6")
    assert kit.run() is Outcome.SUCCESS
    events = kit.events()
    assert_inside_their_states(events)
    assert check_transitions([Event.model_validate(e) for e in events]) is None
    found = substates(events)
    collection = ["FETCH_LOGS", "NORMALIZE", "ATTACH_ARTIFACTS"]
    assert [s for n, _, s in found if n == 1] == ["FLAKY_RERUN", *collection]
    # The request is localized as it is built, before its failures are traced as triaged.
    coder = ["LOCALIZATION", "LOG_TRIAGE", "ROOT_CAUSE_HYPOTHESIS", "CHANGE_IMPACT_ESTIMATE"]
    # Iteration 2 reruns only what did not pass, one of which still fails: no gate. No
    # spectrum run precedes its coder call: the baseline's last flaky rerun recorded the lines.
    focus = ["FLAKY_RERUN", "FOCUS_RUN"]
    assert [s for n, _, s in found if n == 2] == [*coder, *focus, *collection]
    # Iteration 3's focus passes, so the whole suite runs as the regression gate.
    gate = ["FLAKY_RERUN", "GATE_RUN"]
    assert [s for n, _, s in found if n == 3] == [*coder, *focus, *gate, *collection]
    by_name = {(e["iteration"], e["event"]): e for e in events if e["kind"] == "substate"}
    localized = by_name[2, "LOCALIZATION"]["reason"]
    assert "file(s) indexed" in localized
    assert "within fwloop_source_bytes=40960" in localized
    triage = by_name[2, "LOG_TRIAGE"]["reason"]
    assert triage.startswith("2 failing test(s) packed as 2 record(s) of 2 signature(s)")
    hypothesis = by_name[2, "ROOT_CAUSE_HYPOTHESIS"]
    assert hypothesis["reason"] == "root cause: 'fix test_2'; 1 hypothesis(es); confidence 0.80"
    assert hypothesis["evidence"] == ["rounds/02/coder-1.answer.json"]
    impact = by_name[2, "CHANGE_IMPACT_ESTIMATE"]["reason"]
    assert impact == "1 file(s) (fw/state.txt), +1/-1 line(s)"
    assert "3 new failure(s) rerun, 1 passed (flaky)" in by_name[1, "FLAKY_RERUN"]["reason"]
    assert "flaky (exclude)" in by_name[1, "NORMALIZE"]["reason"]
    assert "whole suite ran as the regression gate" in by_name[3, "GATE_RUN"]["reason"]
    attached = by_name[3, "ATTACH_ARTIFACTS"]
    assert "rounds/03/results.json" in attached["evidence"]
    snapshot = json.loads((kit.controller.recorder.path / "task-timeline.json").read_text())
    assert snapshot["iterations"][2]["snapshot"][:12] in attached["reason"]
    # The timeline's states stay the state machine's own.
    assert all(
        s not in {x.value for x in SubState} for it in snapshot["iterations"] for s in it["states"]
    )


def test_an_environment_reset_is_a_health_check_of_test_setup(kit: ControllerKit) -> None:
    kit.build("ok down")
    assert kit.run() is Outcome.ENV_UNAVAILABLE
    events = kit.events()
    assert_inside_their_states(events)
    checks = [e for e in events if e["event"] == "HEALTH_CHECK"]
    assert len(checks) == 2  # one for each reset the retry budget allows
    assert all(e["from"] == "TEST_SETUP" for e in checks)
    assert (
        "failed on the environment (ConnectionRefusedError: the board is down)"
        in (checks[0]["reason"])
    )
    assert checks[0]["evidence"] == ["rounds/01/selection.txt"]


class _Tester:
    def __init__(self, provider: FakeProvider) -> None:
        self.provider = provider

    @pytest.hookimpl
    def pytest_fwloop_make_provider(self, role: str, spec: str) -> FakeProvider | None:
        return self.provider if spec == self.provider.spec else None


def test_the_testers_precheck_and_commands_are_sub_states_of_test_run(
    kit: ControllerKit,
) -> None:
    plan: dict[str, Any] = {
        "select": ["tests/test_fw.py::test_1"],
        "commands": [{"argv": ["true"], "reason": "smoke"}, {"argv": ["rm", "-rf", "/"]}],
        "notes": "",
    }
    plan["commands"][1]["reason"] = "hostile"
    tester = FakeProvider("fake:tester", [plan])
    kit.coder.answers = [fixing("ok bug", "ok ok")]
    kit.build(
        "ok bug",
        "fwloop_tester = fake:tester",
        "fwloop_allowed_commands = true",
        plugins=(_Tester(tester),),
    )
    assert kit.run() is Outcome.SUCCESS
    events = kit.events()
    assert_inside_their_states(events)
    [precheck] = [e for e in events if e["event"] == "TESTER_PRECHECK"]
    assert precheck["reason"] == "tester pre-check skipped by the fake child"
    [commands] = [e for e in events if e["event"] == "TESTER_COMMANDS"]
    assert commands["reason"] == "tester commands: 1 passed, 0 failed, 1 blocked"
    assert commands["evidence"] == ["rounds/02/commands.json"]


def _moved(events: list[Event], name: str, to: str) -> list[Event]:
    """The trace with the first `name` sub-state line said to be in (and to lead to) `to`."""
    index = next(i for i, e in enumerate(events) if e.event == name)
    moved = events[index].model_copy(update={"from_state": to, "to_state": to})
    return [*events[:index], moved, *events[index + 1 :]]


def test_replay_accepts_sub_states_only_inside_their_state(kit: ControllerKit) -> None:
    kit.coder.answers = [fixing("ok bug", "ok ok")]
    kit.build("ok bug")
    assert kit.run() is Outcome.SUCCESS
    events = [Event.model_validate(e) for e in kit.events()]
    assert check_transitions(events) is None
    # Claimed for another state: the chain breaks where the trace is not.
    elsewhere = check_transitions(_moved(events, "LOG_TRIAGE", "TEST_RUN"))
    assert elsewhere is not None
    assert "starts where the trace is not" in elsewhere.detail
    index = next(i for i, e in enumerate(events) if e.event == "LOG_TRIAGE")
    renamed = events[index].model_copy(update={"event": "FOCUS_RUN"})
    wrong = check_transitions([*events[:index], renamed, *events[index + 1 :]])
    assert wrong is not None
    assert wrong.detail == "sub-state FOCUS_RUN belongs to TEST_RUN, the trace is in CODE_ANALYSIS"
    moving = events[index].model_copy(update={"to_state": "PATCH_GENERATION"})
    leads = check_transitions([*events[:index], moving, *events[index + 1 :]])
    assert leads is not None
    assert "it cannot move" in leads.detail


def test_the_sub_state_table_names_each_once_in_a_real_state() -> None:
    assert set(SUBSTATES) == set(SubState)
    assert misplaced("LOG_TRIAGE", "CODE_ANALYSIS") is None
    assert misplaced("TEA_BREAK", "CODE_ANALYSIS") == "'TEA_BREAK' is not a sub-state"
    for name in ("LOG_TRIAGE", "ROOT_CAUSE_HYPOTHESIS", "CHANGE_IMPACT_ESTIMATE"):
        assert SUBSTATES[SubState(name)].state.value == "CODE_ANALYSIS"  # seed 001 §3.2
    for name in ("FETCH_LOGS", "NORMALIZE", "ATTACH_ARTIFACTS"):
        assert SUBSTATES[SubState(name)].state.value == "RESULT_COLLECTION"
    assert SUBSTATES[SubState.HEALTH_CHECK].state.value == "TEST_SETUP"


@pytest.mark.slow
def test_a_real_run_traces_its_sub_states_in_the_events_the_report_and_with_v(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = LoopProject(pytester, monkeypatch)
    project.calc_suite()
    coder = project.agent("coder", [coder_answer(p) for p in calc_fix_patches()])
    result = project.run(f"--fwloop-coder={coder.spec}", "-v")
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(
        [
            "fwloop: [[]2[]]   CODE_ANALYSIS/LOG_TRIAGE: 5 failing test(s) packed as *",
            "fwloop: [[]2[]]   CODE_ANALYSIS/CHANGE_IMPACT_ESTIMATE: 1 file(s) (fw/calc.py), "
            "+1/-1 line(s)",
        ]
    )
    events = project.events()
    assert_inside_their_states(events)
    names = {e["event"] for e in events if e["kind"] == "substate"}
    assert names >= {
        "LOG_TRIAGE",
        "ROOT_CAUSE_HYPOTHESIS",
        "CHANGE_IMPACT_ESTIMATE",
        "FOCUS_RUN",
        "GATE_RUN",
        "FLAKY_RERUN",
        "FETCH_LOGS",
        "NORMALIZE",
        "ATTACH_ARTIFACTS",
    }
    [run_dir] = project.run_dirs()
    fetched = next(e for e in events if e["event"] == "FETCH_LOGS")
    assert fetched["evidence"] == ["rounds/01/results-1.json", "rounds/01/pytest.log"]
    assert fetched["reason"] == "results-1.json: 6 test record(s)"
    page = (run_dir / "report.html").read_text()
    traced = [e for e in events if e["kind"] == "substate"]
    assert page.count('<tr class="substate">') == len(traced)
    assert '<td class="sub">LOG_TRIAGE</td>' in page
    replayed = project.replay()
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    # Without -v the terminal shows the moves only; the trace keeps the rest.
    quiet = project.run(f"--fwloop-coder={coder.spec}")
    assert "LOG_TRIAGE" not in quiet.stdout.str()
