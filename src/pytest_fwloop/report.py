"""The end of a run: the tree settled, `summary.json`, the timeline, the report, the summary."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pytest_fwloop.budget import Usage
from pytest_fwloop.fsm import State
from pytest_fwloop.outcomes import Outcome, exit_status
from pytest_fwloop.results import nodeids
from pytest_fwloop.rundir import utc_now

if TYPE_CHECKING:
    from pytest_fwloop.controller import Controller, Iteration


def final_state_of(outcome: Outcome) -> State:
    if outcome is Outcome.SUCCESS:
        return State.SUCCESS
    if outcome in (Outcome.CANCELED, Outcome.AWAITING_OPERATOR_CONFIRM):
        return State.ABORTED
    return State.FAILURE


def best_iteration(iterations: list[Iteration]) -> Iteration | None:
    """The earliest iteration with the highest pass count, if it beat the baseline."""
    measured = [it for it in iterations if it.results is not None]
    if len(measured) < 2:
        return None
    best = max(measured, key=lambda it: (it.pass_count, -it.number))
    return best if best.pass_count > measured[0].pass_count else None


def finalize(controller: Controller, duration: float) -> None:
    """Keep or restore the tree, then write every record and print the summary."""
    c = controller
    assert c.outcome is not None
    outcome = c.outcome
    state = final_state_of(outcome)
    patch_name: str | None = None
    if outcome is Outcome.SUCCESS:
        c.recorder.write_text("final.patch", c.workspace.diff_from_baseline())
        patch_name = "final.patch"
        c.workspace.close(keep_tree=True)
        tree = "the fixed tree is kept"
    else:
        best = best_iteration(c.iterations)
        if best is not None:
            c.recorder.write_text(
                "best.patch", c.workspace.diff(c.workspace.baseline, best.checkpoint)
            )
            patch_name = "best.patch"
        restored = c.workspace.restore_baseline()
        c.workspace.close(keep_tree=True)  # already restored just above
        tree = f"the tree is restored to its baseline ({len(restored)} path(s) reverted)"

    measured = [it for it in c.iterations if it.results is not None]
    latest = measured[-1].results if measured else None
    code = int(exit_status(outcome, advisory=c.settings.advisory))
    summary: dict[str, Any] = {
        "run_id": c.recorder.run_id,
        "outcome": outcome.value,
        "final_state": state.value,
        "iterations": len(measured),
        "convergence_type": c.convergence_type.value if c.convergence_type else None,
        "reason": c.final_reason,
        "pass_counts": [it.pass_count for it in measured],
        "total_counts": [it.total_count for it in measured],
        "coder_calls": c.coder_calls,
        "usage": c.usage.to_dict(),
        "unresolved": nodeids(latest.not_passing()) if latest else [],
        "patch": patch_name,
        "exit_status": code,
        "mode": c.settings.mode.value,
        "criteria": c.settings.criteria.to_dict(),
        "max_iter": c.settings.max_iter,
        "rootdir": str(c.settings.rootdir),
        "baseline_snapshot": c.workspace.baseline,
        "finished": utc_now(),
        "duration_s": round(duration, 2),
    }
    c.recorder.write_json("summary.json", summary)
    c.recorder.write_json(
        "task-timeline.json",
        {"run_id": c.recorder.run_id, "iterations": [_timeline_entry(it) for it in c.iterations]},
    )
    c.recorder.write_text(
        "report.md", _report(summary, c.iterations, tree, _usage_line(c.usage.total))
    )

    rows = [
        [
            it.number,
            it.kind,
            f"{it.pass_count}/{it.total_count}",
            f"{it.pass_count / max(it.total_count, 1):.1%}",
            it.coder_calls,
            it.convergence_type or "continue",
        ]
        for it in measured
    ]
    closing = [f"{tree}; records: {c.recorder.path}", f"agent usage: {_usage_line(c.usage.total)}"]
    if patch_name:
        closing.append(f"patch: {c.recorder.path / patch_name}")
    if code == 0 and outcome is not Outcome.SUCCESS:
        closing.append(
            f"WARNING: outcome {outcome.value} exits 0 only because ci_terminate_as = warning; "
            "the suite is NOT green"
        )
    c.terminal.summary(
        outcome=outcome.value,
        final_state=state.value,
        reason=c.redact(c.final_reason),
        rows=rows,
        closing=closing,
    )


def _timeline_entry(it: Iteration) -> dict[str, Any]:
    return {
        "iteration": it.number,
        "kind": it.kind,
        "states": it.states,
        "pass_count": it.pass_count,
        "total_count": it.total_count,
        "counts": it.results.counts() if it.results else None,
        "patch_summary": it.patch_summary,
        "coder_calls": it.coder_calls,
        "review_rounds": it.review_rounds,
        "convergence_type": it.convergence_type,
        "reason": it.reason,
        "score": it.score,
        "snapshot": it.checkpoint,
        "notes": it.notes,
    }


def _usage_line(total: Usage) -> str:
    """Tokens and cost as the providers reported them, and how many calls reported nothing."""
    text = f"{total.calls} call(s), {total.tokens:.0f} tokens, {total.cost_usd:.4f} USD"
    if total.unreported_calls:
        text += f" ({total.unreported_calls} call(s) reported no usage)"
    return text


def _report(summary: dict[str, Any], iterations: list[Iteration], tree: str, usage: str) -> str:
    lines = [
        f"# fwloop run {summary['run_id']}",
        "",
        f"- outcome: **{summary['outcome']}** ({summary['final_state']}), exit status "
        f"{summary['exit_status']}",
        f"- reason: {summary['reason']}",
        f"- {tree}",
        f"- coder calls: {summary['coder_calls']}",
        f"- agent usage: {usage}",
        f"- patch: {summary['patch'] or 'none'}",
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
    if summary["unresolved"]:
        lines += ["", "Still failing:", ""]
        lines += [f"- `{nodeid}`" for nodeid in summary["unresolved"]]
    lines.append("")
    return "\n".join(lines)
