"""PATCH_GENERATION's gate and PATCH_APPLY (DESIGN.md §3, §6): no unchecked patch is applied.

The order is fixed and decided in `gate_rules` (pure); `PatchGate` gathers the facts (the
policy judged on the patch's headers and on what git would write, `git apply --check`, the
reviewer's answer, or the review panel's decision) and records what each refusal leaves behind.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from pytest_fwloop.agents.errors import AnswerInvalid, ProviderError
from pytest_fwloop.agents.role import RoleAgent
from pytest_fwloop.core.change.unified_diff import parse_patch
from pytest_fwloop.core.gate.gate_rules import Refusal, apply_failure, first_refusal, review_refusal
from pytest_fwloop.core.gate.repeats import find_repeat
from pytest_fwloop.core.gate.risky import find_risky, raised_risk
from pytest_fwloop.core.machine.decimals import written
from pytest_fwloop.core.machine.fsm import ErrorType, LoopEvent
from pytest_fwloop.core.machine.outcomes import Outcome
from pytest_fwloop.core.machine.recovery import ErrorState
from pytest_fwloop.core.records.agent_protocol import AgentRequest, CoderAnswer, ReviewerAnswer
from pytest_fwloop.loop.services import Services
from pytest_fwloop.loop.state import Iteration, Step, Verdict, failed, provider_error
from pytest_fwloop.loop.steps.coder_patch import unplaced
from pytest_fwloop.loop.steps.review_panel import ReviewPanel
from pytest_fwloop.workspace import PatchApplyError


@dataclass
class PatchGate:
    """The gate of one run; remembers every applied patch to tell repeats."""

    services: Services
    reviewer: RoleAgent
    #: The review panel, when one is the strict gate instead of the reviewer.
    panel: ReviewPanel | None = None
    # (iteration, patch) of every patch applied, for stuck detection; told at most once.
    tried: list[tuple[int, str]] = field(default_factory=list)
    repeat_told: bool = False
    review_path: Path | None = None
    #: The last approved patch's review and the risk the gate summed for it (K candidates
    #: are ranked by it, DESIGN.md §19).
    approved: tuple[ReviewerAnswer, float] | None = None

    def judge(
        self,
        answer: CoderAnswer,
        current: Iteration,
        reviewer_request: Callable[[str], AgentRequest],
    ) -> Verdict:
        patch = answer.patch
        repeat = find_repeat(patch, self.tried) if patch.strip() else None
        policy = self.services.policy()
        refusal = first_refusal(
            patch,
            repeat,
            self.repeat_told,
            lambda: self.services.workspace.check_patch(patch, policy),
            lambda: self.services.workspace.check_apply(patch),
            answer,
        )
        if refusal is not None and refusal.recorded_as == "apply" and refusal.must_fix:
            # git names the first line it could not match; the coder also gets the file's
            # nearest lines for each hunk, to quote right next time.
            nearest = unplaced(patch, self.services.workspace, policy)
            refusal = dataclasses.replace(refusal, must_fix=[*refusal.must_fix, *nearest])
        if refusal is None:
            try:
                review, said = self._review(reviewer_request(patch), current.number)
            except AnswerInvalid as exc:
                # A panel names the member whose answer it is: the others answered well.
                who = "reviewer" if self.panel is None else f"review panel member {exc.provider}"
                return failed(
                    ErrorState(
                        ErrorType.MODEL_FAILURE,
                        f"{who} answer failed the schema twice ({'; '.join(exc.errors[:2])})",
                        LoopEvent.RECOVER_TO_ANALYSIS,
                        terminal_outcome=Outcome.REVIEW_SCHEMA_INVALID,
                    ),
                    LoopEvent.PATCH_REJECTED,
                )
            except ProviderError as exc:
                return failed(provider_error("reviewer", exc), LoopEvent.PATCH_REJECTED)
            if review.decision == "changes_requested":
                current.review_rounds += 1
            risky = find_risky(patch, self.services.settings.risky_patterns)
            refusal = review_refusal(
                review,
                current.review_rounds,
                self.services.settings.options.review_rounds,
                self.services.settings.options.max_risk,
                current.number,
                risky,
                "review panel" if said else "reviewer",
            )
            if refusal is None:
                total, shown = raised_risk(review.risk, risky)
                self.approved = (review, float(total))
                return self._approve(answer, current, review, shown, said)
            refusal = _naming(refusal, said)
        return self._refuse(refusal, patch, current, repeat is not None)

    def forget_if_timed_out(self, verdict: Verdict, current: Iteration) -> None:
        """Take back the applied patch of `current` when its pre-check ran out of time: it was
        rolled back unjudged, so the same patch again is another try of it, not a repeat that
        would hide the timeout."""
        timed_out = verdict.error is not None and verdict.error.type is ErrorType.TIMEOUT
        if timed_out and self.tried and self.tried[-1] == (current.number, current.patch):
            self.tried.pop()

    def _review(self, request: AgentRequest, iteration: int) -> tuple[ReviewerAnswer, str]:
        """The reviewer's verdict, or the review panel's with its line for the trace."""
        if self.panel is None:
            review = self.reviewer.ask(request)
            assert isinstance(review, ReviewerAnswer)
            return review, ""
        verdict = self.panel.judge(request, iteration)
        return verdict.review, verdict.line

    def apply(self, current: Iteration, before: str) -> Verdict:
        """Apply the approved patch to the tree snapshotted as `before`; the coder's must-fix
        items and diagnostics are spent."""
        try:
            touched = self.services.workspace.apply(current.patch, before)
        except PatchApplyError as exc:
            error, must_fix = apply_failure(str(exc))
            return failed(error, LoopEvent.APPLY_FAILED, must_fix=must_fix)
        self.tried.append((current.number, current.patch))
        folder = self.services.recorder.relative(self.services.recorder.round_path(current.number))
        path = self.services.recorder.write_patch(f"{folder}/patch.diff", current.patch)
        return Verdict(
            Step(
                LoopEvent.PATCH_APPLIED,
                f"applied to {len(touched)} file(s): {', '.join(touched[:5])}",
                (self.services.recorder.relative(path),),
            ),
            must_fix=[],
            diagnostics="",
        )

    def _approve(
        self,
        answer: CoderAnswer,
        current: Iteration,
        review: ReviewerAnswer,
        risk: str,
        said: str,
    ) -> Verdict:
        """`risk`: the patch's risk as the gate summed it (the reviewer's, or the panel's highest,
        raised by risky code); `said`: the panel's line for the trace, empty for one reviewer."""
        self.adopt(answer, current, review)
        bound = f"{risk} <= {written(self.services.settings.options.max_risk)}"
        if said:
            return Verdict(
                Step(
                    LoopEvent.PATCH_APPROVED,
                    f"policy passed; review panel approved (highest risk {bound}): {said}",
                )
            )
        return Verdict(
            Step(LoopEvent.PATCH_APPROVED, f"policy passed; reviewer approved (risk {bound})")
        )

    def adopt(self, answer: CoderAnswer, current: Iteration, review: ReviewerAnswer) -> None:
        """Make an approved answer the iteration's patch, its review the one the tests see."""
        current.patch = answer.patch
        folder = self.services.recorder.relative(self.services.recorder.round_path(current.number))
        self.review_path = self.services.recorder.write_json(
            f"{folder}/review.json", review.model_dump(mode="json")
        )
        files = sorted({c.new_path or c.old_path or "" for c in parse_patch(answer.patch)})
        current.patch_summary = f"{answer.summary[:200]} [{', '.join(files)}]"

    def _refuse(self, refusal: Refusal, patch: str, current: Iteration, repeat: bool) -> Verdict:
        if refusal.recorded_as is not None:
            round_path = self.services.recorder.round_path(current.number)
            count = len(list(round_path.glob("rejected-*.diff")))
            self.services.recorder.write_patch(
                f"{self.services.recorder.relative(round_path)}/rejected-{count + 1}-"
                f"{refusal.recorded_as}.diff",
                patch,
            )
        if repeat:
            self.repeat_told = True
        constraints = None
        if refusal.recorded_as == "policy":
            policy = self.services.policy()
            constraints = [
                "touch only firmware source files inside the workspace; tests, test "
                "configuration, CI files, binaries, symlinks and file modes are off limits",
                f"keep the patch under {policy.max_files} files and "
                f"{policy.max_changed_lines} changed lines",
            ]
        if refusal.error is None:
            return Verdict(
                Step(refusal.event, refusal.reason),
                must_fix=refusal.must_fix,
            )
        return failed(
            refusal.error,
            refusal.event,
            must_fix=refusal.must_fix or None,
            constraints=constraints,
        )


def _naming(refusal: Refusal, said: str) -> Refusal:
    """A refusal of the review panel names its decision (split or unanimous, each vote)."""
    if not said:
        return refusal
    if refusal.error is None:
        return dataclasses.replace(refusal, reason=f"{refusal.reason}; {said}")
    error = dataclasses.replace(refusal.error, reason=f"{refusal.error.reason}; {said}")
    return dataclasses.replace(refusal, error=error)
