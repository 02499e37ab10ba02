"""When the repair loop stops: the convergence rules of seed 001 §5.19 (DESIGN.md §4).

Everything here is pure arithmetic over the per-iteration `pass_count`/`total_count` history, so
the whole stop decision can be read and property-tested without running a loop. No I/O:
`criteria_file` reads and validates a user's criteria file into a `ConvergenceCriteria`.
"""

from __future__ import annotations

import dataclasses
import enum
import itertools
from fractions import Fraction
from typing import TYPE_CHECKING, Literal

from pytest_fwloop.core.machine.decimals import FINE_RATE_PLACES, percent
from pytest_fwloop.core.verdict import exact_rates as exactly

if TYPE_CHECKING:
    from collections.abc import Sequence


class CriteriaError(Exception):
    """A convergence setting is invalid; the message is one line meant for the user."""


class ConvergenceType(str, enum.Enum):
    """The terminal verdicts of CONVERGENCE_CHECK."""

    SUCCESS = "success"
    CONVERGED_WITH_IMPROVEMENT = "converged_with_improvement"
    PLATEAUED = "plateaued"
    FAILURE = "failure"
    TIMEOUT = "timeout"


class ExecutionMode(str, enum.Enum):
    """How the loop runs; it decides what a plateau leads to."""

    INTERACTIVE = "interactive"
    CI = "ci"
    AUTO = "auto"


class PlateauAction(str, enum.Enum):
    """What `PlateauHandlingStrategy.handle_plateau` asks the loop to do next."""

    HUMAN_REVIEW = "human_review"
    SUCCESS_WITH_WARNING = "success_with_warning"
    FAILURE = "failure"
    STRATEGY_SWITCH = "strategy_switch"


_RATE_FIELDS = (
    "target_pass_rate",
    "failure_rate_threshold",
    "slow_improvement_threshold",
    "plateau_improvement_threshold",
    "stability_delta_threshold",
    "no_improvement_epsilon",
)
_COUNT_FIELDS = (
    "failure_rate_consecutive_limit",
    "avg_improvement_window",
    "min_iterations_for_slow_improvement",
    "min_iterations_for_plateau",
    "stable_iterations_required",
    "consecutive_no_improvement_limit",
)


@dataclasses.dataclass(frozen=True)
class ConvergenceCriteria:
    """The thresholds of seed 001 §5.19.1; the defaults are the seed's `STANDARD_CRITERIA`."""

    target_pass_rate: float = 1.0
    # FAILURE when the failure rate exceeds the threshold this many iterations in a row.
    failure_rate_threshold: float = 0.70
    failure_rate_consecutive_limit: int = 3
    # Average of the last N positive improvement rates: below "slow" is only a signal, below
    # "plateau" ends the loop; each needs a minimum number of iterations so an early lull is not
    # mistaken for the end.
    avg_improvement_window: int = 3
    slow_improvement_threshold: float = 0.05
    plateau_improvement_threshold: float = 0.01
    min_iterations_for_slow_improvement: int = 5
    min_iterations_for_plateau: int = 7
    # A target reached once is not SUCCESS until the pass rate holds over this many iterations.
    stable_iterations_required: int = 2
    stability_delta_threshold: float = 0.02
    # An improvement rate <= epsilon counts as "no improvement" (regressions included).
    no_improvement_epsilon: float = 0.0
    consecutive_no_improvement_limit: int = 2

    def __post_init__(self) -> None:
        for name in _RATE_FIELDS:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise CriteriaError(f"{name}={value!r} is not a number; use a rate from 0.0 to 1.0")
            if not 0.0 <= value <= 1.0:
                raise CriteriaError(
                    f"{name}={value!r} is outside [0, 1]; use a rate from 0.0 to 1.0"
                )
        for name in _COUNT_FIELDS:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise CriteriaError(f"{name}={value!r} is not a count; use an integer >= 1")

    def to_dict(self) -> dict[str, float | int]:
        """The criteria as plain values, in field order, for run files and the decision trace."""
        return {field.name: getattr(self, field.name) for field in dataclasses.fields(self)}


