"""Retry, backoff and failover (DESIGN.md §5): what is retried, how long it waits, when it stops.

The providers are small in-process implementations of the Provider interface answering from a
list, and the sleep is a list that collects the pauses: the rules are about counts and seconds,
and no test waits. The real CLIs and HTTP servers are in test_provider_*.py.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from email.utils import format_datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_fwloop.agents.base import RawAnswer
from pytest_fwloop.agents.errors import (
    AnswerInvalid,
    ProviderError,
    ProviderErrorKind,
    classify_failure,
)
from pytest_fwloop.agents.retry import RetryBudget, RetryPolicy, parse_retry_after
from pytest_fwloop.agents.role import CallRecord, RoleAgent
from pytest_fwloop.core.records.agent_protocol import AgentRequest, ReviewerAnswer, load_schema

APPROVE = json.dumps({"decision": "approve", "must_fix": [], "risk": 0.1, "summary": "ok"})
TOO_RISKY = json.dumps({"decision": "approve", "must_fix": [], "risk": 1.5, "summary": "ok"})
Kind = ProviderErrorKind


class ListProvider:
    """Answers from `outcomes` in order (text is answered, a ProviderError raised); the last
    outcome repeats, so "always fails" is one entry."""

    def __init__(self, spec: str, *outcomes: str | ProviderError) -> None:
        self.spec = spec
        self.outcomes = list(outcomes)
        self.calls = 0

    def call(self, request: AgentRequest, timeout: float) -> RawAnswer:
        self.calls += 1
        outcome = self.outcomes.pop(0) if len(self.outcomes) > 1 else self.outcomes[0]
        if isinstance(outcome, ProviderError):
            raise outcome
        return RawAnswer(text=outcome)


def failure(
    kind: ProviderErrorKind, spec: str = "p1", retry_after: float | None = None
) -> ProviderError:
    return ProviderError(kind, spec, f"{kind.value} happened", retry_after=retry_after)


class Run:
    """A reviewer RoleAgent whose records and pauses are kept for the assertions."""

    def __init__(self, *providers: ListProvider, policy: RetryPolicy | None = None) -> None:
        self.records: list[CallRecord] = []
        self.sleeps: list[float] = []
        self.agent = RoleAgent(
            "reviewer",
            list(providers),
            load_schema("reviewer"),
            self.records.append,
            retry_policy=policy or RetryPolicy(base_delay=0.01),
            sleep=self.sleeps.append,
        )

    def ask(self) -> ReviewerAnswer:
        answer = self.agent.ask(
            AgentRequest(role="reviewer", iteration=1, goal="g", workspace="/fw")
        )
        assert isinstance(answer, ReviewerAnswer)
        return answer

    def trail(self) -> list[tuple[str, int, str | None]]:
        return [(r.provider, r.retry_count, r.error_kind) for r in self.records]


@pytest.mark.parametrize(
    "kind", [Kind.PROVIDER_TIMEOUT, Kind.PROVIDER_NETWORK_ERROR, Kind.PROVIDER_RATE_LIMITED]
)
def test_a_transient_error_retries_the_same_provider(kind: ProviderErrorKind) -> None:
    run = Run(ListProvider("p1", failure(kind), failure(kind), APPROVE))
    run.ask()
    assert run.trail() == [("p1", 0, kind.value), ("p1", 1, kind.value), ("p1", 2, None)]
    assert [r.attempt for r in run.records] == [1, 2, 3]
    # Full jitter: each pause lies in [0, base * 2**(n-1)].
    assert len(run.sleeps) == 2
    assert 0 <= run.sleeps[0] <= 0.01
    assert 0 <= run.sleeps[1] <= 0.02
    assert run.records[0].retry_reason is None
    assert run.records[1].retry_reason == (
        f"{kind.value}: {kind.value} happened (retry 1 of 3 after {run.sleeps[0]:.3g} s)"
    )


def test_retries_are_bounded_in_count_then_fail_over() -> None:
    first = ListProvider("p1", failure(Kind.PROVIDER_TIMEOUT))
    run = Run(first, ListProvider("p2", APPROVE))
    run.ask()
    assert first.calls == 4  # the call and max_retries=3 retries
    assert run.trail() == [
        ("p1", 0, "provider_timeout"),
        ("p1", 1, "provider_timeout"),
        ("p1", 2, "provider_timeout"),
        ("p1", 3, "provider_timeout"),
        ("p2", 0, None),
    ]
    assert len(run.sleeps) == 3
    assert run.records[4].retry_reason == (
        "failover from p1: provider_timeout: provider_timeout happened (3 of 3 retries used)"
    )


@pytest.mark.parametrize(
    "kind",
    [
        Kind.PROVIDER_AUTH_ERROR,
        Kind.PROVIDER_NOT_FOUND,
        Kind.PROVIDER_PERMISSION_DENIED,
        Kind.PROVIDER_BAD_OUTPUT,
    ],
)
def test_a_non_transient_error_fails_over_at_once(kind: ProviderErrorKind) -> None:
    first = ListProvider("p1", failure(kind))
    run = Run(first, ListProvider("p2", APPROVE))
    run.ask()
    assert first.calls == 1
    assert run.sleeps == []
    assert run.records[1].retry_reason == (
        f"failover from p1: {kind.value}: {kind.value} happened ({kind.value} is not transient)"
    )


def test_retry_after_is_a_floor_for_the_pause() -> None:
    run = Run(ListProvider("p1", failure(Kind.PROVIDER_RATE_LIMITED, retry_after=4.5), APPROVE))
    run.ask()
    assert run.sleeps == [4.5]  # jitter stays below base_delay=0.01, so Retry-After decides
    assert run.records[1].retry_reason == (
        "provider_rate_limited: provider_rate_limited happened "
        "(retry 1 of 3 after 4.5 s; Retry-After 4.5 s)"
    )


def test_the_pauses_of_one_ask_are_capped_in_total_seconds() -> None:
    policy = RetryPolicy(max_retries=10, base_delay=0.001, max_total=5.0)
    limited = failure(Kind.PROVIDER_RATE_LIMITED, retry_after=2.0)
    first = ListProvider("p1", limited)
    run = Run(first, ListProvider("p2", APPROVE), policy=policy)
    run.ask()
    assert run.sleeps == [2.0, 2.0]  # a third pause would make 6 s > 5 s
    assert first.calls == 3
    assert run.records[3].retry_reason == (
        "failover from p1: provider_rate_limited: provider_rate_limited happened "
        "(a 2 s pause would pass the 5 s retry budget (4 s used))"
    )


def test_a_retry_after_beyond_the_budget_fails_over_without_waiting() -> None:
    policy = RetryPolicy(max_total=120.0)
    run = Run(
        ListProvider("p1", failure(Kind.PROVIDER_RATE_LIMITED, retry_after=3600)),
        ListProvider("p2", APPROVE),
        policy=policy,
    )
    run.ask()
    assert run.sleeps == []
    assert run.trail() == [("p1", 0, "provider_rate_limited"), ("p2", 0, None)]


def test_the_budget_is_shared_by_the_providers_of_one_ask() -> None:
    policy = RetryPolicy(max_retries=5, base_delay=0.001, max_total=5.0)
    run = Run(
        ListProvider("p1", failure(Kind.PROVIDER_RATE_LIMITED, retry_after=3.0)),
        ListProvider("p2", failure(Kind.PROVIDER_NETWORK_ERROR, retry_after=1.5), APPROVE),
        policy=policy,
    )
    run.ask()
    assert run.sleeps == [3.0, 1.5]
    assert run.trail() == [
        ("p1", 0, "provider_rate_limited"),
        ("p1", 1, "provider_rate_limited"),
        ("p2", 0, "provider_network_error"),
        ("p2", 1, None),
    ]


def test_each_ask_starts_with_a_fresh_budget() -> None:
    policy = RetryPolicy(max_retries=1, base_delay=0.001, max_total=2.0)
    limited = failure(Kind.PROVIDER_RATE_LIMITED, retry_after=2.0)
    run = Run(ListProvider("p1", limited, APPROVE, limited, APPROVE), policy=policy)
    run.ask()
    run.ask()
    assert run.sleeps == [2.0, 2.0]


def test_when_every_provider_fails_the_last_error_is_raised_after_its_retries() -> None:
    last = failure(Kind.PROVIDER_NETWORK_ERROR, "p2")
    second = ListProvider("p2", last)
    run = Run(ListProvider("p1", failure(Kind.PROVIDER_AUTH_ERROR)), second)
    with pytest.raises(ProviderError) as caught:
        run.ask()
    assert caught.value is last
    assert second.calls == 4
    assert [r.retry_count for r in run.records] == [0, 0, 1, 2, 3]


def test_a_re_ask_is_recorded_with_its_reason_and_a_retry_after_it_counts_on() -> None:
    run = Run(ListProvider("p1", TOO_RISKY, failure(Kind.PROVIDER_TIMEOUT), APPROVE))
    run.ask()
    assert run.trail() == [
        ("p1", 0, "provider_bad_output"),
        ("p1", 1, "provider_timeout"),
        ("p1", 2, None),
    ]
    assert run.records[1].retry_reason == (
        "re-asked with the validation errors of the last answer: "
        "$.risk: 1.5 is greater than the maximum of 1"
    )
    # The retry after the timeout re-sends the re-ask, validation errors and all.
    assert run.records[2].request["validation_errors"] == run.records[0].errors


def test_an_answer_invalid_twice_fails_over_with_its_reason() -> None:
    run = Run(ListProvider("p1", TOO_RISKY), ListProvider("p2", APPROVE))
    run.ask()
    assert run.sleeps == []
    assert str(run.records[2].retry_reason).startswith(
        "failover from p1: provider_bad_output: the reviewer answer failed the JSON gate 2 "
        "time(s) in a row"
    )


def test_an_answer_invalid_at_the_end_is_raised_as_such() -> None:
    with pytest.raises(AnswerInvalid):
        Run(ListProvider("p1", TOO_RISKY)).ask()


def test_a_failed_call_keeps_its_stderr_and_usage() -> None:
    error = ProviderError(
        Kind.PROVIDER_AUTH_ERROR,
        "p1",
        "bad key",
        stderr="Invalid API key\n",
        usage={"input_tokens": 10.0, "cost_usd": 0.001},
    )
    run = Run(ListProvider("p1", error), ListProvider("p2", APPROVE))
    run.ask()
    assert (run.records[0].stderr, run.records[0].usage) == (
        "Invalid API key\n",
        {"input_tokens": 10.0, "cost_usd": 0.001},
    )


def test_zero_retries_turns_retrying_off() -> None:
    first = ListProvider("p1", failure(Kind.PROVIDER_TIMEOUT))
    run = Run(first, ListProvider("p2", APPROVE), policy=RetryPolicy(max_retries=0))
    run.ask()
    assert (first.calls, run.sleeps) == (1, [])


@pytest.mark.parametrize("field", ["max_retries", "base_delay", "max_delay", "max_total"])
def test_a_negative_policy_is_refused(field: str) -> None:
    with pytest.raises(ValueError, match=f"retry {field} must be >= 0"):
        RetryPolicy(**{field: -1})


@given(
    retry=st.integers(1, 30),
    base=st.floats(0, 10),
    cap=st.floats(0, 60),
    retry_after=st.none() | st.floats(0, 300),
    draw=st.floats(0, 1, exclude_max=True),
)
def test_the_pause_is_within_the_jitter_window_and_never_before_retry_after(
    retry: int, base: float, cap: float, retry_after: float | None, draw: float
) -> None:
    policy = RetryPolicy(base_delay=base, max_delay=cap)
    pause = policy.delay(retry, retry_after, lambda: draw)
    window = min(cap, base * 2.0 ** (retry - 1))
    assert pause >= (retry_after or 0.0)
    assert pause <= max(window, retry_after or 0.0)


@given(
    retry_afters=st.lists(st.none() | st.floats(0, 100), min_size=1, max_size=40),
    max_total=st.floats(0, 200),
    max_retries=st.integers(0, 10),
)
def test_the_budget_never_pauses_more_than_allowed(
    retry_afters: list[float | None], max_total: float, max_retries: int
) -> None:
    budget = RetryBudget(RetryPolicy(max_retries=max_retries, base_delay=1.0, max_total=max_total))
    paused = 0.0
    for retries, retry_after in enumerate(retry_afters):
        decision = budget.decide(
            failure(Kind.PROVIDER_RATE_LIMITED, retry_after=retry_after), retries
        )
        if decision.delay is None:
            continue
        assert retries < max_retries
        assert decision.delay >= (retry_after or 0.0)
        paused += decision.delay
    assert paused <= max_total


NOW = datetime(2026, 1, 1, 12, 0, 0, tzinfo=timezone.utc)


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("120", 120.0),
        (" 1.5 ", 1.5),
        ("0", 0.0),
        (format_datetime(NOW + timedelta(seconds=90), usegmt=True), 90.0),
        ("Thu, 01 Jan 2026 12:00:30 GMT", 30.0),
        (format_datetime(NOW - timedelta(seconds=5), usegmt=True), 0.0),  # already past
        ("-3", 0.0),
        ("soon", None),
        ("", None),
        ("nan", None),
    ],
)
def test_retry_after_is_read_as_seconds_or_an_http_date(value: str, seconds: float | None) -> None:
    assert parse_retry_after(value, now=NOW) == seconds


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("Invalid API key · Please run /login", Kind.PROVIDER_AUTH_ERROR),
        ("unexpected status 401 Unauthorized", Kind.PROVIDER_AUTH_ERROR),
        ('API Error: 429 {"type":"rate_limit_error"}', Kind.PROVIDER_RATE_LIMITED),
        ("API Error: 529 Overloaded", Kind.PROVIDER_RATE_LIMITED),
        ("You've hit your usage limit. Try again later.", Kind.PROVIDER_RATE_LIMITED),
        ("Request timed out.", Kind.PROVIDER_TIMEOUT),
        ("stream disconnected before completion", Kind.PROVIDER_NETWORK_ERROR),
        ("API Error: 500 Internal server error", Kind.PROVIDER_NETWORK_ERROR),
        ("Tool execution crashed", None),
    ],
)
def test_error_messages_are_classified(text: str, kind: ProviderErrorKind | None) -> None:
    assert classify_failure(text) is kind
