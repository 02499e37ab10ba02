"""What every agent is sent (DESIGN.md §5): the `command:` protocol's request, bounded.

Failures are packed by signature within `fwloop_context_bytes` (less what the coder's
`evidence`, `similar_fixes` and `declined_before` take); the history carries earlier iterations'
counts, patch summaries and outcomes; never a whole log. A request with a patch
names its risky code (`fwloop_risky_patterns`): which hunk matched which pattern.
"""

from __future__ import annotations

from collections.abc import Sequence

from pytest_fwloop.config.settings import LoopSettings
from pytest_fwloop.core.gate.risky import MAX_LISTED, assess
from pytest_fwloop.core.records.agent_protocol import (
    AgentRequest,
    DeclinedBefore,
    EvidenceExcerpt,
    HistoryEntry,
    SimilarFix,
)
from pytest_fwloop.core.request.failure_pack import pack_failures
from pytest_fwloop.core.suite.history import open_regressions
from pytest_fwloop.core.suite.results import TestRecord
from pytest_fwloop.core.suite.signature import excerpt, scrub, signature
from pytest_fwloop.knowledge.fixes import declined_before, similar_fixes
from pytest_fwloop.knowledge.store import KnowledgeBase
from pytest_fwloop.loop.state import LoopState


def agent_request(
    loop: LoopState,
    settings: LoopSettings,
    role: str,
    failing: Sequence[TestRecord],
    patch: str = "",
    **extra: object,
) -> AgentRequest:
    """The protocol's fields for `role` about the open failures `failing`; `extra` adds fields
    or replaces the defaults. Assembled through `loop/request/desk.py`."""
    root = str(settings.rootdir)
    similar: list[SimilarFix] = []
    before: list[DeclinedBefore] = []
    if role == "coder" and settings.knowledge is not None:
        knowledge = KnowledgeBase(settings.knowledge)
        signatures = [signature(t, root) for t in failing]
        # A quarter of the context at most, taken from what the failures may fill.
        similar, note = similar_fixes(
            knowledge, signatures, loop.run_id, settings.options.context_bytes // 4
        )
        before, unread = declined_before(knowledge, signatures, loop.run_id)
        for text in (note, unread):
            if text and text not in loop.current.notes:
                loop.current.notes.append(text)
    evidence = _evidence(loop, settings) if role == "coder" else None
    taken = [*similar, *before, *([evidence] if evidence else [])]
    used = sum(len(item.model_dump_json()) for item in taken)
    failures = pack_failures(failing, settings.options.context_bytes - used, root=root)
    history = [
        HistoryEntry(
            iteration=it.number,
            pass_count=it.pass_count,
            total_count=it.total_count,
            patch_summary=it.patch_summary,
            outcome="; ".join([it.kind, *it.notes]),
        )
        for it in loop.iterations
        if it.results is not None
    ]
    fields: dict[str, object] = {
        "role": role,
        "iteration": loop.current.number,
        "goal": settings.options.goal,
        "workspace": str(settings.rootdir),
        "failures": failures,
        "history": history,
        "must_fix": list(loop.must_fix),
        "patch": patch,
        "build_diagnostics": loop.build_diagnostics,
        "constraints": list(loop.constraints),
        "regressions": open_regressions(loop.measured(), root),
        "similar_fixes": similar,
        "declined_before": before,
        "operator_messages": list(loop.operator_messages),
        "risky": assess(patch, settings.risky_patterns, failing)[:MAX_LISTED] if patch else [],
        "evidence": evidence,
    }
    return AgentRequest.model_validate({**fields, **extra})


def _evidence(loop: LoopState, settings: LoopSettings) -> EvidenceExcerpt | None:
    """The earlier run's failure log (--fwloop-evidence), until the coder's first patch has been
    tested: from then on the live tree's failures say more than an old log. A quarter of the
    context at most, head and tail, paths and timestamps scrubbed as in the failures."""
    log = settings.evidence
    if log is None or len(loop.attempts()) > 1:
        return None
    text = excerpt(scrub(log.text, str(settings.rootdir)), settings.options.context_bytes // 4)
    return EvidenceExcerpt(path=log.path, size_bytes=log.size_bytes, excerpt=text)