# Seed §6.1 describes its presets with a different (unimplemented) criteria model. Its fields map
# onto §5.19's like this; every field not listed keeps the §5.19 default. §6.1's max_iterations is
# not a convergence criterion here: --max-iter owns it.
#
#   §5.19 field                 ← §6.1 field            strict  balanced  aggressive
#   target_pass_rate            ← target_pass_rate       0.98    0.95      0.90
#   slow_improvement_threshold  ← improvement_threshold  0.03    0.05      0.02
#   stable_iterations_required  ← stability_window       5       3         3 (§6.1 default)
#   stability_delta_threshold   ← stability_threshold    0.03    0.03      0.03 (§6.1 default)
PRESETS: dict[str, ConvergenceCriteria] = {
    "standard": ConvergenceCriteria(),
    "strict": ConvergenceCriteria(
        target_pass_rate=0.98,
        slow_improvement_threshold=0.03,
        stable_iterations_required=5,
        stability_delta_threshold=0.03,
    ),
    "balanced": ConvergenceCriteria(
        target_pass_rate=0.95,
        slow_improvement_threshold=0.05,
        stable_iterations_required=3,
        stability_delta_threshold=0.03,
    ),
    "aggressive": ConvergenceCriteria(
        target_pass_rate=0.90,
        slow_improvement_threshold=0.02,
        stable_iterations_required=3,
        stability_delta_threshold=0.03,
    ),
}


def pass_rate(pass_count: int, total_count: int) -> float:
    """Share of passing tests; an empty run counts as 0% rather than dividing by zero."""
    return pass_count / max(total_count, 1)


def improvement_rate(prev_pass: int, curr_pass: int, prev_total: int) -> float:
    """Growth of the pass count relative to the previous total; negative means a regression."""
    return (curr_pass - prev_pass) / max(prev_total, 1)


def average_improvement_rate(
    pass_counts: Sequence[int], total_counts: Sequence[int], window: int = 3
) -> float:
    """Mean of the last `window` improvement rates, regressions counted as 0: a step back is
    caught by the no-improvement streak, not by dragging the average below the plateau's."""
    return float(exactly.average_improvement(pass_counts, total_counts, window))


def stability_delta(prev_rate: float, curr_rate: float) -> float:
    """How far the pass rate moved between two adjacent iterations."""
    return abs(curr_rate - prev_rate)


def stable_for_last_n_iterations(
    pass_rates: Sequence[float | Fraction], n: int, delta_threshold: float
) -> bool:
    """Whether the last `n` pass rates all lie within `delta_threshold` of their neighbour,
    exactly (49/50 then 50/50 moved 2%). With fewer than `n` results nothing is stable yet,
    which is what makes a green baseline wait for a confirming run when `n` is 2.
    """
    if n < 1:
        raise ValueError(f"stable_for_last_n_iterations: n={n}; use n >= 1")
    if len(pass_rates) < n:
        return False
    tail = pass_rates[len(pass_rates) - n :]
    return not any(
        exactly.exceeds(abs(exactly.fraction(b) - exactly.fraction(a)), delta_threshold)
        for a, b in itertools.pairwise(tail)
    )


def convergence_score(
    curr_pass_rate: float,
    target_pass_rate: float,
    last_stability_delta: float,
    avg_improvement: float,
    criteria: ConvergenceCriteria,
) -> float:
    """A 0–1 display score (seed §5.19.2 item 4): close to target, stable, and slowing down.

    It never decides a stop; it only tells the operator how converged the loop looks.
    """
    eps = 1e-9
    progress = min(1.0, curr_pass_rate / max(target_pass_rate, eps))
    stability = max(0.0, 1.0 - last_stability_delta / max(criteria.stability_delta_threshold, eps))
    slowdown = max(0.0, 1.0 - avg_improvement / max(criteria.slow_improvement_threshold, eps))
    return 0.5 * progress + 0.3 * stability + 0.2 * slowdown


def _streak_from_tail(flags: Sequence[bool]) -> int:
    """Length of the run of True values at the end of `flags`."""
    streak = 0
    for flag in reversed(flags):
        if not flag:
            break
        streak += 1
    return streak


