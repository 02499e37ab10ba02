"""RoleAgent: the failover list, the re-ask on an invalid answer, and the call records.

The providers here are small in-process implementations of the Provider interface: they answer
from a list and keep the requests they were given, which is what these rules are about. The
real executables are exercised in test_agents_providers.py.
"""

from __future__ import annotations

import json

import pytest

from pytest_fwloop.agents.base import RawAnswer
from pytest_fwloop.agents.errors import AnswerInvalid, ProviderError, ProviderErrorKind
from pytest_fwloop.agents.retry import RetryPolicy
from pytest_fwloop.agents.role import CallRecord, RoleAgent
from pytest_fwloop.core.machine.state_clock import DeadlinePassed
from pytest_fwloop.core.records.agent_protocol import (
    AgentRequest,
    CoderAnswer,
    ReviewerAnswer,
    Role,
    TesterAnswer,
    load_schema,
)

APPROVE = json.dumps({"decision": "approve", "must_fix": [], "risk": 0.1, "summary": "ok"})
TOO_RISKY = json.dumps({"decision": "approve", "must_fix": [], "risk": 1.5, "summary": "ok"})


class ListProvider:
    """Answers from `outcomes` in order: text is answered, a ProviderError is raised."""

    def __init__(self, spec: str, *outcomes: str | ProviderError) -> None:
        self.spec = spec
        self.outcomes = list(outcomes)
        self.requests: list[AgentRequest] = []

    def call(self, request: AgentRequest, timeout: float) -> RawAnswer:
        self.requests.append(request)
        outcome = self.outcomes.pop(0)
        if isinstance(outcome, ProviderError):
            raise outcome
        return RawAnswer(text=outcome, stderr=f"{self.spec} stderr")


def discard(record: CallRecord) -> None:
    """A record sink for tests that look at the answer, not the records."""


def timeout_error(spec: str) -> ProviderError:
    return ProviderError(ProviderErrorKind.PROVIDER_TIMEOUT, spec, "no answer within 600 s")


def request(role: Role = "reviewer") -> AgentRequest:
    return AgentRequest(
        role=role, iteration=1, goal="make every selected test pass", workspace="/fw"
    )


def reviewer(
    *providers: ListProvider,
    records: list[CallRecord] | None = None,
    schema: dict[str, object] | None = None,
    invalid_retries: int = 1,
) -> RoleAgent:
    sink: list[CallRecord] = [] if records is None else records
    return RoleAgent(
        "reviewer",
        list(providers),
        load_schema("reviewer") if schema is None else schema,
        sink.append,
        timeout=42.0,
        retry_policy=RetryPolicy(max_retries=0),  # failover on the first error, no backoff
        invalid_retries=invalid_retries,
    )


def test_a_valid_answer_is_parsed_and_recorded() -> None:
    provider = ListProvider("p1", APPROVE)
    records: list[CallRecord] = []
    answer = reviewer(provider, records=records).ask(request())
    assert answer == ReviewerAnswer(decision="approve", must_fix=[], risk=0.1, summary="ok")
    (record,) = records
    assert record.role == "reviewer"
    assert record.attempt == 1
    assert record.provider == "p1"
    assert record.request == provider.requests[0].to_wire()
    assert record.raw == APPROVE
    assert record.stderr == "p1 stderr"
    assert record.document == json.loads(APPROVE)
    assert (record.errors, record.error_kind) == ([], None)
    assert record.duration_s >= 0


def test_the_agent_fills_in_its_role_and_schema() -> None:
    schema = {**load_schema("reviewer"), "title": "team reviewer"}
    provider = ListProvider("p1", APPROVE)
    reviewer(provider, schema=schema).ask(request(role="coder"))
    (sent,) = provider.requests
    assert sent.role == "reviewer"
    assert sent.schema_ == schema
    assert sent.to_wire()["schema"] == schema


@pytest.mark.parametrize(
    ("role", "answer", "model"),
    [
        (
            "coder",
            {
                "analysis": {"root_cause": "x", "hypotheses": [], "confidence": 0.5},
                "patch": "",
                "summary": "s",
            },
            CoderAnswer,
        ),
        ("reviewer", json.loads(APPROVE), ReviewerAnswer),
        ("tester", {"select": [], "commands": [], "notes": ""}, TesterAnswer),
    ],
)
def test_the_answer_type_follows_the_role(
    role: Role, answer: dict[str, object], model: type[object]
) -> None:
    agent = RoleAgent(role, [ListProvider("p", json.dumps(answer))], load_schema(role), discard)
    assert isinstance(agent.ask(request(role)), model)


def test_an_invalid_answer_is_re_asked_once_with_the_errors() -> None:
    provider = ListProvider("p1", TOO_RISKY, APPROVE)
    records: list[CallRecord] = []
    answer = reviewer(provider, records=records).ask(request())
    assert isinstance(answer, ReviewerAnswer)
    first, second = provider.requests
    assert first.validation_errors == []
    assert second.validation_errors == ["$.risk: 1.5 is greater than the maximum of 1"]
    assert [(r.attempt, r.error_kind) for r in records] == [
        (1, "provider_bad_output"),
        (2, None),
    ]
    assert records[0].errors == second.validation_errors
    assert records[0].document == json.loads(TOO_RISKY)


def test_invalid_after_every_re_ask_is_answer_invalid() -> None:
    provider = ListProvider("p1", TOO_RISKY, "no JSON here")
    records: list[CallRecord] = []
    with pytest.raises(AnswerInvalid) as caught:
        reviewer(provider, records=records).ask(request())
    assert caught.value.provider == "p1"
    assert caught.value.kind is ProviderErrorKind.PROVIDER_BAD_OUTPUT
    assert caught.value.raw == "no JSON here"
    assert caught.value.errors == [
        "the answer is not one JSON object: Expecting value at line 1 column 1"
    ]
    assert "\n" not in str(caught.value)
    assert records[1].document is None


