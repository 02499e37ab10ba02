"""The stop rules of seed 001 §5.19: the seed's worked examples, edge cases, random histories."""

from __future__ import annotations

import dataclasses
import itertools
import json
import re
from typing import TYPE_CHECKING

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_fwloop.config.criteria_file import load_criteria
from pytest_fwloop.core.machine.fsm import IterationKind
from pytest_fwloop.core.verdict.baseline_gate import unconfirmed
from pytest_fwloop.core.verdict.convergence import (
    PRESETS,
    ConvergenceChecker,
    ConvergenceCriteria,
    ConvergenceType,
    CriteriaError,
    ExecutionMode,
    PlateauAction,
    PlateauHandlingStrategy,
    average_improvement_rate,
    convergence_score,
    determine_convergence,
    improvement_rate,
    pass_rate,
    stability_delta,
    stable_for_last_n_iterations,
)

if TYPE_CHECKING:
    from pathlib import Path

STANDARD = ConvergenceCriteria()

# Hypothesis' deadline is a wall-clock assertion, which has no place in a test of pure arithmetic.
pure = settings(deadline=None)


def verdicts(
    pass_counts: list[int], total: int, max_iterations: int = 10
) -> list[ConvergenceType | None]:
    """The verdict after each iteration of a history with a fixed suite size."""
    return [
        determine_convergence(
            pass_counts[:iteration], [total] * iteration, STANDARD, iteration, max_iterations
        )[0]
        for iteration in range(1, len(pass_counts) + 1)
    ]


# --- the four worked examples of seed §5.19.4 -------------------------------------------------


def test_example_1_success_at_iteration_5() -> None:
    history = [80, 90, 97, 100, 100]
    assert verdicts(history, 100) == [None, None, None, None, ConvergenceType.SUCCESS]
    assert average_improvement_rate(history, [100] * 5) == pytest.approx(0.0333, abs=1e-4)
    _, reason = determine_convergence(history, [100] * 5, STANDARD, 5, 10)
    assert reason == (
        "SUCCESS: pass_rate=100.0% >= target=100.0% && stable(last 2) delta=0.00% <= 2.00%"
    )


def test_example_1_reached_target_but_unstable_waits() -> None:
    # Iteration 4 is at 100% but moved 3% from iteration 3, beyond the 2% stability threshold.
    verdict, reason = determine_convergence([80, 90, 97, 100], [100] * 4, STANDARD, 4, 10)
    assert verdict is None
    assert reason.startswith("continue: pass_rate=100.0% (target=100.0%)")
    assert "last_delta=3.00%" in reason


def test_example_2_converged_with_improvement_at_iteration_5() -> None:
    history = [60, 75, 82, 82, 82]
    assert verdicts(history, 100) == [
        None,
        None,
        None,
        None,
        ConvergenceType.CONVERGED_WITH_IMPROVEMENT,
    ]
    _, reason = determine_convergence(history, [100] * 5, STANDARD, 5, 10)
    assert reason == (
        "CONVERGED_WITH_IMPROVEMENT: best_pass_count=82, pass_rate=82.0% < target=100.0%, "
        "avg_improvement=2.33% < 5.00%, no_improvement_streak=2"
    )


def test_example_3_failure_at_iteration_3() -> None:
    history = [25, 28, 29]
    assert verdicts(history, 100) == [None, None, ConvergenceType.FAILURE]
    _, reason = determine_convergence(history, [100] * 3, STANDARD, 3, 10)
    assert reason == (
        "FAILURE: failure_rate=71.0% > threshold=70.0% for 3 consecutive iterations (limit=3)"
    )


def test_example_4_plateaued_at_iteration_7() -> None:
    history = [50, 60, 66, 69, 70, 71, 71]
    assert verdicts(history, 100) == [None] * 6 + [ConvergenceType.PLATEAUED]
    _, reason = determine_convergence(history, [100] * 7, STANDARD, 7, 10)
    assert reason == "PLATEAUED: avg_improvement=0.67% < 1.00% && current_iteration=7 >= 7"


def test_example_4_flags_slow_improvement_before_the_plateau() -> None:
    totals = [100] * 6
    _, reason_5 = determine_convergence([50, 60, 66, 69, 70], totals[:5], STANDARD, 5, 10)
    _, reason_6 = determine_convergence([50, 60, 66, 69, 70, 71], totals, STANDARD, 6, 10)
    assert reason_5.startswith("slow improvement: avg_improvement=3.33% < 5.00%")
    assert "current_iteration=5 >= 5" in reason_5
    assert reason_6.startswith("slow improvement: avg_improvement=1.67% < 5.00%")


