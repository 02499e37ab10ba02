"""Every threshold comparison on the seed's decimal numbers, at its boundary (issues 34, 39).

Each case below was decided by binary float arithmetic before issue 34: `0.1 + 0.2 x 3` is
0.7000000000000001, so a trace said `0.70 > fwloop_max_risk 0.70`. Issue 34 compared the numbers
as printed, so 0.7000001 passed a limit of 0.70; now a value as written (a risk, a confidence,
a cost) is compared exactly, sums taken in decimal, and the trace prints the exact numbers;
rates of counts are compared as exact fractions (`core/machine/decimals.py`,
`core/verdict/exact_rates.py`).
"""

from __future__ import annotations

from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loopkit import coder_answer
from pytest_fwloop.core.gate.gate_rules import review_refusal
from pytest_fwloop.core.gate.risky import raised_risk
from pytest_fwloop.core.machine.agent_budget import Budget, Usage
from pytest_fwloop.core.machine.decimals import above, below, percent, percent_apart, shown
from pytest_fwloop.core.records.agent_protocol import CoderAnswer, ReviewerAnswer, RiskyChange
from pytest_fwloop.core.suite.results import Metric
from pytest_fwloop.core.verdict.coder_confidence import judge
from pytest_fwloop.core.verdict.convergence import (
    ConvergenceCriteria,
    determine_convergence,
    stable_for_last_n_iterations,
)
from pytest_fwloop.core.verdict.iteration_advice import fitted_trend
from pytest_fwloop.core.verdict.metrics import compare, describe

pure = settings(deadline=None)
#: A decimal as a person writes it for a risk, a confidence or a limit: 0.00 to 1.00.
hundredths = st.integers(0, 100).map(lambda n: n / 100)


def risky(count: int) -> list[RiskyChange]:
    return [
        RiskyChange(
            file="fw/a.c", hunk="@@", line="+x", pattern=f"p{i}", matched="x", boot_critical=False
        )
        for i in range(count)
    ]


def review(risk: float) -> ReviewerAnswer:
    return ReviewerAnswer(decision="approve", must_fix=[], risk=risk, summary="ok")


def test_the_helpers_round_half_up_from_the_written_decimal() -> None:
    assert shown(0.1 + 0.2 * 3) == "0.70"
    assert shown(0.125) == "0.13"  # the float 0.125 is exact; half up, not half even
    assert not above(0.1 + 0.2 * 3, 0.7, 2)
    assert above(0.71, 0.7, 2)
    assert not below(0.599, 0.6, 2)
    assert percent(0.7) == "70.0%"
    assert percent(0.02 + 1e-17, 4) == "2.00%"
    assert percent_apart(0.1004, 0.1) == "10.04%"
    assert percent_apart(0.0004, 0.0) == "0.04%"


def test_a_risk_at_the_limit_is_allowed_as_docs_security_promises() -> None:
    """docs/security.md: 'a reviewer's 0.1 with three patterns matched is 0.7, still allowed'."""
    risk, said = raised_risk(0.1, risky(3))
    assert risk == Decimal("0.7")
    assert said == "0.10 + 0.2 x 3 risky pattern(s) (p0, p1, p2) = 0.70"
    assert review_refusal(review(0.1), 0, 3, 0.7, 2, risky(3)) is None
    refused = review_refusal(review(0.11), 0, 3, 0.7, 2, risky(3))
    assert refused is not None
    assert refused.error is not None
    assert "= 0.71 > fwloop_max_risk 0.70" in refused.error.reason


@pure
@given(hundredths, st.integers(0, 5), hundredths)
def test_the_risk_bound_is_decimal_arithmetic(risk: float, patterns: int, limit: float) -> None:
    exact = min(Decimal(repr(risk)) + Decimal("0.2") * patterns, Decimal(1))
    refused = review_refusal(review(risk), 0, 3, limit, 2, risky(patterns))
    assert (refused is not None) == (exact > Decimal(repr(limit)))
    if refused is not None and refused.error is not None:
        said, bound = refused.error.reason.rsplit(" > fwloop_max_risk ", 1)
        assert Decimal(said.rsplit(" ", 1)[-1]) > Decimal(bound)  # never "0.70 > 0.70"


@pytest.mark.parametrize(
    ("confidence", "status"),
    [
        (0.6, "usable"),
        (0.6000001, "usable"),
        (0.5999999, "low_confidence"),
        (0.599, "low_confidence"),
    ],
)
def test_a_confidence_is_judged_exactly(confidence: float, status: str) -> None:
    """Issue 34 took 0.599 as the `0.60` it prints as; it is below 0.6, as written."""
    fix = coder_answer("")
    fix["analysis"] = {**fix["analysis"], "confidence": confidence}
    answer = CoderAnswer.model_validate(fix)
    assert judge(answer, 0.6, asked_again=False).status == status


