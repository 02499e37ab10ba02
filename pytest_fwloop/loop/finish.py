"""The end of a run: the tree settled, `summary.json`, the timeline, the report, the summary.

A run that cannot end this way (an internal error) is settled by `crash.py`.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

from pytest_fwloop.agents.chat.server import ModelServer
from pytest_fwloop.core.machine.agent_budget import Usage
from pytest_fwloop.core.machine.fsm import State
from pytest_fwloop.core.machine.outcomes import Outcome, exit_status
from pytest_fwloop.core.records.run_records import (
    BestTree,
    CandidatesSummary,
    MetricSeries,
    ModelServerRecord,
    RunContext,
    Summary,
    Timeline,
    UsageRecord,
)
from pytest_fwloop.core.suite.history import (
    broken_per_iteration,
    flaky_per_iteration,
    outcomes_by_test,
)
from pytest_fwloop.core.suite.results import TestRecord, nodeids
from pytest_fwloop.core.verdict.convergence import ConvergenceType, ExecutionMode
from pytest_fwloop.core.verdict.metrics import judge, series
from pytest_fwloop.loop.crash import INTERNAL_ERROR_FILE
from pytest_fwloop.loop.rundir import utc_now
from pytest_fwloop.loop.state import best_kept
from pytest_fwloop.reports.html import RunPage, write_html_report

if TYPE_CHECKING:
    from pathlib import Path

    from pytest_fwloop.config.settings import LoopSettings
    from pytest_fwloop.core.records.redaction import Redactor
    from pytest_fwloop.loop.agent_calls import CallLog
    from pytest_fwloop.loop.rundir import RunRecorder
    from pytest_fwloop.loop.state import Iteration, LoopState
    from pytest_fwloop.loop.terminal import Terminal
    from pytest_fwloop.workspace import Workspace


def final_state_of(outcome: Outcome) -> State:
    if outcome is Outcome.SUCCESS:
        return State.SUCCESS
    if outcome in (
        Outcome.CANCELED,
        Outcome.AWAITING_OPERATOR_CONFIRM,
        Outcome.DISCUSSION_COMPLETE,
    ):
        return State.ABORTED
    return State.FAILURE


def finalize(
    loop: LoopState,
    calls: CallLog,
    *,
    settings: LoopSettings,
    recorder: RunRecorder,
    workspace: Workspace,
    terminal: Terminal,
    redact: Redactor,
    duration: float,
    context: RunContext,
) -> None:
    """Keep or restore the tree, then write every record and print the summary."""
    assert loop.outcome is not None
    outcome = loop.outcome
    tree, patch_name, best = _settle_tree(loop, settings, recorder, workspace, terminal)
    summary = _summary(loop, calls, settings, recorder, workspace, patch_name, duration, context)
    summary = summary.model_copy(update={"best": best})
    recorder.write_json("summary.json", summary.model_dump(mode="json"))
    unstored = _remember_verdicts(loop, settings, recorder)
    timeline = Timeline(
        run_id=recorder.run_id, iterations=[it.timeline_entry() for it in loop.iterations]
    )
    recorder.write_json("task-timeline.json", timeline.model_dump(mode="json"))
    usage = _usage_line(calls.usage.total)
    recorder.write_text(
        "report.md",
        _report(summary, loop.iterations, tree, usage) + _calls_report(calls, settings, redact),
    )
    page = report_page(loop, recorder.run_id, settings, outcome.value, redact(loop.final_reason))
    unwritten = write_html_report(recorder.path, page, recorder.redact)
    measured = [it for it in loop.iterations if it.results is not None]
    closing = [
        f"{tree}; records: {recorder.path}",
        *_deliver_user_reports(measured, outcome, settings, recorder.run_id),
        f"agent usage: {usage}",
        *([f"patch: {recorder.path / patch_name}"] if patch_name else []),
        *([unwritten] if unwritten else []),
        *([unstored] if unstored else []),
        *_warnings(summary, settings),
        *([f"next: {summary.recommendation}"] if summary.recommendation else []),
        *_to_keep_the_fixes(best),
    ]
    _print_summary(loop, summary, settings, terminal, redact, measured, closing)
    # Last, so that a failure anywhere above leaves the journal for settle_crash to restore from.
    workspace.close(keep_tree=True)


def _remember_verdicts(loop: LoopState, settings: LoopSettings, recorder: RunRecorder) -> str:
    """The inconclusive and declined tests into the knowledge base; a line when it failed."""
    verdicts = {
        **{n: (record, "inconclusive") for n, record in loop.inconclusive.items()},
        **{n: (record, "declined") for n, record in loop.declined.items()},
    }
    if not (settings.knowledge and verdicts):  # a green run opens no knowledge base (issue 41)
        return ""
    from pytest_fwloop.knowledge.fixes import remember_verdicts
    from pytest_fwloop.knowledge.store import KnowledgeBase

    assert loop.outcome is not None
    knowledge = KnowledgeBase(settings.knowledge)
    return remember_verdicts(
        knowledge, recorder.run_id, loop.outcome.value, verdicts, recorder.redact
    )


def _print_summary(
    loop: LoopState,
    summary: Summary,
    settings: LoopSettings,
    terminal: Terminal,
    redact: Redactor,
    measured: list[Iteration],
    closing: list[str],
) -> None:
    """The run's last words on the terminal: its table, its metrics, what still fails."""
    latest = measured[-1].results if measured else None
    terminal.summary(
        outcome=summary.outcome.value,
        final_state=summary.final_state,
        reason=redact(loop.final_reason),
        rows=[_row(it) for it in measured],
        metrics=_metric_rows(loop, settings, summary.metrics),
        closing=closing,
        failing=[(t.nodeid, redact(_one_line(t, settings.rootdir))) for t in latest.not_passing()]
        if latest
        else [],
    )


