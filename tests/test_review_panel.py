"""A review panel (seed 002; docs/providers.md): every member judges each patch, in parallel;
`fwloop_review_rule` decides; each review is recorded, the must-fix lists are merged for the
coder, a split decision is named in the trace, and the highest risk is what fwloop_max_risk
bounds. Replay recomputes every panel decision from the recorded votes."""

from __future__ import annotations

import json
import shutil
import threading
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from controllerkit import ControllerKit, FakeProvider, fixing
from loopkit import APPROVE, LoopProject, calc_fix_patches, coder_answer
from pytest_fwloop.agents.base import RawAnswer
from pytest_fwloop.agents.errors import ProviderError, ProviderErrorKind
from pytest_fwloop.cli.main import main
from pytest_fwloop.config.settings import load_settings
from pytest_fwloop.core.gate.review_panel import approvals_needed, merged_must_fix, panel_verdict
from pytest_fwloop.core.machine.outcomes import Outcome
from pytest_fwloop.core.records.agent_protocol import AgentRequest, ReviewerAnswer


def review(decision: str, risk: float = 0.1, *issues: str) -> ReviewerAnswer:
    return ReviewerAnswer.model_validate(
        {
            "decision": decision,
            "must_fix": [{"issue": issue} for issue in issues],
            "risk": risk,
            "summary": f"{decision} at {risk}",
        }
    )


def changes(*issues: str, risk: float = 0.2) -> dict[str, Any]:
    return review("changes_requested", risk, *issues).model_dump()


def approve(risk: float = 0.1) -> dict[str, Any]:
    return {**APPROVE, "risk": risk}


# -- the rule (pure) -----------------------------------------------------------------------------


def test_all_needs_every_member_and_majority_more_than_half() -> None:
    assert [approvals_needed("all", n) for n in (2, 3, 4)] == [2, 3, 4]
    assert [approvals_needed("majority", n) for n in (2, 3, 4, 5)] == [2, 2, 3, 3]
    two_of_three = [("a", review("approve")), ("b", review("approve")), ("c", changes_of("x"))]
    assert panel_verdict("majority", two_of_three).review.decision == "approve"
    assert panel_verdict("all", two_of_three).review.decision == "changes_requested"
    one_of_two = two_of_three[1:]
    assert panel_verdict("majority", one_of_two).review.decision == "changes_requested"


def changes_of(*issues: str, risk: float = 0.2) -> ReviewerAnswer:
    return review("changes_requested", risk, *issues)


def test_the_verdict_merges_must_fix_names_a_split_and_takes_the_highest_risk() -> None:
    votes = [
        ("claude", review("approve", 0.3)),
        ("codex", changes_of("check the divisor", "keep the ISR short", risk=0.6)),
        ("rules", changes_of("Check  the divisor", risk=0.1)),
    ]
    verdict = panel_verdict("majority", votes)
    assert (verdict.review.decision, verdict.approvals, verdict.needed) == (
        "changes_requested",
        1,
        2,
    )
    assert verdict.split
    assert verdict.review.risk == 0.6
    assert [m.issue for m in verdict.review.must_fix] == [
        "check the divisor (raised by codex, rules)",
        "keep the ISR short (raised by codex)",
    ]
    assert verdict.line == (
        "split decision, 1 of 3 approve (fwloop_review_rule=majority: 2 needed): "
        "changes_requested; claude approve (risk 0.30), codex changes_requested (risk 0.60), "
        "rules changes_requested (risk 0.10); highest risk 0.60"
    )
    agreed = panel_verdict("all", [("a", review("approve")), ("b", review("approve", 0.2))])
    assert not agreed.split
    assert agreed.line.startswith("unanimous decision, 2 of 2 approve")
    assert agreed.review.must_fix == []
    # A dissent that is outvoted still shows in the panel's review, for the record.
    outvoted = panel_verdict("majority", [*votes[:2], ("c", review("approve"))])
    assert outvoted.review.decision == "approve"
    [dissent] = outvoted.review.must_fix[:1]
    assert dissent.issue.endswith("(raised by codex)")


