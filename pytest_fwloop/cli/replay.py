"""`fwloop replay RUN`: re-walk a recorded run and check every decision against its evidence
(DESIGN.md §12; seed 001 §2.2 "usable for audit and replay").

Three kinds of decision are re-derived from the run directory alone, with the same code the loop
used (`fsm.next_state`, `convergence.determine_convergence`, `baseline_gate.baseline_gate`,
`analysis.analyse`):

- every transition of `task-events.jsonl` is a row of the table, and each starts where the one
  before it ended, from IDLE to a terminal state: a line removed or edited breaks the chain (a
  run continued by `fwloop confirm|resume|followup` walks from IDLE again after each end); a
  sub-state line stays in the state the table puts it in;
- every `rounds/NN/convergence.json` verdict follows from its counts and criteria (a SUCCESS
  withheld where a baseline-passing test fails or a metric of the results is worse than the
  recorded tolerance allows), its counts are the ones the iterations' `results.json` give, and
  its analysis (score, trend, reasons, recommendation) is the one those numbers give;
- every applied `patch.diff` is the patch the reviewer approved in that iteration;
- every review panel's decision (`panel-K.json`) is what its rule gives for the votes recorded
  in the members' calls, and a patch it let through had its approval within `fwloop_max_risk`.

The first decision that does not reproduce is named with its iteration. The checks are pure
functions of the loaded records; `load_run` is the only part that reads files.
"""

from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError

from pytest_fwloop.core.gate.candidate_choice import Candidate, choose
from pytest_fwloop.core.gate.review_panel import panel_verdict
from pytest_fwloop.core.machine import fsm
from pytest_fwloop.core.machine.decimals import over, written
from pytest_fwloop.core.machine.fsm import IterationKind
from pytest_fwloop.core.machine.substates import misplaced
from pytest_fwloop.core.records.agent_protocol import ReviewerAnswer
from pytest_fwloop.core.records.round_records import (
    CandidateEntry,
    CandidatesRecord,
    ConvergenceRecord,
    PanelRecord,
    call_files,
)
from pytest_fwloop.core.records.run_records import AnalysisRecord, Event, Summary, Timeline
from pytest_fwloop.core.suite.results import IterationResults
from pytest_fwloop.core.verdict.baseline_gate import baseline_gate, unconfirmed
from pytest_fwloop.core.verdict.convergence import (
    ConvergenceCriteria,
    ConvergenceType,
    CriteriaError,
    ExecutionMode,
    determine_convergence,
)
from pytest_fwloop.core.verdict.iteration_advice import Facts, analyse

#: The stem of a reviewer call's files, as a panel vote names it.
_CALL = re.compile(r"reviewer-[0-9]+")


class ReplayError(Exception):
    """The run directory cannot be replayed at all (missing or unreadable records)."""


@dataclass(frozen=True)
class Difference:
    """The first decision that does not follow from the records."""

    iteration: int
    decision: str  # "transition", "convergence", "panel" or "patch"
    detail: str

    def __str__(self) -> str:
        return f"iteration {self.iteration}, {self.decision}: {self.detail}"


@dataclass
class Round:
    """What one `rounds/NN/` holds that the checks read."""

    results: IterationResults | None = None
    convergence: ConvergenceRecord | None = None
    patch: str | None = None
    review: dict[str, object] | None = None
    reviewed: list[str] = field(default_factory=list)  # each reviewer request's patch, in order
    #: Each panel decision, with the review its members' recorded calls hold (None: none).
    panels: list[tuple[PanelRecord, list[ReviewerAnswer | None]]] = field(default_factory=list)
    #: Each choice among K candidates (`candidates.json`, `candidates-2.json`, …), in order.
    candidates: list[CandidatesRecord] = field(default_factory=list)
    #: The diff of each candidate by (record index, number), as its folder keeps it.
    candidate_patches: dict[tuple[int, int], str] = field(default_factory=dict)


@dataclass
class RecordedRun:
    summary: Summary
    events: list[Event]
    timeline: Timeline
    rounds: dict[int, Round]


def load_run(path: Path) -> RecordedRun:
    """The run directory's records, validated by their models; ReplayError names what is wrong."""
    try:
        summary = Summary.model_validate_json(_read(path / "summary.json"))
        timeline = Timeline.model_validate_json(_read(path / "task-timeline.json"))
        lines = _read(path / "task-events.jsonl").splitlines()
        events = [Event.model_validate_json(line) for line in lines if line.strip()]
        rounds = {int(folder.name): _round(folder) for folder in _round_folders(path)}
    except (ValidationError, ValueError) as exc:
        raise ReplayError(f"{path}: a record does not validate: {_first_error(exc)}") from None
    return RecordedRun(summary, events, timeline, rounds)


