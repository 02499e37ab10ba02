"""What every agent is sent (DESIGN.md §5): the `command:` protocol's request, bounded.

Failures are packed by signature within `fwloop_context_bytes`; the history carries earlier
iterations' counts, patch summaries and outcomes; never a whole log.
"""

from __future__ import annotations

from pytest_fwloop.agents.protocol import AgentRequest, HistoryEntry
from pytest_fwloop.context import pack_failures
from pytest_fwloop.history import open_regressions
from pytest_fwloop.loop_state import LoopState
from pytest_fwloop.settings import LoopSettings


def agent_request(
    loop: LoopState, settings: LoopSettings, role: str, patch: str = "", **extra: object
) -> AgentRequest:
    """The request for `role`; `extra` adds protocol fields or replaces the defaults."""
    latest = loop.latest_results()
    failures = pack_failures(
        [t for t in latest.not_passing() if not t.flaky] if latest else [],
        settings.context_bytes,
        root=str(settings.rootdir),
    )
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
        "goal": settings.goal,
        "workspace": str(settings.rootdir),
        "failures": failures,
        "history": history,
        "must_fix": list(loop.must_fix),
        "patch": patch,
        "build_diagnostics": loop.build_diagnostics,
        "constraints": list(loop.constraints),
        "regressions": open_regressions(loop.measured(), str(settings.rootdir)),
    }
    return AgentRequest.model_validate({**fields, **extra})