# --- further histories ---------------------------------------------------------------------------


def test_constant_pass_count_converges_at_the_minimum_iteration() -> None:
    assert verdicts([9] * 5, 12) == [None] * 4 + [ConvergenceType.CONVERGED_WITH_IMPROVEMENT]
    _, reason = determine_convergence([9] * 5, [12] * 5, STANDARD, 5, 10)
    assert "best_pass_count=9, pass_rate=75.0%" in reason
    assert "no_improvement_streak=4" in reason


def test_timeout_takes_precedence_over_success() -> None:
    verdict, reason = determine_convergence([12, 12], [12, 12], STANDARD, 10, 10)
    assert verdict is ConvergenceType.TIMEOUT
    assert reason == "TIMEOUT: current_iteration=10 >= max_iterations=10"


def test_timeout_past_the_limit() -> None:
    verdict, reason = determine_convergence([3], [12], STANDARD, 11, 10)
    assert verdict is ConvergenceType.TIMEOUT
    assert "current_iteration=11 >= max_iterations=10" in reason


def test_success_is_checked_before_high_failure() -> None:
    # Three runs at 75% failure would be FAILURE, but a 25% target is met and stable first.
    criteria = ConvergenceCriteria(target_pass_rate=0.25)
    verdict, _ = determine_convergence([25, 25, 25], [100] * 3, criteria, 3, 10)
    assert verdict is ConvergenceType.SUCCESS


def test_plateau_is_checked_before_converged_with_improvement() -> None:
    # A flat history satisfies both rules at iteration 7; the seed's order makes it a plateau.
    verdict, reason = determine_convergence([9] * 7, [12] * 7, STANDARD, 7, 10)
    assert verdict is ConvergenceType.PLATEAUED
    assert reason == "PLATEAUED: avg_improvement=0.00% < 1.00% && current_iteration=7 >= 7"


def test_green_baseline_needs_a_confirming_run() -> None:
    first, reason = determine_convergence([12], [12], STANDARD, 1, 10)
    assert first is None
    assert reason.startswith("continue: pass_rate=100.0%")
    second, _ = determine_convergence([12, 12], [12, 12], STANDARD, 2, 10)
    assert second is ConvergenceType.SUCCESS


def test_single_stable_iteration_makes_a_green_baseline_success() -> None:
    criteria = ConvergenceCriteria(stable_iterations_required=1)
    verdict, reason = determine_convergence([12], [12], criteria, 1, 10)
    assert verdict is ConvergenceType.SUCCESS
    assert "stable(last 1) delta=0.00%" in reason


def test_green_after_a_big_jump_is_not_yet_success() -> None:
    verdict, _ = determine_convergence([5, 12], [12, 12], STANDARD, 2, 10)
    assert verdict is None


def test_regression_is_not_counted_as_improvement() -> None:
    assert improvement_rate(90, 85, 100) == pytest.approx(-0.05)
    # Only the positive step counts: (10% + 0%) / 2.
    assert average_improvement_rate([80, 90, 85], [100] * 3) == pytest.approx(0.05)


def test_regression_below_the_best_is_not_converged() -> None:
    # The same shape as example 2, but the last run fell back from the best of 82.
    verdict, reason = determine_convergence([60, 75, 82, 82, 80], [100] * 5, STANDARD, 5, 10)
    assert verdict is None
    assert reason.startswith("slow improvement:")


def test_high_failure_with_regression_streak_fails_before_three_high_failures() -> None:
    # Failure rate 75% only twice, but the pass count fell and then stood still.
    verdict, reason = determine_convergence([50, 25, 25], [100] * 3, STANDARD, 3, 10)
    assert verdict is ConvergenceType.FAILURE
    assert reason == (
        "FAILURE: failure_rate=75.0% > threshold=70.0% && no_improvement_streak=2 >= 2"
    )


def test_empty_runs_count_as_zero_percent() -> None:
    assert pass_rate(0, 0) == 0.0
    assert improvement_rate(0, 3, 0) == 3.0
    verdict, reason = determine_convergence([0, 0, 0], [0, 0, 0], STANDARD, 3, 10)
    assert verdict is ConvergenceType.FAILURE
    assert "failure_rate=100.0%" in reason