def report_page(
    loop: LoopState, run_id: str, settings: LoopSettings, outcome: str, reason: str
) -> RunPage:
    """What report.html shows of the loop as it stands: during the run and at its end."""
    return RunPage(
        run_id,
        [it.timeline_entry() for it in loop.iterations],
        loop.attempts(),
        settings.criteria.target_pass_rate,
        outcome,
        reason,
        loop.labgrid,
        loop.declined,
        judge(loop.measured(), settings.options.metric_tolerance),
    )


def _settle_tree(
    loop: LoopState,
    settings: LoopSettings,
    recorder: RunRecorder,
    workspace: Workspace,
    terminal: Terminal,
) -> tuple[str, str | None, BestTree | None]:
    """Keep the fixed tree on success; else restore the baseline, or keep the best iteration's
    tree (--fwloop-keep=best, or the operator's yes), its diff kept either way. What happened to
    the tree, the patch file written, and the best tree."""
    if loop.outcome is Outcome.SUCCESS:
        recorder.write_patch("final.patch", workspace.diff_from_baseline())
        kept = loop.kept()
        loop.left_tree = kept[-1].checkpoint if kept else ""
        return "the fixed tree is kept", "final.patch", None
    best = best_kept(loop.iterations)
    if best is None:
        restored = workspace.restore_baseline()
        tree = f"the tree is restored to its baseline ({len(restored)} path(s) reverted)"
        return tree, None, None
    recorder.write_patch("best.patch", workspace.diff(workspace.baseline, best.checkpoint))
    counts = f"iteration {best.number}: {best.pass_count}/{best.total_count} passed"
    in_place = settings.endings.keep_best or _operator_keeps(loop, settings, terminal, counts)
    if in_place:
        workspace.restore(best.checkpoint)
        loop.left_tree = best.checkpoint
        why = "--fwloop-keep=best" if settings.endings.keep_best else "the operator's answer"
        tree = f"the best tree ({counts}) is kept in place ({why}); the suite is not green"
    else:
        restored = workspace.restore_baseline()
        tree = f"the tree is restored to its baseline ({len(restored)} path(s) reverted)"
    record = BestTree(
        iteration=best.number,
        pass_count=best.pass_count,
        total_count=best.total_count,
        in_place=in_place,
        apply=apply_command(recorder.run_id, settings),
    )
    return tree, "best.patch", record


