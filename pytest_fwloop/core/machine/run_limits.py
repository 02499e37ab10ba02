"""The run's own limits (seed 001 §5.17, §6.1; DESIGN.md §15), as plain decisions.

Beside each state's timeout, a whole run has a time limit (`--fwloop-timeout`, the seed's
`timeout_minutes`) and a circuit breaker: a coder whose patches keep being rolled back, or keep
breaking tests that passed, is stopped after `fwloop_circuit_breaker` of either, whatever the
convergence rules would still allow.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence


def circuit_breaker(
    rolled_back: int, regressions: Mapping[str, Sequence[str]], threshold: int
) -> str | None:
    """Why the breaker trips (one line with the counts), or None: `rolled_back` patches undone,
    `regressions` the tests each iteration broke (iteration: node ids)."""
    broke = sum(1 for tests in regressions.values() if tests)
    if rolled_back < threshold and broke < threshold:
        return None
    return (
        f"circuit breaker (seed 001 §5.17): {rolled_back} patch(es) rolled back and {broke} "
        f"iteration(s) broke tests that passed before them; fwloop_circuit_breaker = {threshold}"
    )


def run_timeout_reason(limit_s: float, state: str) -> str:
    """The run's reason when its time limit ends it."""
    return (
        f"the run took longer than --fwloop-timeout={limit_s / 60:g} minute(s) (seed 001 "
        f"timeout_minutes); it stopped in {state}"
    )
