"""The analysis after each iteration (seed 001 §6.3; docs/metrics.md): score, trend, reasons and
a one-line recommendation, a pure function of the numbers convergence.json records."""

from __future__ import annotations

import dataclasses
import itertools
import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controllerkit import ControllerKit, fixing
from envs_support.browser import open_page
from loopkit import CALC, FIXES, LoopProject, coder_answer, unified_diff
from pytest_fwloop.cli.replay import load_run, replay
from pytest_fwloop.core.machine.outcomes import Outcome
from pytest_fwloop.core.records.run_records import MetricChange
from pytest_fwloop.core.verdict.convergence import (
    ConvergenceCriteria,
    ConvergenceType,
    ExecutionMode,
    determine_convergence,
)
from pytest_fwloop.core.verdict.iteration_advice import (
    Facts,
    analyse,
    fitted_trend,
    forecast,
    headline,
)

STANDARD = ConvergenceCriteria()
#: The plateau rule ends the run before the converged-with-improvement rule can.
EARLY_PLATEAU = ConvergenceCriteria(
    min_iterations_for_plateau=4, min_iterations_for_slow_improvement=8
)


def facts(
    passed: list[int],
    total: int = 6,
    *,
    criteria: ConvergenceCriteria = STANDARD,
    max_iter: int = 10,
    mode: ExecutionMode = ExecutionMode.CI,
    **more: object,
) -> Facts:
    """The facts of the iteration just run, with the verdict the rules give."""
    totals = [total] * len(passed)
    verdict, _ = determine_convergence(passed, totals, criteria, len(passed), max_iter)
    return Facts(passed, totals, criteria, len(passed), max_iter, verdict, mode, **more)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("rates", "trend", "slope"),
    [
        ([0.5], "insufficient_data", 0.0),
        ([0.2, 0.4, 0.6, 0.8], "improving", 0.2),
        ([0.8, 0.6, 0.4], "declining", -0.2),
        ([0.5, 0.5, 0.51, 0.5], "stable", 0.001),
        ([0.5, 0.5, 0.56, 0.6], "mixed", 0.036),  # between half the threshold and the threshold
        ([0.0, 0.0, 0.0, 0.0, 0.2, 0.4, 0.6, 0.8], "improving", 0.2),  # the window only
    ],
)
def test_the_trend_is_the_fitted_slope_named_as_the_seed_names_it(
    rates: list[float], trend: str, slope: float
) -> None:
    named, fitted, window = fitted_trend(rates, 4, 0.05)
    assert (named, window) == (trend, min(len(rates), 4))
    assert fitted == pytest.approx(slope)


@pytest.mark.parametrize(
    ("passed", "recommendation"),
    [
        ([1], "baseline: 5 failing test(s) go to the coder"),
        ([1, 2], "improving: about 5 more iteration(s) to the target at this pace"),
        ([1, 3, 3], "stalling: the run ends converged_with_improvement at iteration 5 if"),
        ([1, 3, 3, 3, 3], "converged at 50.0%: keep the gain with fwloop apply"),
        ([5, 3], "declining: the recent patches made things worse"),
        ([1, 6], "green once: confirming with no new patch"),
        ([1, 6, 6], "done: the target is met and held"),
        ([0, 0, 0], "failed at 0.0%: check the build and the environment"),
        ([0, 0], "failing: the run ends failure at iteration 3 if nothing improves"),
    ],
)
def test_the_recommendation_follows_from_the_counts(passed: list[int], recommendation: str) -> None:
    assert analyse(facts(passed)).recommendation.startswith(recommendation)


def test_a_plateau_near_recommends_auto_mode_unless_the_run_is_in_it() -> None:
    near = facts([1, 3, 3], criteria=EARLY_PLATEAU)
    assert analyse(near).recommendation == (
        "plateau near: the run ends plateaued at iteration 5 if nothing improves; "
        "consider --fwloop-mode=auto"
    )
    auto = dataclasses.replace(near, mode=ExecutionMode.AUTO)
    assert analyse(auto).recommendation.endswith("; auto mode switches strategy there")
    ended = facts([1, 3, 3, 3, 3], criteria=EARLY_PLATEAU)
    assert ended.verdict is ConvergenceType.PLATEAUED
    assert analyse(ended).recommendation.startswith("plateaued at 50.0%: consider --fwloop-mode")


def test_running_short_names_the_iterations_the_pace_needs() -> None:
    short = facts([4, 5, 6], total=12, max_iter=6)
    assert analyse(short).recommendation == (
        "running short: about 7 more iteration(s) at the recent pace, 3 left; "
        "consider --max-iter=10"
    )
    out = facts([4, 5, 6, 7, 8, 9], total=12, max_iter=6)
    assert out.verdict is ConvergenceType.TIMEOUT
    assert analyse(out).recommendation == (
        "out of iterations at 75.0%: fwloop resume RUN --max-iter 4 continues"
    )


