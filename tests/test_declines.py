"""A coder's "not a code defect" as plain decisions (pytest_fwloop/core/verdict/declines.py)."""

from __future__ import annotations

from pytest_fwloop.core.machine.outcomes import Outcome
from pytest_fwloop.core.records.agent_protocol import CoderAnswer
from pytest_fwloop.core.records.run_records import DeclinedRecord
from pytest_fwloop.core.verdict.declines import decline_ending, declined_by, still_declined


def _answer(patch: str, *declined: tuple[str, str]) -> CoderAnswer:
    return CoderAnswer.model_validate(
        {
            "analysis": {
                "root_cause": "an optional module is missing",
                "hypotheses": [],
                "confidence": 0.9,
            },
            "patch": patch,
            "summary": "",
            "declined": [{"nodeid": n, "reason": r} for n, r in declined],
        }
    )


def test_only_the_failures_sent_can_be_declined() -> None:
    sent = {"t.py::a": "sig-a", "t.py::b": "sig-b"}
    answer = _answer("", ("t.py::a", "no codec here"), ("t.py::never_sent", "whatever"))
    assert declined_by(answer, sent, 3) == {
        "t.py::a": DeclinedRecord(signature="sig-a", reason="no codec here", iteration=3)
    }


def test_an_empty_reason_takes_the_root_cause() -> None:
    [record] = declined_by(_answer("", ("t.py::a", "")), {"t.py::a": "sig"}, 2).values()
    assert record.reason == "an optional module is missing"


def test_a_declined_test_that_fails_another_way_is_sent_again() -> None:
    declined = {"t.py::a": DeclinedRecord(signature="sig-a", reason="r", iteration=2)}
    assert still_declined({"t.py::a": "sig-a", "t.py::b": "sig-b"}, declined) == {"t.py::a"}
    assert still_declined({"t.py::a": "sig-other"}, declined) == set()


def test_the_ending_is_converged_with_improvement_only_above_the_baseline() -> None:
    declined = {"t.py::a": DeclinedRecord(signature="s", reason="no codec", iteration=2)}
    outcome, reason = decline_ending([3, 5, 6], declined)
    assert outcome is Outcome.CONVERGED_WITH_IMPROVEMENT
    assert reason == (
        "only tests the coder declined are left failing (1: no codec); pass count 3 -> 6 over "
        "the baseline"
    )
    assert decline_ending([3, 3], declined) == (
        Outcome.FAILURE,
        "the coder declined every remaining failure: no codec",
    )
    assert decline_ending([3], declined)[0] is Outcome.FAILURE