def _pass_rates(pass_counts: Sequence[int], total_counts: Sequence[int]) -> list[float]:
    """The pass rate of every iteration, after checking the history is one the loop can produce."""
    if not pass_counts or not total_counts:
        raise ValueError("convergence: no iteration results yet; record at least one run")
    if len(pass_counts) != len(total_counts):
        raise ValueError(
            f"convergence: {len(pass_counts)} pass counts but {len(total_counts)} total counts; "
            "record both for every iteration"
        )
    rates: list[float] = []
    for index, (passed, total) in enumerate(zip(pass_counts, total_counts, strict=True), start=1):
        if not 0 <= passed <= total:
            raise ValueError(
                f"convergence: result {index} has pass_count={passed}, total_count={total}; "
                "need 0 <= pass_count <= total_count"
            )
        rates.append(pass_rate(passed, total))
    return rates


@dataclasses.dataclass(frozen=True)
class History:
    """What the rules read off a history of counts (`read_history`)."""

    pass_rates: list[float]
    avg_improvement: float
    last_delta: float  # how far the pass rate moved in the last iteration
    is_stable: bool
    # Iterations in a row, the last included: failure rate over the threshold; no improvement.
    high_failure_streak: int
    no_improvement_streak: int
    score: float  # `convergence_score`, for display


def read_history(
    pass_counts: Sequence[int], total_counts: Sequence[int], criteria: ConvergenceCriteria
) -> History:
    """The history's rates, averages and streaks, after checking it is one the loop can make."""
    rates = _pass_rates(pass_counts, total_counts)
    exact = exactly.pass_rates(pass_counts, total_counts)
    average = average_improvement_rate(pass_counts, total_counts, criteria.avg_improvement_window)
    delta = stability_delta(rates[-2], rates[-1]) if len(rates) >= 2 else 0.0
    return History(
        pass_rates=rates,
        avg_improvement=average,
        last_delta=delta,
        score=convergence_score(rates[-1], criteria.target_pass_rate, delta, average, criteria),
        is_stable=stable_for_last_n_iterations(
            exact, criteria.stable_iterations_required, criteria.stability_delta_threshold
        ),
        high_failure_streak=_streak_from_tail(
            [exactly.exceeds(1 - rate, criteria.failure_rate_threshold) for rate in exact]
        ),
        no_improvement_streak=_streak_from_tail(
            [
                not exactly.exceeds(step, criteria.no_improvement_epsilon)
                for step in exactly.improvements(pass_counts, total_counts)
            ]
        ),
    )


