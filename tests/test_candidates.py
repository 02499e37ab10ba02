"""K candidates per iteration through the controller in-process (DESIGN.md §19).

The kit's child reads a tree's `fw/state.txt`: one word a test, `ok` passes. Each candidate's
tests run in its own scratch tree under `.fwloop/candidates/` (real exports from the real
shadow store, real builds where one is configured); the user's tree is watched through
`Workspace.apply`, the one way the loop writes a patch into it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from controllerkit import FIRMWARE, ControllerKit, fixing
from pytest_fwloop.cli.replay import load_run, replay
from pytest_fwloop.core.machine.outcomes import Outcome
from pytest_fwloop.loop.operator.continuation import Action, Order
from pytest_fwloop.workspace import Workspace

#: A build that fails when the firmware says `broken`, as a compiler would on a syntax error.
BUILD = (
    "import sys, pathlib\n"
    "text = pathlib.Path('fw/state.txt').read_text()\n"
    "sys.exit('fw/state.txt:1: error: broken' if 'broken' in text else 0)\n"
)


@pytest.fixture
def kit(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> ControllerKit:
    return ControllerKit(pytester, monkeypatch)


def watch_applies(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every patch written into the user's tree, in order."""
    applied: list[str] = []
    real = Workspace.apply

    def apply(self: Workspace, patch: str, before: str | None = None) -> list[str]:
        applied.append(patch)
        return real(self, patch, before)

    monkeypatch.setattr(Workspace, "apply", apply)
    return applied


def candidates_record(kit: ControllerKit, iteration: int, name: str = "candidates") -> Any:
    path = kit.controller.recorder.round_path(iteration) / f"{name}.json"
    return json.loads(path.read_text(encoding="utf-8"))


def test_the_candidate_that_fixes_most_without_a_regression_is_the_one_applied(
    kit: ControllerKit, monkeypatch: pytest.MonkeyPatch
) -> None:
    applied = watch_applies(monkeypatch)
    breaks = fixing("ok bug bug", "bad ok ok", "fixes both, breaks test_0")
    partial = fixing("ok bug bug", "ok ok bug", "fixes one")
    right = fixing("ok bug bug", "ok ok ok", "fixes both")
    kit.coder.answers = [breaks, partial, right]
    kit.build("ok bug bug", "fwloop_max_iter = 5", "fwloop_candidates = 3")
    assert kit.run() is Outcome.SUCCESS
    assert kit.firmware() == "ok ok ok"
    # Only the chosen candidate ever reached the user's tree.
    assert applied == [right["patch"]]
    record = candidates_record(kit, 2)
    assert (record["k"], record["chosen"], record["pass_at_1"], record["pass_at_k"]) == (
        3,
        3,
        False,
        True,
    )
    verdicts = {c["number"]: (c["verdict"], c["broke"]) for c in record["candidates"]}
    assert verdicts == {
        1: ("dropped", ["tests/test_fw.py::test_0"]),
        2: ("lost", None),
        3: ("chosen", []),
    }
    assert record["candidates"][1]["why"].endswith("ranks above it (it fixes more)")
    assert record["failing"] == ["tests/test_fw.py::test_1", "tests/test_fw.py::test_2"]
    # Every candidate ran in a scratch tree of its own under .fwloop/, removed after.
    scratch = kit.root / ".fwloop" / "candidates"
    assert kit.child.trees
    assert all(tree.parent == scratch for tree in kit.child.trees)
    assert len(set(kit.child.trees)) == 3
    assert not any(tree.exists() for tree in kit.child.trees)
    summary = kit.summary()
    assert summary["pass_counts"] == [1, 3, 3]
    assert summary["coder_calls"] == 3
    assert summary["candidates"]["pass_at_1"] == 0
    assert summary["candidates"]["pass_at_k"] == 1
    assert summary["candidates"]["chosen_not_first"] == 1
    [round_] = summary["candidates"]["rounds"]
    assert (round_["iteration"], round_["chosen"], round_["fixed_by_first"]) == (2, 3, 0)
    # The applied patch went through the ordinary path: its review, patch.diff, its rebuild.
    assert (kit.controller.recorder.round_path(2) / "patch.diff").read_text() == right["patch"]
    report = (kit.controller.recorder.path / "report.html").read_text(encoding="utf-8")
    assert "Candidates 1: candidate 3 chosen of 3; pass@1 no, pass@3 yes" in report
    assert "dropped: it breaks 1 passing test(s): tests/test_fw.py::test_0" in report
    events = [e["event"] for e in kit.events() if e["kind"] == "substate"]
    assert events.count("CANDIDATE_TRIAL") == 3
    assert events.count("CANDIDATE_CHOICE") == 1


