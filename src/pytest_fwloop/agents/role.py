"""One role (coder, reviewer, tester) behind its failover list and the strict-JSON gate.

Every call is handed to `record` whatever its fate, so the run directory shows what each model
was asked and what it said (DESIGN.md §8), including the answers the gate threw away.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pytest_fwloop.agents.base import RawAnswer
from pytest_fwloop.agents.errors import AnswerInvalid, ProviderError, ProviderErrorKind
from pytest_fwloop.agents.protocol import (
    AnswerParseError,
    extract_json,
    parse_answer,
    validate_answer,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from pytest_fwloop.agents.base import Provider
    from pytest_fwloop.agents.protocol import AgentRequest, Answer, Role


@dataclass(frozen=True)
class CallRecord:
    """One provider call: the wire request, the raw answer, and what the gate made of it."""

    role: Role
    attempt: int  # 1-based, counting every call of one `ask` across all providers
    provider: str
    request: dict[str, object]
    raw: str
    stderr: str
    document: object | None  # the parsed JSON, when there was any
    errors: list[str]
    error_kind: str | None  # a ProviderErrorKind value; None when the answer passed
    duration_s: float


@dataclass(frozen=True)
class _Checked:
    raw: str
    document: dict[str, object] | None
    answer: Answer | None
    errors: list[str]


class RoleAgent:
    """Asks the providers in order until one gives an answer that passes `schema`.

    An invalid answer is re-asked of the same provider `invalid_retries` more times, with the
    errors in `validation_errors`; still invalid is AnswerInvalid. Any ProviderError moves on to
    the next provider, and when all have failed the last error is raised.
    """

    def __init__(
        self,
        role: Role,
        providers: list[Provider],
        schema: dict[str, object],
        record: Callable[[CallRecord], None],
        timeout: float = 600.0,
        invalid_retries: int = 1,
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
        self._record = record

    def ask(self, request: AgentRequest) -> Answer:
        """The validated answer of the first provider that gives one; the answer's type follows
        the role (CoderAnswer, ReviewerAnswer, TesterAnswer)."""
        request = request.model_copy(update={"role": self.role, "schema_": self.schema})
        attempts = itertools.count(1)
        last_error: ProviderError | None = None
        for provider in self.providers:
            try:
                return self._ask_provider(provider, request, attempts)
            except ProviderError as exc:
                # Seam for retrying transient errors (exc.kind.transient, exc.retry_after) with
                # backoff before failing over; until then every error fails over at once.
                last_error = exc
        assert last_error is not None  # providers is never empty
        raise last_error

    def _ask_provider(
        self, provider: Provider, request: AgentRequest, attempts: Iterator[int]
    ) -> Answer:
        asked = request
        for _ in range(self.invalid_retries + 1):
            checked = self._call(provider, asked, next(attempts))
            if checked.answer is not None:
                return checked.answer
            asked = request.model_copy(update={"validation_errors": checked.errors})
        raise AnswerInvalid(
            provider.spec,
            f"the {self.role} answer failed the JSON gate {self.invalid_retries + 1} time(s) in "
            f"a row: {checked.errors[0]}",
            checked.errors,
            checked.raw,
        )

    def _call(self, provider: Provider, request: AgentRequest, attempt: int) -> _Checked:
        wire = request.to_wire()
        started = time.monotonic()
        error: ProviderError | None = None
        try:
            answer = provider.call(request, self.timeout)
        except ProviderError as exc:
            error, answer = exc, RawAnswer(text="")  # nothing was answered
        duration_s = time.monotonic() - started
        kind: str | None
        if error is not None:
            checked, kind = _Checked("", None, None, [error.message]), error.kind.value
        else:
            checked = self._check(answer.text)
            kind = (
                None if checked.answer is not None else ProviderErrorKind.PROVIDER_BAD_OUTPUT.value
            )
        self._record(
            CallRecord(
                role=self.role,
                attempt=attempt,
                provider=provider.spec,
                request=wire,
                raw=checked.raw,
                stderr=answer.stderr,
                document=checked.document,
                errors=checked.errors,
                error_kind=kind,
                duration_s=duration_s,
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