@pytest.mark.parametrize("retries", [0, 2])
def test_invalid_retries_bounds_the_re_asks(retries: int) -> None:
    provider = ListProvider("p1", *[TOO_RISKY] * (retries + 1))
    with pytest.raises(AnswerInvalid):
        reviewer(provider, invalid_retries=retries).ask(request())
    assert len(provider.requests) == retries + 1


def test_an_invalid_provider_fails_over_to_the_next() -> None:
    first = ListProvider("p1", TOO_RISKY, TOO_RISKY)
    second = ListProvider("p2", APPROVE)
    records: list[CallRecord] = []
    answer = reviewer(first, second, records=records).ask(request())
    assert isinstance(answer, ReviewerAnswer)
    assert [(r.provider, r.attempt) for r in records] == [("p1", 1), ("p1", 2), ("p2", 3)]
    # The next provider starts clean, not with the first one's errors.
    assert second.requests[0].validation_errors == []


def test_a_provider_error_fails_over_and_is_recorded() -> None:
    records: list[CallRecord] = []
    agent = reviewer(
        ListProvider("p1", timeout_error("p1")), ListProvider("p2", APPROVE), records=records
    )
    assert isinstance(agent.ask(request()), ReviewerAnswer)
    failed = records[0]
    assert failed.error_kind == "provider_timeout"
    assert failed.errors == ["no answer within 600 s"]
    assert (failed.raw, failed.stderr, failed.document) == ("", "", None)


def test_when_all_providers_fail_the_last_error_is_raised() -> None:
    last = timeout_error("p3")
    agent = reviewer(
        ListProvider("p1", timeout_error("p1")),
        ListProvider("p2", TOO_RISKY, TOO_RISKY),
        ListProvider("p3", last),
    )
    with pytest.raises(ProviderError) as caught:
        agent.ask(request())
    assert caught.value is last


def test_a_replacement_schema_is_the_gate() -> None:
    # A conftest hook may tighten the shipped schema (DESIGN.md §5).
    strict = load_schema("reviewer")
    properties = strict["properties"]
    assert isinstance(properties, dict)
    properties["risk"] = {"type": "number", "maximum": 0.05}
    with pytest.raises(AnswerInvalid) as caught:
        reviewer(ListProvider("p1", APPROVE, APPROVE), schema=strict).ask(request())
    assert caught.value.errors == ["$.risk: 0.1 is greater than the maximum of 0.05"]


def test_the_models_hold_the_line_behind_a_loose_schema() -> None:
    with pytest.raises(AnswerInvalid) as caught:
        reviewer(ListProvider("p1", "{}"), schema={}, invalid_retries=0).ask(request())
    assert caught.value.errors == [
        "$.decision: Field required",
        "$.must_fix: Field required",
        "$.risk: Field required",
        "$.summary: Field required",
    ]


def test_errors_that_are_not_provider_errors_are_not_swallowed() -> None:
    class Broken:
        spec = "broken"

        def call(self, request: AgentRequest, timeout: float) -> RawAnswer:
            raise RuntimeError("a bug in a provider")

    agent = RoleAgent("reviewer", [Broken(), ListProvider("p2", APPROVE)], {}, discard)
    with pytest.raises(RuntimeError, match="a bug in a provider"):
        agent.ask(request())


def test_the_timeout_reaches_the_provider() -> None:
    seen: list[float] = []

    class Clocked(ListProvider):
        def call(self, request: AgentRequest, timeout: float) -> RawAnswer:
            seen.append(timeout)
            return super().call(request, timeout)

    reviewer(Clocked("p1", APPROVE)).ask(request())
    assert seen == [42.0]


@pytest.mark.parametrize(
    ("providers", "retries", "problem"),
    [([], 1, "needs at least one provider"), ([ListProvider("p")], -1, "must be >= 0")],
)
def test_impossible_configurations_are_refused(
    providers: list[ListProvider], retries: int, problem: str
) -> None:
    with pytest.raises(ValueError, match=problem):
        RoleAgent("coder", list(providers), {}, discard, invalid_retries=retries)


def test_the_states_time_left_caps_each_call_and_stops_the_asking() -> None:
    left = [100.0]
    seen: list[float] = []
    slept: list[float] = []

    class Slow(ListProvider):
        def call(self, request: AgentRequest, timeout: float) -> RawAnswer:
            seen.append(timeout)
            left[0] -= timeout  # it used all the time it had, and then timed out
            return super().call(request, timeout)

    first = Slow("p1", timeout_error("p1"), timeout_error("p1"))
    second = ListProvider("p2", APPROVE)
    agent = RoleAgent(
        "reviewer",
        [first, second],
        load_schema("reviewer"),
        discard,
        timeout=60.0,
        retry_policy=RetryPolicy(max_retries=3),
        sleep=slept.append,
        time_left=lambda: left[0],
    )
    with pytest.raises(DeadlinePassed, match=r"ran out of the state.s time.*provider_timeout"):
        agent.ask(request())
    assert seen == [60.0, 40.0]  # the second call gets only what the state has left
    assert len(slept) == 1
    assert not second.requests  # no failover once the state's time is spent


def test_no_call_starts_when_the_state_has_no_time_left() -> None:
    provider = ListProvider("p1", APPROVE)
    agent = RoleAgent("reviewer", [provider], load_schema("reviewer"), discard, time_left=lambda: 0)
    with pytest.raises(DeadlinePassed):
        agent.ask(request())
    assert not provider.requests