def test_a_candidate_that_does_not_build_costs_no_iteration(
    kit: ControllerKit, monkeypatch: pytest.MonkeyPatch
) -> None:
    applied = watch_applies(monkeypatch)
    (kit.root / "build.py").write_text(BUILD, encoding="utf-8")
    broken = fixing("ok bug", "ok broken", "does not compile")
    right = fixing("ok bug", "ok ok")
    kit.coder.answers = [broken, right]
    kit.build("ok bug", "fwloop_build = python3 build.py", "fwloop_candidates = 2")
    assert kit.run() is Outcome.SUCCESS
    assert applied == [right["patch"]]
    record = candidates_record(kit, 2)
    first = record["candidates"][0]
    assert (first["build"], first["verdict"], first["fixed"]) == ("failed", "dropped", None)
    assert "its build exited 1: fw/state.txt:1: error: broken" in first["why"]
    assert record["pass_at_1"] is False
    assert record["pass_at_k"] is True
    # The baseline, the chosen candidate's iteration, its confirmation: as one right answer.
    assert kit.summary()["pass_counts"] == [1, 2, 2]


def test_when_no_candidate_survives_the_coder_is_asked_again_in_the_same_iteration(
    kit: ControllerKit,
) -> None:
    (kit.root / "build.py").write_text(BUILD, encoding="utf-8")
    kit.coder.answers = [
        fixing("ok bug", "ok broken"),
        fixing("ok bug", "broken ok"),
        fixing("ok bug", "ok ok"),
    ]
    kit.build("ok bug", "fwloop_build = python3 build.py", "fwloop_candidates = 2")
    assert kit.run() is Outcome.SUCCESS
    moves = kit.moves()
    assert ("PATCH_GENERATION", "patch_rejected", "ERROR_RECOVERY") in moves
    assert ("ERROR_RECOVERY", "recover_to_analysis", "CODE_ANALYSIS") in moves
    # Both broken candidates' diagnostics went back to the coder, in iteration 2 still.
    retry = kit.coder.requests[2]
    assert retry.iteration == 2
    issues = [m.issue for m in retry.must_fix]
    assert any(i.startswith("candidate 1 its build exited 1") for i in issues)
    assert any(i.startswith("candidate 2 its build exited 1") for i in issues)
    assert candidates_record(kit, 2)["chosen"] is None
    assert candidates_record(kit, 2, "candidates-2")["chosen"] == 1
    summary = kit.summary()
    assert summary["pass_counts"] == [1, 2, 2]
    assert [r["chosen"] for r in summary["candidates"]["rounds"]] == [None, 1]


def test_each_request_says_which_candidate_it_asks_for_and_agreement_is_counted(
    kit: ControllerKit,
) -> None:
    same = fixing("bug", "ok")
    kit.coder.answers = [same, same, fixing("bug", "meh")]
    kit.build("bug", "fwloop_candidates = 3")
    assert kit.run() is Outcome.SUCCESS
    extras = [r.model_extra or {} for r in kit.coder.requests]
    assert [e.get("candidate") for e in extras] == [
        {"number": 1, "of": 3},
        {"number": 2, "of": 3},
        {"number": 3, "of": 3},
    ]
    # One localization for the three: the same evidence in each.
    assert (
        len({json.dumps(r.failures and r.failures[0].model_dump()) for r in kit.coder.requests})
        == 1
    )
    record = candidates_record(kit, 2)
    assert [(c["agreement"], c["same_as"]) for c in record["candidates"]] == [
        (2, None),
        (2, 1),
        (1, None),
    ]
    assert record["chosen"] == 1
    # The duplicate was not checked again: two scratch trees, not three.
    assert len(set(kit.child.trees)) == 2


def test_one_candidate_sends_no_candidate_field_and_writes_no_candidate_record(
    kit: ControllerKit,
) -> None:
    kit.coder.answers = [fixing("bug", "ok")]
    kit.build("bug")
    assert kit.run() is Outcome.SUCCESS
    assert "candidate" not in (kit.coder.requests[0].model_extra or {})
    assert not list(Path(kit.controller.recorder.path).glob("rounds/*/candidates*"))
    assert kit.summary()["candidates"] is None
    assert kit.child.trees == []
    assert (kit.root / FIRMWARE).read_text().strip() == "ok"


