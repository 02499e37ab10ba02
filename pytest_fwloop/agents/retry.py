"""When a failed provider call is worth repeating, and after how long (DESIGN.md §5).

Transient errors (timeout, network, rate limit) retry the same provider with exponential backoff
and full jitter, never sooner than the provider's Retry-After; the retries are bounded per
provider in count and per ask in seconds of pausing. Everything else fails over at once. Pure:
the caller sleeps, so tests never wait.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import datetime, timezone
from email.utils import parsedate_to_datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable

    from pytest_fwloop.agents.errors import ProviderError


@dataclass(frozen=True)
class RetryPolicy:
    """`max_retries` more calls to one provider per ask after a transient error; pauses drawn
    from [0, min(max_delay, base_delay * 2**(n-1))] (full jitter) or Retry-After if longer; all
    pauses of one ask together at most `max_total` seconds."""

    max_retries: int = 3
    base_delay: float = 1.0
    max_delay: float = 30.0
    max_total: float = 120.0

    def __post_init__(self) -> None:
        for name in ("max_retries", "base_delay", "max_delay", "max_total"):
            if getattr(self, name) < 0:
                raise ValueError(f"fwloop: retry {name} must be >= 0, got {getattr(self, name)}")

    def delay(self, retry: int, retry_after: float | None, draw: Callable[[], float]) -> float:
        """The pause before retry number `retry` (1-based); `draw` gives a number in [0, 1)."""
        ceiling = min(self.max_delay, self.base_delay * 2.0 ** (retry - 1))
        # Full jitter spreads the retries of many clients; Retry-After is a floor, not a hint.
        return max(ceiling * draw(), retry_after or 0.0)


@dataclass(frozen=True)
class RetryDecision:
    """Retry after `delay` seconds, or (delay None) fail over; `reason` says which and why."""

    delay: float | None
    reason: str


class RetryBudget:
    """The retries of one ask: the count per provider is the caller's, the seconds are kept here."""

    def __init__(self, policy: RetryPolicy, draw: Callable[[], float] = random.random) -> None:
        self.policy = policy
        self.paused = 0.0
        self._draw = draw

    def decide(self, error: ProviderError, retries: int) -> RetryDecision:
        """Whether to call the same provider again after `error`, its `retries` so far counted."""
        policy = self.policy
        if not error.kind.transient:
            return RetryDecision(None, f"{error.kind.value} is not transient")
        if retries >= policy.max_retries:
            return RetryDecision(None, f"{retries} of {policy.max_retries} retries used")
        delay = policy.delay(retries + 1, error.retry_after, self._draw)
        if self.paused + delay > policy.max_total:
            return RetryDecision(
                None,
                f"a {delay:.3g} s pause would pass the {policy.max_total:g} s retry budget "
                f"({self.paused:.3g} s used)",
            )
        self.paused += delay
        after = f"; Retry-After {error.retry_after:g} s" if error.retry_after is not None else ""
        return RetryDecision(
            delay, f"retry {retries + 1} of {policy.max_retries} after {delay:.3g} s{after}"
        )


def parse_retry_after(value: str, now: datetime | None = None) -> float | None:
    """Seconds to wait from a Retry-After value (delta-seconds or HTTP-date); None if unreadable."""
    text = value.strip()
    try:
        seconds = float(text)
    except ValueError:
        try:
            when = parsedate_to_datetime(text)
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:  # RFC 9110 dates are GMT; an obsolete form may lack the zone
            when = when.replace(tzinfo=timezone.utc)
        seconds = (when - (now or datetime.now(timezone.utc))).total_seconds()
    if seconds != seconds:  # NaN
        return None
    return max(seconds, 0.0)
