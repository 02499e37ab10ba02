"""The run outcomes of DESIGN.md §8 and the exit status each one maps to (DESIGN.md §10)."""

from __future__ import annotations

import enum


class ProviderErrorKind(str, enum.Enum):
    """How a provider call failed; each kind ends a run as the outcome of the same value."""

    PROVIDER_NOT_FOUND = "provider_not_found"
    PROVIDER_PERMISSION_DENIED = "provider_permission_denied"
    PROVIDER_AUTH_ERROR = "provider_auth_error"
    PROVIDER_TIMEOUT = "provider_timeout"
    PROVIDER_NETWORK_ERROR = "provider_network_error"
    PROVIDER_RATE_LIMITED = "provider_rate_limited"
    PROVIDER_QUOTA_EXHAUSTED = "provider_quota_exhausted"
    PROVIDER_BAD_OUTPUT = "provider_bad_output"

    @property
    def transient(self) -> bool:
        """Worth retrying the same provider after a pause; the others fail over at once."""
        return self in _TRANSIENT_KINDS


_TRANSIENT_KINDS = frozenset(
    {
        ProviderErrorKind.PROVIDER_TIMEOUT,
        ProviderErrorKind.PROVIDER_NETWORK_ERROR,
        ProviderErrorKind.PROVIDER_RATE_LIMITED,
    }
)


class Outcome(str, enum.Enum):
    """Every way a loop run can end; `summary.json["outcome"]` is one of these values."""

    SUCCESS = "success"
    CONVERGED_WITH_IMPROVEMENT = "converged_with_improvement"
    PLATEAUED = "plateaued"
    FAILURE = "failure"
    MAX_ITERATIONS_REACHED = "max_iterations_reached"
    CANCELED = "canceled"
    AWAITING_OPERATOR_CONFIRM = "awaiting_operator_confirm"
    DISCUSSION_COMPLETE = "discussion_complete"
    REVIEW_SCHEMA_INVALID = "review_schema_invalid"
    TESTER_SCHEMA_INVALID = "tester_schema_invalid"
    TESTER_COMMAND_BLOCKED = "tester_command_blocked"
    TEST_FAILED = "test_failed"
    REPEATED_TEST_FAILURE = "repeated_test_failure"
    POLICY_VIOLATION = "policy_violation"
    PATCH_APPLY_FAILED = "patch_apply_failed"
    BUILD_FAILED = "build_failed"
    ENV_UNAVAILABLE = "env_unavailable"
    PROVIDER_NOT_FOUND = ProviderErrorKind.PROVIDER_NOT_FOUND.value
    PROVIDER_PERMISSION_DENIED = ProviderErrorKind.PROVIDER_PERMISSION_DENIED.value
    PROVIDER_AUTH_ERROR = ProviderErrorKind.PROVIDER_AUTH_ERROR.value
    PROVIDER_TIMEOUT = ProviderErrorKind.PROVIDER_TIMEOUT.value
    PROVIDER_NETWORK_ERROR = ProviderErrorKind.PROVIDER_NETWORK_ERROR.value
    PROVIDER_RATE_LIMITED = ProviderErrorKind.PROVIDER_RATE_LIMITED.value
    PROVIDER_QUOTA_EXHAUSTED = ProviderErrorKind.PROVIDER_QUOTA_EXHAUSTED.value
    PROVIDER_BAD_OUTPUT = ProviderErrorKind.PROVIDER_BAD_OUTPUT.value
    BUDGET_EXHAUSTED = "budget_exhausted"
    REPEATED_PATCH = "repeated_patch"
    TIMEOUT = "timeout"
    CIRCUIT_BREAKER = "circuit_breaker"
    COLLECTION_ERROR = "collection_error"
    INTERNAL_ERROR = "internal_error"


#: Longest line an internal error is reported by.
CRASH_LINE_CHARS = 300

#: Outcomes that ci_terminate_as="warning" may soften to exit 0 (DESIGN.md §10).
ADVISORY_OUTCOMES = frozenset({Outcome.PLATEAUED, Outcome.CONVERGED_WITH_IMPROVEMENT})


class ExitStatus(enum.IntEnum):
    """pytest's `ExitCode` values (DESIGN.md §10), without importing pytest into the core."""

    OK = 0
    TESTS_FAILED = 1
    INTERRUPTED = 2
    INTERNAL_ERROR = 3
    USAGE_ERROR = 4


def exit_status(outcome: Outcome, *, advisory: bool = False) -> ExitStatus:
    """Map an outcome to pytest's exit code; only a confirmed green tree exits 0."""
    if outcome is Outcome.SUCCESS:
        return ExitStatus.OK
    if outcome is Outcome.CANCELED:
        return ExitStatus.INTERRUPTED
    if outcome is Outcome.INTERNAL_ERROR:
        return ExitStatus.INTERNAL_ERROR
    if advisory and outcome in ADVISORY_OUTCOMES:
        return ExitStatus.OK
    return ExitStatus.TESTS_FAILED


def describe_crash(exc: BaseException) -> str:
    """An internal error in one bounded line: its type and the first line of its message (a
    jsonschema error's message goes on to quote whole schemas)."""
    lines = str(exc).strip().splitlines()
    text = f"{type(exc).__name__}: {lines[0].strip()}" if lines else type(exc).__name__
    return text if len(text) <= CRASH_LINE_CHARS else text[: CRASH_LINE_CHARS - 1] + "…"