def test_a_budget_at_the_limit_is_not_exceeded() -> None:
    spent = Usage()
    for cost in (0.1, 0.2):
        spent.add({"cost_usd": cost})
    assert spent.cost_usd == 0.3  # added in decimal, not 0.30000000000000004
    assert Budget(usd=0.3).overrun(spent) is None
    spent.add({"cost_usd": 0.0001})
    assert Budget(usd=0.3).overrun(spent) == (
        "the agents' reported cost 0.3001 USD exceeds --fwloop-budget-usd=0.3 after 3 call(s)"
    )


def test_a_pass_rate_that_moved_by_the_threshold_is_stable() -> None:
    """49/50 then 50/50 moved 2%; in floats 2.0000000000000018%, which was not stable."""
    assert stable_for_last_n_iterations([49 / 50, 50 / 50], 2, 0.02)
    verdict, reason = determine_convergence([49, 50], [50, 50], ConvergenceCriteria(), 2, 10)
    assert verdict is not None
    assert verdict.value == "success"
    assert "delta=2.00% <= 2.00%" in reason
    assert not stable_for_last_n_iterations([48 / 50, 50 / 50], 2, 0.02)


def test_an_average_improvement_at_the_slow_threshold_is_not_slow() -> None:
    """Improvements 0, 4 and 11 of 100 average 5%; in floats 4.9999999999999996%, which said
    `slow improvement: avg_improvement=5.00% < 5.00%`."""
    criteria = ConvergenceCriteria()
    verdict, reason = determine_convergence([60, 60, 60, 64, 75], [100] * 5, criteria, 5, 10)
    assert verdict is None
    assert reason.startswith("continue: ")
    _, slower = determine_convergence([60, 60, 60, 64, 74], [100] * 5, criteria, 5, 10)
    assert slower.startswith("slow improvement: avg_improvement=4.67% < 5.00%")


def test_a_failure_rate_at_the_threshold_is_not_high() -> None:
    criteria = ConvergenceCriteria()
    assert determine_convergence([30, 30, 30], [100] * 3, criteria, 3, 10)[0] is None
    verdict, reason = determine_convergence([29, 29, 29], [100] * 3, criteria, 3, 10)
    assert verdict is not None
    assert verdict.value == "failure"
    assert reason.startswith("FAILURE: failure_rate=71.0% > threshold=70.0% for 3")


def test_a_slope_at_the_threshold_is_not_improving() -> None:
    """A slope of exactly 5% an iteration fitted as 5.000000000000001%: `improving`."""
    assert fitted_trend([0.7, 0.75, 0.8, 0.85], 4, 0.05)[0] == "mixed"
    assert fitted_trend([0.7, 0.75, 0.8, 0.86], 4, 0.05)[0] == "improving"
    assert fitted_trend([0.85, 0.8, 0.75, 0.7], 4, 0.05)[0] == "mixed"


def test_a_metric_moved_by_its_tolerance_is_not_worse() -> None:
    """0.3 -> 0.33 is 10%; in floats 10.000000000000009%, which was worse than 10%."""
    baseline = {"ratio": Metric(value=0.3, better="lower")}
    [at] = compare(baseline, {"ratio": Metric(value=0.33, better="lower")}, {"*": 0.1})
    assert not at.worse
    assert describe(at) == "ratio 0.3 -> 0.33 (+10.0%)"
    [over] = compare(baseline, {"ratio": Metric(value=0.33003, better="lower")}, {"*": 0.1})
    assert over.worse
    assert describe(over) == "ratio 0.3 -> 0.33003 (+10.01%)"  # not "+10.0%, tolerance 10.0%"
    drop = {"coverage": Metric(value=80.0, better="higher")}
    [tiny] = compare(drop, {"coverage": Metric(value=79.97, better="higher")}, {"*": 0.0})
    assert tiny.worse  # a tolerance of 0: any move the bad way
    assert describe(tiny) == "coverage 80 -> 79.97 (-0.04%)"


def test_a_failure_rate_just_over_the_threshold_is_high_and_says_by_how_much() -> None:
    """Issue 39: 7004 of 10000 failing is over 70%, though it prints as 70.0%; compared as the
    exact fraction of its counts, and printed with the places that tell it from 70.0%."""
    criteria = ConvergenceCriteria()
    verdict, reason = determine_convergence([2996] * 3, [10000] * 3, criteria, 3, 10)
    assert verdict is not None
    assert verdict.value == "failure"
    assert reason.startswith("FAILURE: failure_rate=70.04% > threshold=70.0% for 3")
    assert determine_convergence([3000] * 3, [10000] * 3, criteria, 3, 10)[0] is None


def test_a_pass_rate_that_moved_just_over_the_threshold_is_not_stable() -> None:
    """2001/100000 is over a stability delta of 2%, though it prints as 2.00%."""
    assert not stable_for_last_n_iterations([0.97999, 1.0], 2, 0.02)
    assert stable_for_last_n_iterations([0.98, 1.0], 2, 0.02)
