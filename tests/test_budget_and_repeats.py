"""Budgets (usage arithmetic, the run budget) and stuck detection (repeated and A/B patches)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from loopkit import (
    APPROVE,
    CALC,
    FIXES,
    LoopProject,
    calc_fix_patches,
    coder_answer,
    tree_state,
    unified_diff,
)
from pytest_fwloop.core.gate.repeats import RepeatedPatch, find_repeat, hunks, reverted
from pytest_fwloop.core.machine.agent_budget import Budget, Usage, UsageLedger

# -- usage and budget (pure) ---------------------------------------------------------------------


def test_usage_sums_what_providers_report_and_counts_silent_calls() -> None:
    usage = Usage()
    usage.add({"input_tokens": 1300, "cached_input_tokens": 1000, "output_tokens": 150})
    usage.add({"input_tokens": 200, "output_tokens": 50, "cost_usd": 0.0123})
    usage.add({})
    assert usage.calls == 3
    assert usage.unreported_calls == 1
    assert usage.tokens == 1700  # input (cache reads included) + output
    assert usage.cost_usd == pytest.approx(0.0123)
    assert usage.to_dict() == {
        "calls": 3,
        "unreported_calls": 1,
        "input_tokens": 1500,
        "cached_input_tokens": 1000,
        "output_tokens": 200,
        "cost_usd": 0.0123,
        "tokens": 1700,
    }


def test_ledger_keeps_roles_apart_and_totals_them() -> None:
    ledger = UsageLedger()
    ledger.add("coder", {"input_tokens": 10, "output_tokens": 5, "cost_usd": 0.5})
    ledger.add("reviewer", {"input_tokens": 4, "output_tokens": 1, "cost_usd": 0.25})
    ledger.add("coder", {"input_tokens": 10, "output_tokens": 5, "cost_usd": 0.5})
    report = ledger.to_dict()
    assert report["roles"] == {
        "coder": {
            "calls": 2,
            "unreported_calls": 0,
            "input_tokens": 20,
            "cached_input_tokens": 0,
            "output_tokens": 10,
            "cost_usd": 1,
            "tokens": 30,
        },
        "reviewer": {
            "calls": 1,
            "unreported_calls": 0,
            "input_tokens": 4,
            "cached_input_tokens": 0,
            "output_tokens": 1,
            "cost_usd": 0.25,
            "tokens": 5,
        },
    }
    assert ledger.total.tokens == 35
    assert ledger.total.cost_usd == 1.25


def spent(**usage: float) -> Usage:
    total = Usage()
    total.add(usage)
    return total


def test_budget_is_exceeded_only_above_the_limit() -> None:
    assert Budget().overrun(spent(cost_usd=1e6, input_tokens=1e9)) is None
    assert Budget(usd=0.5).overrun(spent(cost_usd=0.5)) is None
    assert Budget(usd=0.5).overrun(spent(cost_usd=0.51)) == (
        "the agents' reported cost 0.51 USD exceeds --fwloop-budget-usd=0.5 after 1 call(s)"
    )
    assert Budget(tokens=100).overrun(spent(input_tokens=60, output_tokens=40)) is None
    assert Budget(tokens=100).overrun(spent(input_tokens=60, output_tokens=41)) == (
        "the agents used 101 tokens (input + output), over --fwloop-budget-tokens=100 "
        "after 1 call(s)"
    )


# -- repeated patches (pure) ---------------------------------------------------------------------


def diff(before: str, after: str, path: str = "fw/calc.py") -> str:
    return unified_diff(path, before, after)


FIX_ADD = diff(CALC, CALC.replace(*FIXES[0]))
FIXED_ADD = CALC.replace(*FIXES[0])


def test_hunks_ignore_line_numbers_and_whitespace_at_line_ends() -> None:
    moved = FIX_ADD.replace("@@ -1,", "@@ -3,").replace(" +1,", " +3,")
    trailing = FIX_ADD.replace("return a + b\n", "return a + b   \n")
    assert hunks(moved) == hunks(FIX_ADD) == hunks(trailing)
    assert len(hunks(FIX_ADD)) == 1
    assert hunks(FIX_ADD) != hunks(diff(CALC, CALC.replace("a - b", "b + a")))


def test_hunks_of_several_files_compare_as_a_set() -> None:
    first = diff("x = 1\n", "x = 2\n", "a.c")
    second = diff("y = 1\n", "y = 2\n", "b.c")
    assert hunks(first + second) == hunks(second + first)
    assert hunks(first) != hunks(diff("x = 1\n", "x = 2\n", "c.c"))  # same text, other file


def test_a_removed_line_that_looks_like_a_header_stays_in_its_hunk() -> None:
    patch = diff("-- a/comment\nkeep\n", "keep\n", "notes.lua")
    assert hunks(patch) == {("notes.lua", ("-- a/comment", "keep"), ("keep",))}


def test_patches_without_text_hunks_never_count_as_repeats() -> None:
    binary = "diff --git a/fw.bin b/fw.bin\nGIT binary patch\nliteral 1\nAcmZPo000001\n"
    assert hunks(binary) == frozenset()
    assert find_repeat(binary, [(2, binary)]) is None


def test_the_same_change_again_is_a_repeat_of_the_iteration_that_tried_it() -> None:
    other = diff(FIXED_ADD, FIXED_ADD.replace(*FIXES[1]))
    repeat = find_repeat(FIX_ADD, [(2, FIX_ADD), (3, other)])
    assert repeat == RepeatedPatch(2)
    assert repeat.must_fix() == (
        "this patch repeats the change iteration 2 already tried; it was not applied: "
        "propose a different fix"
    )
    assert find_repeat(other, [(2, FIX_ADD)]) is None


def test_reverting_the_previous_patch_is_allowed_but_redoing_it_is_an_alternation() -> None:
    revert = diff(FIXED_ADD, CALC)
    assert hunks(revert) == reverted(hunks(FIX_ADD))
    assert find_repeat(revert, [(2, FIX_ADD)]) is None  # undoing a bad idea is fine
    repeat = find_repeat(FIX_ADD, [(2, FIX_ADD), (3, revert)])
    assert repeat == RepeatedPatch(2, undone_by=3)
    assert "which iteration 3 reverted (an A/B alternation)" in repeat.must_fix()


lines = st.lists(st.sampled_from(["x = 1", "x = 2", "-- c", "+ d", "", "  y"]), max_size=8)


@given(before=lines, after=lines)
def test_a_change_repeats_itself_and_its_revert_is_its_mirror(
    before: list[str], after: list[str]
) -> None:
    old, new = "".join(f"{line}\n" for line in before), "".join(f"{line}\n" for line in after)
    change = hunks(diff(old, new))
    assert (change == frozenset()) == (old == new)
    assert hunks(diff(new, old)) == reverted(change)
    if change:
        assert find_repeat(diff(old, new), [(2, diff(old, new))]) == RepeatedPatch(2)
        assert find_repeat(diff(old, new), [(2, diff(old, new)), (3, diff(new, old))]) == (
            RepeatedPatch(2, undone_by=3)
        )


# -- the loop ------------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_repeated_patch_is_refused_once_then_ends_the_run(project: LoopProject) -> None:
    project.calc_suite()
    before = tree_state(project.root)
    # Iteration 2 applies the add fix; iteration 3 proposes the same change again, is told
    # once without it being applied, and proposes it yet again.
    coder = project.agent("coder", [coder_answer(FIX_ADD, "fix add")])
    result = project.run(f"--fwloop-coder={coder.spec}")
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    summary = project.summary()
    assert summary["outcome"] == "repeated_patch"
    assert summary["final_state"] == "FAILURE"
    assert summary["pass_counts"] == [1, 3]
    assert summary["reason"] == (
        "the coder proposed the change iteration 2 already tried again, after being told once"
    )
    assert [r["iteration"] for r in coder.requests()] == [2, 3, 3]
    told = coder.requests()[2]
    assert told["must_fix"] == [
        {
            "issue": "this patch repeats the change iteration 2 already tried; it was not "
            "applied: propose a different fix",
            "file": None,
            "line": None,
        }
    ]
    assert tree_state(project.root) == before
    [run_dir] = project.run_dirs()
    assert len(list((run_dir / "rounds" / "03").glob("rejected-*-repeat.diff"))) == 2
    assert [e["event"] for e in project.events()].count("patch_repeated") == 1


@pytest.mark.slow
def test_an_ab_alternation_is_named_as_one(project: LoopProject) -> None:
    project.calc_suite()
    revert = diff(FIXED_ADD, CALC)
    coder = project.agent(
        "coder",
        [coder_answer(FIX_ADD, "fix add"), coder_answer(revert, "revert"), coder_answer(FIX_ADD)],
    )
    # The whole suite each iteration, so the revert's effect on add's tests is measured (a
    # focus run would carry their pass until a gate: tests/test_suite_fit.py).
    result = project.run(f"--fwloop-coder={coder.spec}", "--fwloop-focus=off")
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    summary = project.summary()
    assert summary["outcome"] == "repeated_patch"
    assert summary["pass_counts"] == [1, 3, 1]  # undoing iteration 2 was allowed
    assert "which iteration 3 reverted (an A/B alternation) again" in summary["reason"]
    told = coder.requests()[3]
    assert told["iteration"] == 4
    assert (
        "iteration 2, which iteration 3 reverted (an A/B alternation)"
        in (told["must_fix"][0]["issue"])
    )


@pytest.mark.slow
def test_budget_exhausted_stops_cleanly_and_restores_the_tree(
    project: LoopProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    project.calc_suite()
    before = tree_state(project.root)
    claude = project.claude(
        monkeypatch, [coder_answer(p) for p in calc_fix_patches()], [APPROVE], cost_usd=0.0123
    )
    # Coder and reviewer each cost 0.0123: within 0.04 for three calls, over it at the fourth.
    result = project.run("--fwloop-coder=claude", "--fwloop-budget-usd=0.04")
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    summary = project.summary()
    assert summary["outcome"] == "budget_exhausted"
    assert summary["final_state"] == "FAILURE"
    assert summary["reason"] == (
        "the agents' reported cost 0.0492 USD exceeds --fwloop-budget-usd=0.04 after 4 call(s)"
    )
    assert summary["pass_counts"] == [1, 3]  # iteration 3's reviewer call was the fourth
    assert summary["usage"]["total"]["calls"] == 4
    assert summary["usage"]["roles"]["coder"]["cost_usd"] == pytest.approx(0.0246)
    assert summary["usage"]["roles"]["reviewer"]["tokens"] == 2200
    assert len(claude.requests("reviewer")) == 2
    assert tree_state(project.root) == before
    last = project.events()[-1]
    assert (last["from"], last["event"], last["to"]) == (
        "PATCH_GENERATION",
        "budget_exhausted",
        "FAILURE",
    )
    [run_dir] = project.run_dirs()
    assert "return a + b" in (run_dir / "best.patch").read_text()
    result.stdout.fnmatch_lines(
        ["*outcome: budget_exhausted (FAILURE)*", "*agent usage: 4 call(s), 4400 tokens*"]
    )


@pytest.mark.slow
def test_token_budget_from_the_ini(project: LoopProject, monkeypatch: pytest.MonkeyPatch) -> None:
    project.calc_suite("fwloop_budget_tokens = 1000\n")
    project.claude(monkeypatch, [coder_answer(FIX_ADD)], cost_usd=0.0)
    result = project.run("--fwloop-coder=claude")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    summary = project.summary()
    assert summary["outcome"] == "budget_exhausted"
    assert summary["reason"].startswith("the agents used 1100 tokens (input + output), over")
    assert summary["iterations"] == 1  # the coder's first call went over: nothing applied
    assert project.events()[-1]["from"] == "CODE_ANALYSIS"
    [run_dir] = project.run_dirs()
    meta = json.loads((run_dir / "rounds" / "02" / "coder-1.meta.json").read_text())
    assert meta["usage"] == {
        "input_tokens": 1000,
        "cached_input_tokens": 0,
        "output_tokens": 100,
        "cost_usd": 0.0,
    }


@pytest.mark.slow
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--fwloop-budget-usd=0"], "*--fwloop-budget-usd=0: must be a number > 0*"),
        (["--fwloop-budget-tokens=lots"], "*--fwloop-budget-tokens=lots: must be a whole number*"),
    ],
)
def test_bad_budgets_are_usage_errors(project: LoopProject, args: list[str], message: str) -> None:
    project.calc_suite("fwloop_coder = rules\n")
    result = project.run(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])
    assert project.run_dirs() == []
