"""Which of an iteration's K candidates is applied (DESIGN.md §19), pure.

Each candidate is judged by the facts its checks gathered in a scratch tree of its own: the
gate and the reviewer, the build, the focus run of the tests failing now, and (for the leader)
the whole suite as the regression gate. The rules, in order: a candidate with no patch, refused
by the gate, that does not build, or that breaks a test which passes now is dropped; of the
rest the one fixing most failing tests wins, ties going to the lower reviewer risk, then to the
change more candidates proposed (agreement), then to the earlier candidate. Candidates that
are the same change (hunks compared as `repeats.hunks` does) are checked once: the first of
them stands for all, and their number is its agreement.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

from pytest_fwloop.core.gate.repeats import hunks
from pytest_fwloop.core.records.run_records import CandidateRound, CandidatesSummary


@dataclass(frozen=True)
class Candidate:
    """One coder answer and what its checks found; None where a check has not run (yet)."""

    number: int  # 1-based, in the order the coder was asked
    patch: str
    #: Why it left the running before the tests could judge it (no patch, the gate, the
    #: build, a duplicate): the first check that stopped it, in words.
    dropped: str | None = None
    #: The number of the earlier candidate making the same change, when it is a duplicate.
    same_as: int | None = None
    #: How many candidates made this change, itself included (duplicates' own is theirs).
    agreement: int = 1
    #: The risk the gate summed (the reviewer's, raised by risky code), once it approved.
    risk: float | None = None
    #: The tests failing now that its focus run passed, and those it left failing.
    fixed: tuple[str, ...] | None = None
    still_failing: tuple[str, ...] = ()
    #: Tests passing now that its whole-suite run did not pass; None until that run.
    broke: tuple[str, ...] | None = None

    @property
    def standing(self) -> bool:
        """Still in the running: checked by its focus run and not found breaking a test."""
        return self.dropped is None and self.fixed is not None and not self.broke

    @property
    def solves(self) -> bool:
        """It fixed every failing test of its focus and its gate found no regression."""
        return self.standing and not self.still_failing and self.broke == ()


def with_agreement(candidates: Sequence[Candidate]) -> list[Candidate]:
    """Each duplicate marked `same_as` the first candidate of its change (and dropped, so it is
    not checked twice); every candidate's `agreement` is the size of its group. A candidate
    with no patch agrees with nobody."""
    first_of: dict[frozenset[tuple[str, tuple[str, ...], tuple[str, ...]]], int] = {}
    group: dict[int, list[int]] = {}
    for c in candidates:
        change = hunks(c.patch) if c.patch.strip() else frozenset()
        if not change:
            continue
        leader = first_of.setdefault(change, c.number)
        group.setdefault(leader, []).append(c.number)
    marked = []
    for c in candidates:
        lead = next((n for n, members in group.items() if c.number in members), None)
        if lead is None:
            marked.append(c)
            continue
        size = len(group[lead])
        if lead == c.number:
            marked.append(dataclasses.replace(c, agreement=size))
        else:
            marked.append(
                dataclasses.replace(
                    c,
                    agreement=size,
                    same_as=lead,
                    dropped=c.dropped or f"the same change as candidate {lead}",
                )
            )
    return marked


def _rank_key(c: Candidate) -> tuple[int, float, int, int]:
    assert c.fixed is not None
    return (-len(c.fixed), c.risk if c.risk is not None else 1.0, -c.agreement, c.number)


def ranking(candidates: Sequence[Candidate]) -> list[Candidate]:
    """The candidates still standing, best first."""
    return sorted((c for c in candidates if c.standing), key=_rank_key)


def next_to_gate(candidates: Sequence[Candidate]) -> Candidate | None:
    """The leader, when its whole-suite run is still owed; None once the leader has passed its
    gate or nobody is standing."""
    ranked = ranking(candidates)
    if not ranked or ranked[0].broke is not None:
        return None
    return ranked[0]


def first_unjudged(candidates: Sequence[Candidate]) -> Candidate | None:
    """The first candidate's change when its focus fixed every failing test but no gate ran
    it (another led): its whole-suite run is owed to pass@1, so that figure is measured, not
    guessed; None when nothing is owed."""
    first = candidates[0] if candidates else None
    if first is not None and first.same_as is not None:
        first = next((c for c in candidates if c.number == first.same_as), None)
    if first is None or not first.standing or first.still_failing or first.broke is not None:
        return None
    return first


@dataclass(frozen=True)
class Choice:
    """The candidate to apply (None: none survived) and, per candidate, why it won or lost."""

    chosen: int | None
    why: dict[int, str]


def choose(candidates: Sequence[Candidate]) -> Choice:
    """The leader that passed its gate, and one line per candidate saying why it won or lost.
    Call once `next_to_gate` is None."""
    ranked = ranking(candidates)
    winner = ranked[0] if ranked and ranked[0].broke == () else None
    why: dict[int, str] = {}
    for c in candidates:
        if c.dropped is not None:
            why[c.number] = f"dropped: {c.dropped}"
        elif c.broke:
            more = f" and {len(c.broke) - 3} more" if c.broke[3:] else ""
            shown = ", ".join(c.broke[:3]) + more
            why[c.number] = f"dropped: it breaks {len(c.broke)} passing test(s): {shown}"
        elif c.fixed is None:
            why[c.number] = "dropped: its tests did not run"
        elif winner is not None and c.number == winner.number:
            why[c.number] = f"chosen: {_merits(c)}"
        else:
            why[c.number] = f"lost: {_merits(c)}" + (
                f"; candidate {winner.number} ranks above it ({_edge(winner, c)})"
                if winner is not None
                else ""
            )
    return Choice(winner.number if winner is not None else None, why)


def _merits(c: Candidate) -> str:
    assert c.fixed is not None
    total = len(c.fixed) + len(c.still_failing)
    risk = f"risk {c.risk:g}" if c.risk is not None else "risk unknown"
    gated = " and no regression in the whole suite" if c.broke == () else ""
    return f"fixes {len(c.fixed)}/{total} failing test(s){gated}; {risk}; agreement {c.agreement}"


def _edge(winner: Candidate, loser: Candidate) -> str:
    """The first rule that puts `winner` above `loser`."""
    assert winner.fixed is not None
    assert loser.fixed is not None
    if len(winner.fixed) != len(loser.fixed):
        return "it fixes more"
    if winner.risk != loser.risk:
        return "same fixes, lower risk"
    if winner.agreement != loser.agreement:
        return "same fixes and risk, more candidates agree on it"
    return "a tie on every rule: the earlier candidate"


@dataclass(frozen=True)
class PassAt:
    """What K bought in one iteration: whether the first candidate alone solved it (pass@1),
    whether any did (pass@K), and how many failing tests each fixed."""

    k: int
    pass_at_1: bool
    pass_at_k: bool
    fixed_by_first: int
    fixed_by_chosen: int


def pass_at(candidates: Sequence[Candidate], choice: Choice) -> PassAt:
    """pass@1 is the first candidate's own result (with a duplicate, its change's); pass@K is
    whether any candidate solved every failing test without a regression found."""
    by_number = {c.number: c for c in candidates}
    first = candidates[0]
    first = by_number.get(first.same_as or first.number, first)
    chosen = by_number.get(choice.chosen) if choice.chosen is not None else None
    return PassAt(
        k=len(candidates),
        pass_at_1=first.solves,
        pass_at_k=any(c.solves for c in candidates),
        fixed_by_first=len(first.fixed or ()) if not first.broke else 0,
        fixed_by_chosen=len(chosen.fixed or ()) if chosen is not None else 0,
    )


def summarised(rounds: Sequence[CandidateRound], k: int, jobs: int) -> CandidatesSummary | None:
    """`summary.json["candidates"]`: the run's choices, and how often pass@1 and pass@K held;
    None with one candidate per iteration."""
    if k <= 1:
        return None
    return CandidatesSummary(
        k=k,
        jobs=jobs,
        rounds=list(rounds),
        pass_at_1=sum(r.pass_at_1 for r in rounds),
        pass_at_k=sum(r.pass_at_k for r in rounds),
        chosen_not_first=sum(r.chosen not in (None, 1) for r in rounds),
    )
