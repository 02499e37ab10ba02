"""Focus reruns (DESIGN.md §13), as plain decisions over recorded results.

A firmware suite is slow, so after a patch the iteration first runs only the tests the coder is
working on (those that failed or were flaky at some iteration, plus the tests reading the patch's
review or plan, plus the tester's picks); the tests it leaves out carry their last full-run
outcome, so convergence always sees whole-suite counts. The full suite then runs in the same
iteration as the regression gate, whenever the focused evidence could end the loop green: SUCCESS
is only ever declared on a full run.

A regression the focus hides (a patch breaks a test that never failed while others still fail)
surfaces at the first gate. The regression is listed under the gate's iteration, `broken_in`
names it, and the patch just applied is not rolled back for it (only a test that ran before a
patch convicts that patch); the run's shadow snapshots (one per iteration, `task-timeline.json`'s
`snapshot`) hold every tree in between, so `git --git-dir .fwloop/shadow.git diff A B` shows the
patches that could have done it, and the coder and reviewer get the regression to mend first.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from pytest_fwloop.core.machine.fsm import IterationKind
from pytest_fwloop.core.suite.results import COMMAND_NODEID_PREFIX, IterationResults, not_passing

Attempts = Sequence[tuple[int, IterationResults]]


@dataclass(frozen=True)
class FocusPlan:
    """What an iteration runs first: `select` None means the whole suite; otherwise only those
    node ids, the rest of `carried` standing in for the tests left out (empty: run nothing)."""

    select: list[str] | None
    carried: IterationResults | None = None
    why: str = "the whole suite"


WHOLE_SUITE = FocusPlan(None)


def plan_iteration(
    kind: IterationKind,
    standing: IterationResults | None,
    attempts: Attempts,
    extra: Iterable[str] = (),
) -> FocusPlan:
    """The focus of an iteration of `kind` on the tree whose last full results are `standing`.

    - a patch iteration, or a confirmation, runs what did not pass, or passed only on a rerun,
      at any iteration so far: the tests the coder is working on, so a patch that breaks one it
      fixed earlier is caught at once (the gate that made the loop green just ran the others
      on this very tree);
    - plus the tests that read the patch's review or test plan (their outcome is the patch's),
      and `extra`, the tester's picks;
    - the baseline, a patch iteration with nothing failing, and any iteration with nothing
      recorded to carry, run the whole suite.
    """
    if (
        standing is None
        or not standing.tests
        or kind not in (IterationKind.PATCH, IterationKind.CONFIRMATION)
    ):
        return WHOLE_SUITE
    failing = _suite_ids(t.nodeid for t in standing.tests if not_passing(t))
    if kind is IterationKind.PATCH and not failing:
        return WHOLE_SUITE  # nothing failing to focus on: the patch is judged by the full suite
    ever = _suite_ids(
        t.nodeid for _, results in attempts for t in results.tests if not_passing(t) or t.flaky
    )
    wanted = ever + [n for n in failing if n not in ever]
    why = f"{len(wanted)} test(s) that failed or were flaky at some iteration"
    aware = [t.nodeid for t in standing.tests if t.patch_aware and t.nodeid not in wanted]
    picked = [n for n in _suite_ids(extra) if n not in wanted and n not in aware]
    if aware:
        why += f" + {len(aware)} reading the patch's review or test plan"
    if picked:
        why += f" + {len(picked)} picked by the tester"
    return FocusPlan(wanted + aware + picked, carry(standing), why)


def carry(results: IterationResults) -> IterationResults:
    """`results` as the records of tests not run this time: outcome kept, marked `carried`.
    Tester command records are left out: a command is rerun by its own round, not carried."""
    tests = [
        t.model_copy(update={"carried": True})
        for t in results.tests
        if not t.nodeid.startswith(COMMAND_NODEID_PREFIX)
    ]
    return IterationResults(exitstatus=results.exitstatus, tests=tests, metrics=results.metrics)


def gate_due(focused: IterationResults, estimate: IterationResults, target: float) -> bool:
    """Whether the full suite must run now: every focused test passed, or the whole-suite
    estimate (carried + focused) reaches the target, so a verdict of SUCCESS would rest on
    carried outcomes unless the gate runs."""
    if focused.environment_failures():
        return False  # the environment is reset and the tests rerun first
    if not focused.not_passing():
        return True
    return estimate.total_count > 0 and estimate.pass_count / estimate.total_count >= target


def _suite_ids(nodeids: Iterable[str]) -> list[str]:
    return [n for n in dict.fromkeys(nodeids) if not n.startswith(COMMAND_NODEID_PREFIX)]
