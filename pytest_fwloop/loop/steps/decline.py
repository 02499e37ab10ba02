"""The coder's "not a code defect" in the loop (DESIGN.md §15; rules in `core/verdict/declines.py`).

PATCH_GENERATION takes a decline (no patch, the tests named in `declined`) as a decision, not a
model failure: the declined tests are
recorded and the coder goes on with the other failures, if any, without being asked again
about the declined ones. CODE_ANALYSIS ends the run when only declined tests are left.
"""

from __future__ import annotations

from pytest_fwloop.core.machine.fsm import LoopEvent
from pytest_fwloop.core.records.run_records import DecisionRecord
from pytest_fwloop.core.suite.signature import signature
from pytest_fwloop.core.verdict.declines import decline_ending, declined_by
from pytest_fwloop.loop.state import LoopState, Step


def take_decline(loop: LoopState, root: str) -> Step | None:
    """The tests a coder answer declines are recorded (with a patch for the others, too); an
    answer that only declines goes back to the coder for the rest."""
    answer = loop.coder_answer
    if answer is None or not answer.declined:
        return None
    sent = {t.nodeid: signature(t, root) for t in loop.open_failures(root)}
    declined = declined_by(answer, sent, loop.current.number)
    loop.declined.update(declined)
    if answer.patch.strip() or not declined:  # a patch goes to the gate; naming none: unusable
        return None
    loop.coder_answer = None
    loop.current.decisions.append(
        DecisionRecord(
            confidence=answer.analysis.confidence,
            status="declined",
            reason=answer.analysis.root_cause[:300],
        )
    )
    names = ", ".join(sorted(declined)[:5]) + (" …" if len(declined) > 5 else "")
    return Step(
        LoopEvent.CODER_DECLINED,
        f"the coder declined {len(declined)} test(s) as not a code defect "
        f"({answer.analysis.root_cause[:160]}): {names}",
    )


def only_declined_left(loop: LoopState, root: str) -> Step | None:
    """Before asking the coder: nothing is left but what it declined, so the run ends."""
    latest = loop.latest_results()
    if not loop.declined or latest is None or loop.open_failures(root):
        return None
    left = {
        n: loop.declined[n] for n in {t.nodeid for t in latest.not_passing()} & set(loop.declined)
    }
    if not left:
        return None
    outcome, reason = decline_ending([it.pass_count for it in loop.kept()], left)
    loop.outcome, loop.final_reason = outcome, reason
    return Step(LoopEvent.ONLY_DECLINED_LEFT, reason)
