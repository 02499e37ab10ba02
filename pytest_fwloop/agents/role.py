"""One role (coder, reviewer, tester) behind its failover list and the strict-JSON gate.

Every call is handed to `record` whatever its fate, so the run directory shows what each model
was asked and what it said (DESIGN.md §8), including the answers the gate threw away and every
retry and failover with its reason.
"""

from __future__ import annotations

import itertools
import math
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pytest_fwloop.agents.base import RawAnswer
from pytest_fwloop.agents.errors import AnswerInvalid, ProviderError, ProviderErrorKind
from pytest_fwloop.agents.retry import RetryBudget, RetryPolicy
from pytest_fwloop.core.machine.outcomes import Outcome, describe_crash
from pytest_fwloop.core.machine.state_clock import DeadlinePassed
from pytest_fwloop.core.records.agent_protocol import (
    AnswerParseError,
    extract_json,
    parse_answer,
    validate_answer,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from pytest_fwloop.agents.base import Provider
    from pytest_fwloop.core.records.agent_protocol import AgentRequest, Answer, Role

DEFAULT_RETRY_POLICY = RetryPolicy()


@dataclass(frozen=True)
class CallRecord:
    """One provider call: the wire request, the raw answer, and what the gate made of it.

    `retry_count` counts the earlier calls of this ask to the same provider (re-asks and
    transient retries); `retry_reason` says why this call was made when it is not the first
    (`retry 1 of 3 after 0.4 s …`, `re-asked …`, `failover from claude: …`).
    """

    role: Role
    attempt: int  # 1-based, counting every call of one `ask` across all providers
    provider: str
    request: dict[str, object]
    raw: str
    stderr: str
    document: object | None  # the parsed JSON, when there was any
    errors: list[str]
    error_kind: str | None  # a ProviderErrorKind value, or internal_error; None when it passed
    duration_s: float
    retry_count: int = 0
    retry_reason: str | None = None
    usage: dict[str, float] = field(default_factory=dict)  # RawAnswer.usage, also when failed
    tool_calls: tuple[dict[str, object], ...] = ()  # RawAnswer.conversation's, in order
    tools_offered: bool = False  # whether the model was offered tools in this call


@dataclass(frozen=True)
class _Checked:
    raw: str
    document: dict[str, object] | None
    answer: Answer | None
    errors: list[str]


class RoleAgent:
    """Asks the providers in order until one gives an answer that passes `schema`.

    A transient ProviderError (timeout, network, rate limit) retries the same provider as
    `retry_policy` allows, pausing with `sleep`; any other ProviderError, or a transient one out
    of retries, fails over to the next provider. An invalid answer is re-asked of the same
    provider `invalid_retries` more times, with the errors in `validation_errors`; still invalid
    is AnswerInvalid, which fails over too. When all have failed the last error is raised.

    `time_left` is the seconds the state asking may still take: each call's timeout is capped by
    it, and once it is spent DeadlinePassed ends the asking (no retry, no failover).
    """

    def __init__(
        self,
        role: Role,
        providers: list[Provider],
        schema: dict[str, object],
        record: Callable[[CallRecord], object],
        timeout: float = 600.0,
        invalid_retries: int = 1,
        retry_policy: RetryPolicy = DEFAULT_RETRY_POLICY,
        sleep: Callable[[float], None] = time.sleep,
        time_left: Callable[[], float] = lambda: math.inf,
    ) -> None:
        if not providers:
            raise ValueError(f"fwloop: the {role} role needs at least one provider")
        if invalid_retries < 0:
            raise ValueError(f"fwloop: invalid_retries must be >= 0, got {invalid_retries}")
        self.role = role
        self.providers = list(providers)
        self.schema = schema
        self.timeout = timeout
        self.invalid_retries = invalid_retries
        self.retry_policy = retry_policy
        self._record = record
        self._sleep = sleep
        self._time_left = time_left

    def skip(self, answered: int) -> None:
        """A continued run: its earlier processes had `answered` strict answers of this role.
        Only providers that replay answers in order (`scripted:`) need to know."""
        for provider in self.providers:
            skip = getattr(provider, "skip", None)
            if skip is not None:
                skip(self.role, answered)

    def ask(self, request: AgentRequest) -> Answer:
        """The validated answer of the first provider that gives one; the answer's type follows
        the role (CoderAnswer, ReviewerAnswer, TesterAnswer)."""
        request = request.model_copy(update={"role": self.role, "schema_": self.schema})
        attempts = itertools.count(1)
        budget = RetryBudget(self.retry_policy)
        reason: str | None = None
        last_error: ProviderError | None = None
        for provider in self.providers:
            try:
                return self._ask_provider(provider, request, attempts, budget, reason)
            except _GaveUp as gave_up:
                last_error = gave_up.error
                reason = f"failover from {provider.spec}: {gave_up.why}"
        assert last_error is not None  # providers is never empty
        raise last_error

    def comment(self, request: AgentRequest) -> str:
        """A free-text answer (a proposal's roundtable, DESIGN.md §11): the first provider's
        non-empty text, no schema; every call recorded like the others. ProviderError when no
        provider answers."""
        request = request.model_copy(update={"role": self.role, "schema_": {}})
        failures: list[str] = []
        last = ProviderError(ProviderErrorKind.PROVIDER_BAD_OUTPUT, self.role, "no answer")
        for attempt, provider in enumerate(self.providers, start=1):
            started = time.monotonic()
            error: ProviderError | None = None
            try:
                answer = provider.call(request, self._left(None))
            except ProviderError as exc:
                error, answer = exc, _failed(exc)
            if error is None and not answer.text.strip():
                error = ProviderError(
                    ProviderErrorKind.PROVIDER_BAD_OUTPUT, provider.spec, "an empty answer"
                )
            self._record(
                CallRecord(
                    role=self.role,
                    attempt=attempt,
                    provider=provider.spec,
                    request=request.to_wire(),
                    raw=answer.text,
                    stderr=answer.stderr,
                    document=None,
                    errors=[error.message] if error else [],
                    error_kind=error.kind.value if error else None,
                    duration_s=time.monotonic() - started,
                    retry_reason=f"failover: {failures[-1]}" if failures else None,
                    usage=answer.usage,
                )
            )
            if error is None:
                return answer.text.strip()
            failures.append(f"{provider.spec}: {error.message}")
            last = error
        raise last

    def _ask_provider(
        self,
        provider: Provider,
        request: AgentRequest,
        attempts: Iterator[int],
        budget: RetryBudget,
        reason: str | None,
    ) -> Answer:
        """The answer of one provider, re-asked and retried as the rules allow; _GaveUp when
        the next provider should be asked instead."""
        asked = request
        invalid = transient = 0
        while True:
            left = self._left(reason)
            try:
                checked = self._call(
                    provider, asked, next(attempts), invalid + transient, reason, left
                )
            except ProviderError as exc:
                decision = budget.decide(exc, transient)
                failure = f"{exc.kind.value}: {exc.message}"
                self._left(failure)
                if decision.delay is None:
                    raise _GaveUp(exc, f"{failure} ({decision.reason})") from None
                self._sleep(min(decision.delay, self._time_left()))
                transient += 1
                reason = f"{failure} ({decision.reason})"
                continue
            if checked.answer is not None:
                return checked.answer
            invalid += 1
            if invalid > self.invalid_retries:
                error = AnswerInvalid(
                    provider.spec,
                    f"the {self.role} answer failed the JSON gate {invalid} time(s) in a row: "
                    f"{checked.errors[0]}",
                    checked.errors,
                    checked.raw,
                )
                raise _GaveUp(error, f"{error.kind.value}: {error.message}")
            asked = request.model_copy(update={"validation_errors": checked.errors})
            reason = f"re-asked with the validation errors of the last answer: {checked.errors[0]}"

    def _left(self, last: str | None) -> float:
        """The seconds the next call may take; DeadlinePassed when none are left."""
        left = self._time_left()
        if left <= 0:
            why = f" (last: {last})" if last else ""
            raise DeadlinePassed(f"the {self.role}'s calls ran out of the state's time{why}")
        return min(self.timeout, left)

    def _call(
        self,
        provider: Provider,
        request: AgentRequest,
        attempt: int,
        retry_count: int,
        retry_reason: str | None,
        timeout: float,
    ) -> _Checked:
        wire = request.to_wire()
        started = time.monotonic()
        answer = RawAnswer(text="")
        error: Exception | None = None
        kind: str | None
        try:
            answer = provider.call(request, timeout)
            checked = self._check(answer.text)
            kind = (
                None if checked.answer is not None else ProviderErrorKind.PROVIDER_BAD_OUTPUT.value
            )
        except ProviderError as exc:
            # Nothing was answered; what the call still produced is kept for the record.
            error, answer = exc, _failed(exc)
            checked, kind = _Checked("", None, None, [exc.message]), exc.kind.value
        except Exception as exc:
            # A bug in the provider or the gate (a broken replacement schema): the call is
            # still recorded and counted, then the exception ends the run as an internal error.
            error = exc
            checked = _Checked(answer.text, None, None, [describe_crash(exc)])
            kind = Outcome.INTERNAL_ERROR.value
        duration_s = time.monotonic() - started
        talk = answer.conversation
        self._record(
            CallRecord(
                role=self.role,
                attempt=attempt,
                provider=provider.spec,
                request=talk.sent if talk.sent is not None else wire,
                raw=checked.raw,
                stderr=answer.stderr,
                document=checked.document,
                errors=checked.errors,
                error_kind=kind,
                duration_s=duration_s,
                retry_count=retry_count,
                retry_reason=retry_reason,
                usage=answer.usage,
                tool_calls=talk.tool_calls,
                tools_offered=talk.tools_offered,
            )
        )
        if error is not None:
            raise error
        return checked

    def _check(self, text: str) -> _Checked:
        """The strict-JSON gate: one JSON object, valid under the schema, and under the model."""
        try:
            document = extract_json(text)
        except ValueError as exc:
            return _Checked(text, None, None, [str(exc)])
        errors = validate_answer(self.role, document, self.schema)
        if errors:
            return _Checked(text, document, None, errors)
        try:
            return _Checked(text, document, parse_answer(self.role, document), [])
        except AnswerParseError as exc:
            return _Checked(text, document, None, exc.errors)


def _failed(error: ProviderError) -> RawAnswer:
    """What a failed call still produced, as an answer without text, for its record."""
    return RawAnswer(
        text="", stderr=error.stderr, usage=error.usage, conversation=error.conversation
    )


class _GaveUp(Exception):
    """One provider is done with this ask: `error` to raise if it was the last, `why` for the
    next provider's retry_reason."""

    def __init__(self, error: ProviderError, why: str) -> None:
        super().__init__(why)
        self.error = error
        self.why = why
