"""The whole run's time limit (`--fwloop-timeout`, seed 001 §6.1 `timeout_minutes`).

Checked between states, and every wait on the outside (an agent, the build, the tests) is cut at
it as at its state's own timeout; bookkeeping states are never cut (a cut git operation could
leave the tree half restored), so the run ends after the one in progress.
"""

from __future__ import annotations

from pytest_fwloop.core.machine.fsm import LoopEvent
from pytest_fwloop.core.machine.outcomes import Outcome
from pytest_fwloop.core.machine.run_limits import run_timeout_reason
from pytest_fwloop.core.machine.state_clock import StateClock
from pytest_fwloop.loop.state import LoopState, Step


class RunDeadline:
    def __init__(self, clock: StateClock, limit_s: float | None) -> None:
        self.clock = clock
        self.limit_s = limit_s
        self.at = None if limit_s is None else clock.now() + limit_s

    def cap(self, seconds: float) -> float:
        """A wait's timeout, cut to what is left of the run."""
        return seconds if self.at is None else min(seconds, max(self.at - self.clock.now(), 0.0))

    def passed(self, loop: LoopState) -> Step | None:
        """The run's end (outcome timeout) once the limit has passed, else None."""
        if self.at is None or self.limit_s is None or self.clock.now() < self.at:
            return None
        loop.outcome = Outcome.TIMEOUT
        loop.final_reason = run_timeout_reason(self.limit_s, loop.state.value)
        return Step(LoopEvent.RUN_TIMEOUT, loop.final_reason)
