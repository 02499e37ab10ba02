"""ERROR_RECOVERY as data (seed 001 §4.2, §5.20): per error type, how often to retry, then what.

Pure: the controller raises an `ErrorState` naming where it can resume, this module decides whether
the retry budget allows it. Counts are per iteration, so one bad iteration cannot starve the next.
"""

from __future__ import annotations

from dataclasses import dataclass

from pytest_fwloop.core.machine.fsm import ErrorType, LoopEvent
from pytest_fwloop.core.machine.outcomes import Outcome


@dataclass(frozen=True)
class RecoveryRule:
    max_retries: int
    exhausted_outcome: Outcome
    action: str


RULES: dict[ErrorType, RecoveryRule] = {
    ErrorType.BUILD_FAILURE: RecoveryRule(
        2, Outcome.BUILD_FAILED, "roll back the patch and send the diagnostics to the coder"
    ),
    ErrorType.TEST_ENV_FAILURE: RecoveryRule(
        2, Outcome.ENV_UNAVAILABLE, "reset the environment and rerun the affected tests"
    ),
    ErrorType.TIMEOUT: RecoveryRule(1, Outcome.FAILURE, "retry the state once"),
    ErrorType.ARTIFACT_MISSING: RecoveryRule(1, Outcome.FAILURE, "rerun the tests to re-collect"),
    ErrorType.MODEL_FAILURE: RecoveryRule(2, Outcome.FAILURE, "ask the coder again"),
    ErrorType.POLICY_VIOLATION: RecoveryRule(
        2, Outcome.POLICY_VIOLATION, "regenerate under tighter constraints"
    ),
    ErrorType.PATCH_APPLY_FAILURE: RecoveryRule(
        2, Outcome.PATCH_APPLY_FAILED, "send git's message to the coder and regenerate"
    ),
    ErrorType.FIRMWARE_NO_BOOT: RecoveryRule(
        2, Outcome.ENV_UNAVAILABLE, "roll back; tell the coder the firmware no longer boots"
    ),
    ErrorType.COLLECTION_ERROR: RecoveryRule(
        0, Outcome.COLLECTION_ERROR, "the suite itself is broken; fix it by hand (no agent call)"
    ),
    ErrorType.TEST_COMMAND_FAILURE: RecoveryRule(
        0, Outcome.REPEATED_TEST_FAILURE, "the cause lies outside the coder's patch (seed 004)"
    ),
}


@dataclass(frozen=True)
class ErrorState:
    """One classified error: where the loop may resume, and the outcome if it may not.

    `terminal_outcome` is set for errors no retry can mend (a missing provider, a reviewer that
    cannot produce valid JSON twice): they end the run at once.
    """

    type: ErrorType
    reason: str
    resume_event: LoopEvent
    terminal_outcome: Outcome | None = None


@dataclass(frozen=True)
class RecoveryDecision:
    event: LoopEvent
    reason: str
    outcome: Outcome | None


def decide(error: ErrorState, retries_so_far: int) -> RecoveryDecision:
    """Resume if the type's budget allows another retry, else stop with the type's outcome."""
    if error.terminal_outcome is not None:
        return RecoveryDecision(LoopEvent.UNRECOVERABLE, error.reason, error.terminal_outcome)
    rule = RULES[error.type]
    if retries_so_far < rule.max_retries:
        return RecoveryDecision(
            error.resume_event,
            f"{error.type.value}: {error.reason}; retry {retries_so_far + 1}/{rule.max_retries}"
            f" ({rule.action})",
            None,
        )
    spent = (
        f"{rule.max_retries} retries exhausted"
        if rule.max_retries
        else f"not retried: {rule.action}"
    )
    return RecoveryDecision(
        LoopEvent.UNRECOVERABLE,
        f"{error.type.value}: {error.reason}; {spent}",
        rule.exhausted_outcome,
    )