def determine_convergence(
    pass_counts: Sequence[int],
    total_counts: Sequence[int],
    criteria: ConvergenceCriteria,
    current_iteration: int,
    max_iterations: int,
) -> tuple[ConvergenceType | None, str]:
    """Apply seed 001 §5.19.2 item 5 to the history; None means iterate again.

    `current_iteration` is the number of the iteration just completed. The rules are tried in the
    seed's order and the first that holds wins; the reason carries the numbers that decided it.
    Rates meet thresholds as exact fractions of their counts (`exact_rates`).
    """
    history = read_history(pass_counts, total_counts, criteria)
    curr_pass_rate = history.pass_rates[-1]
    rates = exactly.pass_rates(pass_counts, total_counts)
    exact_rate, curr_failure_rate = rates[-1], 1 - rates[-1]

    # Checked before anything else so that no combination of thresholds can loop forever.
    if current_iteration >= max_iterations:
        return (
            ConvergenceType.TIMEOUT,
            f"TIMEOUT: current_iteration={current_iteration} >= max_iterations={max_iterations}",
        )

    last_delta = abs(rates[-1] - rates[-2]) if len(rates) >= 2 else Fraction(0)
    avg_improvement = exactly.average_improvement(
        pass_counts, total_counts, criteria.avg_improvement_window
    )
    high_failure_streak = history.high_failure_streak
    failure_shown = exactly.shown(curr_failure_rate, criteria.failure_rate_threshold)
    no_improvement_streak = history.no_improvement_streak
    target = criteria.target_pass_rate

    stable_at = criteria.stability_delta_threshold
    if not exactly.short_of(exact_rate, target) and history.is_stable:
        return (
            ConvergenceType.SUCCESS,
            f"SUCCESS: pass_rate={curr_pass_rate:.1%} >= target={target:.1%} "
            f"&& stable(last {criteria.stable_iterations_required}) "
            f"delta={exactly.shown(last_delta, stable_at, FINE_RATE_PLACES)} "
            f"<= {percent(stable_at, FINE_RATE_PLACES)}",
        )

    if high_failure_streak >= criteria.failure_rate_consecutive_limit:
        return (
            ConvergenceType.FAILURE,
            f"FAILURE: failure_rate={failure_shown} "
            f"> threshold={percent(criteria.failure_rate_threshold)} "
            f"for {high_failure_streak} consecutive iterations "
            f"(limit={criteria.failure_rate_consecutive_limit})",
        )

    if (
        exactly.exceeds(curr_failure_rate, criteria.failure_rate_threshold)
        and no_improvement_streak >= criteria.consecutive_no_improvement_limit
    ):
        return (
            ConvergenceType.FAILURE,
            f"FAILURE: failure_rate={failure_shown} "
            f"> threshold={percent(criteria.failure_rate_threshold)} "
            f"&& no_improvement_streak={no_improvement_streak} "
            f">= {criteria.consecutive_no_improvement_limit}",
        )

    plateau_at = criteria.plateau_improvement_threshold
    if current_iteration >= criteria.min_iterations_for_plateau and exactly.short_of(
        avg_improvement, plateau_at
    ):
        return (
            ConvergenceType.PLATEAUED,
            f"PLATEAUED: avg_improvement="
            f"{exactly.shown(avg_improvement, plateau_at, FINE_RATE_PLACES)} "
            f"< {percent(criteria.plateau_improvement_threshold, FINE_RATE_PLACES)} "
            f"&& current_iteration={current_iteration} >= {criteria.min_iterations_for_plateau}",
        )

    # Not at target, but the current result is the best seen and it has stopped moving: the
    # present strategy has given what it can.
    best_pass_count = max(pass_counts)
    slow = exactly.short_of(avg_improvement, criteria.slow_improvement_threshold)
    avg = exactly.shown(avg_improvement, criteria.slow_improvement_threshold, FINE_RATE_PLACES)
    slow_at = percent(criteria.slow_improvement_threshold, FINE_RATE_PLACES)
    if (
        exactly.short_of(exact_rate, target)
        and pass_counts[-1] == best_pass_count
        and current_iteration >= criteria.min_iterations_for_slow_improvement
        and slow
        and no_improvement_streak >= criteria.consecutive_no_improvement_limit
    ):
        return (
            ConvergenceType.CONVERGED_WITH_IMPROVEMENT,
            f"CONVERGED_WITH_IMPROVEMENT: best_pass_count={best_pass_count}, "
            f"pass_rate={curr_pass_rate:.1%} < target={target:.1%}, "
            f"avg_improvement={avg} < {slow_at}, no_improvement_streak={no_improvement_streak}",
        )

    # Slow progress is a hint to change strategy, never a reason to stop on its own.
    if current_iteration >= criteria.min_iterations_for_slow_improvement and slow:
        return (
            None,
            f"slow improvement: avg_improvement={avg} < {slow_at} "
            f"&& current_iteration={current_iteration} "
            f">= {criteria.min_iterations_for_slow_improvement} "
            "(consider a different strategy; iterating on)",
        )

    return (
        None,
        f"continue: pass_rate={curr_pass_rate:.1%} (target={target:.1%}), "
        f"avg_improvement={history.avg_improvement:.2%}, last_delta={history.last_delta:.2%}, "
        f"high_failure_streak={high_failure_streak}, "
        f"no_improvement_streak={no_improvement_streak}, "
        f"iteration {current_iteration} of {max_iterations}",
    )


