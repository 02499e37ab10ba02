"""The controller in-process (tests/controllerkit.py): its walk of the table and its decisions,
without a child pytest or an agent process. The real-process stories are in test_loop_*.py."""

from __future__ import annotations

import json
from typing import Any

import pytest

from controllerkit import ControllerKit, fixing
from loopkit import APPROVE
from pytest_fwloop.agents.base import RawAnswer
from pytest_fwloop.agents.errors import ProviderError, ProviderErrorKind
from pytest_fwloop.core.machine.outcomes import Outcome
from pytest_fwloop.core.records.agent_protocol import AgentRequest
from pytest_fwloop.core.suite.results import TestRecord
from pytest_fwloop.loop.request.desk import Assembled, RequestDesk
from pytest_fwloop.loop.state import LoopState
from pytest_fwloop.workspace import PatchApplyError

BASELINE_PATH = [
    ("IDLE", "start", "INIT"),
    ("INIT", "baseline", "BUILD_SETUP"),
    ("BUILD_SETUP", "no_build", "TEST_SETUP"),
    ("TEST_SETUP", "env_ready", "TEST_RUN"),
    ("TEST_RUN", "tests_finished", "RESULT_COLLECTION"),
    ("RESULT_COLLECTION", "results_normalized", "RESULT_ANALYSIS"),
    ("RESULT_ANALYSIS", "decision_produced", "CONVERGENCE_CHECK"),
]


