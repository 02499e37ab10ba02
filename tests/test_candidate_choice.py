"""The choice among K candidates (core/gate/candidate_choice.py, DESIGN.md §19), pure."""

from __future__ import annotations

import dataclasses

from loopkit import unified_diff
from pytest_fwloop.core.gate.candidate_choice import (
    Candidate,
    choose,
    first_unjudged,
    next_to_gate,
    pass_at,
    ranking,
    summarised,
    with_agreement,
)
from pytest_fwloop.core.records.run_records import CandidateRound

FAILING = ("t::a", "t::b")


def patch(value: str) -> str:
    return unified_diff("fw/x.c", "int x = 0;\n", f"int x = {value};\n")


def checked(number: int, value: str, fixed: tuple[str, ...], risk: float = 0.1) -> Candidate:
    still = tuple(n for n in FAILING if n not in fixed)
    return Candidate(number, patch(value), risk=risk, fixed=fixed, still_failing=still)


def test_the_same_change_is_checked_once_and_counts_as_agreement() -> None:
    # Candidate 3 is candidate 1's change with other hunk numbers and trailing blanks.
    shifted = patch("1").replace("@@ -1 +1 @@", "@@ -5 +5 @@").replace("= 1;", "= 1;  ")
    marked = with_agreement(
        [Candidate(1, patch("1")), Candidate(2, patch("2")), Candidate(3, shifted)]
    )
    assert [(c.agreement, c.same_as) for c in marked] == [(2, None), (1, None), (2, 1)]
    assert marked[2].dropped == "the same change as candidate 1"
    assert marked[0].dropped is None


def test_a_candidate_without_a_patch_agrees_with_nobody() -> None:
    marked = with_agreement([Candidate(1, "", dropped="it proposes no patch"), Candidate(2, "")])
    assert [(c.agreement, c.same_as) for c in marked] == [(1, None), (1, None)]


def test_most_fixes_first_then_lower_risk_then_agreement_then_the_earlier() -> None:
    candidates = [
        checked(1, "1", ("t::a",), risk=0.1),
        checked(2, "2", FAILING, risk=0.5),
        checked(3, "3", FAILING, risk=0.2),
        dataclasses.replace(checked(4, "4", FAILING, risk=0.2), agreement=2),
        checked(5, "5", FAILING, risk=0.2),
    ]
    assert [c.number for c in ranking(candidates)] == [4, 3, 5, 2, 1]


def test_the_leader_owes_its_gate_and_one_that_breaks_a_passing_test_is_never_chosen() -> None:
    candidates = [checked(1, "1", FAILING, risk=0.1), checked(2, "2", ("t::a",), risk=0.1)]
    leader = next_to_gate(candidates)
    assert leader is not None
    assert leader.number == 1
    candidates[0] = dataclasses.replace(candidates[0], broke=("t::c",))
    leader = next_to_gate(candidates)
    assert leader is not None
    assert leader.number == 2  # the next one leads now
    candidates[1] = dataclasses.replace(candidates[1], broke=())
    assert next_to_gate(candidates) is None
    choice = choose(candidates)
    assert choice.chosen == 2
    assert choice.why[1] == "dropped: it breaks 1 passing test(s): t::c"
    assert choice.why[2].startswith("chosen: fixes 1/2 failing test(s) and no regression")


def test_nothing_standing_chooses_nothing_and_says_why_for_each() -> None:
    candidates = [
        Candidate(1, patch("1"), dropped="its build exited 2: x.c:1: error: expected ';'"),
        Candidate(2, "", dropped="it proposes no patch"),
        dataclasses.replace(checked(3, "3", FAILING), broke=("t::c", "t::d", "t::e", "t::f")),
    ]
    choice = choose(candidates)
    assert choice.chosen is None
    assert choice.why[1] == "dropped: its build exited 2: x.c:1: error: expected ';'"
    assert choice.why[3] == ("dropped: it breaks 4 passing test(s): t::c, t::d, t::e and 1 more")


def test_a_loser_is_told_which_rule_put_the_winner_above_it() -> None:
    candidates = [
        dataclasses.replace(checked(1, "1", FAILING, risk=0.3), broke=()),
        checked(2, "2", FAILING, risk=0.4),
        checked(3, "3", ("t::a",), risk=0.1),
    ]
    choice = choose(candidates)
    assert choice.chosen == 1
    assert choice.why[2].endswith("candidate 1 ranks above it (same fixes, lower risk)")
    assert choice.why[3].endswith("candidate 1 ranks above it (it fixes more)")


def test_pass_at_1_is_the_first_candidates_own_result_and_pass_at_k_any() -> None:
    wrong = checked(1, "1", ("t::a",))
    right = dataclasses.replace(checked(2, "2", FAILING), broke=())
    candidates = [wrong, right]
    measured = pass_at(candidates, choose(candidates))
    assert (measured.k, measured.pass_at_1, measured.pass_at_k) == (2, False, True)
    assert (measured.fixed_by_first, measured.fixed_by_chosen) == (1, 2)


def test_pass_at_1_owes_the_first_a_gate_when_its_focus_fixed_everything() -> None:
    """The first fixed every failing test but another led (lower risk): its whole-suite run
    is owed, so pass@1 is measured rather than assumed."""
    first = checked(1, "1", FAILING, risk=0.5)
    leader = dataclasses.replace(checked(2, "2", FAILING, risk=0.1), broke=())
    owed = first_unjudged([first, leader])
    assert owed is not None
    assert owed.number == 1
    gated = dataclasses.replace(first, broke=())
    assert first_unjudged([gated, leader]) is None
    assert pass_at([gated, leader], choose([gated, leader])).pass_at_1
    # A first candidate that duplicates nobody but fixed only part is owed nothing.
    assert first_unjudged([checked(1, "1", ("t::a",)), leader]) is None


def test_a_duplicate_first_candidate_takes_its_changes_result() -> None:
    leader = dataclasses.replace(checked(2, "2", FAILING), broke=())
    first = Candidate(1, patch("2"), dropped="the same change as candidate 2", same_as=2)
    assert pass_at([first, leader], choose([first, leader])).pass_at_1


def test_the_run_summary_counts_the_rounds_and_is_absent_with_one_candidate() -> None:
    assert summarised([], 1, 1) is None
    candidates = [
        checked(1, "1", ("t::a",)),
        dataclasses.replace(checked(2, "2", FAILING), broke=()),
    ]
    choice = choose(candidates)
    measured = pass_at(candidates, choice)
    round_ = CandidateRound(
        iteration=2,
        k=2,
        chosen=choice.chosen,
        pass_at_1=measured.pass_at_1,
        pass_at_k=measured.pass_at_k,
        fixed_by_first=measured.fixed_by_first,
        fixed_by_chosen=measured.fixed_by_chosen,
        build_s=0.2,
        tests_s=1.0,
    )
    summary = summarised([round_], 2, 1)
    assert summary is not None
    assert (summary.pass_at_1, summary.pass_at_k, summary.chosen_not_first) == (0, 1, 1)
