"""Threshold comparisons on the seed's decimal numbers.

Risk, confidence, budgets and tolerances are decimals a person or a model writes
(`fwloop_max_risk 0.7`, `"risk": 0.7000001`); in binary floating point `0.1 + 0.2 * 3` is
0.7000000000000001, which is over 0.7. A value as written is compared exactly (`over`,
`under`): each float stands for the decimal of its shortest repr, which is the text a JSON
answer or an ini line wrote for any number of up to 15 significant digits, sums are taken in
decimal, and the trace prints the very decimals compared (`written`: `0.7000001 >
0.70`). The convergence checker's rates are exact fractions of their counts
(`verdict/exact_rates.py`); the fitted slope of the iteration's advice, a least-squares fit,
is compared as the trace prints it, rounded half up (`above`, `below`, `percent`), so a
comparison and its line can never disagree. A metric's tolerance is compared exactly
(`exact`, `percent_apart`): a tolerance of 0 means any move the bad way, however small, printed
with as many places as tell it from the tolerance. Pure.
"""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal

#: Places of risk and confidence in the trace (`0.70`).
SCORE_PLACES = 2
#: Places of a rate printed as `12.3%`, and of one printed as `12.34%`.
RATE_PLACES = 3
FINE_RATE_PLACES = 4
#: The most places `percent_apart` prints.
MAX_PLACES = 12


def exact(value: float | Decimal) -> Decimal:
    """The decimal a float stands for: its shortest repr (0.7, not 0.6999999999999999556)."""
    return value if isinstance(value, Decimal) else Decimal(repr(float(value)))


def over(value: float | Decimal, limit: float | Decimal) -> bool:
    """`value > limit`, exactly as the two were written."""
    return exact(value) > exact(limit)


def under(value: float | Decimal, limit: float | Decimal) -> bool:
    """`value < limit`, exactly as the two were written."""
    return exact(value) < exact(limit)


def written(value: float | Decimal, places: int = SCORE_PLACES) -> str:
    """`value` exactly, with at least `places` decimals: `0.70`, `0.7000001`, never rounded."""
    decimal = exact(value)
    if decimal.is_finite() and -int(decimal.as_tuple().exponent) < places:
        decimal = decimal.quantize(Decimal(1).scaleb(-places))
    return f"{decimal:f}"


def as_printed(value: float, places: int) -> Decimal:
    """`value` rounded half up to `places` decimals, from the decimal its float stands for."""
    return exact(value).quantize(Decimal(1).scaleb(-places), ROUND_HALF_UP)


def above(value: float, limit: float, places: int) -> bool:
    """`value > limit` as the two are printed with `places` decimals."""
    return as_printed(value, places) > as_printed(limit, places)


def below(value: float, limit: float, places: int) -> bool:
    """`value < limit` as the two are printed with `places` decimals."""
    return as_printed(value, places) < as_printed(limit, places)


def shown(value: float, places: int = SCORE_PLACES) -> str:
    """`value` as the trace prints it: `0.70`."""
    return f"{as_printed(value, places):f}"


def percent(value: float, places: int = RATE_PLACES) -> str:
    """A rate as the trace prints it, `places` counted on the rate: `70.0%` for 3."""
    return f"{as_printed(value, places) * 100:.{max(places - 2, 0)}f}%"


def percent_apart(value: float, limit: float, places: int = RATE_PLACES) -> str:
    """A rate as `percent` prints it with `places`, and more while that would print it equal
    to `limit` (or to 0) though it is not: `10.04%` beside a tolerance of 10%, not `10.0%`."""
    while places < MAX_PLACES and (
        (as_printed(value, places) == as_printed(limit, places) and exact(value) != exact(limit))
        or (as_printed(value, places) == 0 and exact(value) != 0)
    ):
        places += 1
    return percent(value, places)
