"""What only a coder call needs, built the first time one is due (issue 41).

Most runs of a suite are green: the baseline passes and the loop ends without asking a model.
Such a run never imports the request builders, the localization stack (the code index and its
parsers, the spectrum reader), the patch gate, the review panel or the proposals: the
controller builds this desk, and imports them, only when CODE_ANALYSIS is first reached
(`tests/test_green_imports.py` fails when a green run loads them).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pytest_fwloop.core.records.agent_protocol import AgentRequest
from pytest_fwloop.loop.request.desk import Assembled, RequestDesk
from pytest_fwloop.loop.request.localization import Localizer
from pytest_fwloop.loop.request.spectrum_run import record_spectrum
from pytest_fwloop.loop.state import Step, Verdict
from pytest_fwloop.loop.steps.analysis import ask_coder
from pytest_fwloop.loop.steps.confidence import weigh_answer
from pytest_fwloop.loop.steps.decline import only_declined_left, take_decline
from pytest_fwloop.loop.steps.patch_gate import PatchGate
from pytest_fwloop.loop.steps.proposal import ProposalDesk
from pytest_fwloop.loop.steps.review_panel import ReviewPanel

if TYPE_CHECKING:
    from collections.abc import Callable

    from pytest_fwloop.agents.role import CallRecord, RoleAgent
    from pytest_fwloop.core.records.redaction import Redactor
    from pytest_fwloop.loop.child_runner import ChildRunner
    from pytest_fwloop.loop.services import Services
    from pytest_fwloop.loop.state import LoopState


class RepairDesk:
    """The patch gate, the proposals, the localizer and the request desk of one run."""

    def __init__(
        self,
        services: Services,
        loop: LoopState,
        agents: tuple[RoleAgent, RoleAgent | None],
        record: Callable[[CallRecord], str],
        time_left: Callable[[], float],
        redact: Redactor,
    ) -> None:
        settings = services.settings
        reviewer, tester = agents
        self.services = services
        self.loop = loop
        self.time_left = time_left
        panel = ReviewPanel(services, record, time_left) if settings.review_panel else None
        self.gate = PatchGate(services, reviewer, panel)
        self.proposals = ProposalDesk(services, reviewer, tester)
        rounds = services.recorder.path / "rounds"
        self.localizer = Localizer(
            services.workspace, settings.options.source_bytes, redact, services.policy, rounds
        )
        self.desk = RequestDesk(services, loop, self.localizer)

    def request(self, role: str, patch: str = "", **extra: object) -> AgentRequest:
        """A role's request as the loop stands, with the tree's code its model is sent."""
        return self.desk.request(role, patch, **extra)

    def assemble(self) -> Assembled:
        return self.desk.assemble("coder")

    def analyse(self, coder: RoleAgent, child: ChildRunner) -> Step:
        """CODE_ANALYSIS: the run ends when only declined tests are left; else the spectrum
        run when one is due (given at most half the state's time left), then the coder."""
        ended = only_declined_left(self.loop, str(self.services.settings.rootdir))
        if ended is not None:
            return ended
        settings = self.services.settings
        if settings.options.source_bytes > 0:
            limit = min(settings.options.test_timeout, self.time_left() / 2)
            record_spectrum(self.services, self.loop, child, limit)
        k = settings.options.candidates
        if k > 1:
            from pytest_fwloop.loop.candidates.asking import ask_candidates

            return ask_candidates(self.services, self.loop, coder, self.assemble, k)
        return ask_coder(self.services, self.loop, coder, self.assemble)

    def judge(self, child: ChildRunner) -> Step | Verdict:
        """PATCH_GENERATION: a decline or an unsure answer is decided here; else the proposal
        stop, then the patch gate and the reviewer (for each of K candidates, then the checks
        that choose one, run by `child`), whose verdict the controller adopts."""
        loop = self.loop
        assert loop.coder_answer is not None
        judged = take_decline(loop, str(self.services.settings.rootdir)) or weigh_answer(
            loop, self.services.settings
        )
        if judged is not None:
            return judged
        paused = self.proposals.stop(len(self.gate.tried), loop, self.request)
        if paused is not None:
            return paused

        def ask_reviewer(patch: str) -> AgentRequest:
            return self.request("reviewer", patch)

        if loop.candidate_answers:
            from pytest_fwloop.loop.candidates.stage import CandidateStage

            stage = CandidateStage(self.services, loop, self.gate, child, self.time_left)
            verdict = stage.judge(loop.current, ask_reviewer)
        else:
            verdict = self.gate.judge(loop.coder_answer, loop.current, ask_reviewer)
        if verdict.constraints is not None:
            loop.constraints = verdict.constraints
        if self.gate.review_path is not None:
            loop.review_path = self.gate.review_path
        return verdict
