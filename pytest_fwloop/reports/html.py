"""`report.html` (DESIGN.md §12): the run for a person to look at, in one self-contained file.

Written at each iteration end, so opening it during a long run shows how far it got, and at the
end; `fwloop report RUN` writes it again from the run directory alone. Inline CSS and SVG, no
script and no network, so it reads the same with scripts off or archived by CI. Everything that
comes from tests, firmware output or agents is escaped by the template engine (Jinja2 with
autoescaping): a test named `<script>` shows as text.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jinja2

from pytest_fwloop.core.records.round_records import call_files
from pytest_fwloop.core.records.run_records import (
    AnalysisRecord,
    DeclinedRecord,
    LabgridRecord,
    MetricChange,
    TimelineEntry,
)
from pytest_fwloop.core.suite.history import outcomes_by_test
from pytest_fwloop.core.suite.results import IterationResults
from pytest_fwloop.core.verdict.metrics import iteration_metrics

#: Tests shown in the matrix at most (the failing ones first); the rest are counted.
MATRIX_ROWS = 400
#: Characters of each diff, analysis or log excerpt shown.
TEXT_CHARS = 20_000
CHART_WIDTH, CHART_HEIGHT, CHART_PAD = 640, 220, 36
SPARK_WIDTH, SPARK_HEIGHT = 120, 24


@dataclass
class RoundView:
    number: int
    kind: str
    counts: str
    rate: str
    executed: int
    verdict: str
    reason: str
    notes: Sequence[str]
    #: Each coder answer's confidence and how its decision record judged it.
    confidence: str = ""
    patch: str = ""
    analysis: str = ""
    review: dict[str, Any] | None = None
    #: Each review panel decision of the round (`panel-K.json`), in order.
    panels: list[dict[str, Any]] = field(default_factory=list)
    #: Each choice among K candidates of the round (`candidates.json`, …), in order.
    candidates: list[dict[str, Any]] = field(default_factory=list)
    plan: dict[str, Any] | None = None
    commands: list[dict[str, Any]] = field(default_factory=list)
    links: list[str] = field(default_factory=list)
    #: The convergence analysis after it (seed 001 §6.3).
    convergence: AnalysisRecord | None = None


@dataclass(frozen=True)
class MetricRow:
    """One metric of the report's table: its value per iteration, and against the baseline."""

    name: str
    better: str
    values: list[str]
    spark: str
    change: MetricChange | None


@dataclass(frozen=True)
class RunPage:
    """What the page shows of a run: its timeline, each attempt's tests, and how it stands."""

    run_id: str
    timeline: Sequence[TimelineEntry]
    attempts: list[tuple[int, IterationResults]]
    target: float
    outcome: str
    reason: str
    #: The labgrid place(s) the run held, None without a board farm.
    labgrid: LabgridRecord | None = None
    #: The tests the coder declined (node id: record), DESIGN.md §15.
    declined: Mapping[str, DeclinedRecord] = field(default_factory=dict)
    #: The latest kept tree's metrics against the baseline's (docs/metrics.md).
    metrics: Sequence[MetricChange] = ()


def write_html_report(run_dir: Path, page: RunPage, redact: Callable[[str], str]) -> str:
    """(Re)write the run's `report.html` while the loop runs or as it ends; the loop's own texts
    (reasons, notes) are redacted like every record. The page is for people, never a condition
    of the run: what kept it from being written is returned as a note."""
    try:
        render_to(run_dir / "report.html", run_dir, page, redact)
    except (OSError, jinja2.TemplateError, ValueError, KeyError, TypeError) as exc:
        return f"report.html not written: {type(exc).__name__}: {exc}"
    return ""


def render_to(
    target_file: Path, run_dir: Path, page: RunPage, redact: Callable[[str], str] = str
) -> Path:
    """Write the report of `run_dir` to `target_file`, through `redact`; its links lead into
    the run directory wherever the file is. Iterations whose tests never ran are left out."""
    measured = [entry for entry in page.timeline if entry.counts is not None]
    rounds = [_round(run_dir, entry) for entry in measured]
    matrix, hidden = _matrix(page.attempts)
    latest = next((r.convergence for r in reversed(rounds) if r.convergence), None)
    html = _TEMPLATE.render(
        run_id=page.run_id,
        outcome=page.outcome,
        reason=page.reason,
        labgrid=page.labgrid,
        declined=page.declined,
        rounds=rounds,
        next=latest.recommendation if latest is not None and page.outcome != "success" else "",
        metrics=_metric_rows(page.attempts, page.metrics),
        chart=_chart(measured, page.target),
        target=f"{page.target:.0%}",
        matrix=matrix,
        hidden=hidden,
        iterations=[n for n, _ in page.attempts],
        events=_events(run_dir / "task-events.jsonl"),
        base="" if target_file.parent == run_dir else f"{run_dir.as_uri()}/",
    )
    temporary = target_file.with_name(f".{target_file.name}.tmp")
    temporary.write_text(redact(html), encoding="utf-8")
    temporary.replace(target_file)  # a browser reloading it mid-run never sees half a page
    return target_file