@pytest.fixture
def kit(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> ControllerKit:
    return ControllerKit(pytester, monkeypatch)


def test_a_fix_is_applied_confirmed_and_kept(kit: ControllerKit) -> None:
    kit.coder.answers = [fixing("ok bug", "ok ok")]
    kit.build("ok bug", "fwloop_max_iter = 5")
    assert kit.run() is Outcome.SUCCESS
    assert kit.firmware() == "ok ok"
    summary = kit.summary()
    assert (summary["pass_counts"], summary["total_counts"]) == ([1, 2, 2], [2, 2, 2])
    assert summary["patch"] == "final.patch"
    moves = kit.moves()
    assert moves[: len(BASELINE_PATH)] == BASELINE_PATH
    assert moves[len(BASELINE_PATH) :] == [
        ("CONVERGENCE_CHECK", "continue", "CODE_ANALYSIS"),
        ("CODE_ANALYSIS", "analysis_ready", "PATCH_GENERATION"),
        ("PATCH_GENERATION", "patch_approved", "PATCH_APPLY"),
        ("PATCH_APPLY", "patch_applied", "BUILD_SETUP"),
        *BASELINE_PATH[2:],
        ("CONVERGENCE_CHECK", "confirm", "TEST_SETUP"),
        *BASELINE_PATH[3:],
        ("CONVERGENCE_CHECK", "converged", "SUCCESS"),
    ]
    # The coder saw the baseline's failure; the reviewer saw the coder's patch.
    [request] = kit.coder.requests
    assert [f.nodeid for f in request.failures] == ["tests/test_fw.py::test_1"]
    assert "+ok ok" in kit.reviewer.requests[0].patch


def test_changes_requested_go_back_to_the_coder_with_the_must_fix_list(
    kit: ControllerKit,
) -> None:
    kit.coder.answers = [fixing("bug", "meh"), fixing("bug", "ok")]
    kit.reviewer.answers = [
        {
            "decision": "changes_requested",
            "must_fix": [{"issue": "meh is not ok"}],
            "risk": 0.2,
            "summary": "wrong value",
        },
        APPROVE,
    ]
    kit.build("bug", "fwloop_max_iter = 5")
    assert kit.run() is Outcome.SUCCESS
    assert ("PATCH_GENERATION", "review_changes_requested", "CODE_ANALYSIS") in kit.moves()
    assert [m.issue for m in kit.coder.requests[1].must_fix] == ["meh is not ok"]
    assert kit.firmware() == "ok"


def test_a_slow_coder_is_cut_at_the_states_deadline_retried_once_then_the_run_fails(
    kit: ControllerKit,
) -> None:
    def hangs(request: AgentRequest, timeout: float) -> RawAnswer:
        kit.time.advance(timeout)  # the provider used all the time it was given
        raise ProviderError(ProviderErrorKind.PROVIDER_TIMEOUT, "fake:coder", "no answer")

    kit.coder.answers = [hangs]
    kit.build("bug", "fwloop_state_timeout = 90", "fwloop_agent_timeout = 60")
    assert kit.run() is Outcome.FAILURE
    timeouts = [e for e in kit.events() if e["event"] == "state_timeout"]
    assert [(e["from"], e["to"]) for e in timeouts] == [("CODE_ANALYSIS", "ERROR_RECOVERY")] * 2
    assert "CODE_ANALYSIS exceeded fwloop_state_timeout=90s" in timeouts[0]["reason"]
    # Each state's calls share its 90 s: a full 60 s call, then the 30 s left; no third call.
    assert kit.coder.timeouts == [60, 30, 60, 30]
    recoveries = [e for e in kit.events() if e["from"] == "ERROR_RECOVERY"]
    assert [e["event"] for e in recoveries] == ["recover_to_analysis", "unrecoverable"]
    assert "TIMEOUT" in recoveries[-1]["reason"]
    assert kit.firmware() == "bug"


def test_a_bookkeeping_state_over_its_timeout_ends_the_run(kit: ControllerKit) -> None:
    class SlowHook:
        """An iteration-done hook that takes long: CONVERGENCE_CHECK goes over its time."""

        @pytest.hookimpl
        def pytest_fwloop_iteration_done(self, iteration: int) -> None:
            kit.time.advance(120)

    kit.coder.answers = [fixing("bug", "ok")]
    kit.build("bug", "fwloop_state_timeout = 100", plugins=(SlowHook(),))
    assert kit.run() is Outcome.FAILURE
    moves = kit.moves()
    assert moves[-2:] == [
        ("CONVERGENCE_CHECK", "state_timeout", "ERROR_RECOVERY"),
        ("ERROR_RECOVERY", "unrecoverable", "FAILURE"),
    ]
    assert not kit.coder.requests  # never retried: the run ended at the first overrun
    assert "CONVERGENCE_CHECK exceeded fwloop_state_timeout=100s" in kit.events()[-1]["reason"]


def test_a_test_run_over_its_timeout_is_rerun_once(kit: ControllerKit) -> None:
    kit.coder.answers = [fixing("bug", "ok")]
    kit.build("bug", "fwloop_test_timeout = 50")
    kit.child.timed_out = [True, False]
    assert kit.run() is Outcome.SUCCESS
    moves = kit.moves()
    assert moves[4:7] == [
        ("TEST_RUN", "state_timeout", "ERROR_RECOVERY"),
        ("ERROR_RECOVERY", "recover_to_test_setup", "TEST_SETUP"),
        ("TEST_SETUP", "env_ready", "TEST_RUN"),
    ]
    first = next(e for e in kit.events() if e["event"] == "state_timeout")
    assert "TEST_RUN exceeded fwloop_test_timeout=50s" in first["reason"]
    assert first["evidence"] == ["rounds/01/pytest.log"]


def test_a_test_run_that_keeps_timing_out_fails_the_run(kit: ControllerKit) -> None:
    kit.build("bug", "fwloop_test_timeout = 50")
    kit.child.timed_out = [True, True]
    assert kit.run() is Outcome.FAILURE
    assert kit.moves()[-1] == ("ERROR_RECOVERY", "unrecoverable", "FAILURE")
    assert not kit.coder.requests


def test_a_build_broken_by_the_patch_is_rolled_back_and_the_coder_told(
    kit: ControllerKit,
) -> None:
    # The build fails while the firmware says `broken`, as a compiler would on bad code.
    kit.coder.answers = [fixing("bug", "broken"), fixing("bug", "ok")]
    kit.build("bug", "fwloop_build = grep -qv broken fw/state.txt", "fwloop_max_iter = 5")
    assert kit.run() is Outcome.SUCCESS
    assert ("BUILD_RUN", "build_failed", "ERROR_RECOVERY") in kit.moves()
    retry = kit.coder.requests[1]
    assert any("broke the build" in m.issue for m in retry.must_fix)
    assert kit.firmware() == "ok"


def _timed_build(kit: ControllerKit, firmware: str, *ini: str) -> list[dict[str, Any]]:
    kit.build(firmware, "fwloop_build = sleep 30", "fwloop_build_timeout = 0.3", *ini)
    assert kit.run() is Outcome.FAILURE
    return [e for e in kit.events() if e["from"] in ("BUILD_RUN", "ERROR_RECOVERY")]


def test_a_baseline_build_over_its_timeout_is_retried_once(kit: ControllerKit) -> None:
    events = _timed_build(kit, "bug")
    assert [(e["from"], e["event"]) for e in events] == [
        ("BUILD_RUN", "state_timeout"),
        ("ERROR_RECOVERY", "recover_to_build"),
        ("BUILD_RUN", "state_timeout"),
        ("ERROR_RECOVERY", "unrecoverable"),
    ]
    assert "fwloop_build_timeout=0.3s" in events[0]["reason"]


def test_a_patch_whose_build_times_out_is_rolled_back_and_the_coder_told(
    kit: ControllerKit,
) -> None:
    kit.coder.answers = [fixing("bug", "slow"), fixing("bug", "ok")]
    kit.build(
        "bug",
        "fwloop_build = sh -c 'if grep -q slow fw/state.txt; then sleep 30; fi'",
        "fwloop_build_timeout = 2",
        "fwloop_max_iter = 5",
    )
    assert kit.run() is Outcome.SUCCESS
    moves = kit.moves()
    at = moves.index(("BUILD_RUN", "state_timeout", "ERROR_RECOVERY"))
    assert moves[at + 1] == ("ERROR_RECOVERY", "recover_to_analysis", "CODE_ANALYSIS")
    told = kit.coder.requests[1].must_fix
    assert any("fwloop_build_timeout=2s" in m.issue for m in told)
    assert kit.firmware() == "ok"


def test_a_dead_board_is_reset_not_sent_to_the_coder(kit: ControllerKit) -> None:
    kit.build("ok down")
    assert kit.run() is Outcome.ENV_UNAVAILABLE
    resets = [m for m in kit.moves() if m[1] == "recover_to_test_setup"]
    assert len(resets) == 2  # TEST_ENV_FAILURE's retry budget, then the run stops
    assert kit.moves()[-1] == ("ERROR_RECOVERY", "unrecoverable", "FAILURE")
    assert not kit.coder.requests
    assert kit.child.runs == 3


def test_a_patch_that_stops_the_firmware_booting_is_rolled_back(kit: ControllerKit) -> None:
    kit.coder.answers = [fixing("ok bug", "down down"), fixing("ok bug", "ok ok")]
    kit.build("ok bug", "fwloop_max_iter = 5")
    assert kit.run() is Outcome.SUCCESS
    assert ("RESULT_ANALYSIS", "firmware_no_boot", "ERROR_RECOVERY") in kit.moves()
    told = kit.coder.requests[1].must_fix
    assert any("no longer boots" in m.issue for m in told)
    assert kit.firmware() == "ok ok"


def test_a_tree_git_cannot_write_is_not_sent_back_to_the_coder(
    kit: ControllerKit, monkeypatch: pytest.MonkeyPatch
) -> None:
    kit.coder.answers = [fixing("bug", "ok")]
    controller = kit.build("bug", "fwloop_max_iter = 5")

    def read_only(patch: str, before: str) -> list[str]:
        raise PatchApplyError("error: unable to write file 'fw/state.txt': Permission denied")

    monkeypatch.setattr(controller.workspace, "apply", read_only)
    assert kit.run() is Outcome.PATCH_APPLY_FAILED
    assert len(kit.coder.requests) == 1
    assert "the tree cannot be written" in kit.summary()["reason"]
    assert kit.firmware() == "bug"


def test_a_patch_that_breaks_a_passing_test_is_named_to_the_coder_and_the_reviewer(
    kit: ControllerKit,
) -> None:
    kit.coder.answers = [fixing("ok bug bug", "bug ok ok"), fixing("bug ok ok", "ok ok ok")]
    kit.build("ok bug bug", "fwloop_max_iter = 6")
    assert kit.run() is Outcome.SUCCESS
    [regression] = kit.coder.requests[1].regressions
    assert (regression.nodeid, regression.broken_in) == ("tests/test_fw.py::test_0", 2)
    assert "AssertionError" in regression.signature
    assert [r.nodeid for r in kit.reviewer.requests[1].regressions] == ["tests/test_fw.py::test_0"]
    summary = kit.summary()
    assert summary["regressions"] == {"2": ["tests/test_fw.py::test_0"]}
    assert summary["tests"]["tests/test_fw.py::test_0"] == {
        "1": "passed",
        "2": "failed",
        "3": "passed",
        "4": "passed",
    }


def test_success_is_withheld_while_a_baseline_passing_test_fails(kit: ControllerKit) -> None:
    """Target 75%: the first patch reaches it but breaks test_0, which passed at the baseline;
    the loop goes on to the coder instead of confirming, and ends green."""
    (kit.root / "criteria.toml").write_text("target_pass_rate = 0.75\n")
    kit.coder.answers = [
        fixing("ok ok bug bug", "bug ok ok ok"),
        fixing("bug ok ok ok", "ok ok ok ok"),
    ]
    kit.build("ok ok bug bug", "fwloop_criteria = criteria.toml", "fwloop_max_iter = 8")
    assert kit.run() is Outcome.SUCCESS
    assert kit.firmware() == "ok ok ok ok"
    assert len(kit.coder.requests) == 2


def test_a_patch_that_breaks_more_than_it_fixes_is_rolled_back(kit: ControllerKit) -> None:
    kit.coder.answers = [fixing("ok bug ok", "bug ok bug"), fixing("ok bug ok", "ok ok ok")]
    kit.build("ok bug ok", "fwloop_max_iter = 6")
    assert kit.run() is Outcome.SUCCESS
    assert kit.firmware() == "ok ok ok"
    rollback = next(e for e in kit.events() if e["kind"] == "rollback")
    assert rollback["iteration"] == 2
    assert "broke 2 test(s)" in rollback["reason"]
    retry = kit.coder.requests[1]
    assert any("rolled back" in m.issue for m in retry.must_fix)
    # The coder works from the tree as it stands again: the baseline's one failure.
    assert [f.nodeid for f in retry.failures] == ["tests/test_fw.py::test_1"]
    timeline = json.loads((kit.controller.recorder.path / "task-timeline.json").read_text())
    assert [it["kind"] for it in timeline["iterations"]][:3] == ["baseline", "rollback", "patch"]


def test_a_patch_that_raises_the_pass_count_is_kept_even_if_it_breaks_one(
    kit: ControllerKit,
) -> None:
    kit.coder.answers = [fixing("ok bug bug", "bug ok ok"), fixing("bug ok ok", "ok ok ok")]
    kit.build("ok bug bug", "fwloop_max_iter = 6")
    assert kit.run() is Outcome.SUCCESS
    assert not [e for e in kit.events() if e["kind"] == "rollback"]


@pytest.mark.parametrize(
    ("policy", "pass_counts", "total_counts"),
    [("exclude", [1, 2, 2], [2, 2, 2]), ("pass", [2, 3, 3], [3, 3, 3]), ("fail", [1, 2], [3, 3])],
)
def test_a_flaky_test_is_rerun_counted_by_the_policy_and_never_sent_to_the_coder(
    kit: ControllerKit, policy: str, pass_counts: list[int], total_counts: list[int]
) -> None:
    kit.coder.answers = [fixing("ok flake bug", "ok flake ok")]
    kit.build("ok flake bug", f"fwloop_flaky_policy = {policy}", "fwloop_max_iter = 4")
    outcome = kit.run()
    summary = kit.summary()
    assert summary["pass_counts"][: len(pass_counts)] == pass_counts
    assert summary["total_counts"][: len(total_counts)] == total_counts
    assert summary["flaky"]["1"] == summary["flaky"]["2"] == ["tests/test_fw.py::test_1"]
    assert [f.nodeid for f in kit.coder.requests[0].failures] == ["tests/test_fw.py::test_2"]
    assert all(not r.failures for r in kit.coder.requests[1:])  # the flaky test is never sent
    assert (outcome is Outcome.SUCCESS) is (policy != "fail")


def test_a_test_failing_every_rerun_is_sent_with_its_latest_failure(kit: ControllerKit) -> None:
    """A board that hung on the first attempt, then the real defect on both reruns (fresh
    boards): the coder is sent the defect, and results.json counts the reruns (issue 33)."""
    kit.coder.answers = [fixing("ok hang", "ok ok")]
    kit.build("ok hang", "fwloop_max_iter = 4")
    assert kit.run() is Outcome.SUCCESS
    [failure] = kit.coder.requests[0].failures
    assert "'defect'" in failure.excerpt
    assert "'hang'" not in failure.excerpt
    record = _results(kit, 1)["tests/test_fw.py::test_1"]
    assert (record["outcome"], record["reruns"], record.get("flaky", False)) == ("failed", 2, False)
    assert "'defect'" in record["longrepr"]


def _timeline(kit: ControllerKit) -> list[dict[str, Any]]:
    path = kit.controller.recorder.path / "task-timeline.json"
    return json.loads(path.read_text(encoding="utf-8"))["iterations"]  # type: ignore[no-any-return]


def _results(kit: ControllerKit, iteration: int) -> dict[str, dict[str, Any]]:
    path = kit.controller.recorder.round_path(iteration) / "results.json"
    return {t["nodeid"]: t for t in json.loads(path.read_text(encoding="utf-8"))["tests"]}


def test_focus_runs_what_failed_then_the_whole_suite_as_the_gate(kit: ControllerKit) -> None:
    """Two bugs fixed one per call: iteration 2 reruns only the two failures (one still fails,
    so no gate, the passing tests carried); iteration 3 reruns both again (what failed at some
    iteration), they pass, so the whole suite runs as the gate; the confirmation reruns only
    what ever failed."""
    kit.coder.answers = [
        fixing("ok ok bug bug", "ok ok ok bug"),
        fixing("ok ok ok bug", "ok " * 3 + "ok"),
    ]
    kit.build("ok ok bug bug", "fwloop_max_iter = 6")
    assert kit.run() is Outcome.SUCCESS
    summary = kit.summary()
    # The baseline: 4 tests + its 2 failures rerun twice as flaky candidates, the last rerun
    # with the 2 passing tests beside them, recording the lines each ran (the baseline did
    # not), so iteration 2 needs no spectrum run; its focus run records its own, so iteration
    # 3 needs none either.
    assert summary["executed_counts"] == [4 + 2 + 4, 2, 2 + 4, 2]
    assert kit.child.executed == [4, 2, 4, 2, 2, 4, 2]
    # Convergence saw whole-suite counts every time.
    assert summary["total_counts"] == [4, 4, 4, 4]
    assert summary["pass_counts"] == [2, 3, 4, 4]
    carried = _results(kit, 2)
    assert [n for n, t in carried.items() if t["carried"]] == [
        "tests/test_fw.py::test_0",
        "tests/test_fw.py::test_1",
    ]
    assert not any(t["carried"] for t in _results(kit, 3).values())  # the gate's full run
    notes = [" ".join(it["notes"]) for it in _timeline(kit)]
    assert "whole suite ran as the regression gate" in notes[2]
    assert [it["executed"] for it in _timeline(kit)] == summary["executed_counts"]


def test_focus_off_runs_the_whole_suite_every_iteration(kit: ControllerKit) -> None:
    kit.coder.answers = [
        fixing("ok ok bug bug", "ok ok ok bug"),
        fixing("ok ok ok bug", "ok " * 3 + "ok"),
    ]
    kit.build("ok ok bug bug", "fwloop_max_iter = 6", "fwloop_focus = off")
    assert kit.run() is Outcome.SUCCESS
    # The baseline's last flaky rerun runs the 2 passing tests too, recording the lines (the
    # baseline recorded none); iteration 2's whole suite records its own, as a patch's run.
    assert kit.summary()["executed_counts"] == [4 + 2 + 4, 4, 4, 4]
    assert not any(t["carried"] for t in _results(kit, 2).values())


def test_a_green_baseline_is_confirmed_without_running_the_suite_again(
    kit: ControllerKit,
) -> None:
    kit.build("ok ok ok")
    assert kit.run() is Outcome.SUCCESS
    assert kit.child.executed == [3]
    assert kit.summary()["executed_counts"] == [3, 0]
    assert all(t["carried"] for t in _results(kit, 2).values())
    assert not kit.coder.requests


def test_a_flaky_baseline_test_is_rerun_by_the_confirmation(kit: ControllerKit) -> None:
    kit.build("ok flake ok")
    assert kit.run() is Outcome.SUCCESS
    # Baseline 3 + the flake's rerun; the confirmation reruns only the flake (+ its rerun).
    assert kit.summary()["executed_counts"] == [4, 2]


def test_a_regression_hidden_by_the_focus_is_caught_by_the_gate_and_not_blamed_on_the_last_patch(
    kit: ControllerKit,
) -> None:
    """Patch 1 fixes test_2 and breaks test_0, which the focus does not rerun while test_3
    still fails; patch 2 fixes test_3, the gate runs and finds test_0 broken. Patch 2 did not
    break it (test_0 did not run before it), so it stays; the coder is sent the regression."""
    kit.coder.answers = [
        fixing("ok ok bug bug", "bad ok ok bug"),
        fixing("bad ok ok bug", "bad ok ok ok"),
        fixing("bad ok ok ok", "ok ok ok ok"),
    ]
    kit.build("ok ok bug bug", "fwloop_max_iter = 8")
    assert kit.run() is Outcome.SUCCESS
    assert kit.firmware() == "ok ok ok ok"
    summary = kit.summary()
    assert summary["tests"]["tests/test_fw.py::test_0"] == {
        "1": "passed",
        "2": "passed",  # carried: iteration 2 did not run it
        "3": "failed",
        "4": "passed",
        "5": "passed",
    }
    assert _results(kit, 2)["tests/test_fw.py::test_0"]["carried"]
    assert summary["regressions"] == {"3": ["tests/test_fw.py::test_0"]}
    assert not [e for e in kit.events() if e["kind"] == "rollback"]
    [regression] = kit.coder.requests[2].regressions
    assert (regression.nodeid, regression.broken_in) == ("tests/test_fw.py::test_0", 3)


def test_a_fix_is_remembered_and_shown_to_the_coder_of_a_later_run(kit: ControllerKit) -> None:
    """Run 1 fixes test_1; the knowledge base keeps the fix with the failure it fixed. Run 2
    meets the same failure: its coder is sent run 1's fix in `similar_fixes`."""
    fix = fixing("ok bug", "ok ok", "reset the UART divisor")
    kit.coder.answers = [fix]
    kit.build("ok bug")
    assert kit.run() is Outcome.SUCCESS
    assert kit.coder.requests[0].similar_fixes == []
    notes = _timeline(kit)[1]["notes"]
    assert "fix stored in the knowledge base as #1" in notes
    kit.build("ok bug", run_id="run-2")
    assert kit.run() is Outcome.SUCCESS
    [similar] = kit.coder.requests[1].similar_fixes
    assert (similar.run_id, similar.iteration) == ("run-1", 2)
    assert similar.patch == fix["patch"]
    assert similar.signatures == [kit.coder.requests[1].failures[0].signature]


def test_without_a_knowledge_base_nothing_is_kept(kit: ControllerKit) -> None:
    kit.coder.answers = [fixing("ok bug", "ok ok")]
    kit.build("ok bug", "fwloop_knowledge = off")
    assert kit.run() is Outcome.SUCCESS
    assert not (kit.root / ".fwloop" / "knowledge.sqlite").exists()


def test_a_focused_test_the_patch_removed_is_not_carried_as_failing(kit: ControllerKit) -> None:
    """The patch drops test_3 (a renamed or deleted test): the focus does not find it, so its
    old failing record no longer counts; the totals follow the suite."""
    kit.coder.answers = [fixing("ok bug bug bug", "ok bug ok"), fixing("ok bug ok", "ok ok ok")]
    kit.build("ok bug bug bug", "fwloop_max_iter = 6")
    assert kit.run() is Outcome.SUCCESS
    summary = kit.summary()
    assert summary["total_counts"] == [4, 3, 3, 3]
    assert summary["pass_counts"] == [1, 2, 3, 3]
    assert "1 focused test(s) no longer collected" in " ".join(_timeline(kit)[1]["notes"])


def test_each_request_is_assembled_from_one_reading_of_the_open_failures(
    kit: ControllerKit, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One entry point assembles every request (loop/request/desk.py): the protocol's fields
    and the localized code are built from the same list of open failures, read once."""
    reads = 0
    real_open, real_assemble = LoopState.open_failures, RequestDesk.assemble

    def counting(self: LoopState, root: str) -> list[TestRecord]:
        nonlocal reads
        reads += 1
        return real_open(self, root)

    assembled: list[tuple[str, int, int]] = []

    def measured(self: RequestDesk, role: str, patch: str = "", **extra: object) -> Assembled:
        before = reads
        done = real_assemble(self, role, patch, **extra)
        assembled.append((role, reads - before, len(done.failing)))
        return done

    monkeypatch.setattr(LoopState, "open_failures", counting)
    monkeypatch.setattr(RequestDesk, "assemble", measured)
    kit.coder.answers = [fixing("ok bug", "ok ok")]
    kit.build("ok bug", "fwloop_max_iter = 5")
    assert kit.run() is Outcome.SUCCESS
    assert assembled == [("coder", 1, 1), ("reviewer", 1, 1)]
    [request] = kit.coder.requests
    assert [f.nodeid for f in request.failures] == ["tests/test_fw.py::test_1"]