def _operator_keeps(
    loop: LoopState, settings: LoopSettings, terminal: Terminal, counts: str
) -> bool:
    """Interactive mode asks whether the best tree stays (a canceled run is not asked: the
    operator stopped it)."""
    if settings.mode is not ExecutionMode.INTERACTIVE or loop.outcome is Outcome.CANCELED:
        return False
    if not sys.stdin.isatty():
        return False
    return terminal.ask(
        f"fwloop: the run ended {loop.outcome.value if loop.outcome else ''}; keep its best tree "
        f"({counts}) in place instead of the baseline? [y/N] "
    )


def apply_command(run_id: str, settings: LoopSettings) -> str:
    """The command that puts a run's best tree in place, as typed where pytest was started."""
    where = "" if settings.invocation_dir == settings.rootdir else f" --rootdir {settings.rootdir}"
    return f"fwloop apply {run_id}{where}"


def _summary(
    loop: LoopState,
    calls: CallLog,
    settings: LoopSettings,
    recorder: RunRecorder,
    workspace: Workspace,
    patch_name: str | None,
    duration: float,
    context: RunContext,
) -> Summary:
    assert loop.outcome is not None
    outcome = loop.outcome
    measured = [it for it in loop.iterations if it.results is not None]
    latest = measured[-1].results if measured else None
    return Summary(
        run_id=recorder.run_id,
        outcome=outcome,
        final_state=final_state_of(outcome).value,
        iterations=len(measured),
        convergence_type=loop.convergence_type.value if loop.convergence_type else None,
        reason=loop.final_reason,
        pass_counts=[it.pass_count for it in measured],
        total_counts=[it.total_count for it in measured],
        executed_counts=[it.executed for it in measured],
        coder_calls=calls.coder_calls,
        usage=UsageRecord.model_validate(calls.usage.to_dict()),
        unresolved=nodeids(latest.not_passing()) if latest else [],
        patch=patch_name,
        exit_status=int(exit_status(outcome, advisory=settings.advisory)),
        mode=settings.mode.value,
        criteria=settings.criteria.to_dict(),
        max_iter=settings.options.max_iter,
        rootdir=str(settings.rootdir),
        baseline_snapshot=workspace.baseline,
        internal_error=INTERNAL_ERROR_FILE if outcome is Outcome.INTERNAL_ERROR else None,
        finished=utc_now(),
        duration_s=round(duration, 2),
        context=context,
        tests=outcomes_by_test(loop.attempts()),
        regressions=broken_per_iteration(loop.attempts(), loop.rolled_back()),
        flaky=flaky_per_iteration(loop.attempts()),
        labgrid=loop.labgrid,
        declined=loop.declined,
        inconclusive=loop.inconclusive,
        known_failures={
            t.nodeid: t.outcome
            for t in (latest.tests if latest else [])
            if t.nodeid in settings.endings.known_failures
        },
        metrics=series(loop.attempts(), settings.options.metric_tolerance),
        recommendation=_last_recommendation(loop, measured),
        goal=settings.options.goal,
        evidence=settings.evidence.path if settings.evidence else None,
        notifications=loop.notifications,
        model_servers=model_servers(settings),
        candidates=_candidates(loop, settings),
    )


def _candidates(loop: LoopState, settings: LoopSettings) -> CandidatesSummary | None:
    """What K candidates bought (DESIGN.md §19); None, and nothing imported, with one."""
    if settings.options.candidates <= 1:
        return None
    from pytest_fwloop.core.gate.candidate_choice import summarised

    rounds = [r for it in loop.iterations for r in it.candidate_rounds]
    return summarised(rounds, settings.options.candidates, settings.options.candidate_jobs)