decisions = st.sampled_from(["approve", "changes_requested"])
votes_strategy = st.lists(
    st.tuples(decisions, st.floats(0, 1), st.lists(st.sampled_from("abc"), max_size=3)),
    min_size=1,
    max_size=5,
)


@given(votes_strategy, st.sampled_from(["all", "majority"]))
def test_any_panel_decides_by_count_and_loses_no_must_fix_item(
    raw: list[tuple[str, float, list[str]]], rule: str
) -> None:
    votes = [
        (f"m{i}", review(d, r, *((issues or ["x"]) if d == "changes_requested" else [])))
        for i, (d, r, issues) in enumerate(raw)
    ]
    verdict = panel_verdict(rule, votes)  # type: ignore[arg-type]
    approvals = sum(v.decision == "approve" for _, v in votes)
    assert (verdict.review.decision == "approve") is (
        approvals >= approvals_needed(rule, len(votes))  # type: ignore[arg-type]
    )
    assert verdict.review.risk == max(v.risk for _, v in votes)
    raised = {m.issue.lower() for _, v in votes if v.decision != "approve" for m in v.must_fix}
    merged = {m.issue.split(" (raised by ")[0].lower() for m in merged_must_fix(votes)}
    assert merged == raised
    # What the gate is handed passes the reviewer's own schema.
    ReviewerAnswer.model_validate(verdict.review.model_dump())


# -- the loop, in-process ----------------------------------------------------------------------


class Members:
    """The panel's members, made through the public provider hook."""

    def __init__(self, *members: FakeProvider) -> None:
        self.members = {m.spec: m for m in members}

    @pytest.hookimpl
    def pytest_fwloop_make_provider(self, role: str, spec: str) -> FakeProvider | None:
        return self.members.get(spec)


