"""Metrics beside pass counts (seed 001 §2.1, §5.15 "key metrics meet their thresholds"), pure.

An iteration's metrics are the numbers its tests recorded plus the run's own (`coverage`). SUCCESS
also needs every metric of the baseline to be no worse than its tolerance allows: a change in
the bad direction larger than `tolerance × |baseline value|` (seed 001 §6.1's
`performance_degradation_threshold`, 0.05 by default). docs/metrics.md explains it for users.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from decimal import Decimal

from pytest_fwloop.core.machine.decimals import exact, percent, percent_apart
from pytest_fwloop.core.records.run_records import MetricChange, MetricSeries
from pytest_fwloop.core.suite.history import Measured
from pytest_fwloop.core.suite.results import IterationResults, Metric

#: The key of `fwloop_metric_tolerance`'s default in its parsed mapping (`0.05 boot_ms=0.1`).
ANY_METRIC = "*"
DEFAULT_TOLERANCE = 0.05

Tolerances = Mapping[str, float]


def tolerance_of(name: str, tolerances: Tolerances) -> float:
    """The metric's own tolerance, else the option's default, else seed §6.1's 0.05."""
    return tolerances.get(name, tolerances.get(ANY_METRIC, DEFAULT_TOLERANCE))


def iteration_metrics(results: IterationResults) -> dict[str, Metric]:
    """Every metric of one iteration by name. A name recorded by several tests is the suite's
    one number: the worst value counts, so no order of the tests can hide a bad one."""
    found: dict[str, Metric] = {}
    for metric_map in [results.metrics, *(t.metrics for t in results.tests)]:
        for name, metric in metric_map.items():
            held = found.get(name)
            if held is None or _worse_by(metric, held.value) > 0:
                found[name] = metric
    return found


def _worse_by(metric: Metric, baseline: float) -> Decimal:
    """How much worse `metric` is than `baseline`, in its own unit (negative: better)."""
    moved = exact(metric.value) - exact(baseline)
    return moved if metric.better == "lower" else -moved


def compare(
    baseline: Mapping[str, Metric], current: Mapping[str, Metric], tolerances: Tolerances
) -> list[MetricChange]:
    """Each baseline metric against its value now, by name. A metric the baseline did not have
    is new: shown, never judged. One the baseline had and the iteration lacks is worse: the
    tree no longer shows it holds. The change is judged in decimal, as the values and the
    tolerance are written (0.3 -> 0.33 is 10%, not 10.000000000000009%)."""
    changes = []
    for name in sorted(baseline.keys() | current.keys()):
        before, now = baseline.get(name), current.get(name)
        metric = now or before
        assert metric is not None
        tolerance = tolerance_of(name, tolerances)
        change = None
        worse = before is not None and now is None
        if before is not None and now is not None:
            was = exact(before.value)
            change = float((exact(now.value) - was) / abs(was)) if was else None
            worse = _worse_by(now, before.value) > exact(tolerance) * abs(was)
        changes.append(
            MetricChange(
                name=name,
                better=metric.better,
                baseline=before.value if before else None,
                value=now.value if now else None,
                change=change,
                tolerance=tolerance,
                worse=worse,
            )
        )
    return changes


def judge(measured: Measured, tolerances: Tolerances) -> list[MetricChange]:
    """The latest kept iteration's metrics against the baseline's (first of `measured`)."""
    if not measured:
        return []
    return compare(
        iteration_metrics(measured[0][1]), iteration_metrics(measured[-1][1]), tolerances
    )


def describe(change: MetricChange) -> str:
    """`boot_ms 412 -> 460 (+11.7%)`: a change as the terminal and the reasons say it."""
    if change.value is None:
        return f"{change.name} {_number(change.baseline)} -> not measured"
    if change.baseline is None:
        return f"{change.name} {_number(change.value)} (new)"
    if change.baseline == change.value:
        return f"{change.name} {_number(change.value)}"
    moved = ""
    if change.change is not None:
        sign = "-" if change.change < 0 else "+"
        moved = f" ({sign}{percent_apart(abs(change.change), change.tolerance)})"
    return f"{change.name} {_number(change.baseline)} -> {_number(change.value)}{moved}"


def withheld_line(changes: Sequence[MetricChange]) -> str:
    """Why SUCCESS waits for the metrics, naming each worse one and its tolerance."""
    worse = [
        f"{describe(c)}, {c.better} is better, tolerance {percent(c.tolerance)}"
        for c in changes
        if c.worse
    ]
    listed = "; ".join(worse)
    return f"{len(worse)} metric(s) worse than at the baseline beyond their tolerance ({listed})"


def series(attempts: Measured, tolerances: Tolerances) -> dict[str, MetricSeries]:
    """`summary.json["metrics"]`: each metric's value in every iteration that measured it."""
    table: dict[str, MetricSeries] = {}
    for number, results in attempts:
        for name, metric in iteration_metrics(results).items():
            entry = table.setdefault(
                name,
                MetricSeries(better=metric.better, tolerance=tolerance_of(name, tolerances)),
            )
            entry.values[str(number)] = metric.value
    return dict(sorted(table.items()))


def _number(value: float | None) -> str:
    return "-" if value is None else f"{value:g}"