def _round_folders(path: Path) -> list[Path]:
    rounds = path / "rounds"
    return sorted(p for p in rounds.iterdir() if p.name.isdigit()) if rounds.is_dir() else []


def _round(folder: Path) -> Round:
    found = Round()
    if (folder / "results.json").is_file():
        found.results = IterationResults.model_validate_json(_read(folder / "results.json"))
    if (folder / "convergence.json").is_file():
        found.convergence = ConvergenceRecord.model_validate_json(
            _read(folder / "convergence.json")
        )
    if (folder / "patch.diff").is_file():
        found.patch = _read(folder / "patch.diff")
    if (folder / "review.json").is_file():
        found.review = json.loads(_read(folder / "review.json"))
    requests = call_files(folder, "reviewer", "request.json")
    found.reviewed = [str(json.loads(_read(p)).get("patch", "")) for p in requests]
    choices = sorted(folder.glob("candidates*.json"), key=lambda p: int(p.stem[11:] or 1))
    for index, path in enumerate(choices):
        choice = CandidatesRecord.model_validate_json(_read(path))
        found.candidates.append(choice)
        for entry in choice.candidates:
            if entry.patch is not None:
                patch_file = folder.parents[1] / entry.patch
                found.candidate_patches[index, entry.number] = _read(patch_file)
    for path in sorted(folder.glob("panel-*.json"), key=lambda p: int(p.stem.split("-")[1])):
        record = PanelRecord.model_validate_json(_read(path))
        found.panels.append((record, [_vote(folder, vote.call) for vote in record.votes]))
    return found


def _vote(folder: Path, call: str) -> ReviewerAnswer | None:
    """The review a panel member's recorded call answered, None when it holds none."""
    path = folder / f"{call}.answer.json"
    if not _CALL.fullmatch(call) or not path.is_file():
        return None
    try:
        return ReviewerAnswer.model_validate_json(_read(path))
    except ValidationError:
        return None


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ReplayError(f"{path}: {exc.strerror or exc}") from None


