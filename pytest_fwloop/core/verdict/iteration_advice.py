"""The analysis printed after each iteration (seed 001 §6.3): score, trend, reasons, and what to
do next, in one line.

A pure function of what `rounds/NN/convergence.json` records beside it (the counts, criteria,
limit, mode and verdict, the baseline regressions and metric changes replay derives from the
results), so `fwloop replay` re-derives it like the verdict. It advises; it never decides a stop.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from pytest_fwloop.core.machine.decimals import RATE_PLACES, above, below
from pytest_fwloop.core.records.run_records import AnalysisRecord, MetricChange, Trend
from pytest_fwloop.core.verdict.convergence import (
    ConvergenceCriteria,
    ConvergenceType,
    ExecutionMode,
    History,
    determine_convergence,
    read_history,
)
from pytest_fwloop.core.verdict.exact_rates import short_of
from pytest_fwloop.core.verdict.metrics import describe

#: Metrics the terminal's analysis line names at most (the worst first); the rest are counted.
HEADLINE_METRICS = 3


@dataclass(frozen=True)
class Facts:
    """What the analysis is given: the checker's inputs and verdict, and what withholds SUCCESS."""

    pass_counts: Sequence[int]
    total_counts: Sequence[int]
    criteria: ConvergenceCriteria
    iteration: int
    max_iter: int
    verdict: ConvergenceType | None
    mode: ExecutionMode
    #: Tests that passed at the baseline and fail now.
    regressions: Sequence[str] = ()
    metrics: Sequence[MetricChange] = ()


def analyse(facts: Facts) -> AnalysisRecord:
    """The analysis of the iteration just judged; the trend is fitted over the same window the
    plateau rule averages over, plus its starting point."""
    history = read_history(facts.pass_counts, facts.total_counts, facts.criteria)
    trend, slope, window = fitted_trend(
        history.pass_rates,
        facts.criteria.avg_improvement_window + 1,
        facts.criteria.slow_improvement_threshold,
    )
    return AnalysisRecord(
        score=round(history.score, 4),
        trend=trend,
        slope=round(slope, 4),
        window=window,
        reasons=_reasons(facts, history, trend, slope, window),
        recommendation=recommend(facts, history, trend),
    )


def headline(analysis: AnalysisRecord, metrics: Sequence[MetricChange]) -> str:
    """The terminal's analysis line: score, trend, and the metrics that moved most."""
    trend = analysis.trend.replace("_", " ")
    if analysis.window >= 2:
        trend += f" ({analysis.slope:+.1%}/iteration over {analysis.window})"
    line = f"score {analysis.score:.2f}, trend {trend}"
    if metrics:
        ranked = sorted(metrics, key=lambda c: (not c.worse, -_badness(c), c.name))
        shown = [describe(c) + (" WORSE" if c.worse else "") for c in ranked[:HEADLINE_METRICS]]
        more = len(metrics) - len(shown)
        line += "; metrics: " + ", ".join(shown) + (f" (+{more} more)" if more else "")
    return line


def _badness(change: MetricChange) -> float:
    """How far a metric moved the bad way, relative (0 when it cannot be said)."""
    if change.change is None:
        return 0.0
    return change.change if change.better == "lower" else -change.change


def fitted_trend(rates: Sequence[float], window: int, threshold: float) -> tuple[Trend, float, int]:
    """The least-squares slope of the last `window` pass rates, named as the seed names it:
    beyond ±`threshold` an iteration improving or declining, within half of it stable, mixed in
    between; each compared as the line prints the slope (`+5.0%`)."""
    tail = list(rates[-window:])
    if len(tail) < 2:
        return "insufficient_data", 0.0, len(tail)
    mean_x = (len(tail) - 1) / 2
    mean_y = sum(tail) / len(tail)
    slope = sum((x - mean_x) * (y - mean_y) for x, y in enumerate(tail)) / sum(
        (x - mean_x) ** 2 for x in range(len(tail))
    )
    if above(slope, threshold, RATE_PLACES):
        return "improving", slope, len(tail)
    if below(slope, -threshold, RATE_PLACES):
        return "declining", slope, len(tail)
    calm = not above(abs(slope), threshold / 2, RATE_PLACES)
    return ("stable" if calm else "mixed"), slope, len(tail)


