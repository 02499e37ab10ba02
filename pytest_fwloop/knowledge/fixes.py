"""What the loop remembers across runs (DESIGN.md §12, §15): each fix that raised the pass count
goes to the knowledge base, and so does each test a coder declined or could not analyse; the
coder is shown the fixes of failures like its own, and what earlier coders said of them.

The knowledge base is a help, never a condition: a file that cannot be read or written costs the
run one note, not its outcome.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Protocol

from pytest_fwloop.core.records.agent_protocol import DeclinedBefore, SimilarFix
from pytest_fwloop.core.records.redaction import Redactor
from pytest_fwloop.core.records.run_records import DeclinedRecord
from pytest_fwloop.core.suite.results import IterationResults, not_passing
from pytest_fwloop.core.suite.signature import excerpt, scrub, signature
from pytest_fwloop.knowledge.store import KnowledgeBase, KnowledgeError, StoredFix

#: Failures whose excerpts are stored with a fix, and bytes of each.
STORED_EXCERPTS = 5
EXCERPT_BYTES = 1024
_CHANGED_FILE = re.compile(r"^\+\+\+ b/(.+)$", re.MULTILINE)


class PatchedIteration(Protocol):
    """What is remembered of an iteration: its patch and what its tests made of it."""

    @property
    def number(self) -> int: ...
    @property
    def patch(self) -> str: ...
    @property
    def patch_summary(self) -> str: ...
    @property
    def results(self) -> IterationResults | None: ...


def similar_fixes(
    knowledge: KnowledgeBase, signatures: Sequence[str], run_id: str, budget: int
) -> tuple[list[SimilarFix], str]:
    """Earlier fixes, from other runs, for failures with these signatures, within `budget`
    bytes of JSON; a note when the knowledge base could not be read."""
    if not signatures:
        return [], ""
    try:
        found = knowledge.similar(signatures, run_id)
    except KnowledgeError as exc:
        return [], f"knowledge base not used: {exc}"
    kept: list[SimilarFix] = []
    for fix in found:
        if sum(len(f.model_dump_json()) for f in [*kept, fix]) > budget:
            break
        kept.append(fix)
    return kept, ""


def declined_before(
    knowledge: KnowledgeBase, signatures: Sequence[str], run_id: str
) -> tuple[list[DeclinedBefore], str]:
    """What earlier runs' coders said of failures with these signatures (declined, or
    inconclusive); a note when the knowledge base could not be read."""
    try:
        return knowledge.verdicts_for(list(dict.fromkeys(signatures)), run_id), ""
    except KnowledgeError as exc:
        return [], f"knowledge base not used: {exc}"


def remember_verdicts(
    knowledge: KnowledgeBase | None,
    run_id: str,
    outcome: str,
    verdicts: Mapping[str, tuple[DeclinedRecord, str]],
    redact: Redactor,
) -> str:
    """Store each declined or inconclusive test (node id: (record, status)) with the run's
    outcome; a note when that failed."""
    if knowledge is None or not verdicts:
        return ""
    rows = [
        DeclinedBefore(
            nodeid=nodeid,
            signature=redact(record.signature),
            status="declined" if status == "declined" else "inconclusive",
            reason=redact(record.reason)[:500],
            run_id=run_id,
            outcome=outcome,
        )
        for nodeid, (record, status) in verdicts.items()
    ]
    try:
        knowledge.store_verdicts(rows)
    except KnowledgeError as exc:
        return f"knowledge base not written: {exc}"
    return ""


def remember(
    knowledge: KnowledgeBase | None,
    run_id: str,
    before: IterationResults,
    iteration: PatchedIteration,
    analysis: str,
    redact: Redactor,
    root: str,
) -> str:
    """Store the iteration's patch if it raised the pass count; a note of what happened."""
    after = iteration.results
    if knowledge is None or after is None or after.pass_count <= before.pass_count:
        return ""
    passing = {t.nodeid for t in after.tests if t.outcome in ("passed", "xfailed")}
    fixed = [t for t in before.tests if not_passing(t) and t.nodeid in passing]
    fix = StoredFix(
        run_id=run_id,
        iteration=iteration.number,
        outcome=f"pass count {before.pass_count} -> {after.pass_count}",
        signatures=list(dict.fromkeys(redact(signature(t, root)) for t in fixed)),
        nodeids=[t.nodeid for t in fixed],
        excerpts=[
            redact(excerpt(scrub(t.longrepr, root), EXCERPT_BYTES)) for t in fixed[:STORED_EXCERPTS]
        ],
        analysis=redact(analysis),
        summary=redact(iteration.patch_summary),
        patch=redact(iteration.patch),
        files=sorted(set(_CHANGED_FILE.findall(iteration.patch))),
    )
    try:
        stored = knowledge.store(fix)
    except KnowledgeError as exc:
        return f"knowledge base not written: {exc}"
    return f"fix stored in the knowledge base as #{stored}"