def _first_error(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        error = exc.errors()[0]
        return f"{'.'.join(str(p) for p in error['loc'])}: {error['msg']}"
    return str(exc).splitlines()[0]


# -- the checks (pure) ---------------------------------------------------------------------------


def check_transitions(events: list[Event]) -> Difference | None:
    """The trace is one unbroken walk of the transition table from IDLE to a terminal state;
    a continued run's next controller starts from IDLE again."""
    state = fsm.State.IDLE
    iteration = 1
    for event in events:
        iteration = event.iteration
        if event.kind == "agent_call":
            continue
        if state in fsm.TERMINAL_STATES and event.from_state == fsm.State.IDLE.value:
            state = fsm.State.IDLE
        if event.from_state != state.value:
            return Difference(
                iteration,
                "transition",
                f"{event.from_state} --{event.event}--> {event.to_state} starts where the trace "
                f"is not (it was in {state.value}): a move is missing or edited",
            )
        if event.kind == "substate":  # work inside the state (seed 001 §3.2), not a move
            wrong = misplaced(event.event, state.value)
            if wrong is None and event.to_state != state.value:
                wrong = f"sub-state {event.event} leads to {event.to_state}: it cannot move"
            if wrong is not None:
                return Difference(iteration, "transition", wrong)
            continue
        if event.kind == "rollback":
            if event.to_state != state.value or state is not fsm.State.CONVERGENCE_CHECK:
                return Difference(iteration, "transition", "a rollback outside CONVERGENCE_CHECK")
            continue
        if event.kind == "internal_error":
            state = fsm.State.FAILURE  # an exception ends the loop from any state
            continue
        if event.kind == "applied":
            if state not in fsm.TERMINAL_STATES:
                return Difference(iteration, "transition", "`fwloop apply` on a run not ended")
            continue
        if event.kind == "notification":
            continue  # a delivery where the loop stood (a plateau, the end): no move
        if event.kind == "interrupted":
            state = fsm.State.ABORTED  # a killed controller, as its resumer found it
            continue
        try:
            target = fsm.next_state(state, fsm.LoopEvent(event.event))
        except (ValueError, fsm.IllegalTransition) as exc:
            return Difference(iteration, "transition", f"not a row of the table: {exc}")
        if target.value != event.to_state:
            return Difference(
                iteration,
                "transition",
                f"{state.value} --{event.event}--> leads to {target.value}, the trace says "
                f"{event.to_state}",
            )
        state = target
    if state not in fsm.TERMINAL_STATES:
        return Difference(iteration, "transition", f"the trace ends in {state.value}, not terminal")
    return None


def check_verdicts(
    rounds: dict[int, Round], kinds: dict[int, IterationKind], max_iter: int
) -> Difference | None:
    """Each recorded verdict is what the convergence rules give for the recorded counts, and the
    counts are the ones the iterations' results give."""
    attempts: list[tuple[int, IterationResults]] = []
    for number in sorted(rounds):
        recorded = rounds[number]
        if recorded.convergence is None:
            continue
        if recorded.results is None:
            return Difference(number, "convergence", "a verdict with no results.json")
        attempts.append((number, recorded.results))
        found = _check_verdict(number, recorded.convergence, attempts, kinds, max_iter)
        if found is not None:
            return found
    return None


def _check_verdict(
    number: int,
    record: ConvergenceRecord,
    attempts: list[tuple[int, IterationResults]],
    kinds: dict[int, IterationKind],
    max_iter: int,
) -> Difference | None:
    """Round `number`'s verdict and analysis against the rules, over the attempts up to it."""
    counted = ([r.pass_count for _, r in attempts], [r.total_count for _, r in attempts])
    if (record.pass_counts, record.total_counts) != counted:
        return Difference(
            number,
            "convergence",
            f"the verdict was taken on pass/total counts {record.pass_counts}/"
            f"{record.total_counts}; the results give {counted[0]}/{counted[1]}",
        )
    try:
        criteria = _criteria(record.criteria)
    except (TypeError, CriteriaError) as exc:
        return Difference(number, "convergence", f"unusable criteria: {exc}")
    limit = record.max_iter if record.max_iter is not None else max_iter
    verdict, reason = determine_convergence(*counted, criteria, number, limit)
    measured = [(n, r) for n, r in attempts if kinds.get(n) != IterationKind.ROLLBACK]
    gate = baseline_gate(measured, record.metric_tolerance)
    if verdict is ConvergenceType.SUCCESS:
        # Withheld while a baseline-passing test fails, a metric is worse, or the tree
        # has not been confirmed with no new patch.
        ran = [kinds.get(n, IterationKind.PATCH) for n, _ in attempts]
        withheld = gate.withheld() + unconfirmed(ran, criteria.stable_iterations_required)
        if withheld:
            verdict = None
            reason += withheld
    expected = verdict.value if verdict is not None else None
    if expected != record.convergence_type:
        return Difference(
            number,
            "convergence",
            f"the record says {record.convergence_type or 'continue'}, the rules give "
            f"{expected or 'continue'} ({reason})",
        )
    if record.analysis is None or record.mode is None:
        return None  # recorded before the analysis was
    facts = Facts(
        *counted,
        criteria,
        number,
        limit,
        verdict,
        ExecutionMode(record.mode),
        gate.regressions,
        gate.metrics,
    )
    return _check_analysis(number, record.analysis, facts)


def _check_analysis(number: int, recorded: AnalysisRecord, facts: Facts) -> Difference | None:
    derived = analyse(facts)
    if derived == recorded:
        return None
    return Difference(
        number,
        "analysis",
        f"the record recommends {recorded.recommendation!r} (score {recorded.score}, "
        f"{recorded.trend}); its numbers give {derived.recommendation!r} (score "
        f"{derived.score}, {derived.trend})",
    )


def _criteria(values: dict[str, float]) -> ConvergenceCriteria:
    """The criteria a record names; its counts come back from JSON as numbers, made whole."""
    counts = {f.name for f in dataclasses.fields(ConvergenceCriteria) if type(f.default) is int}
    return ConvergenceCriteria(
        **{
            name: int(v) if name in counts and float(v).is_integer() else v
            for name, v in values.items()
        }  # type: ignore[arg-type]
    )


def check_patches(rounds: dict[int, Round]) -> Difference | None:
    """Every applied patch is the one the reviewer approved in its iteration."""
    for number in sorted(rounds):
        recorded = rounds[number]
        if recorded.patch is None:
            continue
        if recorded.review is None or recorded.review.get("decision") != "approve":
            decision = recorded.review.get("decision") if recorded.review else "no review.json"
            return Difference(number, "patch", f"applied without an approval ({decision})")
        if recorded.candidates:
            continue  # the chosen candidate's approval is `check_candidates`' to judge
        if not recorded.reviewed or recorded.reviewed[-1] != recorded.patch:
            return Difference(number, "patch", "patch.diff is not the patch the reviewer approved")
    return None


def check_candidates(rounds: dict[int, Round]) -> Difference | None:
    """Each choice among K candidates follows from its recorded facts by the rules of
    `candidate_choice`, and the patch applied is the chosen one, as the reviewer saw it."""
    for number in sorted(rounds):
        recorded = rounds[number]
        for index, record in enumerate(recorded.candidates):
            facts = [
                _candidate(entry, recorded.candidate_patches.get((index, entry.number), ""))
                for entry in record.candidates
            ]
            derived = choose(facts)
            if derived.chosen != record.chosen:
                return Difference(
                    number,
                    "candidates",
                    f"candidate {record.chosen} was chosen; its records give {derived.chosen}",
                )
        last = recorded.candidates[-1] if recorded.candidates else None
        if last is None or recorded.patch is None:
            continue
        chosen = recorded.candidate_patches.get((len(recorded.candidates) - 1, last.chosen or 0))
        if chosen != recorded.patch or chosen not in recorded.reviewed:
            return Difference(
                number, "candidates", "patch.diff is not the chosen candidate the reviewer saw"
            )
    return None


def _candidate(entry: CandidateEntry, patch: str) -> Candidate:
    """A candidate's facts as `candidates.json` keeps them."""
    broke = tuple(entry.broke) if entry.broke is not None else None
    dropped = entry.why.removeprefix("dropped: ") if entry.verdict == "dropped" else None
    return Candidate(
        entry.number,
        patch,
        dropped=None if broke else dropped,
        same_as=entry.same_as,
        agreement=entry.agreement,
        risk=entry.risk,
        fixed=tuple(entry.fixed) if entry.fixed is not None else None,
        still_failing=tuple(entry.still_failing),
        broke=broke,
    )


def check_panels(rounds: dict[int, Round]) -> Difference | None:
    """Each panel decision follows from its members' recorded reviews under its rule; a patch
    applied after one was approved by the last, within fwloop_max_risk, as review.json says."""
    for number in sorted(rounds):
        recorded = rounds[number]
        for k, (panel, reviews) in enumerate(recorded.panels, 1):
            votes: list[tuple[str, ReviewerAnswer]] = []
            for vote, review in zip(panel.votes, reviews, strict=True):
                said = f"{review.decision} (risk {written(review.risk)})" if review else "nothing"
                if review is None or (review.decision, review.risk) != (vote.decision, vote.risk):
                    return Difference(
                        number,
                        "panel",
                        f"panel-{k}.json: {vote.provider} voted {vote.decision} (risk "
                        f"{written(vote.risk)}); its call {vote.call} answered {said}",
                    )
                votes.append((vote.provider, review))
            verdict = panel_verdict(panel.rule, votes)
            derived = verdict.review
            recounted = (derived.decision, verdict.approvals, verdict.needed, verdict.split)
            recorded_as = (panel.decision, panel.approvals, panel.needed, panel.split)
            if (*recounted, derived.risk) != (*recorded_as, panel.risk):
                return Difference(
                    number,
                    "panel",
                    f"panel-{k}.json says {panel.decision} ({panel.approvals} approve, "
                    f"{panel.needed} needed); the votes under rule {panel.rule} give "
                    f"{derived.decision} ({verdict.line})",
                )
        if recorded.patch is None or not recorded.panels:
            continue
        last = recorded.panels[-1][0]
        kept = recorded.review or {}
        if last.decision != "approve" or over(last.risk, last.max_risk):
            return Difference(
                number,
                "panel",
                f"patch.diff was applied after the panel's {last.decision} (highest risk "
                f"{written(last.risk)}, fwloop_max_risk {written(last.max_risk)})",
            )
        if (kept.get("decision"), kept.get("risk")) != (last.decision, last.risk):
            return Difference(number, "panel", "review.json is not the panel's last decision")
    return None


def replay(run: RecordedRun) -> Difference | None:
    """The first decision of `run` that does not reproduce, or None."""
    kinds = {entry.iteration: entry.kind for entry in run.timeline.iterations}
    return (
        check_transitions(run.events)
        or check_verdicts(run.rounds, kinds, run.summary.max_iter)
        or check_panels(run.rounds)
        or check_candidates(run.rounds)
        or check_patches(run.rounds)
    )


def timeline_lines(run: RecordedRun) -> list[str]:
    """The run's iterations, one line each, as `fwloop replay` prints them."""
    lines = [f"run {run.summary.run_id}: {run.summary.outcome.value} ({run.summary.reason})"]
    for entry in run.timeline.iterations:
        counts = f"{entry.pass_count}/{entry.total_count}" if entry.counts is not None else "-"
        verdict = entry.convergence_type or "continue"
        lines.append(
            f"  [{entry.iteration}] {entry.kind:<12} {counts:>11}  {verdict:<26} "
            f"{entry.patch_summary[:60]}".rstrip()
        )
    return lines
