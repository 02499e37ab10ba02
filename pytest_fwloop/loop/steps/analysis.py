"""CODE_ANALYSIS (DESIGN.md §3, §5): the coder is asked, and what it was sent and said is traced.

Seed 001 §3.2's sub-states of the state are the work it does: `LOG_TRIAGE` (the failures packed
for the coder), `ROOT_CAUSE_HYPOTHESIS` (its analysis) and `CHANGE_IMPACT_ESTIMATE` (what its
patch touches). A CLI coder's edits of the workspace become its proposed patch and are undone
until the gate passes them.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from pytest_fwloop.agents.errors import ProviderError
from pytest_fwloop.agents.role import RoleAgent
from pytest_fwloop.core.change.unified_diff import PatchParseError, parse_patch
from pytest_fwloop.core.machine.fsm import LoopEvent
from pytest_fwloop.core.machine.substates import SubState
from pytest_fwloop.core.records.agent_protocol import AgentRequest, CoderAnswer
from pytest_fwloop.core.records.round_records import call_files
from pytest_fwloop.loop.request.desk import Assembled
from pytest_fwloop.loop.services import Services
from pytest_fwloop.loop.state import LoopState, Step, coder_failed
from pytest_fwloop.loop.steps.coder_patch import Refused, form_patch


def ask_coder(
    services: Services,
    loop: LoopState,
    coder: RoleAgent,
    assemble: Callable[[], Assembled],
) -> Step:
    """The coder's answer kept for PATCH_GENERATION, or its provider's failure."""
    number = loop.current.number
    assembled = assemble()
    request = assembled.request
    services.substate(
        number, SubState.LOG_TRIAGE, _triage(len(assembled.failing), services, request)
    )
    workspace = services.workspace
    # Every patch before this call was kept or rolled back: the whole-tree snapshots taken for
    # it (and the build output only they hold) will not be read again.
    workspace.drop_snapshots()
    before = workspace.expect_agent_edits(f"before the coder's call in iteration {number}")
    try:
        answer = coder.ask(request)
    except ProviderError as exc:
        failure = coder_failed(exc, request, services.settings.coder)
        return loop.fail(failure, LoopEvent.ANALYSIS_FAILED)
    finally:
        # A CLI coder's edits are a proposed patch like any other (DESIGN.md §5): nothing
        # stays in the tree before the policy and the reviewer have passed it.
        edits = workspace.take_agent_edits(before)
    assert isinstance(answer, CoderAnswer)
    reason = f"coder: {answer.summary[:120]} (confidence {answer.analysis.confidence:.2f})"
    if edits and not answer.patch.strip() and not answer.edits:
        answer = answer.model_copy(update={"patch": edits})
        reason += "; its edits of the workspace are the proposed patch, undone until approved"
    elif edits:
        note = "the coder both edited the workspace and sent a patch: edits undone, patch used"
        loop.current.notes.append(note)
        reason += f"; {note}"
    answers = call_files(services.recorder.round_path(number), "coder", "answer.json")
    evidence = [services.recorder.relative(answers[-1])] if answers else []
    formed = form_patch(answer, workspace, services.policy())
    if isinstance(formed, Refused):
        # Its next request says why: each edit that found no single place (with the nearest
        # lines), each path refused, or that it sent both a patch and edits.
        loop.must_fix = formed.must_fix
        return loop.fail(formed.error, LoopEvent.ANALYSIS_FAILED)
    answer = formed.answer
    if formed.notes:
        reason += "; " + _record_built(services, number, answers, formed.notes, answer.patch)
    analysis = answer.analysis
    services.substate(
        number,
        SubState.ROOT_CAUSE_HYPOTHESIS,
        f"root cause: {analysis.root_cause[:160]!r}; {len(analysis.hypotheses)} "
        f"hypothesis(es); confidence {analysis.confidence:.2f}",
        evidence,
    )
    services.substate(number, SubState.CHANGE_IMPACT_ESTIMATE, _impact(answer), evidence)
    loop.coder_answer = answer
    return Step(LoopEvent.ANALYSIS_READY, reason)


def _record_built(
    services: Services, number: int, answers: list[Path], notes: tuple[str, ...], diff: str
) -> str:
    """Keep the diff built from the answer beside its raw answer; the trace's words for it."""
    stem = answers[-1].name.split(".")[0] if answers else "coder"
    folder = services.recorder.relative(services.recorder.round_path(number))
    path = services.recorder.write_patch(f"{folder}/{stem}.built.diff", diff)
    return f"built the one diff ({services.recorder.relative(path)}): {'; '.join(notes)[:400]}"


def _triage(failing: int, services: Services, request: AgentRequest) -> str:
    signatures = len({f.signature for f in request.failures})
    return (
        f"{failing} failing test(s) packed as {len(request.failures)} record(s) of "
        f"{signatures} signature(s) within fwloop_context_bytes="
        f"{services.settings.options.context_bytes}"
        f"; {len(request.regressions)} regression(s), {len(request.must_fix)} must-fix "
        f"item(s), {len(request.similar_fixes)} similar fix(es) sent"
    )


def _impact(answer: CoderAnswer) -> str:
    if not answer.patch.strip():
        return f"no patch proposed ({len(answer.declined)} test(s) declined)"
    try:
        changes = parse_patch(answer.patch)
    except PatchParseError as exc:
        return f"the patch does not parse ({exc}); the gate refuses it"
    files = sorted({c.new_path or c.old_path or "" for c in changes})
    added = sum(c.added_lines for c in changes)
    removed = sum(c.removed_lines for c in changes)
    return f"{len(files)} file(s) ({', '.join(files[:5])}), +{added}/-{removed} line(s)"