def test_what_withholds_success_comes_first_with_its_numbers() -> None:
    worse = MetricChange(
        name="boot_ms",
        better="lower",
        baseline=400,
        value=480,
        change=0.2,
        tolerance=0.05,
        worse=True,
    )
    green = facts([1, 6], metrics=[worse], regressions=["t.py::test_a"])
    analysis = analyse(green)
    assert analysis.recommendation == (
        "bring boot_ms back within tolerance of the baseline, or raise fwloop_metric_tolerance "
        "if the change is intended"
    )
    assert analysis.reasons == [
        "pass rate 100.0% (6/6), target 100.0%",
        "trend improving: +83.3% per iteration over the last 2 iterations",
        "1 test(s) that passed at the baseline fail now",
        "boot_ms worse than at the baseline beyond its tolerance 5.0%",
    ]
    assert analyse(facts([1, 6], regressions=["t.py::test_a"])).recommendation == (
        "mend the 1 test(s) broken since the baseline first"
    )
    assert headline(analysis, [worse]) == (
        "score 0.50, trend improving (+83.3%/iteration over 2); "
        "metrics: boot_ms 400 -> 480 (+20.0%) WORSE"
    )


@pytest.mark.parametrize("passed", [[94, 98], [94, 98, 100], [94, 98, 100, 108]])
def test_a_patch_that_raised_the_pass_count_is_progress_whatever_its_size(
    passed: list[int],
) -> None:
    """The C project of issue 34: each patch fixed another bug (4% of the suite or less), and
    each analysis said `slow: prefer a different hypothesis`."""
    advice = analyse(facts(passed, total=109)).recommendation
    assert advice.startswith("improving: about ")
    assert "different hypothesis" not in advice


def test_another_hypothesis_only_after_patches_that_changed_nothing_or_made_it_worse() -> None:
    """The same slow pace, but the last patch changed nothing: now another hypothesis is the
    advice (an early plateau is ruled out so the slow branch is the one that applies)."""
    late = ConvergenceCriteria(
        min_iterations_for_plateau=20, min_iterations_for_slow_improvement=20
    )
    flat = analyse(facts([94, 98, 100, 108, 108], total=200, criteria=late, max_iter=100))
    assert flat.recommendation == (
        "slow: prefer a different hypothesis over another variation of the last patch"
    )


def test_a_run_whose_metric_never_recovers_ends_naming_the_metric() -> None:
    """Every test passes and boot_ms stays 20% slower until the iterations run out: the ending
    names boot_ms, not 'review the failures' (nothing fails)."""
    worse = MetricChange(
        name="boot_ms",
        better="lower",
        baseline=400,
        value=480,
        change=0.2,
        tolerance=0.05,
        worse=True,
    )
    out = facts([5, 6, 6, 6], max_iter=4, metrics=[worse])
    assert out.verdict is ConvergenceType.TIMEOUT
    assert analyse(out).recommendation == (
        "out of iterations at 100.0%: the target is met but boot_ms stayed worse than at the "
        "baseline beyond tolerance: bring it back, or raise fwloop_metric_tolerance if the "
        "change is intended"
    )
    broken = facts([5, 6, 6, 6], max_iter=4, regressions=["t.py::test_a"])
    assert analyse(broken).recommendation == (
        "out of iterations at 100.0%: the target is met but 1 test(s) that passed at the "
        "baseline still fail (t.py::test_a): mend them"
    )


def test_the_forecast_is_the_rules_run_forward_on_a_flat_pass_count() -> None:
    assert forecast(facts([1, 3, 3])) == (ConvergenceType.CONVERGED_WITH_IMPROVEMENT, 5)
    assert forecast(facts([1, 3], max_iter=3)) == (ConvergenceType.TIMEOUT, 3)
    assert forecast(facts([1], total=3)) is None  # 3 iterations ahead nothing ends it


@settings(deadline=None, max_examples=200)
@given(
    passed=st.lists(st.integers(0, 8), min_size=1, max_size=12),
    mode=st.sampled_from(list(ExecutionMode)),
)
def test_any_history_gets_a_score_in_range_and_one_line(
    passed: list[int], mode: ExecutionMode
) -> None:
    analysis = analyse(facts(passed, total=8, max_iter=12, mode=mode))
    assert 0.0 <= analysis.score <= 1.0
    assert analysis.recommendation
    assert "\n" not in analysis.recommendation
    assert analysis.window == min(len(passed), STANDARD.avg_improvement_window + 1)


