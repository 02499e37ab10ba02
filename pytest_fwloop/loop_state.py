"""The loop's per-iteration record and the value each state handler returns."""

from __future__ import annotations

from dataclasses import dataclass, field

from pytest_fwloop.agents.errors import ProviderError
from pytest_fwloop.agents.protocol import MustFix
from pytest_fwloop.fsm import ErrorType
from pytest_fwloop.outcomes import Outcome
from pytest_fwloop.recovery import ErrorState
from pytest_fwloop.results import IterationResults


@dataclass
class Iteration:
    """One pass through the test run, and the patch that led to it."""

    number: int
    kind: str  # "baseline", "patch" or "confirmation"
    patch: str = ""
    patch_summary: str = ""
    checkpoint: str = ""
    results: IterationResults | None = None
    coder_calls: int = 0
    review_rounds: int = 0
    convergence_type: str | None = None
    reason: str = ""
    score: float | None = None
    states: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def pass_count(self) -> int:
        return self.results.pass_count if self.results else 0

    @property
    def total_count(self) -> int:
        return self.results.total_count if self.results else 0


@dataclass(frozen=True)
class Step:
    event: str
    reason: str
    evidence: tuple[str, ...] = ()


@dataclass(frozen=True)
class Verdict:
    """What a step module decided: the event, and what the loop must remember because of it.

    `must_fix` None keeps the current must-fix list; a list replaces it. `diagnostics` None keeps
    the build diagnostics sent to the coder.
    """

    step: Step
    error: ErrorState | None = None
    must_fix: list[MustFix] | None = None
    diagnostics: str | None = None
    constraints: list[str] | None = None
    note: str = ""


def failed(
    error: ErrorState,
    event: str,
    must_fix: list[MustFix] | None = None,
    constraints: list[str] | None = None,
) -> Verdict:
    """The Verdict of a handler that hands `error` to ERROR_RECOVERY."""
    return Verdict(
        Step(event, f"{error.type.value}: {error.reason}"),
        error=error,
        must_fix=must_fix,
        constraints=constraints,
    )


def provider_error(role: str, exc: ProviderError) -> ErrorState:
    """A provider that failed for good: its kind is the outcome if recovery gives up."""
    return ErrorState(
        ErrorType.MODEL_FAILURE,
        f"{role} provider {exc.provider}: {exc.message}",
        "recover_to_analysis",
        terminal_outcome=Outcome(exc.kind.value),
    )