#: A candidate's build that waits (up to 20 s) until another candidate's build has started: it
#: succeeds only when two candidates are built side by side. The user's tree builds at once.
PAIRED_BUILD = (
    "import os, pathlib, sys, time\n"
    "if '/.fwloop/candidates/' not in os.getcwd():\n"
    "    sys.exit(0)\n"
    "meeting = pathlib.Path(os.environ['CANDIDATE_MEETING'])\n"
    "(meeting / str(os.getpid())).write_text(os.getcwd())\n"
    "deadline = time.monotonic() + 20\n"
    "while len(list(meeting.iterdir())) < 2 and time.monotonic() < deadline:\n"
    "    time.sleep(0.02)\n"
    "sys.exit(0 if len(list(meeting.iterdir())) >= 2 else 'no other build came')\n"
)


def test_candidate_jobs_check_two_candidates_side_by_side_each_in_its_own_tree(
    kit: ControllerKit, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    meeting = tmp_path / "meeting"
    meeting.mkdir()
    monkeypatch.setenv("CANDIDATE_MEETING", str(meeting))
    (kit.root / "build.py").write_text(PAIRED_BUILD, encoding="utf-8")
    kit.coder.answers = [fixing("ok bug", "ok meh"), fixing("ok bug", "ok ok")]
    kit.build(
        "ok bug",
        "fwloop_candidates = 2",
        "fwloop_candidate_jobs = 2",
        "fwloop_build = python3 build.py",
        "fwloop_build_timeout = 60",
    )
    outcome = kit.run()
    assert outcome is Outcome.SUCCESS, kit.terminal.getvalue()
    record = candidates_record(kit, 2)
    assert [c["build"] for c in record["candidates"]] == ["ok", "ok"]
    assert record["jobs"] == 2
    assert record["chosen"] == 2
    scratch = [p.read_text() for p in meeting.iterdir()]
    assert len(set(scratch)) == 2  # two trees, never one shared


def test_replay_derives_the_choice_again_and_names_a_record_that_disagrees(
    kit: ControllerKit,
) -> None:
    kit.coder.answers = [fixing("ok bug bug", "ok ok bug"), fixing("ok bug bug", "ok ok ok")]
    kit.build("ok bug bug", "fwloop_candidates = 2")
    assert kit.run() is Outcome.SUCCESS
    run_dir = kit.controller.recorder.path
    assert replay(load_run(run_dir)) is None
    path = run_dir / "rounds" / "02" / "candidates.json"
    record = json.loads(path.read_text(encoding="utf-8"))
    assert record["chosen"] == 2
    record["candidates"][0]["fixed"] = record["failing"]  # as if the first had fixed both
    record["candidates"][0]["still_failing"] = []
    record["candidates"][0]["broke"] = []
    path.write_text(json.dumps(record), encoding="utf-8")
    difference = replay(load_run(run_dir))
    assert difference is not None
    assert (difference.iteration, difference.decision) == (2, "candidates")
    assert "candidate 2 was chosen; its records give 1" in difference.detail


def test_a_resumed_run_keeps_the_candidate_rounds_made_before_it_stopped(
    kit: ControllerKit,
) -> None:
    """`summary.json["candidates"]` of a run continued by `fwloop resume` counts the rounds of
    both processes: state.json carries them."""
    first = fixing("ok bug bug", "ok ok bug", "fixes one")
    rest = fixing("ok ok bug", "ok ok ok", "fixes the other")
    kit.coder.answers = [first, first, rest, rest]
    kit.build("ok bug bug", "fwloop_max_iter = 2", "fwloop_candidates = 2")
    assert kit.run() is Outcome.MAX_ITERATIONS_REACHED
    [saved] = [it["candidate_rounds"] for it in kit.state()["iterations"] if it["number"] == 2]
    assert [r["iteration"] for r in saved] == [2]
    revision = kit.state()["revision"]
    kit.continue_run(Order(action=Action.RESUME, run_id="run-1", revision=revision), "--max-iter=5")
    assert kit.run() is Outcome.SUCCESS
    rounds = kit.summary()["candidates"]["rounds"]
    assert [r["iteration"] for r in rounds] == [2, 3]
    assert kit.summary()["candidates"]["pass_at_k"] == 1  # only the second round fixed all