def test_continue_reason_carries_the_numbers() -> None:
    verdict, reason = determine_convergence([60, 75], [100, 100], STANDARD, 2, 10)
    assert verdict is None
    assert reason == (
        "continue: pass_rate=75.0% (target=100.0%), avg_improvement=15.00%, last_delta=15.00%, "
        "high_failure_streak=0, no_improvement_streak=0, iteration 2 of 10"
    )


@pytest.mark.parametrize(
    ("pass_counts", "total_counts", "message"),
    [
        ([], [], "no iteration results"),
        ([1, 2], [3], "2 pass counts but 1 total counts"),
        ([4], [3], "pass_count=4, total_count=3"),
        ([-1], [3], "pass_count=-1"),
    ],
)
def test_bad_histories_are_rejected(
    pass_counts: list[int], total_counts: list[int], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        determine_convergence(pass_counts, total_counts, STANDARD, 1, 10)


def test_stability_over_the_last_n() -> None:
    assert stability_delta(0.9, 0.88) == pytest.approx(0.02)
    assert not stable_for_last_n_iterations([1.0], 2, 0.02)
    assert stable_for_last_n_iterations([0.5, 0.9, 0.91, 0.92], 3, 0.02)
    assert not stable_for_last_n_iterations([0.5, 0.9, 0.91, 0.92], 4, 0.02)
    assert stable_for_last_n_iterations([0.3], 1, 0.0)
    with pytest.raises(ValueError, match="n=0"):
        stable_for_last_n_iterations([0.3], 0, 0.0)


def test_convergence_score_formula() -> None:
    # 0.5 * 0.9 + 0.3 * (1 - 0.01/0.02) + 0.2 * (1 - 0.02/0.05)
    assert convergence_score(0.9, 1.0, 0.01, 0.02, STANDARD) == pytest.approx(0.72)
    assert convergence_score(1.0, 1.0, 0.0, 0.0, STANDARD) == pytest.approx(1.0)
    assert convergence_score(0.0, 1.0, 0.5, 0.5, STANDARD) == pytest.approx(0.0)


# --- ConvergenceChecker --------------------------------------------------------------------------


def test_checker_follows_example_2() -> None:
    checker = ConvergenceChecker(STANDARD)
    stops = []
    for iteration, passed in enumerate([60, 75, 82, 82, 82], start=1):
        checker.add_iteration_result(passed, 100)
        stops.append(checker.check_convergence(iteration, 10)[:2])
    assert stops == [(False, None)] * 4 + [(True, ConvergenceType.CONVERGED_WITH_IMPROVEMENT)]
    assert checker.pass_counts == (60, 75, 82, 82, 82)
    assert checker.total_counts == (100,) * 5
    # 0.5 * 0.82 + 0.3 * 1 + 0.2 * (1 - (7/300) / 0.05)
    assert checker.score() == pytest.approx(0.41 + 0.3 + 0.2 * (1 - 0.07 / 3 / 0.05))


def test_checker_rejects_bad_results_and_empty_score() -> None:
    checker = ConvergenceChecker(STANDARD)
    with pytest.raises(ValueError, match="no iteration results"):
        checker.score()
    with pytest.raises(ValueError, match="pass_count=5, total_count=4"):
        checker.add_iteration_result(5, 4)
    assert checker.pass_counts == ()


# --- criteria ------------------------------------------------------------------------------------


def test_defaults_are_the_seed_standard() -> None:
    assert STANDARD.to_dict() == {
        "target_pass_rate": 1.0,
        "failure_rate_threshold": 0.70,
        "failure_rate_consecutive_limit": 3,
        "avg_improvement_window": 3,
        "slow_improvement_threshold": 0.05,
        "plateau_improvement_threshold": 0.01,
        "min_iterations_for_slow_improvement": 5,
        "min_iterations_for_plateau": 7,
        "stable_iterations_required": 2,
        "stability_delta_threshold": 0.02,
        "no_improvement_epsilon": 0.0,
        "consecutive_no_improvement_limit": 2,
    }


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("target_pass_rate", 1.5, "target_pass_rate=1.5 is outside [0, 1]"),
        ("stability_delta_threshold", -0.1, "stability_delta_threshold=-0.1 is outside"),
        ("failure_rate_threshold", float("nan"), "failure_rate_threshold=nan is outside"),
        ("target_pass_rate", True, "target_pass_rate=True is not a number"),
        ("stable_iterations_required", 0, "stable_iterations_required=0 is not a count"),
        ("avg_improvement_window", 2.0, "avg_improvement_window=2.0 is not a count"),
    ],
)
def test_criteria_ranges_are_checked(field: str, value: object, message: str) -> None:
    with pytest.raises(CriteriaError, match=re.escape(message)):
        ConvergenceCriteria(**{field: value})  # type: ignore[arg-type]


