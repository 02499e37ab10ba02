"""What SUCCESS needs beyond the target pass rate (seed 001 §5.15): no new regression relative
to the baseline (DESIGN.md §13), and no metric worse than its tolerance allows (docs/metrics.md).

The loop and `fwloop replay` both judge a SUCCESS verdict through `baseline_gate`, so the replay
withholds it exactly where the loop did.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pytest_fwloop.core.history import Measured, baseline_regressions
from pytest_fwloop.core.metrics import Tolerances, judge, withheld_line
from pytest_fwloop.core.records import MetricChange


@dataclass(frozen=True)
class BaselineGate:
    """The latest kept iteration against the baseline."""

    #: Tests that passed at the baseline and do not pass now.
    regressions: list[str]
    #: Every metric against the baseline (judged only when tolerances were given).
    metrics: list[MetricChange] = field(default_factory=list)

    @property
    def holds(self) -> bool:
        return not self.regressions and not any(c.worse for c in self.metrics)

    def withheld(self) -> str:
        """The text a withheld SUCCESS verdict's reason gains, naming what and by how much."""
        parts = []
        if self.regressions:
            parts.append(
                f"{len(self.regressions)} test(s) that passed at the baseline fail now "
                f"({', '.join(self.regressions[:3])})"
            )
        if any(c.worse for c in self.metrics):
            parts.append(withheld_line(self.metrics))
        return "".join(f"; SUCCESS withheld: {part}" for part in parts)


def baseline_gate(measured: Measured, tolerances: Tolerances | None) -> BaselineGate:
    """`tolerances` None (a record older than metrics) leaves the metrics unjudged."""
    metrics = judge(measured, tolerances) if tolerances is not None else []
    return BaselineGate(baseline_regressions(measured), metrics)
