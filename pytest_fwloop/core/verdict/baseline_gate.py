"""What SUCCESS needs beyond the target pass rate (seed 001 §5.15): no new regression relative
to the baseline (DESIGN.md §13), no metric worse than its tolerance allows (docs/metrics.md), and
a tree confirmed by runs with no new patch (`fwloop_confirm_runs`).

The loop and `fwloop replay` both judge a SUCCESS verdict through `baseline_gate` and
`unconfirmed`, so the replay withholds it exactly where the loop did.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from pytest_fwloop.core.machine.fsm import IterationKind
from pytest_fwloop.core.records.run_records import MetricChange
from pytest_fwloop.core.suite.history import Measured, baseline_regressions
from pytest_fwloop.core.verdict.metrics import Tolerances, judge, withheld_line


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


def unconfirmed(kinds: Sequence[IterationKind], stable_iterations_required: int) -> str:
    """The text a SUCCESS verdict's reason gains when the tree it judges has not been run
    `stable_iterations_required - 1` times since its patch with no new patch ('' if it has).

    Seed 001's stability rule alone would take two green patched trees in a row for a success
    (a patch that mends a metric the previous green run made worse): the final tree must itself
    be confirmed, whatever made the previous green run not count. `kinds` are the iterations
    whose tests ran, in order, this one last.
    """
    needed = stable_iterations_required - 1
    confirmed = 0
    for kind in reversed(kinds):
        if kind is not IterationKind.CONFIRMATION:
            break
        confirmed += 1
    if confirmed >= needed:
        return ""
    return (
        f"; SUCCESS withheld: this tree has had {confirmed} of {needed} confirmation run(s) "
        "with no new patch"
    )