def test_presets_map_seed_6_1_onto_5_19() -> None:
    assert PRESETS["standard"] == STANDARD
    mapped = {
        name: (
            criteria.target_pass_rate,
            criteria.slow_improvement_threshold,
            criteria.stable_iterations_required,
            criteria.stability_delta_threshold,
        )
        for name, criteria in PRESETS.items()
    }
    assert mapped == {
        "standard": (1.0, 0.05, 2, 0.02),
        "strict": (0.98, 0.03, 5, 0.03),
        "balanced": (0.95, 0.05, 3, 0.03),
        "aggressive": (0.90, 0.02, 3, 0.03),
    }
    unmapped = {
        "target_pass_rate",
        "slow_improvement_threshold",
        "stable_iterations_required",
        "stability_delta_threshold",
    }
    for criteria in PRESETS.values():
        rest = {k: v for k, v in criteria.to_dict().items() if k not in unmapped}
        assert rest == {k: v for k, v in STANDARD.to_dict().items() if k not in unmapped}


# --- load_criteria -------------------------------------------------------------------------------


def test_load_preset_by_name(tmp_path: Path) -> None:
    assert load_criteria("strict", tmp_path) is PRESETS["strict"]


def test_load_toml_fields(tmp_path: Path) -> None:
    (tmp_path / "crit.toml").write_text("target_pass_rate = 0.9\nmin_iterations_for_plateau = 4\n")
    assert load_criteria("crit.toml", tmp_path) == dataclasses.replace(
        STANDARD, target_pass_rate=0.9, min_iterations_for_plateau=4
    )


def test_load_json_preset_with_override(tmp_path: Path) -> None:
    (tmp_path / "crit.json").write_text(json.dumps({"preset": "strict", "target_pass_rate": 1}))
    assert load_criteria("crit.json", tmp_path) == dataclasses.replace(
        PRESETS["strict"], target_pass_rate=1.0
    )


def test_load_absolute_path(tmp_path: Path) -> None:
    path = tmp_path / "crit.json"
    path.write_text('{"preset": "aggressive"}')
    assert load_criteria(str(path), tmp_path / "elsewhere") == PRESETS["aggressive"]


def test_unknown_field_names_file_and_field(tmp_path: Path) -> None:
    (tmp_path / "crit.toml").write_text("target_pass = 0.9\n")
    with pytest.raises(CriteriaError) as excinfo:
        load_criteria("crit.toml", tmp_path)
    message = str(excinfo.value)
    # The file schema lists exactly the criteria fields, so the two cannot drift apart.
    assert message == (
        "fwloop: --fwloop-criteria=crit.toml: unknown field 'target_pass'; valid fields: preset, "
        + ", ".join(STANDARD.to_dict())
    )
    assert "\n" not in message


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"stable_iterations_required": 2.5}', "field 'stable_iterations_required': "),
        ('{"target_pass_rate": "0.9"}', "field 'target_pass_rate': "),
        ('{"preset": "lenient"}', "field 'preset': "),
        ('{"target_pass_rate": 2}', "target_pass_rate=2.0 is outside"),
        ("[1, 2]", "expected a table of criteria fields, got list"),
        ("{not json", "not valid JSON"),
    ],
)
def test_bad_json_files_give_one_line_errors(tmp_path: Path, content: str, message: str) -> None:
    (tmp_path / "crit.json").write_text(content)
    with pytest.raises(CriteriaError) as excinfo:
        load_criteria("crit.json", tmp_path)
    assert str(excinfo.value).startswith("fwloop: --fwloop-criteria=crit.json: ")
    assert message in str(excinfo.value)
    assert "\n" not in str(excinfo.value)


def test_bad_toml_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "crit.toml").write_text("target_pass_rate = \n")
    with pytest.raises(
        CriteriaError, match=r"^fwloop: --fwloop-criteria=crit.toml: not valid TOML"
    ):
        load_criteria("crit.toml", tmp_path)


def test_missing_file_lists_presets(tmp_path: Path) -> None:
    with pytest.raises(CriteriaError) as excinfo:
        load_criteria("nope.toml", tmp_path)
    message = str(excinfo.value)
    assert f"({tmp_path / 'nope.toml'} not found)" in message
    assert "use one of standard, strict, balanced, aggressive" in message