def model_servers(settings: LoopSettings) -> list[ModelServerRecord]:
    """What each role's `openai:` providers learned of their servers over the run."""
    return [
        ModelServerRecord.model_validate({"role": role, **server.record()})
        for role, server in _servers(settings)
    ]


def _servers(settings: LoopSettings) -> list[tuple[str, ModelServer]]:
    """Each role's `openai:` providers' servers (a provider that has none is skipped)."""
    return [
        (role, server)
        for role, providers in settings.providers.items()
        for provider in providers
        if isinstance(server := getattr(provider, "server", None), ModelServer)
    ]


def _last_recommendation(loop: LoopState, measured: list[Iteration]) -> str:
    """What the last analysis advises when a convergence verdict short of success ended the
    run; any other ending happened after it and is explained by the reason instead."""
    analysis = measured[-1].analysis if measured else None
    ended_by_verdict = loop.convergence_type not in (None, ConvergenceType.SUCCESS)
    return analysis.recommendation if analysis is not None and ended_by_verdict else ""


def _metric_rows(
    loop: LoopState, settings: LoopSettings, metrics: dict[str, MetricSeries]
) -> list[list[object]]:
    """The terminal's metrics table: each metric's values over the run, and how the tree left
    standing compares with the baseline."""
    judged = {c.name: c for c in judge(loop.measured(), settings.options.metric_tolerance)}
    rows: list[list[object]] = []
    for name, metric in metrics.items():
        change = judged.get(name)
        values = [f"{v:g}" for v in metric.values.values()]
        shown = " -> ".join(values) if len(values) <= 6 else "… -> " + " -> ".join(values[-5:])
        status = "-"
        if change is not None:
            status = "WORSE" if change.worse else "new" if change.baseline is None else "ok"
        rows.append(
            [
                name,
                metric.better,
                shown,
                f"{change.change:+.1%}" if change and change.change is not None else "-",
                f"{metric.tolerance:.1%}",
                status,
            ]
        )
    return rows


def _row(it: Iteration) -> list[object]:
    """One line of the terminal's per-iteration table."""
    return [
        it.number,
        it.kind,
        f"{it.pass_count}/{it.total_count}",
        f"{it.pass_count / max(it.total_count, 1):.1%}",
        it.coder_calls,
        it.convergence_type or "continue",
    ]


def _deliver_user_reports(
    measured: list[Iteration], outcome: Outcome, settings: LoopSettings, run_id: str
) -> list[str]:
    """The user's reports describe the tree they are left with: the last one, or the baseline;
    by its last whole-suite run (a confirmation reruns a focus on the gate's tree)."""
    kept = measured if outcome is Outcome.SUCCESS else measured[:1]
    described = [it for it in kept if it.full_run is not None][-1:]
    return [
        line
        for it in described
        if it.full_run is not None
        for line in settings.reports.deliver(it.full_run, run_id, it.number)
    ]


def _warnings(summary: Summary, settings: LoopSettings) -> list[str]:
    """What the operator must not miss: flaky tests, and an exit 0 that is not green."""
    lines = [
        f"declined by the coder, not sent again while failing the same way: {nodeid}: "
        f"{record.reason}"
        for nodeid, record in summary.declined.items()
        if nodeid in summary.unresolved
    ]
    lines += _known_lines(summary.known_failures)
    if summary.flaky:
        flaky = sorted({nodeid for nodeids in summary.flaky.values() for nodeid in nodeids})
        lines.append(
            f"flaky ({len(flaky)}, counted as fwloop_flaky_policy = "
            f"{settings.options.flaky_policy}, "
            f"never sent to the coder): {', '.join(flaky[:5])}" + (" …" if len(flaky) > 5 else "")
        )
    if summary.exit_status == 0 and summary.outcome is not Outcome.SUCCESS:
        lines.append(
            f"WARNING: outcome {summary.outcome.value} exits 0 only because ci_terminate_as = "
            "warning; the suite is NOT green"
        )
    return lines


