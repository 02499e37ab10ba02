"""The convergence checker's rates as the exact fractions of their counts (issue 39).

A pass rate is `pass_count / total_count`: 7/10 is 0.7 exactly, though `1 - 0.7` is
0.30000000000000004 in binary floating point. Every rule of `convergence` meets its threshold
(a decimal as the criteria wrote it) with these fractions, and the reason prints each rate with
as many places as tell it from its threshold (`70.04% > 70.0%`, never `70.0% > 70.0%`). Pure.
"""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction
from typing import TYPE_CHECKING

from pytest_fwloop.core.machine.decimals import RATE_PLACES, exact, percent_apart

if TYPE_CHECKING:
    from collections.abc import Sequence


def fraction(value: float | Fraction) -> Fraction:
    """`value` exactly: a fraction as it is, a float as the decimal it was written as."""
    return value if isinstance(value, Fraction) else Fraction(exact(value))


def pass_rates(pass_counts: Sequence[int], total_counts: Sequence[int]) -> list[Fraction]:
    """Each iteration's pass rate; an empty run is 0%."""
    return [Fraction(p, max(t, 1)) for p, t in zip(pass_counts, total_counts, strict=True)]


def improvements(pass_counts: Sequence[int], total_counts: Sequence[int]) -> list[Fraction]:
    """Each iteration's growth of the pass count over the previous total (negative: a step
    back), from the second iteration on."""
    return [
        Fraction(pass_counts[i] - pass_counts[i - 1], max(total_counts[i - 1], 1))
        for i in range(1, len(pass_counts))
    ]


def average_improvement(
    pass_counts: Sequence[int], total_counts: Sequence[int], window: int
) -> Fraction:
    """The mean of the last `window` improvements, steps back counted as 0."""
    steps = improvements(pass_counts, total_counts)[-window:] if window > 0 else []
    return sum((max(Fraction(0), step) for step in steps), Fraction(0)) / max(len(steps), 1)


def exceeds(value: float | Fraction, limit: float) -> bool:
    """`value > limit`, exactly."""
    return fraction(value) > fraction(limit)


def short_of(value: float | Fraction, limit: float) -> bool:
    """`value < limit`, exactly."""
    return fraction(value) < fraction(limit)


def shown(value: Fraction, limit: float, places: int = RATE_PLACES) -> str:
    """`value` as a percentage beside `limit`, with more places while the two would print
    alike though they differ."""
    decimal = Decimal(value.numerator) / Decimal(value.denominator)
    return percent_apart(float(decimal), limit, places)
