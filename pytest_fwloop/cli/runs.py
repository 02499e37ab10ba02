"""`fwloop list`, `show`, `replay` and `report`: reading recorded runs (DESIGN.md §11, §12).

Nothing here changes a tree or a run directory, except `report`, which writes the report file.
`RUN` is a run id, a unique prefix of one, `last`, or the path of a run directory.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from tabulate import tabulate

from pytest_fwloop.cli.replay import RecordedRun, ReplayError, load_run, replay, timeline_lines
from pytest_fwloop.core.records.run_state import STATE_FILE, StateError, load_state
from pytest_fwloop.core.suite.known_failures import known_failures_file
from pytest_fwloop.reports.html import RunPage, render_to
from pytest_fwloop.workspace import Journal


def find_run(root: Path, runs: Path, name: str) -> Path:
    """A run directory by id, unique id prefix, `last`, or path; ReplayError says why not."""
    if "/" in name or name in (".", ".."):
        path = Path(name)
        if _is_run(path):
            return path
        raise ReplayError(f"fwloop: {name} is not a run directory (no summary.json, no state.json)")
    folder = _runs_folder(root, runs)
    found = sorted(p for p in folder.glob("*") if _is_run(p))
    if not found:
        raise ReplayError(f"fwloop: no run in {folder}; run pytest --fwloop first")
    if name == "last":
        return found[-1]
    matches = [p for p in found if p.name.startswith(name)]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise ReplayError(f"fwloop: no run '{name}' in {folder}; `last` names the latest")
    raise ReplayError(
        f"fwloop: '{name}' names {len(matches)} runs ({', '.join(p.name for p in matches[:3])}"
        f"{', …' if len(matches) > 3 else ''}); give more of the id"
    )


def _is_run(path: Path) -> bool:
    """A run directory: ended (summary.json), or stopped short of it (state.json)."""
    return (path / "summary.json").is_file() or (path / STATE_FILE).is_file()


def _runs_folder(root: Path, runs: Path) -> Path:
    return runs if runs.is_absolute() else root / runs


def _started(run_id: str) -> str:
    """The start time a run id begins with (`20261125-140211-…`), as `2026-11-25 14:02:11`."""
    day, _, clock = run_id.partition("-")
    if len(day) != 8 or len(clock) < 6 or not (day + clock[:6]).isdigit():
        return "?"
    return f"{day[:4]}-{day[4:6]}-{day[6:]} {clock[:2]}:{clock[2:4]}:{clock[4:6]}"


def _open(root: Path, runs: Path, name: str) -> tuple[Path, RecordedRun] | None:
    """The run RUN names and its records; None once the reason it cannot be read is printed."""
    try:
        path = find_run(root, runs, name)
        return path, load_run(path)
    except ReplayError as exc:
        print(exc, file=sys.stderr)
        return None


def list_runs(root: Path, runs: Path, as_json: bool) -> int:
    """`fwloop list`: every run under the rootdir, oldest first."""
    folder = _runs_folder(root, runs)
    rows = []
    for path in sorted(p for p in folder.glob("*") if p.is_dir()) if folder.is_dir() else []:
        try:
            summary = json.loads((path / "summary.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            summary = {}  # running, or its controller was killed: no summary yet
        rows.append(
            {
                "run_id": path.name,
                "started": _started(path.name),
                "outcome": summary.get("outcome", "unfinished"),
                "iterations": summary.get("iterations"),
                "pass_counts": summary.get("pass_counts", []),
                "total": (summary.get("total_counts") or [None])[-1],
            }
        )
    if as_json:
        print(json.dumps(rows, indent=2))
    elif not rows:
        print(f"fwloop: no runs in {folder}")
    else:
        table = [
            [
                r["run_id"],
                r["started"],
                r["outcome"],
                r["iterations"] or "-",
                " → ".join(map(str, r["pass_counts"]))
                + (f" of {r['total']}" if r["total"] else ""),
            ]
            for r in rows
        ]
        print(tabulate(table, ["run", "started", "outcome", "iterations", "passed"]))
    return 0


def show_run(root: Path, runs: Path, name: str, as_json: bool, known: bool = False) -> int:
    """`fwloop show RUN`: outcome, reason, the iterations, and where the records are; with
    `known`, its declined and unresolved tests as a --fwloop-known-failures file."""
    try:
        path = find_run(root, runs, name)
        if not (path / "summary.json").is_file():
            if known:
                raise ReplayError(f"fwloop: run {path.name} has not ended: no failures to list")
            return _show_unfinished(path, as_json)
        run = load_run(path)
    except ReplayError as exc:
        print(exc, file=sys.stderr)
        return 2
    if known:
        print(_known_failures(run), end="")
        return 0
    shown = _shown(path, run)
    if as_json:
        print(json.dumps(shown, indent=2))
        return 0
    _print_shown(run, shown)
    return 0


def _known_failures(run: RecordedRun) -> str:
    """The run's declined, unresolved and known-failing tests as a known-failures file."""
    summary = run.summary
    known_failing = [n for n, o in summary.known_failures.items() if o in ("failed", "error")]
    return known_failures_file(
        summary.run_id, summary.outcome.value, summary.declined, summary.unresolved, known_failing
    )