@pytest.fixture
def kit(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> ControllerKit:
    return ControllerKit(pytester, monkeypatch)


def panel_run(kit: ControllerKit, rule: str, *members: FakeProvider) -> None:
    specs = ", ".join(m.spec for m in members)
    kit.build(
        "ok bug",
        f"fwloop_review_panel = {specs}",
        f"fwloop_review_rule = {rule}",
        plugins=(Members(*members),),
    )


def records(kit: ControllerKit, name: str) -> dict[str, Any]:
    path = kit.controller.recorder.path / name
    return json.loads(path.read_text(encoding="utf-8"))  # type: ignore[no-any-return]


def test_under_all_one_dissent_sends_the_merged_must_fix_back_to_the_coder(
    kit: ControllerKit, capsys: pytest.CaptureFixture[str]
) -> None:
    first = FakeProvider("fake:rev-a", [approve(0.1)])
    second = FakeProvider("fake:rev-b", [changes("name the magic number", risk=0.3), approve()])
    kit.coder.answers = [fixing("ok bug", "ok ok", "first"), fixing("ok bug", "ok ok", "second")]
    panel_run(kit, "all", first, second)
    assert kit.run() is Outcome.SUCCESS
    assert kit.firmware() == "ok ok"
    # Both members judged both proposals; the reviewer's failover list judged none.
    assert (len(first.requests), len(second.requests)) == (2, 2)
    assert kit.reviewer.requests == []
    told = kit.coder.requests[1].must_fix
    assert [m.issue for m in told] == ["name the magic number (raised by fake:rev-b)"]
    split = records(kit, "rounds/02/panel-1.json")
    assert (split["decision"], split["split"], split["approvals"], split["needed"]) == (
        "changes_requested",
        True,
        1,
        2,
    )
    assert [(v["provider"], v["decision"]) for v in split["votes"]] == [
        ("fake:rev-a", "approve"),
        ("fake:rev-b", "changes_requested"),
    ]
    for vote in split["votes"]:  # each vote is a recorded call of its member
        meta = records(kit, f"rounds/02/{vote['call']}.meta.json")
        assert meta["provider"] == vote["provider"]
    agreed = records(kit, "rounds/02/panel-2.json")
    assert (agreed["decision"], agreed["split"], agreed["risk"]) == ("approve", False, 0.1)
    assert records(kit, "rounds/02/review.json")["decision"] == "approve"
    events = kit.events()
    [asked_again] = [e for e in events if e["event"] == "review_changes_requested"]
    assert (
        "review panel requested changes (1 must-fix item(s), round 1/3)" in (asked_again["reason"])
    )
    assert (
        "; split decision, 1 of 2 approve (fwloop_review_rule=all: 2 needed)"
        in (asked_again["reason"])
    )
    panels = [e for e in events if e["event"] == "REVIEW_PANEL"]
    assert [e["evidence"] for e in panels] == [
        ["rounds/02/panel-1.json"],
        ["rounds/02/panel-2.json"],
    ]
    assert panels[0]["reason"].startswith("split decision")
    assert panels[1]["reason"].startswith("unanimous decision")
    [approved] = [e for e in events if e["event"] == "patch_approved"]
    assert approved["reason"].startswith("policy passed; review panel approved (highest risk ")
    assert main(["replay", str(kit.controller.recorder.path)]) == 0
    assert "every decision reproduces" in capsys.readouterr().out
    page = (kit.controller.recorder.path / "report.html").read_text()
    assert "Review panel 1: changes_requested (split)" in page
    assert "fwloop_review_rule=all: 1 of 2 approve, 2 needed" in page


def test_a_majority_lets_a_patch_through_and_names_the_split(kit: ControllerKit) -> None:
    members = [
        FakeProvider("fake:rev-a", [approve()]),
        FakeProvider("fake:rev-b", [changes("the patch is too broad")]),
        FakeProvider("fake:rev-c", [approve(0.2)]),
    ]
    kit.coder.answers = [fixing("ok bug", "ok ok")]
    panel_run(kit, "majority", *members)
    assert kit.run() is Outcome.SUCCESS
    [approved] = [e for e in kit.events() if e["event"] == "patch_approved"]
    assert (
        "split decision, 2 of 3 approve (fwloop_review_rule=majority: 2 needed): approve"
        in (approved["reason"])
    )
    kept = records(kit, "rounds/02/review.json")
    assert (kept["decision"], kept["risk"]) == ("approve", 0.2)
    assert kept["must_fix"][0]["issue"] == "the patch is too broad (raised by fake:rev-b)"


def test_the_highest_risk_of_the_panel_is_held_against_max_risk(kit: ControllerKit) -> None:
    members = [
        FakeProvider("fake:rev-a", [approve(0.1)]),
        FakeProvider("fake:rev-b", [approve(0.9), approve(0.2)]),
    ]
    kit.coder.answers = [fixing("ok bug", "ok ok", "bold"), fixing("ok bug", "ok ok", "careful")]
    panel_run(kit, "all", *members)
    assert kit.run() is Outcome.SUCCESS
    [refused] = [e for e in kit.events() if e["event"] == "patch_rejected"]
    assert "review panel risk 0.90 > fwloop_max_risk 0.70" in refused["reason"]
    assert "unanimous decision, 2 of 2 approve" in refused["reason"]
    [told] = kit.coder.requests[1].must_fix
    assert told.issue.startswith("the review panel rated the patch's risk 0.90")
    assert (kit.controller.recorder.path / "rounds/02/rejected-1-risk.diff").is_file()


def test_the_members_are_asked_at_once(kit: ControllerKit) -> None:
    """Each member's answer waits until every member has been asked: asked one after the
    other, the first would wait in vain and its call fail."""
    meeting = threading.Barrier(3)

    def together(request: AgentRequest, timeout: float) -> RawAnswer:
        meeting.wait(timeout=60)
        return RawAnswer(text=json.dumps(APPROVE))

    members = [FakeProvider(f"fake:rev-{n}", [together]) for n in "abc"]
    kit.coder.answers = [fixing("ok bug", "ok ok")]
    panel_run(kit, "all", *members)
    assert kit.run() is Outcome.SUCCESS
    assert not meeting.broken
    names = sorted(
        p.name for p in kit.controller.recorder.path.glob("rounds/02/reviewer-*.meta.json")
    )
    assert names == [f"reviewer-{k}.meta.json" for k in (1, 2, 3)]


def test_a_member_that_cannot_answer_stops_the_gate_as_a_lone_reviewer_would(
    kit: ControllerKit,
) -> None:
    down = ProviderError(ProviderErrorKind.PROVIDER_AUTH_ERROR, "fake:rev-b", "HTTP 401")
    members = [FakeProvider("fake:rev-a", [approve()]), FakeProvider("fake:rev-b", [down])]
    kit.coder.answers = [fixing("ok bug", "ok ok")]
    panel_run(kit, "majority", *members)
    assert kit.run() is Outcome.PROVIDER_AUTH_ERROR
    assert kit.firmware() == "ok bug"
    assert not list(kit.controller.recorder.path.glob("rounds/*/panel-*.json"))
    assert len(members[0].requests) == 1  # the other member was asked all the same


def test_an_invalid_member_answer_is_review_schema_invalid(kit: ControllerKit) -> None:
    members = [
        FakeProvider("fake:rev-a", [approve()]),
        FakeProvider("fake:rev-b", [{"decision": "maybe"}]),
    ]
    kit.coder.answers = [fixing("ok bug", "ok ok")]
    panel_run(kit, "all", *members)
    assert kit.run() is Outcome.REVIEW_SCHEMA_INVALID
    assert len(members[1].requests) == 2  # re-asked once with the errors, as a reviewer is
    assert kit.summary()["reason"].startswith(
        "review panel member fake:rev-b answer failed the schema twice ("
    )


@pytest.fixture
def panel_dir(kit: ControllerKit) -> Path:
    first = FakeProvider("fake:rev-a", [approve()])
    second = FakeProvider("fake:rev-b", [changes("name the magic number"), approve()])
    kit.coder.answers = [fixing("ok bug", "ok ok"), fixing("ok bug", "ok ok")]
    panel_run(kit, "all", first, second)
    assert kit.run() is Outcome.SUCCESS
    return kit.controller.recorder.path


def _rewrite(path: Path, change: dict[str, Any]) -> None:
    path.write_text(json.dumps({**json.loads(path.read_text()), **change}))


@pytest.mark.parametrize(
    ("tamper", "named"),
    [
        (
            lambda d: _rewrite(d / "rounds/02/panel-1.json", {"decision": "approve"}),
            "iteration 2, panel: panel-1.json says approve (1 approve, 2 needed); the votes "
            "under rule all give changes_requested",
        ),
        (
            lambda d: _rewrite(d / "rounds/02/panel-1.json", {"rule": "majority", "needed": 1}),
            "iteration 2, panel: panel-1.json says changes_requested (1 approve, 1 needed); "
            "the votes under rule majority give changes_requested (split decision, 1 of 2 "
            "approve (fwloop_review_rule=majority: 2 needed)",
        ),
        (
            lambda d: _rewrite(
                d / f"rounds/02/{_call_of(d, 'fake:rev-b')}.answer.json",
                {"decision": "approve", "must_fix": []},
            ),
            "iteration 2, panel: panel-1.json: fake:rev-b voted changes_requested (risk 0.20); "
            "its call",
        ),
        (
            lambda d: _rewrite(d / "rounds/02/panel-2.json", {"max_risk": 0.05}),
            "iteration 2, panel: patch.diff was applied after the panel's approve (highest "
            "risk 0.10, fwloop_max_risk 0.05)",
        ),
    ],
    ids=["decision", "count", "vote", "risk"],
)
def test_replay_recomputes_each_panel_decision_from_the_recorded_votes(
    panel_dir: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    tamper: Any,
    named: str,
) -> None:
    assert main(["replay", str(panel_dir)]) == 0
    copy = shutil.copytree(panel_dir, tmp_path / "copy")
    tamper(copy)
    capsys.readouterr()
    assert main(["replay", str(copy)]) == 1
    assert f"fwloop replay: does not reproduce: {named}" in capsys.readouterr().err


def _call_of(run_dir: Path, provider: str) -> str:
    panel = json.loads((run_dir / "rounds/02/panel-1.json").read_text())
    return next(v["call"] for v in panel["votes"] if v["provider"] == provider)  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    ("ini", "says"),
    [
        (
            "fwloop_review_panel = fake:rev-a",
            "fwloop: ini fwloop_review_panel=fake:rev-a: a review panel needs two or more "
            "members; a single reviewer is fwloop_reviewer",
        ),
        (
            "fwloop_review_rule = majority",
            "fwloop: ini fwloop_review_rule=majority: the rule is a review panel's, and none is "
            "set; name its members in fwloop_review_panel",
        ),
        (
            "fwloop_review_rule = most",
            "fwloop: ini fwloop_review_rule = 'most': must be 'all' (every member approves) or "
            "'majority' (more than half)",
        ),
        (
            "fwloop_review_panel = fake:rev-a, command:/no/such/reviewer",
            "fwloop: ini fwloop_review_panel: command:/no/such/reviewer: ",
        ),
        (
            "fwloop_review_panel = fake:rev-a, rules,",
            "fwloop: ini fwloop_review_panel=fake:rev-a, rules,: empty entry in the review "
            "panel's members; remove the extra comma",
        ),
    ],
    ids=["one-member", "rule-without-panel", "bad-rule", "member-missing", "trailing-comma"],
)
def test_a_panel_that_cannot_decide_is_refused_before_the_run(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, ini: str, says: str
) -> None:
    for name in ("FWLOOP_REVIEW_PANEL", "FWLOOP_REVIEW_RULE"):
        monkeypatch.delenv(name, raising=False)
    pytester.makeini(f"[pytest]\nfwloop_coder = rules\n{ini}\n")
    pytester.plugins.append(Members(FakeProvider("fake:rev-a", [])))
    with pytest.raises(pytest.UsageError) as raised:
        load_settings(pytester.parseconfigure("--fwloop"))
    assert str(raised.value).startswith(says)


