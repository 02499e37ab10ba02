"""The review panel at the strict gate (`fwloop_review_panel`, seed 002; docs/providers.md).

Each member is asked about the same patch at once, from its own thread, through the same strict-JSON
gate as a lone reviewer (re-asked once on an invalid answer, transient errors retried); every call
is recorded as `rounds/NN/reviewer-K.*`. The decision is taken by `core/gate/review_panel.py` only
on every member's valid answer: a member that gives none fails the gate as a lone reviewer's failure
would. What the panel decided, on which recorded calls, is written to `panel-K.json` and named in
the trace (a `REVIEW_PANEL` sub-state), so replay can check it.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from pytest_fwloop.agents.errors import ProviderError
from pytest_fwloop.agents.role import CallRecord
from pytest_fwloop.core.gate.review_panel import PanelVerdict, panel_verdict
from pytest_fwloop.core.machine.substates import SubState
from pytest_fwloop.core.records.agent_protocol import AgentRequest, ReviewerAnswer
from pytest_fwloop.core.records.round_records import PanelRecord, PanelVote
from pytest_fwloop.loop.agent_calls import role_agent
from pytest_fwloop.loop.services import Services


class ReviewPanel:
    """The members of one run's panel, each a reviewer of one provider."""

    def __init__(
        self,
        services: Services,
        record: Callable[[CallRecord], str],
        time_left: Callable[[], float],
    ) -> None:
        self.services = services
        self._record = record
        settings = services.settings
        #: Each member's call stems of the current question, its answer's last.
        self._stems: list[list[str]] = [[] for _ in settings.review_panel]
        self.members = [
            role_agent(
                services.config,
                settings,
                "reviewer",
                self._recorder_of(stems),
                time_left,
                [provider],
            )
            for stems, provider in zip(self._stems, settings.review_panel, strict=True)
        ]

    def _recorder_of(self, stems: list[str]) -> Callable[[CallRecord], None]:
        """One member's call log: every call recorded, its stem kept for the vote."""

        def record(call: CallRecord) -> None:
            stems.append(self._record(call))

        return record

    def judge(self, request: AgentRequest, iteration: int) -> PanelVerdict:
        """Every member's verdict, asked in parallel, and the panel's; the first member's
        failure (in panel order) is raised once all have finished, anything but a provider's
        failure (the budget, the state's deadline) before it."""
        for stems in self._stems:
            stems.clear()
        with ThreadPoolExecutor(len(self.members), thread_name_prefix="fwloop-panel") as pool:
            asked = [pool.submit(member.ask, request) for member in self.members]
        failures = [e for e in (f.exception() for f in asked) if e is not None]
        if failures:
            raise next((e for e in failures if not isinstance(e, ProviderError)), failures[0])
        votes: list[tuple[str, ReviewerAnswer]] = []
        for member, future in zip(self.members, asked, strict=True):
            answer = future.result()
            assert isinstance(answer, ReviewerAnswer)
            votes.append((member.providers[0].spec, answer))
        verdict = panel_verdict(self.services.settings.options.review_rule, votes)
        self._keep(verdict, votes, iteration)
        return verdict

    def _keep(
        self, verdict: PanelVerdict, votes: list[tuple[str, ReviewerAnswer]], iteration: int
    ) -> None:
        recorder = self.services.recorder
        folder = recorder.round_path(iteration)
        number = len(list(folder.glob("panel-*.json"))) + 1
        record = PanelRecord(
            rule=verdict.rule,
            needed=verdict.needed,
            approvals=verdict.approvals,
            decision=verdict.review.decision,
            split=verdict.split,
            risk=verdict.review.risk,
            max_risk=self.services.settings.options.max_risk,
            votes=[
                PanelVote(
                    provider=who,
                    call=stems[-1],
                    decision=answer.decision,
                    risk=answer.risk,
                    must_fix=len(answer.must_fix),
                )
                for (who, answer), stems in zip(votes, self._stems, strict=True)
            ],
        )
        path = recorder.write_json(
            f"{recorder.relative(folder)}/panel-{number}.json", record.model_dump(mode="json")
        )
        self.services.substate(
            iteration, SubState.REVIEW_PANEL, verdict.line, [recorder.relative(path)]
        )
