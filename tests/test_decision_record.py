"""Seed 001's decision record (DESIGN.md §15): the coder's confidence and its ABORT, judged
in PATCH_GENERATION before the gate. In-process controller runs (tests/controllerkit.py)."""

from __future__ import annotations

import io
import sys
from typing import Any

import pytest

from controllerkit import ControllerKit, fixing
from pytest_fwloop.core.machine.outcomes import Outcome
from pytest_fwloop.core.records.agent_protocol import CoderAnswer
from pytest_fwloop.core.verdict.coder_confidence import judge, stopped_short
from pytest_fwloop.knowledge.store import KnowledgeBase


@pytest.fixture
def kit(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> ControllerKit:
    return ControllerKit(pytester, monkeypatch)


def unsure(answer: dict[str, Any], confidence: float = 0.1) -> dict[str, Any]:
    return {**answer, "analysis": {**answer["analysis"], "confidence": confidence}}


def statuses(kit: ControllerKit, iteration: int) -> list[str]:
    return [d.status for d in kit.controller.loop.iterations[iteration - 1].decisions]


def test_the_decision_record_rules() -> None:
    answer = CoderAnswer.model_validate(fixing("a", "b"))
    assert judge(answer, 0.3, asked_again=False).status == "usable"
    low = answer.model_copy(
        update={"analysis": answer.analysis.model_copy(update={"confidence": 0.29})}
    )
    assert judge(low, 0.3, asked_again=False).status == "low_confidence"
    assert judge(low, 0.3, asked_again=True).status == "inconclusive"
    assert judge(answer.model_copy(update={"next_action": "abort"}), 0.3, False).status == "abort"
    assert stopped_short([1, 3], "why") == (
        Outcome.CONVERGED_WITH_IMPROVEMENT,
        "why; pass count 1 -> 3 over the baseline",
    )
    assert stopped_short([1, 1], "why") == (Outcome.FAILURE, "why")


def test_a_low_confidence_answer_is_not_applied_and_the_coder_is_asked_once_more(
    kit: ControllerKit,
) -> None:
    kit.coder.answers = [unsure(fixing("ok bug", "ok ok", "a guess")), fixing("ok bug", "ok ok")]
    kit.build("ok bug")
    assert kit.run() is Outcome.SUCCESS
    assert statuses(kit, 2) == ["low_confidence", "usable"]
    assert ("PATCH_GENERATION", "coder_unsure", "CODE_ANALYSIS") in kit.moves()
    [again] = [m.issue for m in kit.coder.requests[1].must_fix]
    assert again.startswith(
        "your last analysis was not sure enough to apply (coder confidence 0.10 < "
        "fwloop_min_confidence=0.30); nothing was applied."
    )
    assert (
        "--- tests/test_fw.py::test_1\nassert 'bug' == 'ok'" in again
    )  # the failing test's own output
    assert len(kit.reviewer.requests) == 1  # the unsure patch never reached the gate


@pytest.mark.parametrize(
    ("firmware", "outcome"),
    [("ok bug bug", Outcome.CONVERGED_WITH_IMPROVEMENT), ("ok bug", Outcome.FAILURE)],
)
def test_low_confidence_twice_is_inconclusive_and_ends_the_run(
    kit: ControllerKit, firmware: str, outcome: Outcome
) -> None:
    improving = firmware == "ok bug bug"
    first = [fixing("ok bug bug", "ok ok bug")] if improving else []
    guess = unsure(fixing("ok ok bug" if improving else "ok bug", "ok ok ok", "no idea"), 0.2)
    kit.coder.answers = [*first, guess, guess]
    kit.build(firmware)
    assert kit.run() is outcome
    loop = kit.controller.loop
    assert statuses(kit, len(loop.iterations)) == ["low_confidence", "inconclusive"]
    assert loop.final_reason.startswith(
        "the coder's analysis stayed inconclusive (coder confidence 0.20 < "
        "fwloop_min_confidence=0.30, twice): no idea"
    )
    assert list(loop.inconclusive) == [f"tests/test_fw.py::test_{2 if improving else 1}"]
    # The summary names them with the coder's root cause, as it names declined tests.
    inconclusive = kit.summary()["inconclusive"]
    assert list(inconclusive) == list(loop.inconclusive)
    assert [r["reason"] for r in inconclusive.values()] == ["no idea"]
    assert ("PATCH_GENERATION", "coder_inconclusive", "FAILURE") in kit.moves()
    # The knowledge base keeps it for the next run's coder (seed 001 §5.16).
    knowledge = kit.controller.settings.knowledge
    assert knowledge is not None
    kept = KnowledgeBase(knowledge).verdicts_for(
        [record.signature for record in loop.inconclusive.values()], run_id="another run"
    )
    assert [(v.status, v.reason, v.outcome) for v in kept] == [
        ("inconclusive", "no idea", outcome.value)
    ]


def test_the_coder_may_ask_to_abort(kit: ControllerKit) -> None:
    stop = {**fixing("ok bug", "ok ok"), "next_action": "abort"}
    stop["analysis"] = {**stop["analysis"], "root_cause": "the board is not the one described"}
    kit.coder.answers = [stop]
    kit.build("ok bug")
    assert kit.run() is Outcome.FAILURE
    assert kit.controller.loop.final_reason == (
        "the coder asked to abort: the board is not the one described"
    )
    assert statuses(kit, 2) == ["abort"]
    assert kit.firmware() == "ok bug"


class Operator(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_in_proposal_mode_a_low_confidence_patch_stops_for_the_operator(
    kit: ControllerKit, monkeypatch: pytest.MonkeyPatch
) -> None:
    kit.coder.answers = [fixing("ok bug bug", "ok ok bug"), unsure(fixing("ok ok bug", "ok ok ok"))]
    kit.build("ok bug bug", "fwloop_propose = first", "fwloop_mode = interactive")
    # Yes to the first proposal; the second (propose = first would not stop for it) is low.
    monkeypatch.setattr(sys, "stdin", Operator("y\n"))
    assert kit.run() is Outcome.CANCELED
    shown = kit.terminal.getvalue()
    assert shown.count("Apply this patch?") == 2
    assert "**Confidence:** 0.10" in shown
    # Canceled: the baseline is back, the first (confirmed) fix one `fwloop apply` away.
    assert kit.firmware() == "ok bug bug"
    assert (kit.controller.recorder.path / "best.patch").is_file()