def test_other_suffix_is_rejected(tmp_path: Path) -> None:
    (tmp_path / "crit.yaml").write_text("target_pass_rate: 0.9\n")
    with pytest.raises(CriteriaError, match=re.escape("crit.yaml is not a .toml or .json file")):
        load_criteria("crit.yaml", tmp_path)


# --- plateau handling ----------------------------------------------------------------------------


def test_interactive_plateau_asks_the_operator() -> None:
    action, reason = PlateauHandlingStrategy().handle_plateau(0.71, 0)
    assert action is PlateauAction.HUMAN_REVIEW
    assert "71.0%" in reason


def test_ci_plateau_fails_by_default() -> None:
    strategy = PlateauHandlingStrategy(mode=ExecutionMode.CI)
    assert strategy.ci_terminate_as == "failure"
    action, reason = strategy.handle_plateau(0.71, 0)
    assert action is PlateauAction.FAILURE
    assert reason == "ci mode: plateau at pass rate 71.0% ends as a failure"


def test_ci_plateau_as_warning_when_opted_in() -> None:
    strategy = PlateauHandlingStrategy(mode=ExecutionMode.CI, ci_terminate_as="warning")
    action, reason = strategy.handle_plateau(0.5, 0)
    assert action is PlateauAction.SUCCESS_WITH_WARNING
    assert "50.0%" in reason


def test_auto_plateau_switches_until_the_limit() -> None:
    strategy = PlateauHandlingStrategy(mode=ExecutionMode.AUTO)
    actions = [strategy.handle_plateau(0.8, count)[0] for count in range(4)]
    assert actions == [
        PlateauAction.STRATEGY_SWITCH,
        PlateauAction.STRATEGY_SWITCH,
        PlateauAction.FAILURE,
        PlateauAction.FAILURE,
    ]
    assert strategy.handle_plateau(0.8, 1)[1].endswith("switching strategy (2 of 2)")
    assert "limit 2" in strategy.handle_plateau(0.8, 2)[1]


def test_auto_with_no_switches_allowed_fails_at_once() -> None:
    strategy = PlateauHandlingStrategy(mode=ExecutionMode.AUTO, auto_max_strategy_switches=0)
    assert strategy.handle_plateau(0.8, 0)[0] is PlateauAction.FAILURE


def test_ci_terminate_as_is_validated() -> None:
    with pytest.raises(CriteriaError, match="ci_terminate_as='abort' is not allowed"):
        PlateauHandlingStrategy(ci_terminate_as="abort")  # type: ignore[arg-type]


def test_plateau_strategy_defaults_follow_the_seed() -> None:
    strategy = PlateauHandlingStrategy()
    assert strategy.mode is ExecutionMode.INTERACTIVE
    assert strategy.ci_auto_terminate is True
    assert strategy.ci_max_wait_seconds == 0
    assert strategy.ci_notification_channels == ()
    assert strategy.auto_retry_with_different_strategy is False
    assert strategy.auto_max_strategy_switches == 2
    assert strategy.auto_fallback_strategies == ()


# --- properties over random histories ------------------------------------------------------------


@st.composite
def histories(draw: st.DrawFn, fixed_total: bool = False) -> tuple[list[int], list[int]]:
    length = draw(st.integers(min_value=1, max_value=12))
    if fixed_total:
        totals = [draw(st.integers(min_value=0, max_value=40))] * length
    else:
        totals = draw(st.lists(st.integers(0, 40), min_size=length, max_size=length))
    passes = [draw(st.integers(min_value=0, max_value=total)) for total in totals]
    return passes, totals


rates = st.floats(min_value=0.0, max_value=1.0)
counts = st.integers(min_value=1, max_value=8)
criteria_values = st.builds(
    ConvergenceCriteria,
    target_pass_rate=rates,
    failure_rate_threshold=rates,
    failure_rate_consecutive_limit=counts,
    avg_improvement_window=counts,
    slow_improvement_threshold=rates,
    plateau_improvement_threshold=rates,
    min_iterations_for_slow_improvement=counts,
    min_iterations_for_plateau=counts,
    stable_iterations_required=counts,
    stability_delta_threshold=rates,
    no_improvement_epsilon=rates,
    consecutive_no_improvement_limit=counts,
)
iterations = st.integers(min_value=0, max_value=20)

TERMINAL_PREFIXES = {verdict: verdict.name + ": " for verdict in ConvergenceType}


