"""PATCH_GENERATION with K candidates (DESIGN.md §19): each judged, checked, one chosen.

Each candidate with a patch meets the gate and the reviewer as one answer would (one after
another: the reviewer is one provider); the approved ones are built and focus-tested in scratch
trees, up to `fwloop_candidate_jobs` side by side; the leader then runs the whole suite there as
the regression gate (a leader that breaks a passing test drops out and the next one leads).
The rules that rank and choose are pure (`core/gate/candidate_choice.py`). The chosen one
becomes the iteration's approved patch, and PATCH_APPLY applies it to the user's tree through
the ordinary apply, journal and rebuild: everything after the choice is as with one answer.
When none survives, the loop goes back to the coder with what each one broke, in the same
iteration: a candidate that does not build costs no iteration.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Literal

from pytest_fwloop.core.gate.candidate_choice import (
    Candidate,
    Choice,
    PassAt,
    choose,
    first_unjudged,
    next_to_gate,
    pass_at,
    with_agreement,
)
from pytest_fwloop.core.machine.fsm import ErrorType, LoopEvent
from pytest_fwloop.core.machine.recovery import ErrorState
from pytest_fwloop.core.machine.substates import SubState
from pytest_fwloop.core.records.agent_protocol import (
    AgentRequest,
    CoderAnswer,
    MustFix,
    ReviewerAnswer,
)
from pytest_fwloop.core.records.round_records import CandidateEntry, CandidatesRecord
from pytest_fwloop.core.records.run_records import CandidateRound
from pytest_fwloop.loop.candidates.trial import TrialReport, Trials
from pytest_fwloop.loop.child_runner import ChildRunner
from pytest_fwloop.loop.services import Services
from pytest_fwloop.loop.state import Iteration, LoopState, Step, Verdict, failed
from pytest_fwloop.loop.steps.patch_gate import PatchGate

#: Bytes of each dropped candidate's build diagnostics the coder is sent back.
DIAGNOSTICS_PER_CANDIDATE = 1500


class CandidateStage:
    """Judges, checks and chooses among one iteration's candidates."""

    def __init__(
        self,
        services: Services,
        loop: LoopState,
        gate: PatchGate,
        child: ChildRunner,
        time_left: Callable[[], float],
    ) -> None:
        self.services = services
        self.loop = loop
        self.gate = gate
        self.child = child
        self.time_left = time_left

    def judge(self, current: Iteration, reviewer_request: Callable[[str], AgentRequest]) -> Verdict:
        """The chosen candidate approved as the iteration's patch, or why none survived."""
        calls = [call for call, _ in self.loop.candidate_answers]
        answers = [answer for _, answer in self.loop.candidate_answers]
        self.loop.candidate_answers = []
        stage = len(current.candidate_rounds) + 1
        name = "candidates" if stage == 1 else f"candidates-{stage}"
        folder = self.services.recorder.round_path(current.number) / name
        candidates = with_agreement(
            [
                Candidate(
                    n,
                    a.patch if a is not None else "",
                    dropped=None if a is not None and a.patch.strip() else _no_patch(a),
                )
                for n, a in enumerate(answers, 1)
            ]
        )
        refusals: dict[int, Verdict] = {}
        reviews: dict[int, tuple[ReviewerAnswer, float]] = {}
        rounds = current.review_rounds
        asked_changes = False
        for c in list(candidates):
            answer = answers[c.number - 1]
            if c.dropped is not None or answer is None:
                continue
            current.review_rounds = rounds
            verdict = self.gate.judge(answer, current, reviewer_request)
            asked_changes |= verdict.step.event is LoopEvent.REVIEW_CHANGES_REQUESTED
            if verdict.step.event is LoopEvent.PATCH_APPROVED and self.gate.approved is not None:
                reviews[c.number] = self.gate.approved
                candidates = _set(candidates, c.number, risk=self.gate.approved[1])
            else:
                refusals[c.number] = verdict
                candidates = _set(candidates, c.number, dropped=f"gate: {verdict.step.reason}")
        current.review_rounds = rounds + int(asked_changes)
        label = f"{self.services.recorder.run_id}-{current.number:02d}"
        trials = Trials(self.services, self.child, self.time_left, label)
        reports = self._check(trials, current, candidates, folder)
        candidates = [
            dataclasses.replace(
                c,
                dropped=c.dropped or reports[c.number].dropped,
                fixed=reports[c.number].fixed if c.dropped is None else None,
                still_failing=reports[c.number].still_failing,
            )
            if c.number in reports
            else c
            for c in candidates
        ]
        candidates = self._gate_runs(trials, candidates, reports, folder)
        trials.clear([c.number for c in candidates])
        choice = choose(candidates)
        measured = pass_at(candidates, choice)
        current.candidate_rounds.append(
            self._record(current, folder, candidates, choice, measured, calls, answers, reports)
        )
        return self._verdict(current, candidates, choice, refusals, reviews, answers, reports)

    def _check(
        self, trials: Trials, current: Iteration, candidates: Sequence[Candidate], folder: Path
    ) -> dict[int, TrialReport]:
        """Build and focus-test each approved candidate in its own tree, `jobs` at a time."""
        base = self.services.workspace.snapshot(f"candidates of iteration {current.number}")
        failing = [t.nodeid for t in self.loop.open_failures(str(self.services.settings.rootdir))]
        todo = [c for c in candidates if c.dropped is None]
        for c in todo:
            (folder / str(c.number)).mkdir(parents=True, exist_ok=True)
        jobs = min(self.services.settings.options.candidate_jobs, max(len(todo), 1))
        with ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="fwloop-candidate") as pool:
            futures = {
                c.number: pool.submit(
                    trials.focus, c.number, c.patch, base, failing, folder / str(c.number)
                )
                for c in todo
            }
            reports = {number: future.result() for number, future in futures.items()}
        for number, report in reports.items():
            self.child.scrub(folder / str(number))
            self._say(current, number, report, folder)
        return reports

    def _gate_runs(
        self,
        trials: Trials,
        candidates: list[Candidate],
        reports: dict[int, TrialReport],
        folder: Path,
    ) -> list[Candidate]:
        """The whole suite for each leader in turn until one breaks nothing; then for the first
        candidate if pass@1 still owes its run."""
        standing = self.loop.latest_results()
        assert standing is not None
        while (leader := next_to_gate(candidates) or first_unjudged(candidates)) is not None:
            where = folder / str(leader.number)
            broke = trials.whole(leader.number, standing, where, reports[leader.number])
            self.child.scrub(where)
            if broke is None:
                candidates = _set(
                    candidates, leader.number, dropped="its whole-suite run left no results"
                )
            else:
                candidates = _set(candidates, leader.number, broke=broke)
        return candidates

    def _say(self, current: Iteration, number: int, report: TrialReport, folder: Path) -> None:
        if report.dropped is not None:
            said = f"candidate {number} dropped: {report.dropped}"
        else:
            fixed = len(report.fixed or ())
            said = f"candidate {number}: built, fixes {fixed}/{fixed + len(report.still_failing)}"
        recorder = self.services.recorder
        where = recorder.relative(folder / str(number))
        self.services.substate(current.number, SubState.CANDIDATE_TRIAL, said, (where,))

    def _record(
        self,
        current: Iteration,
        folder: Path,
        candidates: Sequence[Candidate],
        choice: Choice,
        measured: PassAt,
        calls: Sequence[str],
        answers: Sequence[CoderAnswer | None],
        reports: dict[int, TrialReport],
    ) -> CandidateRound:
        """`candidates.json` beside the round's files, and the line that says the choice."""
        recorder = self.services.recorder
        entries = []
        for c in candidates:
            answer = answers[c.number - 1]
            report = reports.get(c.number, TrialReport())
            patch = None
            if c.patch.strip():
                relpath = f"{recorder.relative(folder)}/{c.number}/patch.diff"
                path = recorder.write_patch(relpath, c.patch)
                patch = recorder.relative(path)
            why = choice.why[c.number]
            entries.append(
                CandidateEntry(
                    number=c.number,
                    call=calls[c.number - 1],
                    patch=patch,
                    summary=answer.summary[:200] if answer is not None else "",
                    same_as=c.same_as,
                    agreement=c.agreement,
                    risk=c.risk,
                    build=report.build,
                    build_s=round(report.build_s, 3),
                    fixed=list(c.fixed) if c.fixed is not None else None,
                    still_failing=list(c.still_failing),
                    broke=list(c.broke) if c.broke is not None else None,
                    tests_s=round(report.tests_s, 3),
                    verdict=_VERDICTS[why.split(":", 1)[0]],
                    why=why,
                )
            )
        failing = [t.nodeid for t in self.loop.open_failures(str(self.services.settings.rootdir))]
        document = CandidatesRecord(
            iteration=current.number,
            k=len(candidates),
            jobs=self.services.settings.options.candidate_jobs,
            failing=failing,
            chosen=choice.chosen,
            pass_at_1=measured.pass_at_1,
            pass_at_k=measured.pass_at_k,
            candidates=entries,
        )
        path = recorder.write_json(
            f"{recorder.relative(folder)}.json", document.model_dump(mode="json")
        )
        chosen = f"candidate {choice.chosen} chosen" if choice.chosen else "no candidate survived"
        said = (
            f"{chosen} of {len(candidates)}; pass@1 {'yes' if measured.pass_at_1 else 'no'}, "
            f"pass@{len(candidates)} {'yes' if measured.pass_at_k else 'no'}"
        )
        self.services.substate(
            current.number, SubState.CANDIDATE_CHOICE, said, (recorder.relative(path),)
        )
        return CandidateRound(
            iteration=current.number,
            k=len(candidates),
            chosen=choice.chosen,
            pass_at_1=measured.pass_at_1,
            pass_at_k=measured.pass_at_k,
            fixed_by_first=measured.fixed_by_first,
            fixed_by_chosen=measured.fixed_by_chosen,
            build_s=round(sum(r.build_s for r in reports.values()), 3),
            tests_s=round(sum(r.tests_s for r in reports.values()), 3),
        )

    def _verdict(
        self,
        current: Iteration,
        candidates: Sequence[Candidate],
        choice: Choice,
        refusals: dict[int, Verdict],
        reviews: dict[int, tuple[ReviewerAnswer, float]],
        answers: Sequence[CoderAnswer | None],
        reports: dict[int, TrialReport],
    ) -> Verdict:
        """The chosen one approved; else the gate's own refusal when the gate refused them all
        (as with one answer), else back to the coder with what each checked one did."""
        if choice.chosen is not None:
            answer = answers[choice.chosen - 1]
            review = reviews[choice.chosen]
            assert answer is not None
            self.loop.coder_answer = answer
            self.gate.adopt(answer, current, review[0])
            return Verdict(
                Step(
                    LoopEvent.PATCH_APPROVED,
                    f"candidate {choice.chosen} of {len(candidates)} chosen: "
                    f"{choice.why[choice.chosen].removeprefix('chosen: ')}",
                )
            )
        if not reports and refusals:
            return refusals[min(refusals)]
        must_fix = [
            MustFix(issue=_lost_line(c, choice, reports.get(c.number)))
            for c in candidates
            if c.same_as is None
        ]
        built = any(r.build == "ok" or r.fixed is not None for r in reports.values())
        kind = ErrorType.MODEL_FAILURE if built else ErrorType.BUILD_FAILURE
        error = ErrorState(
            kind,
            f"none of the {len(candidates)} candidates survived its checks",
            LoopEvent.RECOVER_TO_ANALYSIS,
        )
        return failed(error, LoopEvent.PATCH_REJECTED, must_fix=must_fix)


#: The word `choose` starts each candidate's line with, as the record's vocabulary.
_VERDICTS: dict[str, Literal["chosen", "lost", "dropped"]] = {
    "chosen": "chosen",
    "lost": "lost",
    "dropped": "dropped",
}


def _lost_line(c: Candidate, choice: Choice, report: TrialReport | None) -> str:
    """What the coder is told of a candidate that did not survive, with its build's errors."""
    line = f"candidate {c.number} {choice.why[c.number].removeprefix('dropped: ')}"
    if report is not None and report.diagnostics:
        line += f"; its build said:\n{report.diagnostics[:DIAGNOSTICS_PER_CANDIDATE]}"
    return line


def _no_patch(answer: CoderAnswer | None) -> str:
    return "its call gave no usable answer" if answer is None else "it proposes no patch"


def _set(candidates: Sequence[Candidate], number: int, **changes: object) -> list[Candidate]:
    """The candidates with `number`'s facts updated."""
    return [
        dataclasses.replace(c, **changes) if c.number == number else c  # type: ignore[arg-type]
        for c in candidates
    ]
