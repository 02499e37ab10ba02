"""How a provider call can fail (DESIGN.md §5); each kind is also a run outcome of §8, and
both are named once, in `core/machine/outcomes.py`."""

from __future__ import annotations

import re
from dataclasses import dataclass

from pytest_fwloop.core.machine.outcomes import ProviderErrorKind as ProviderErrorKind


@dataclass(frozen=True)
class Conversed:
    """What a model call went through besides its text: the read-only tool calls the model made
    (`openai:`), whether tools were offered at all, and the request as it was sent when the
    provider cut it to the model's window (None: as asked)."""

    tool_calls: tuple[dict[str, object], ...] = ()
    tools_offered: bool = False
    sent: dict[str, object] | None = None


class ProviderError(Exception):
    """One provider call failed; `provider` is its spec, `message` one line for the user.

    `stderr`, `usage` and `conversation` keep what the call still produced (diagnostics,
    tokens and cost a failed call was billed, the tool calls it made), so the run directory and
    the budget see failed calls too.
    """

    def __init__(
        self,
        kind: ProviderErrorKind,
        provider: str,
        message: str,
        *,
        retry_after: float | None = None,
        stderr: str = "",
        usage: dict[str, float] | None = None,
        conversation: Conversed | None = None,
    ) -> None:
        # Messages quote stderr and model output; the one-line promise is kept here, once.
        self.message = " ".join(message.split())
        super().__init__(f"{provider}: {self.message}")
        self.kind = kind
        self.provider = provider
        self.retry_after = retry_after
        self.stderr = stderr
        self.usage = dict(usage or {})
        self.conversation = conversation or Conversed()


class AnswerInvalid(ProviderError):
    """The provider answered, but not with JSON that passes the schema, even when re-asked."""

    def __init__(self, provider: str, message: str, errors: list[str], raw: str) -> None:
        super().__init__(ProviderErrorKind.PROVIDER_BAD_OUTPUT, provider, message)
        self.errors = errors
        self.raw = raw


class SpecError(ValueError):
    """A provider spec that cannot work (unknown name, missing directory); one line."""


# Checked in order on the error text a CLI or server gave; first match wins. Credentials come
# first: "401 … rate limit docs" is still an auth problem, and retrying it cannot help.
_FAILURE_PATTERNS: tuple[tuple[ProviderErrorKind, re.Pattern[str]], ...] = (
    (
        ProviderErrorKind.PROVIDER_AUTH_ERROR,
        re.compile(
            r"invalid[ _-]?(?:x-)?api[ _-]?key|please run /login|not logged in|log ?in required|"
            r"\b40[13]\b|unauthori[sz]ed|forbidden|authentication[ _]error|"
            r"missing environment variable|"
            r"invalid[ _]authentication|incorrect api key|oauth token has expired",
            re.IGNORECASE,
        ),
    ),
    (
        # Out of credit: a 429 that no wait mends, so it is not retried.
        ProviderErrorKind.PROVIDER_QUOTA_EXHAUSTED,
        re.compile(
            r"insufficient[ _]quota|quota exceeded|exceeded your current quota|"
            r"check your plan and billing|credit balance is too low",
            re.IGNORECASE,
        ),
    ),
    (
        ProviderErrorKind.PROVIDER_RATE_LIMITED,
        re.compile(
            r"\b429\b|rate[ _-]?limit|too many requests|overloaded|\b529\b|usage limit|quota",
            re.IGNORECASE,
        ),
    ),
    (
        ProviderErrorKind.PROVIDER_TIMEOUT,
        re.compile(r"timed out|time ?out|etimedout|deadline exceeded", re.IGNORECASE),
    ),
    (
        ProviderErrorKind.PROVIDER_NETWORK_ERROR,
        re.compile(
            r"connection (?:refused|reset|error|closed|aborted)|econn(?:refused|reset)|enotfound|"
            r"getaddrinfo|stream disconnected|error sending request|network error|fetch failed|"
            r"internal server error|bad gateway|service unavailable|api error: 5\d\d|"
            r"experiencing high demand|"
            r"status:? 5\d\d",
            re.IGNORECASE,
        ),
    ),
)


def kind_of_status(status: int, text: str = "") -> ProviderErrorKind:
    """The kind an HTTP status of a model API means, wherever it is reported (the OpenAI
    provider's own call, Claude Code's `api_error_status`); `text`, the error's message, tells
    an account out of credit (a 429 or 400 no wait mends) from a rate limit."""
    if classify_failure(text) is ProviderErrorKind.PROVIDER_QUOTA_EXHAUSTED:
        return ProviderErrorKind.PROVIDER_QUOTA_EXHAUSTED
    if status in (401, 403):
        return ProviderErrorKind.PROVIDER_AUTH_ERROR
    if status in (429, 529):
        return ProviderErrorKind.PROVIDER_RATE_LIMITED
    if status == 408:
        return ProviderErrorKind.PROVIDER_TIMEOUT
    if status >= 500:
        return ProviderErrorKind.PROVIDER_NETWORK_ERROR
    return ProviderErrorKind.PROVIDER_BAD_OUTPUT


def classify_failure(text: str) -> ProviderErrorKind | None:
    """The kind an error message points to (auth, rate limit, timeout, network), or None.

    Only for text already known to describe a failure: a model's answer may mention "timeout"
    because the firmware has one.
    """
    return next((kind for kind, pattern in _FAILURE_PATTERNS if pattern.search(text)), None)