def _known_lines(known: dict[str, str]) -> list[str]:
    """Known failures: which still fail (not counted), which pass now (the file may drop them)."""
    failing = sorted(n for n, outcome in known.items() if outcome in ("failed", "error"))
    passing = sorted(n for n, outcome in known.items() if outcome in ("passed", "xfailed"))
    lines = []
    if failing:
        lines.append(
            f"known failures, not counted and not sent to the coder ({len(failing)}): "
            + ", ".join(failing[:5])
            + (" …" if len(failing) > 5 else "")
        )
    lines += [
        f"known failure now passes: {n} (drop it from --fwloop-known-failures)" for n in passing
    ]
    return lines


def _to_keep_the_fixes(best: BestTree | None) -> list[str]:
    """The summary's last line when verified fixes are not in the tree: how to get them."""
    if best is None or best.in_place:
        return []
    return [
        f"to keep the fixes (iteration {best.iteration}: {best.pass_count}/{best.total_count} "
        f"passed), run: {best.apply}"
    ]


def _one_line(record: TestRecord, rootdir: Path) -> str:
    """A failure's reason in one line: its crash line, paths relative to the rootdir."""
    text = (record.crash or record.longrepr).strip()
    first = text.splitlines()[0] if text else ""
    return first.replace(f"{rootdir}{os.sep}", "")[:200]


def _usage_line(total: Usage) -> str:
    """Tokens and cost as the providers reported them, and how many calls reported nothing."""
    text = f"{total.calls} call(s), {total.tokens:.0f} tokens, {total.cost_usd:.4f} USD"
    if total.unreported_calls:
        text += f" ({total.unreported_calls} call(s) reported no usage)"
    return text


def _calls_report(calls: CallLog, settings: LoopSettings, redact: Redactor) -> str:
    """The model servers and every call's prompt tokens (cached ones where the server said):
    a prompt prefix the server's cache kept shows here as cached tokens."""
    lines = [
        f"- model server ({role}): {redact(server.line())}" for role, server in _servers(settings)
    ]
    if calls.rows:
        lines += [
            "",
            "| call | provider | seconds | prompt tokens | cached | answer tokens |",
            "|---|---|---|---|---|---|",
        ]
        for row in calls.rows:
            lines.append(
                f"| {row.stem} | {row.provider} | {row.seconds:.1f} | "
                f"{_count(row.usage, 'input_tokens')} | "
                f"{_count(row.usage, 'cached_input_tokens')} | "
                f"{_count(row.usage, 'output_tokens')} |"
            )
    return "\n".join(["", "Model calls:", "", *lines, ""]) if lines else ""


def _count(usage: dict[str, float], name: str) -> str:
    return f"{int(usage[name])}" if name in usage else "-"


def _report(summary: Summary, iterations: list[Iteration], tree: str, usage: str) -> str:
    lines = [
        f"# fwloop run {summary.run_id}",
        "",
        f"- outcome: **{summary.outcome.value}** ({summary.final_state}), exit status "
        f"{summary.exit_status}",
        f"- reason: {summary.reason}",
        f"- {tree}",
        f"- coder calls: {summary.coder_calls}",
        f"- agent usage: {usage}",
        f"- patch: {summary.patch or 'none'}",
        "",
        "| iteration | kind | passed/total | verdict | patch |",
        "|---|---|---|---|---|",
    ]
    for it in iterations:
        if it.results is None:
            continue
        lines.append(
            f"| {it.number} | {it.kind} | {it.pass_count}/{it.total_count} | "
            f"{it.convergence_type or 'continue'} | {it.patch_summary or '-'} |"
        )
    if summary.unresolved:
        lines += ["", "Still failing:", ""]
        lines += [f"- `{nodeid}`" for nodeid in summary.unresolved]
    lines.append("")
    return "\n".join(lines)