#: The files of a run directory `fwloop show` points at, when they exist.
_SHOWN_FILES = (
    "summary.json",
    "report.html",
    "report.md",
    "task-events.jsonl",
    "final.patch",
    "best.patch",
    "proposal.md",
    "proposal.patch",
    STATE_FILE,
)


def _shown(path: Path, run: RecordedRun) -> dict[str, Any]:
    """What `fwloop show` says of an ended run, as its `--json` prints it."""
    summary = run.summary
    iterations = [
        {
            "iteration": e.iteration,
            "kind": e.kind,
            "passed": e.pass_count,
            "total": e.total_count,
            "executed": e.executed,
            "verdict": e.convergence_type or "continue",
        }
        for e in run.timeline.iterations
        if e.counts is not None
    ]
    return {
        "run_id": summary.run_id,
        "outcome": summary.outcome.value,
        "reason": summary.reason,
        "exit_status": summary.exit_status,
        "iterations": iterations,
        "records": {name: str(path / name) for name in _SHOWN_FILES if (path / name).is_file()},
        "best": summary.best.model_dump(mode="json") if summary.best else None,
    }


def _print_shown(run: RecordedRun, shown: dict[str, Any]) -> None:
    summary = run.summary
    iterations = shown["iterations"]
    print(f"run {summary.run_id}: {summary.outcome.value} (exit {summary.exit_status})")
    print(f"reason: {summary.reason}")
    print(
        tabulate([list(i.values()) for i in iterations], list(iterations[0]) if iterations else [])
    )
    for name, where in shown["records"].items():
        print(f"{name}: {where}")
    best = summary.best
    if best is not None and not best.in_place:
        print(
            f"best tree: iteration {best.iteration} ({best.pass_count}/{best.total_count} "
            f"passed), not in place: {best.apply}"
        )


def _show_unfinished(path: Path, as_json: bool) -> int:
    """A run with no summary yet: running, or its controller was killed; told from its state."""
    try:
        state = load_state(path)
    except StateError as exc:
        print(exc, file=sys.stderr)
        return 2
    active = Journal(Path(state.rootdir) / ".fwloop").active()
    where = (
        f"running (pid {active.pid})"
        if active is not None and active.run_id == state.run_id
        else f"its controller stopped in {state.fsm_state} without ending it: "
        f"`fwloop resume {state.run_id}` continues it"
    )
    iterations = [
        {"iteration": it.number, "kind": it.kind, "verdict": it.convergence_type or "continue"}
        for it in state.iterations
        if it.measured
    ]
    if as_json:
        shown = {"run_id": state.run_id, "outcome": "unfinished", "where": where}
        print(json.dumps({**shown, "iterations": iterations}, indent=2))
        return 0
    print(f"run {state.run_id}: unfinished ({where})")
    if iterations:
        print(tabulate([list(i.values()) for i in iterations], list(iterations[0])))
    return 0


def replay_run(root: Path, runs: Path, name: str) -> int:
    opened = _open(root, runs, name)
    if opened is None:
        return 2
    run = opened[1]
    print("\n".join(timeline_lines(run)))
    difference = replay(run)
    if difference is not None:
        print(f"fwloop replay: does not reproduce: {difference}", file=sys.stderr)
        return 1
    print(
        f"fwloop replay: every decision reproduces ({len(run.events)} events, "
        f"{len(run.timeline.iterations)} iterations)"
    )
    return 0


def report_run(root: Path, runs: Path, name: str, output: Path | None) -> int:
    """`fwloop report RUN [-o FILE]`: the run's report.html again, from its records alone."""
    opened = _open(root, runs, name)
    if opened is None:
        return 2
    path, run = opened
    page = RunPage(
        run.summary.run_id,
        run.timeline.iterations,
        [(n, r.results) for n, r in sorted(run.rounds.items()) if r.results is not None],
        float(run.summary.criteria.get("target_pass_rate", 1.0)),
        run.summary.outcome.value,
        run.summary.reason,
        run.summary.labgrid,
        run.summary.declined,
        next(
            (
                r.convergence.metrics
                for _, r in reversed(sorted(run.rounds.items()))
                if r.convergence is not None
            ),
            [],
        ),
    )
    written = render_to(output or path / "report.html", path.resolve(), page)
    print(f"fwloop: report of run {run.summary.run_id}: {written}")
    return 0