# -- a real run ------------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_real_panel_of_two_agents_judges_every_patch_of_pytest_fwloop(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = LoopProject(pytester, monkeypatch)
    project.calc_suite()
    patches = calc_fix_patches()
    # The first patch is sent back by the panel, then proposed again.
    coder = project.agent("coder", [coder_answer(p) for p in [patches[0], *patches]])
    strict = project.agent("strict", [], [changes("add a test name to the summary"), APPROVE])
    lenient = project.agent("lenient", [], [approve(0.3)])
    result = project.run(
        f"--fwloop-coder={coder.spec}",
        f"--fwloop-review-panel={strict.spec},{lenient.spec}",
    )
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines([f"*review_panel=all:{strict.spec},{lenient.spec}*"])
    assert coder.requests("reviewer") == []  # the failover list is not the gate
    assert len(strict.requests("reviewer")) == len(lenient.requests("reviewer")) == 4
    second = coder.requests("coder")[1]
    assert second["must_fix"][0]["issue"] == (
        f"add a test name to the summary (raised by {strict.spec})"
    )
    [run_dir] = project.run_dirs()
    assert sorted(p.name for p in run_dir.glob("rounds/02/panel-*.json")) == [
        "panel-1.json",
        "panel-2.json",
    ]
    splits = [e for e in project.events() if e["event"] == "REVIEW_PANEL"]
    assert [e["reason"].split(",")[0] for e in splits] == [
        "split decision",
        "unanimous decision",
        "unanimous decision",
        "unanimous decision",
    ]
    replayed = project.replay()
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