def _reasons(facts: Facts, history: History, trend: Trend, slope: float, window: int) -> list[str]:
    criteria = facts.criteria
    reasons = [
        f"pass rate {history.pass_rates[-1]:.1%} ({facts.pass_counts[-1]}/"
        f"{facts.total_counts[-1]}), target {criteria.target_pass_rate:.1%}",
        f"trend {trend}: {slope:+.1%} per iteration over the last {window} iterations"
        if window >= 2
        else "one iteration: no trend yet",
    ]
    if history.no_improvement_streak:
        reasons.append(f"no improvement for {history.no_improvement_streak} iteration(s)")
    if history.high_failure_streak:
        reasons.append(
            f"failure rate above {criteria.failure_rate_threshold:.0%} for "
            f"{history.high_failure_streak} iteration(s)"
        )
    if facts.regressions:
        reasons.append(f"{len(facts.regressions)} test(s) that passed at the baseline fail now")
    reasons += [
        f"{c.name} worse than at the baseline beyond its tolerance {c.tolerance:.1%}"
        for c in facts.metrics
        if c.worse
    ]
    return reasons


def recommend(facts: Facts, history: History, trend: Trend) -> str:
    """One line: what the numbers suggest doing next, the first that applies of a fixed order.

    A patch that raised the pass count is progress whatever its size: another hypothesis is
    suggested only after patches that changed nothing or made things worse."""
    if facts.verdict is not None:
        return _after_verdict(facts, history)
    criteria = facts.criteria
    worse = [c.name for c in facts.metrics if c.worse]
    if worse:
        return (
            f"bring {', '.join(worse)} back within tolerance of the baseline, or raise "
            "fwloop_metric_tolerance if the change is intended"
        )
    if facts.regressions:
        return f"mend the {len(facts.regressions)} test(s) broken since the baseline first"
    if history.pass_rates[-1] >= criteria.target_pass_rate:
        return "green once: confirming with no new patch"
    if facts.iteration == 1:
        failing = facts.total_counts[-1] - facts.pass_counts[-1]
        return f"baseline: {failing} failing test(s) go to the coder"
    if facts.pass_counts[-1] > facts.pass_counts[-2]:
        return _progress(facts, history)
    if trend == "declining":
        return "declining: the recent patches made things worse; try another root cause"
    # Progress stopped: say where the run is heading if it stays stopped.
    ending = forecast(facts) if history.no_improvement_streak else None
    if ending is not None:
        verdict, at = ending
        unless = f"the run ends {verdict.value} at iteration {at} if nothing improves"
        if verdict is ConvergenceType.PLATEAUED:
            then = (
                "auto mode switches strategy there"
                if facts.mode is ExecutionMode.AUTO
                else "consider --fwloop-mode=auto"
            )
            return f"plateau near: {unless}; {then}"
        if verdict is ConvergenceType.CONVERGED_WITH_IMPROVEMENT:
            return f"stalling: {unless}; its best tree stays one fwloop apply away"
        if verdict is ConvergenceType.FAILURE:
            return f"failing: {unless}; check the build and the environment"
    short = _running_short(facts, history)
    if short is not None:
        return short
    if short_of(history.avg_improvement, criteria.slow_improvement_threshold):
        return "slow: prefer a different hypothesis over another variation of the last patch"
    return "keep iterating"


def _progress(facts: Facts, history: History) -> str:
    """The last patch raised the pass count: how far the target is at the recent pace."""
    short = _running_short(facts, history)
    if short is not None:
        return short
    more = _iterations_needed(facts, history)
    return f"improving: about {more} more iteration(s) to the target at this pace"


