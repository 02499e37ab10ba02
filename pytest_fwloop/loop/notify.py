"""Notifications (seed 001 §5.19.1 `ci_notification_channels`; `fwloop_notify`, docs/ci.md).

A CI job cannot wait for a person at a plateau, but a bot can tell one: each channel gets one
JSON document (`records.Notification`) when a plateau is detected and when the run ends. Every
delivery is bounded by `fwloop_notify_timeout` and recorded (`summary.json["notifications"]`, a
`notification` line in the trace); one that fails is a note and a terminal line, never a changed
outcome or exit status, and the run's records are never lost for it.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from pytest_fwloop.agents.command import CommandProvider, run_agent_process
from pytest_fwloop.agents.errors import ProviderError, ProviderErrorKind
from pytest_fwloop.config.notify import COMMAND, described
from pytest_fwloop.core.records.run_records import (
    NOTIFICATION_SCHEMA,
    BestTree,
    Event,
    Notification,
    NotificationRecord,
)
from pytest_fwloop.core.suite.results import nodeids
from pytest_fwloop.loop.rundir import utc_now
from pytest_fwloop.loop.terminal import PREFIX

if TYPE_CHECKING:
    from pytest_fwloop.config.settings import LoopSettings
    from pytest_fwloop.core.records.redaction import Redactor
    from pytest_fwloop.core.verdict.convergence import PlateauAction
    from pytest_fwloop.loop.rundir import RunRecorder
    from pytest_fwloop.loop.services import Services
    from pytest_fwloop.loop.state import LoopState
    from pytest_fwloop.loop.terminal import Terminal

#: Node ids a document lists; `unresolved_count` gives how many there are.
MAX_UNRESOLVED = 50
#: Characters of a failed delivery's explanation kept in the records.
DETAIL_CHARS = 300


def announce_plateau(services: Services, loop: LoopState, action: PlateauAction, why: str) -> None:
    """A plateau was detected: each channel is told before the mode acts on it (the operator
    may be asked at a terminal, a strategy switched, the run ended)."""
    settings, recorder = services.settings, services.recorder
    if not settings.plateau.ci_notification_channels:
        return
    measured = [it for it in loop.iterations if it.results is not None]
    latest = loop.current.results
    failing = nodeids(latest.not_passing()) if latest is not None else []
    document = _document(
        settings,
        recorder,
        event="plateau",
        reason=why,
        plateau_action=action.value,
        iteration=loop.current.number,
        pass_counts=[it.pass_count for it in measured],
        total_counts=[it.total_count for it in measured],
        unresolved=failing,
    )
    records = _deliver(settings, recorder, document, loop.current.number, loop.state.value)
    loop.notifications += records
    loop.current.notes += [_note(r) for r in records if not r.delivered]
    for record in records:
        if not record.delivered:
            services.terminal.line(f"{PREFIX} {_note(record)}")


def announce_end(settings: LoopSettings, recorder: RunRecorder, terminal: Terminal) -> None:
    """The run ended (any outcome, an internal error included): each channel gets the document
    made from `summary.json`, and the deliveries are added to it."""
    if not settings.plateau.ci_notification_channels:
        return
    path = recorder.path / "summary.json"
    try:
        summary: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        terminal.line(f"{PREFIX} no notification sent: summary.json unreadable ({exc})")
        return
    best = summary.get("best")
    iteration = int(summary.get("iterations") or 1)
    document = _document(
        settings,
        recorder,
        event="finished",
        outcome=summary["outcome"],
        final_state=summary["final_state"],
        exit_status=summary["exit_status"],
        reason=summary["reason"],
        iteration=iteration,
        pass_counts=summary.get("pass_counts", []),
        total_counts=summary.get("total_counts", []),
        unresolved=summary.get("unresolved", []),
        summary=str(path),
        best=BestTree.model_validate(best) if best else None,
    )
    records = _deliver(settings, recorder, document, iteration, summary["final_state"])
    summary["notifications"] = [
        *summary.get("notifications", []),
        *(r.model_dump(mode="json") for r in records),
    ]
    try:
        recorder.write_json("summary.json", summary)
    except OSError as exc:  # the trace has each delivery already
        terminal.line(f"{PREFIX} summary.json not updated with the notifications: {exc}")
    for record in records:
        if not record.delivered:
            terminal.line(f"{PREFIX} {_note(record)}")


def _document(
    settings: LoopSettings,
    recorder: RunRecorder,
    *,
    event: str,
    reason: str,
    iteration: int,
    pass_counts: list[int],
    total_counts: list[int],
    unresolved: list[str],
    outcome: str | None = None,
    final_state: str | None = None,
    exit_status: int | None = None,
    plateau_action: str | None = None,
    summary: str | None = None,
    best: BestTree | None = None,
) -> Notification:
    return Notification.model_validate(
        {
            "schema": NOTIFICATION_SCHEMA,
            "event": event,
            "run_id": recorder.run_id,
            "outcome": outcome,
            "final_state": final_state,
            "exit_status": exit_status,
            "reason": reason,
            "plateau_action": plateau_action,
            "iteration": iteration,
            "pass_count": pass_counts[-1] if pass_counts else None,
            "total_count": total_counts[-1] if total_counts else None,
            "pass_counts": pass_counts,
            "total_counts": total_counts,
            "unresolved": unresolved[:MAX_UNRESOLVED],
            "unresolved_count": len(unresolved),
            "mode": settings.mode.value,
            "goal": settings.options.goal,
            "run_dir": str(recorder.path),
            "report": str(recorder.path / "report.html"),
            "summary": summary,
            "best": best,
            "apply": best.apply if best is not None and not best.in_place else None,
            "time": utc_now(),
        }
    )


def _deliver(
    settings: LoopSettings,
    recorder: RunRecorder,
    document: Notification,
    iteration: int,
    state: str,
) -> list[NotificationRecord]:
    """Send `document` (redacted) to every channel in turn; each delivery goes to the trace."""
    body = recorder.redact(
        json.dumps(document.model_dump(mode="json", by_alias=True), ensure_ascii=False)
    )
    records = []
    for channel in settings.plateau.ci_notification_channels:
        problem = _send(channel, body, settings, recorder.redact)
        record = NotificationRecord(
            event=document.event,
            channel=described(channel),
            delivered=not problem,
            detail=problem[:DETAIL_CHARS],
        )
        records.append(record)
        said = _note(record) if problem else f"{record.event} notification sent to {record.channel}"
        recorder.append_event(
            Event.note(
                utc_now(), "notification", (state, state), "notification", said, iteration
            ).to_json()
        )
    return records


def _send(channel: str, body: str, settings: LoopSettings, redact: Redactor) -> str:
    """Deliver `body` on `channel`: "" when it was taken, else why not (one line)."""
    timeout = settings.options.notify_timeout
    if channel.startswith(COMMAND):
        provider = CommandProvider(channel.removeprefix(COMMAND), settings.rootdir)
        try:
            done = run_agent_process(
                [provider.executable()],
                stdin=body.encode("utf-8", "replace"),
                cwd=str(settings.rootdir),
                timeout=timeout,
                provider=channel,
            )
        except ProviderError as exc:
            if exc.kind is ProviderErrorKind.PROVIDER_TIMEOUT:
                return f"not done within fwloop_notify_timeout={timeout:g} s; stopped"
            return exc.message
        said = (done.stderr.strip().splitlines() or [""])[-1]
        return f"exit {done.returncode}: {redact(said)}" if done.returncode else ""
    import http.client  # only a run with a webhook pays for them
    import urllib.error
    import urllib.request

    request = urllib.request.Request(
        channel,
        data=body.encode("utf-8", "replace"),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            status = int(response.status)
    except urllib.error.HTTPError as exc:
        return f"HTTP {exc.code}"
    except (OSError, http.client.HTTPException) as exc:
        cause = exc.reason if isinstance(exc, urllib.error.URLError) else exc
        # The message may quote the URL, whose path is a secret.
        return f"{type(cause).__name__}: {str(cause).replace(channel, described(channel))}"
    return "" if 200 <= status < 300 else f"HTTP {status}"


def _note(record: NotificationRecord) -> str:
    return (
        f"the {record.event} notification to {record.channel} failed ({record.detail}); "
        "the run's outcome stands"
    )
