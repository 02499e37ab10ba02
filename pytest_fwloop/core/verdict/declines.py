"""A coder's "not a code defect" (DESIGN.md §15), as plain decisions.

An answer with no patch that names failing tests in `declined` declines them; an empty patch
without it is still an answer that could not be used (asked again, bounded). A declined test is
not sent to the coder again while it fails the same way (same signature). When only declined
tests are left, the run ends: converged with improvement when the pass count rose over the
baseline (seed 001 §5.19), else failure with the coder's words.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pytest_fwloop.core.machine.outcomes import Outcome
from pytest_fwloop.core.records.agent_protocol import CoderAnswer
from pytest_fwloop.core.records.run_records import DeclinedRecord


def declined_by(
    answer: CoderAnswer, sent: Mapping[str, str], iteration: int
) -> dict[str, DeclinedRecord]:
    """What `answer` declines of the failures it was `sent` (node id: signature); a node id it
    names that it was not sent is ignored (it has no evidence to decline)."""
    named = {d.nodeid: d.reason for d in answer.declined if d.nodeid in sent}
    return {
        nodeid: DeclinedRecord(
            signature=sent[nodeid], reason=reason or answer.analysis.root_cause, iteration=iteration
        )
        for nodeid, reason in named.items()
    }


def still_declined(failing: Mapping[str, str], declined: Mapping[str, DeclinedRecord]) -> set[str]:
    """The failing tests (node id: signature) that fail as they did when declined."""
    return {n for n, sig in failing.items() if n in declined and declined[n].signature == sig}


def decline_ending(
    pass_counts: Sequence[int], declined: Mapping[str, DeclinedRecord]
) -> tuple[Outcome, str]:
    """The run's end when only declined tests are left failing."""
    reasons = sorted({record.reason for record in declined.values()})
    words = "; ".join(reasons)[:300]
    if len(pass_counts) >= 2 and pass_counts[-1] > pass_counts[0]:
        return Outcome.CONVERGED_WITH_IMPROVEMENT, (
            f"only tests the coder declined are left failing ({len(declined)}: {words}); "
            f"pass count {pass_counts[0]} -> {pass_counts[-1]} over the baseline"
        )
    return Outcome.FAILURE, f"the coder declined every remaining failure: {words}"
