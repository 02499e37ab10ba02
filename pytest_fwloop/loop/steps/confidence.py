"""Seed 001's decision record in the loop (DESIGN.md §15; rules in
`core/verdict/coder_confidence.py`).

In PATCH_GENERATION, before the gate, each coder answer is judged: usable, below
`fwloop_min_confidence` (asked once more, with the failing tests' fuller output and the
tester's notes as evidence), INCONCLUSIVE (low twice: the run ends), or an ABORT the coder asked
for (the run ends). In proposal mode a low-confidence patch goes to the operator instead.
"""

from __future__ import annotations

from pytest_fwloop.config.settings import LoopSettings
from pytest_fwloop.core.machine.decimals import written
from pytest_fwloop.core.machine.fsm import LoopEvent
from pytest_fwloop.core.records.agent_protocol import MustFix
from pytest_fwloop.core.records.run_records import DeclinedRecord
from pytest_fwloop.core.suite.signature import scrub, signature
from pytest_fwloop.core.verdict.coder_confidence import judge, stopped_short
from pytest_fwloop.loop.state import LoopState, Step

#: Bytes of each failing test's own text given as more evidence (3 tests at most).
EVIDENCE_BYTES = 1500


def weigh_answer(loop: LoopState, settings: LoopSettings) -> Step | None:
    """None sends the answer on (to the proposal desk and the gate); else the step it takes."""
    answer = loop.coder_answer
    assert answer is not None
    current = loop.current
    minimum = settings.endings.min_confidence
    asked_again = any(d.status == "low_confidence" for d in current.decisions)
    record = judge(answer, minimum, asked_again)
    current.decisions.append(record)
    counts = [it.pass_count for it in loop.kept()]
    if record.status == "abort":
        loop.outcome, loop.final_reason = stopped_short(
            counts, f"the coder asked to abort: {record.reason}"
        )
        return Step(LoopEvent.CODER_ABORTED, loop.final_reason)
    if record.status == "usable" or settings.options.propose != "off":
        return None  # a low-confidence proposal stops for the operator (ProposalDesk.due)
    said = (
        f"coder confidence {written(record.confidence)} < fwloop_min_confidence={written(minimum)}"
    )
    root = str(settings.rootdir)
    if record.status == "low_confidence":
        loop.coder_answer = None
        loop.must_fix = [*loop.must_fix, MustFix(issue=_ask_again(loop, said, root))]
        return Step(LoopEvent.CODER_UNSURE, f"{said}: asked once more, with more evidence")
    failing = loop.open_failures(root)
    loop.inconclusive.update(
        {
            t.nodeid: DeclinedRecord(
                signature=signature(t, root), reason=record.reason, iteration=current.number
            )
            for t in failing
        }
    )
    loop.outcome, loop.final_reason = stopped_short(
        counts, f"the coder's analysis stayed inconclusive ({said}, twice): {record.reason}"
    )
    return Step(LoopEvent.CODER_INCONCLUSIVE, loop.final_reason)


def _ask_again(loop: LoopState, said: str, root: str) -> str:
    """The must-fix item of the second request: why, and what more there is to look at."""
    evidence = [
        f"--- {t.nodeid}\n{scrub(t.longrepr, root)[:EVIDENCE_BYTES]}\n"
        f"{scrub(t.sections, root)[-EVIDENCE_BYTES:]}"
        for t in loop.open_failures(root)[:3]
    ]
    tester = loop.tester_round.plan.notes if loop.tester_round is not None else ""
    if tester:
        evidence.append(f"--- the tester's notes\n{tester[:EVIDENCE_BYTES]}")
    return (
        f"your last analysis was not sure enough to apply ({said}); nothing was applied. "
        "Look again with this evidence and answer with a patch you can stand behind, or "
        "decline the tests no code change can mend:\n" + "\n".join(evidence)
    )
