"""The running state's deadline (seed 001 §4: every state has a timeout).

The controller starts the clock as each state begins; whatever the state waits on (an agent call,
the build, the child pytest, a tester command) asks `remaining()` for its own timeout, so no wait
outlives the state. Time the operator takes to answer a prompt is `paused()` out.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager


class DeadlinePassed(Exception):
    """A wait was cut because its state ran out of time; the controller turns it into the
    `state_timeout` event."""


class StateClock:
    def __init__(self, now: Callable[[], float] = time.monotonic) -> None:
        self._now = now
        self._deadline = float("inf")
        self.limit = float("inf")

    def start(self, seconds: float) -> None:
        self.limit = seconds
        self._deadline = self._now() + seconds

    def now(self) -> float:
        """The clock's time (monotonic seconds): what a run-wide deadline is measured on."""
        return self._now()

    def remaining(self) -> float:
        """Seconds left, never below zero."""
        return max(self._deadline - self._now(), 0.0)

    def expired(self) -> bool:
        return self._now() >= self._deadline

    @contextmanager
    def paused(self) -> Iterator[None]:
        """Time spent inside does not count against the state."""
        started = self._now()
        try:
            yield
        finally:
            self._deadline += self._now() - started