@pure
@given(histories(), criteria_values, iterations, iterations)
def test_verdict_shape_timeout_and_success(
    history: tuple[list[int], list[int]],
    criteria: ConvergenceCriteria,
    current_iteration: int,
    max_iterations: int,
) -> None:
    passes, totals = history
    verdict, reason = determine_convergence(
        passes, totals, criteria, current_iteration, max_iterations
    )
    assert verdict is None or isinstance(verdict, ConvergenceType)
    assert (verdict is ConvergenceType.TIMEOUT) == (current_iteration >= max_iterations)
    if verdict is None:
        assert reason.startswith(("continue: ", "slow improvement: "))
    else:
        assert reason.startswith(TERMINAL_PREFIXES[verdict])
    if verdict is ConvergenceType.SUCCESS:
        assert pass_rate(passes[-1], totals[-1]) >= criteria.target_pass_rate
    if verdict is ConvergenceType.CONVERGED_WITH_IMPROVEMENT:
        assert passes[-1] == max(passes)
    assert determine_convergence(
        list(passes), list(totals), criteria, current_iteration, max_iterations
    ) == (verdict, reason)


@pure
@given(histories(), criteria_values, iterations)
def test_checker_agrees_with_determine_convergence(
    history: tuple[list[int], list[int]], criteria: ConvergenceCriteria, max_iterations: int
) -> None:
    checker = ConvergenceChecker(criteria)
    passes, totals = history
    for iteration, (passed, total) in enumerate(zip(passes, totals, strict=True), start=1):
        checker.add_iteration_result(passed, total)
        stop, verdict, reason = checker.check_convergence(iteration, max_iterations)
        expected = determine_convergence(
            passes[:iteration], totals[:iteration], criteria, iteration, max_iterations
        )
        assert (verdict, reason) == expected
        assert stop is (verdict is not None)
        assert 0.0 <= checker.score() <= 1.0


@pure
@given(histories(fixed_total=True), counts)
def test_average_improvement_is_a_rate_for_a_fixed_suite(
    history: tuple[list[int], list[int]], window: int
) -> None:
    passes, totals = history
    assert 0.0 <= average_improvement_rate(passes, totals, window) <= 1.0


@pure
@given(histories(), counts)
def test_average_improvement_is_never_negative(
    history: tuple[list[int], list[int]], window: int
) -> None:
    passes, totals = history
    assert average_improvement_rate(passes, totals, window) >= 0.0


def test_average_improvement_can_exceed_one_when_the_suite_grows() -> None:
    # improvement_rate divides by the previous total (seed §5.19.2), so 0/1 -> 5/5 is +500%.
    assert average_improvement_rate([0, 5], [1, 5]) == 5.0


@pure
@given(rates, rates, st.floats(0.0, 1.0), st.floats(0.0, 10.0), criteria_values)
def test_convergence_score_is_in_unit_interval(
    curr: float, target: float, delta: float, avg: float, criteria: ConvergenceCriteria
) -> None:
    assert 0.0 <= convergence_score(curr, target, delta, avg, criteria) <= 1.0


# -- SUCCESS needs the final tree confirmed with no new patch (issue 34) -------------------------


def test_two_green_patched_trees_in_a_row_are_not_a_confirmed_success() -> None:
    """The seed's stability rule takes 89% then 91% at a 90% target for SUCCESS at once; the
    tree of iteration 2 was never run again with no new patch, so SUCCESS waits for that."""
    criteria = ConvergenceCriteria(target_pass_rate=0.9)
    verdict, _ = determine_convergence([89, 91], [100, 100], criteria, 2, 10)
    assert verdict is ConvergenceType.SUCCESS
    patched = [IterationKind.BASELINE, IterationKind.PATCH]
    assert unconfirmed(patched, criteria.stable_iterations_required) == (
        "; SUCCESS withheld: this tree has had 0 of 1 confirmation run(s) with no new patch"
    )
    assert unconfirmed([*patched, IterationKind.CONFIRMATION], 2) == ""
    assert unconfirmed([IterationKind.BASELINE, IterationKind.CONFIRMATION], 2) == ""
    assert unconfirmed(patched, 1) == ""  # fwloop_confirm_runs = 0


@pure
@given(st.lists(st.sampled_from(list(IterationKind)), min_size=1, max_size=8), st.integers(1, 5))
def test_success_stands_only_after_enough_runs_with_no_new_patch(
    kinds: list[IterationKind], required: int
) -> None:
    tail = len(kinds) - len(
        list(itertools.takewhile(lambda k: k is IterationKind.CONFIRMATION, reversed(kinds)))
    )
    confirmed = len(kinds) - tail
    assert (unconfirmed(kinds, required) == "") == (confirmed >= required - 1)