# -- in the loop ---------------------------------------------------------------------------------


@pytest.fixture
def kit(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> ControllerKit:
    return ControllerKit(pytester, monkeypatch)


def test_each_iteration_prints_its_analysis_and_records_it(kit: ControllerKit) -> None:
    kit.coder.answers = [fixing("ok bug bug", "ok ok bug"), fixing("ok ok bug", "ok ok ok")]
    kit.build("ok bug bug", "fwloop_max_iter = 6")
    assert kit.run() is Outcome.SUCCESS
    shown = [line for line in kit.terminal.getvalue().splitlines() if "analysis:" in line]
    assert shown == [
        "fwloop: [1] analysis: score 0.67, trend insufficient data",
        "fwloop: [2] analysis: score 0.33, trend improving (+33.3%/iteration over 2)",
        "fwloop: [3] analysis: score 0.50, trend improving (+33.3%/iteration over 3)",
        "fwloop: [4] analysis: score 0.80, trend improving (+23.3%/iteration over 4)",
    ]
    advice = [line for line in kit.terminal.getvalue().splitlines() if "] next:" in line]
    assert advice == [
        "fwloop: [1] next: baseline: 2 failing test(s) go to the coder",
        "fwloop: [2] next: improving: about 2 more iteration(s) to the target at this pace",
        "fwloop: [3] next: green once: confirming with no new patch",
        "fwloop: [4] next: done: the target is met and held, and nothing is worse than at the "
        "baseline",
    ]
    path = kit.controller.recorder.path
    timeline = json.loads((path / "task-timeline.json").read_text())
    recorded = json.loads((path / "rounds" / "02" / "convergence.json").read_text())
    assert timeline["iterations"][1]["analysis"] == recorded["analysis"]
    assert recorded["mode"] == "ci"
    assert recorded["analysis"]["score"] == timeline["iterations"][1]["score"]
    assert kit.summary()["recommendation"] == ""  # a green run leaves nothing to advise


def test_quiet_runs_leave_the_analysis_to_the_records(
    kit: ControllerKit, pytester: pytest.Pytester
) -> None:
    kit.coder.answers = [fixing("ok bug", "ok ok")]
    kit.build("ok bug")
    kit.controller.terminal.verbosity = -1
    assert kit.run() is Outcome.SUCCESS
    assert "analysis:" not in kit.terminal.getvalue()
    path = kit.controller.recorder.path / "rounds" / "01" / "convergence.json"
    assert json.loads(path.read_text())["analysis"]["trend"] == "insufficient_data"


def test_a_run_that_ends_short_of_success_says_what_next(kit: ControllerKit) -> None:
    (kit.root / "criteria.toml").write_text(EARLY_PLATEAU_TOML)
    # After one fix, patches that change nothing the tests see.
    kit.coder.answers = [
        fixing("ok bug bug", "ok ok bug"),
        *(fixing(f"ok ok bug{n or ''}", f"ok ok bug{n + 1}") for n in range(4)),
    ]
    kit.build("ok bug bug", "fwloop_criteria = criteria.toml", "fwloop_max_iter = 8")
    assert kit.run() is Outcome.PLATEAUED
    out = kit.terminal.getvalue()
    assert (
        "fwloop: [3] next: plateau near: the run ends plateaued at iteration 5 if nothing "
        "improves; consider --fwloop-mode=auto"
    ) in out
    assert kit.summary()["recommendation"].startswith("plateaued at 66.7%: consider --fwloop-mode")
    assert "next: plateaued at 66.7%" in out.split("fwloop summary")[1]


def test_replay_rederives_each_analysis(kit: ControllerKit, tmp_path: Path) -> None:
    kit.coder.answers = [fixing("ok bug bug", "ok ok bug"), fixing("ok ok bug", "ok ok ok")]
    kit.build("ok bug bug", "fwloop_max_iter = 6")
    assert kit.run() is Outcome.SUCCESS
    assert replay(load_run(kit.controller.recorder.path)) is None
    copy = Path(shutil.copytree(kit.controller.recorder.path, tmp_path / "copy"))
    record = copy / "rounds" / "02" / "convergence.json"
    data = json.loads(record.read_text())
    data["analysis"]["recommendation"] = "plateau near: consider --fwloop-mode=auto"
    record.write_text(json.dumps(data))
    difference = replay(load_run(copy))
    assert difference is not None
    assert str(difference) == (
        "iteration 2, analysis: the record recommends 'plateau near: consider "
        "--fwloop-mode=auto' (score 0.3333, improving); its numbers give 'improving: about 2 "
        "more iteration(s) to the target at this pace' (score 0.3333, improving)"
    )


@pytest.mark.slow
def test_a_real_loop_prints_its_analysis_and_the_report_shows_it(project: LoopProject) -> None:
    """One fix, then patches that change nothing the tests see: the analysis sees the plateau
    coming two iterations ahead, the run ends there, and the summary and report say what next."""
    project.calc_suite()
    project.write("criteria.toml", EARLY_PLATEAU_TOML)
    fixed = CALC.replace(*FIXES[0])
    notes = [fixed + "".join(f"# note {k}\n" for k in range(1, n + 1)) for n in range(4)]
    patches = [unified_diff("fw/calc.py", CALC, fixed)] + [
        unified_diff("fw/calc.py", before, after) for before, after in itertools.pairwise(notes)
    ]
    coder = project.agent("coder", [coder_answer(p) for p in patches])
    result = project.run(f"--fwloop-coder={coder.spec}", "--fwloop-criteria=criteria.toml")
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    summary = project.summary()
    assert (summary["outcome"], summary["pass_counts"]) == ("plateaued", [1, 3, 3, 3, 3])
    result.stdout.fnmatch_lines(
        [
            "*[[]1] analysis: score *, trend insufficient data",
            "*[[]1] next: baseline: 5 failing test(s) go to the coder",
            "*[[]2] analysis: score *, trend improving (+33.3%/iteration over 2)",
            "*[[]3] analysis: score *, trend improving (+16.7%/iteration over 3)",
            "*[[]3] next: plateau near: the run ends plateaued at iteration 5 if nothing "
            "improves; consider --fwloop-mode=auto",
            "*[[]5] next: plateaued at 50.0%: consider --fwloop-mode=auto*",
            "*outcome: plateaued (FAILURE)*",
            "next: plateaued at 50.0%: consider --fwloop-mode=auto, or a hint by fwloop followup",
        ]
    )
    assert summary["recommendation"].startswith("plateaued at 50.0%")
    [run_dir] = project.run_dirs()
    third = json.loads((run_dir / "rounds" / "03" / "convergence.json").read_text())
    assert third["analysis"]["recommendation"].startswith("plateau near")
    assert third["analysis"]["reasons"][:3] == [
        "pass rate 50.0% (3/6), target 100.0%",
        "trend improving: +16.7% per iteration over the last 3 iterations",
        "no improvement for 1 iteration(s)",
    ]
    assert project.replay().returncode == 0
    opened = open_page(run_dir / "report.html", run_dir / "report.png")
    assert opened.console == []
    assert 'id="next"' in opened.dom
    assert "plateaued at 50.0%: consider --fwloop-mode=auto" in opened.dom
    iterations = opened.dom.split('id="iterations"', 1)[1].split("</table>", 1)[0]
    # The fit spans the last 4 iterations: the baseline's 1/6 still lifts it at iteration 4.
    assert re.findall(r'<td class="trend">([^<]*)</td>', iterations) == [
        "insufficient data",
        "improving",
        "improving",
        "improving",
        "stable",
    ]
    assert opened.dom.count('<p class="recommendation">') == 5


EARLY_PLATEAU_TOML = "min_iterations_for_plateau = 4\nmin_iterations_for_slow_improvement = 8\n"


def test_the_coder_hears_slow_progress_only_after_a_patch_that_did_not_help(
    kit: ControllerKit,
) -> None:
    """25 tests, one fixed per patch (4% an iteration, under the 5% slow threshold): the
    coder is not told to change tack while each patch raises the pass count; after a patch
    that changed nothing it is."""
    words = ["ok"] * 20 + ["bug"] * 5

    def fix(count: int) -> dict[str, Any]:
        before = " ".join(["ok"] * (20 + count) + ["bug"] * (5 - count))
        after = " ".join(["ok"] * (21 + count) + ["bug"] * (4 - count))
        return fixing(before, after)

    stuck = " ".join(["ok"] * 24 + ["bug"])
    idle = fixing(stuck, stuck.replace("bug", "oops"), "no effect")
    last = fixing(stuck.replace("bug", "oops"), " ".join(["ok"] * 25))
    kit.coder.answers = [fix(0), fix(1), fix(2), fix(3), idle, last]
    kit.build(" ".join(words), "fwloop_max_iter = 10")
    assert kit.run() is Outcome.SUCCESS, kit.terminal.getvalue()
    assert kit.summary()["pass_counts"] == [20, 21, 22, 23, 24, 24, 25, 25]
    told = [request.constraints for request in kit.coder.requests]
    slowed = ["progress has slowed: prefer a different hypothesis over another variation"]
    # Iteration 5 is the first the seed's slow signal can name; its patch raised the count.
    assert told == [[], [], [], [], [], slowed]