def _round(run_dir: Path, it: TimelineEntry) -> RoundView:
    folder = run_dir / "rounds" / f"{it.iteration:02d}"
    rate = it.pass_count / it.total_count if it.total_count else 0.0
    view = RoundView(
        number=it.iteration,
        kind=it.kind,
        counts=f"{it.pass_count}/{it.total_count}",
        rate=f"{rate:.1%}",
        executed=it.executed,
        verdict=it.convergence_type or "continue",
        reason=it.reason,
        notes=it.notes,
        confidence=", ".join(
            f"{d.confidence:.2f}" + ("" if d.status == "usable" else f" ({d.status})")
            for d in it.decisions
        ),
        patch=_text(folder / "patch.diff"),
        review=_json(folder / "review.json"),
        plan=_json(folder / "test-plan.json"),
        convergence=it.analysis,
    )
    answers = call_files(folder, "coder", "answer.json")
    coder = _json(answers[-1]) if answers else None
    if coder is not None:
        analysis = coder.get("analysis", {})
        parts = [coder.get("summary"), analysis.get("root_cause")]
        if analysis.get("confidence") is not None:
            parts.append(f"confidence {analysis['confidence']}")
        view.analysis = "\n".join(str(part) for part in parts if part)
    panels = sorted(folder.glob("panel-*.json"), key=lambda p: int(p.stem.split("-")[1]))
    view.panels = [panel for panel in map(_json, panels) if panel is not None]
    choices = sorted(folder.glob("candidates*.json"), key=lambda p: int(p.stem[11:] or 1))
    view.candidates = [choice for choice in map(_json, choices) if choice is not None]
    commands = _json(folder / "commands.json")
    view.commands = list(commands.get("commands", [])) if commands else []
    view.links = [
        path.relative_to(run_dir).as_posix()
        for pattern in ("build-precheck*.log", "build.log", "pytest*.log", "console/*")
        for path in sorted(folder.glob(pattern))
    ]
    return view


def _matrix(
    attempts: list[tuple[int, IterationResults]],
) -> tuple[list[tuple[str, list[str]]], int]:
    """Rows of (node id, one cell class per iteration): failing tests first."""
    table = outcomes_by_test(attempts)
    special: dict[tuple[str, int], str] = {}
    for number, results in attempts:
        for t in results.tests:
            if t.flaky:
                special[t.nodeid, number] = "flaky"
            elif t.env_failure:
                special[t.nodeid, number] = "environment"
            elif t.carried:
                special[t.nodeid, number] = f"{t.outcome} carried"
    numbers = [n for n, _ in attempts]
    rows = [
        (
            nodeid,
            [special.get((nodeid, n), outcomes.get(str(n), "absent")) for n in numbers],
        )
        for nodeid, outcomes in table.items()
    ]
    rows.sort(key=lambda row: (all(c.startswith("passed") for c in row[1]), row[0]))
    return rows[:MATRIX_ROWS], max(0, len(rows) - MATRIX_ROWS)


def _metric_rows(
    attempts: list[tuple[int, IterationResults]], judged: Sequence[MetricChange]
) -> list[MetricRow]:
    """Each metric any iteration recorded, its value in every iteration (blank where none)."""
    per_iteration = [iteration_metrics(results) for _, results in attempts]
    names = sorted({name for metrics in per_iteration for name in metrics})
    changes = {c.name: c for c in judged}
    rows = []
    for name in names:
        found = [metrics.get(name) for metrics in per_iteration]
        better = next(m.better for m in found if m is not None)
        rows.append(
            MetricRow(
                name,
                better,
                ["" if m is None else f"{m.value:g}" for m in found],
                _spark([m.value for m in found if m is not None]),
                changes.get(name),
            )
        )
    return rows


def _spark(values: list[float]) -> str:
    """The points of a small polyline of `values`, scaled between their least and greatest."""
    low, high = min(values), max(values)
    step = SPARK_WIDTH / max(len(values) - 1, 1)
    span = (high - low) or 1.0
    return " ".join(
        f"{i * step:.1f},{SPARK_HEIGHT - 2 - (v - low) / span * (SPARK_HEIGHT - 4):.1f}"
        for i, v in enumerate(values)
    )


def _chart(measured: list[TimelineEntry], target: float) -> dict[str, Any]:
    """Points of the pass-rate polyline and the target line, in SVG coordinates."""
    width, height, pad = CHART_WIDTH, CHART_HEIGHT, CHART_PAD
    step = (width - 2 * pad) / max(len(measured) - 1, 1)

    def y(rate: float) -> float:
        return round(height - pad - rate * (height - 2 * pad), 1)

    points = [
        {
            "x": round(pad + i * step, 1),
            "y": y(it.pass_count / it.total_count if it.total_count else 0.0),
            "label": f"iteration {it.iteration}: {it.pass_count}/{it.total_count}",
            "number": it.iteration,
        }
        for i, it in enumerate(measured)
    ]
    return {
        "width": width,
        "height": height,
        "pad": pad,
        "points": points,
        "line": " ".join(f"{p['x']},{p['y']}" for p in points),
        "target_y": y(target),
        "zero_y": y(0.0),
        "full_y": y(1.0),
    }


def _events(path: Path) -> list[dict[str, Any]]:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError:
        return []
    events = []
    for line in lines:
        try:
            events.append(json.loads(line))
        except ValueError:
            continue
    return events


def _text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")[:TEXT_CHARS]
    except OSError:
        return ""


def _json(path: Path) -> dict[str, Any] | None:
    try:
        loaded = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return loaded if isinstance(loaded, dict) else None


_TEMPLATE = jinja2.Environment(
    loader=jinja2.PackageLoader("pytest_fwloop", "templates"),
    autoescape=True,
    undefined=jinja2.StrictUndefined,
).get_template("report.html.j2")
