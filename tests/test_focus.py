"""Focus reruns' decisions (pytest_fwloop/core/suite/focus.py), on recorded results."""

from __future__ import annotations

from pytest_fwloop.core.machine.fsm import IterationKind
from pytest_fwloop.core.suite.focus import WHOLE_SUITE, carry, gate_due, plan_iteration
from pytest_fwloop.core.suite.results import IterationResults, TestOutcome, TestRecord


def run(**outcomes: TestOutcome) -> IterationResults:
    return IterationResults(
        exitstatus=1,
        tests=[TestRecord(nodeid=n, outcome=o, phase="call") for n, o in outcomes.items()],
    )


def test_a_patch_iteration_focuses_on_what_did_not_pass_plus_the_testers_picks() -> None:
    standing = run(a="passed", b="failed", c="error", d="skipped")
    plan = plan_iteration(
        IterationKind.PATCH, standing, [(1, standing)], ["a", "b", "tester::make"]
    )
    assert plan.select == ["b", "c", "a"]
    assert plan.carried is not None
    assert all(t.carried for t in plan.carried.tests)
    assert (
        plan.why == "2 test(s) that failed or were flaky at some iteration + 1 picked by the tester"
    )


def test_a_test_fixed_earlier_in_the_run_stays_in_the_focus() -> None:
    """The coder works on those: a later patch that breaks one again must be seen at once."""
    baseline = run(a="passed", b="failed", c="failed")
    standing = run(a="passed", b="passed", c="failed")
    plan = plan_iteration(IterationKind.PATCH, standing, [(1, baseline), (2, standing)])
    assert plan.select == ["b", "c"]


def test_a_test_reading_the_patchs_review_always_runs() -> None:
    gate = TestRecord(nodeid="gate", outcome="passed", phase="call", patch_aware=True)
    standing = IterationResults(exitstatus=1, tests=[*run(a="passed", b="failed").tests, gate])
    plan = plan_iteration(IterationKind.PATCH, standing, [(1, standing)])
    assert plan.select == ["b", "gate"]
    assert plan.why.endswith("+ 1 reading the patch's review or test plan")


def test_the_baseline_and_a_patch_with_nothing_failing_run_the_whole_suite() -> None:
    green = run(a="passed")
    assert plan_iteration(IterationKind.BASELINE, None, []) is WHOLE_SUITE
    assert plan_iteration(IterationKind.PATCH, green, [(1, green)]) is WHOLE_SUITE
    assert plan_iteration(IterationKind.PATCH, None, []) is WHOLE_SUITE


def test_a_confirmation_reruns_what_failed_or_was_flaky_at_any_iteration() -> None:
    baseline = run(a="failed", b="passed", c="passed")
    flaky = TestRecord(nodeid="c", outcome="skipped", phase="call", flaky=True)
    gate = IterationResults(
        exitstatus=0,
        tests=[*run(a="passed", b="passed").tests, flaky],
    )
    plan = plan_iteration(IterationKind.CONFIRMATION, gate, [(1, baseline), (2, gate)])
    assert plan.select == ["a", "c"]


def test_a_confirmation_of_a_green_baseline_reruns_nothing() -> None:
    green = run(a="passed", b="passed")
    plan = plan_iteration(IterationKind.CONFIRMATION, green, [(1, green)])
    assert plan.select == []
    assert plan.carried is not None
    assert [t.nodeid for t in plan.carried.tests] == ["a", "b"]


def test_carried_records_leave_the_testers_commands_out() -> None:
    commands = carry(run(a="passed", **{"tester::make": "failed"}))  # type: ignore[arg-type]
    assert [t.nodeid for t in commands.tests] == ["a"]


def test_the_gate_runs_when_the_focus_is_green_or_the_estimate_reaches_the_target() -> None:
    focused = run(b="failed")
    estimate = run(a="passed", x="passed", y="passed", b="failed")  # 75%
    assert gate_due(run(b="passed"), estimate, 1.0)
    assert not gate_due(focused, estimate, 1.0)
    assert gate_due(focused, estimate, 0.75)
    board_down = IterationResults(
        exitstatus=1,
        tests=[TestRecord(nodeid="b", outcome="failed", phase="setup", env_failure="EIO")],
    )
    assert not gate_due(board_down, estimate, 0.5)  # the environment is reset first