def _running_short(facts: Facts, history: History) -> str | None:
    more = _iterations_needed(facts, history)
    left = facts.max_iter - facts.iteration
    if more is None or more <= left:
        return None
    return (
        f"running short: about {more} more iteration(s) at the recent pace, {left} left; "
        f"consider --max-iter={facts.iteration + more}"
    )


def forecast(facts: Facts) -> tuple[ConvergenceType, int] | None:
    """The verdict the rules give within one averaging window if the pass count stays as it
    is, and its iteration: what the run is heading for unless a patch helps."""
    passed, total = list(facts.pass_counts), list(facts.total_counts)
    for ahead in range(1, facts.criteria.avg_improvement_window + 1):
        passed.append(passed[-1])
        total.append(total[-1])
        iteration = facts.iteration + ahead
        verdict, _ = determine_convergence(passed, total, facts.criteria, iteration, facts.max_iter)
        if verdict is not None:
            return verdict, iteration
    return None


def _after_verdict(facts: Facts, history: History) -> str:
    rate = f"{history.pass_rates[-1]:.1%}"
    verdict = facts.verdict
    if verdict is ConvergenceType.SUCCESS:
        return "done: the target is met and held, and nothing is worse than at the baseline"
    assert verdict is not None
    held_back = _held_back(facts, history)
    if held_back:
        # The tests pass: what ended the run short of SUCCESS is what withheld it.
        ended = "out of iterations" if verdict is ConvergenceType.TIMEOUT else verdict.value
        return f"{ended.replace('_', ' ')} at {rate}: {held_back}"
    if verdict is ConvergenceType.PLATEAUED:
        if facts.mode is ExecutionMode.AUTO:
            return f"plateaued at {rate}: auto mode switches strategy while switches are left"
        return f"plateaued at {rate}: consider --fwloop-mode=auto, or a hint by fwloop followup"
    if verdict is ConvergenceType.CONVERGED_WITH_IMPROVEMENT:
        return f"converged at {rate}: keep the gain with fwloop apply; the rest needs a person"
    if verdict is ConvergenceType.FAILURE:
        return f"failed at {rate}: check the build and the environment before another run"
    if history.pass_rates[-1] >= facts.criteria.target_pass_rate:
        return f"out of iterations at {rate} before SUCCESS was confirmed: fwloop resume RUN"
    more = _iterations_needed(facts, history)
    if more is None:
        return f"out of iterations at {rate} with no recent progress: review the failures"
    return f"out of iterations at {rate}: fwloop resume RUN --max-iter {more} continues"


def _held_back(facts: Facts, history: History) -> str:
    """At the target, what withheld SUCCESS and what to do about it ('' when nothing did)."""
    if history.pass_rates[-1] < facts.criteria.target_pass_rate:
        return ""
    worse = [c.name for c in facts.metrics if c.worse]
    if worse:
        return (
            f"the target is met but {', '.join(worse)} stayed worse than at the baseline beyond "
            "tolerance: bring it back, or raise fwloop_metric_tolerance if the change is intended"
        )
    if facts.regressions:
        return (
            f"the target is met but {len(facts.regressions)} test(s) that passed at the "
            f"baseline still fail ({', '.join(facts.regressions[:3])}): mend them"
        )
    return ""


def _iterations_needed(facts: Facts, history: History) -> int | None:
    """Iterations to the target at the recent average pace (and its confirmation), or None
    when there is no pace to extrapolate."""
    total = facts.total_counts[-1]
    gain = history.avg_improvement * total
    if gain <= 0:
        return None
    missing = math.ceil(facts.criteria.target_pass_rate * total - 1e-9) - facts.pass_counts[-1]
    confirmation = facts.criteria.stable_iterations_required - 1
    return max(math.ceil(missing / gain), 0) + confirmation