class ConvergenceChecker:
    """Accumulates one result per iteration and judges the history with `determine_convergence`."""

    def __init__(self, criteria: ConvergenceCriteria) -> None:
        self.criteria = criteria
        self._pass_counts: list[int] = []
        self._total_counts: list[int] = []

    @property
    def pass_counts(self) -> tuple[int, ...]:
        return tuple(self._pass_counts)

    @property
    def total_counts(self) -> tuple[int, ...]:
        return tuple(self._total_counts)

    def add_iteration_result(self, pass_count: int, total_count: int) -> None:
        """Record the counts of the iteration just run (DESIGN.md §4 says what they include)."""
        _pass_rates([pass_count], [total_count])
        self._pass_counts.append(pass_count)
        self._total_counts.append(total_count)

    def check_convergence(
        self, current_iteration: int, max_iterations: int
    ) -> tuple[bool, ConvergenceType | None, str]:
        """Return (stop, verdict, reason); stop is True exactly when there is a verdict."""
        verdict, reason = determine_convergence(
            self._pass_counts,
            self._total_counts,
            self.criteria,
            current_iteration,
            max_iterations,
        )
        return verdict is not None, verdict, reason

    def score(self) -> float:
        """The current `convergence_score`, for progress lines."""
        return read_history(self._pass_counts, self._total_counts, self.criteria).score


@dataclasses.dataclass(frozen=True)
class PlateauHandlingStrategy:
    """What a PLATEAUED verdict leads to in each execution mode (seed 001 §5.19.1).

    Deliberate deviation from the seed: `ci_terminate_as` defaults to "failure", not "warning",
    so that a plateaued red suite cannot pass a CI pipeline (DESIGN.md §10). Teams running the loop
    as advisory opt in to "warning". `ci_notification_channels` come from `fwloop_notify` and are
    told of every plateau and every end, in any mode (`loop/notify.py`).
    """

    mode: ExecutionMode = ExecutionMode.INTERACTIVE
    ci_auto_terminate: bool = True
    ci_terminate_as: Literal["warning", "failure"] = "failure"
    ci_max_wait_seconds: int = 0
    ci_notification_channels: tuple[str, ...] = dataclasses.field(default_factory=tuple)
    auto_retry_with_different_strategy: bool = False
    auto_max_strategy_switches: int = 2
    auto_fallback_strategies: tuple[str, ...] = dataclasses.field(default_factory=tuple)

    def __post_init__(self) -> None:
        if self.ci_terminate_as not in ("warning", "failure"):
            raise CriteriaError(
                f"ci_terminate_as={self.ci_terminate_as!r} is not allowed; "
                "use 'warning' or 'failure'"
            )
        if self.ci_max_wait_seconds < 0:
            raise CriteriaError(
                f"ci_max_wait_seconds={self.ci_max_wait_seconds} is negative; use 0 or more"
            )
        if self.auto_max_strategy_switches < 0:
            raise CriteriaError(
                f"auto_max_strategy_switches={self.auto_max_strategy_switches} is negative; "
                "use 0 or more"
            )

    def handle_plateau(
        self, pass_rate: float, strategy_switch_count: int
    ) -> tuple[PlateauAction, str]:
        """Decide the next step after PLATEAUED, given how many strategy switches were spent."""
        if self.mode is ExecutionMode.INTERACTIVE:
            return (
                PlateauAction.HUMAN_REVIEW,
                f"plateau at pass rate {pass_rate:.1%}; waiting for the operator",
            )
        if self.mode is ExecutionMode.CI:
            # CI cannot wait for a person, so the plateau ends the run as configured.
            if self.ci_terminate_as == "warning":
                return (
                    PlateauAction.SUCCESS_WITH_WARNING,
                    f"ci mode: plateau at pass rate {pass_rate:.1%} ends as a warning",
                )
            return (
                PlateauAction.FAILURE,
                f"ci mode: plateau at pass rate {pass_rate:.1%} ends as a failure",
            )
        if strategy_switch_count < self.auto_max_strategy_switches:
            return (
                PlateauAction.STRATEGY_SWITCH,
                f"auto mode: plateau at pass rate {pass_rate:.1%}; switching strategy "
                f"({strategy_switch_count + 1} of {self.auto_max_strategy_switches})",
            )
        return (
            PlateauAction.FAILURE,
            f"auto mode: plateau at pass rate {pass_rate:.1%} after "
            f"{strategy_switch_count} strategy switches (limit "
            f"{self.auto_max_strategy_switches})",
        )
