"""Every request to every role, assembled in one place (DESIGN.md §5, §16, §17).

The open failures are computed once per request and handed to each part that needs them: the
protocol's fields (`agent_request`: failures packed by signature, history, regressions, similar
fixes, evidence, risky code), then the code a model of that role is sent (`localization`: the
coder's ranked sources and repo map, the reviewer's changed functions). What a provider adds is
its own encoding of this request (a prompt, chat messages) and the schema of the gate that will
judge its answer (`agents/role.py`), nothing else.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from pytest_fwloop.config.settings import LoopSettings
from pytest_fwloop.core.records.agent_protocol import AgentRequest
from pytest_fwloop.core.suite.results import TestRecord
from pytest_fwloop.loop.request.agent_request import agent_request
from pytest_fwloop.loop.request.localization import Localizer, with_code
from pytest_fwloop.loop.services import Services
from pytest_fwloop.loop.state import LoopState


@dataclass(frozen=True)
class Assembled:
    """A request and the open failures it was assembled from."""

    request: AgentRequest
    failing: list[TestRecord]


@dataclass(frozen=True)
class RequestDesk:
    """The controller's one way to a request: one per run, beside the localizer it feeds."""

    services: Services
    loop: LoopState
    localizer: Localizer

    def assemble(self, role: str, patch: str = "", **extra: object) -> Assembled:
        """The request for `role` (`patch`: the change under review); `extra` adds protocol
        fields or replaces the defaults (a tester's allowed commands)."""
        settings = self.services.settings
        failing = self.loop.open_failures(str(settings.rootdir))
        request = agent_request(self.loop, settings, role, failing, patch, **extra)
        return Assembled(
            with_code(self.services, self.loop, self.localizer, request, failing), failing
        )

    def request(self, role: str, patch: str = "", **extra: object) -> AgentRequest:
        return self.assemble(role, patch, **extra).request


def as_candidate(assembled: Assembled, number: int, of: int) -> Assembled:
    """The coder's request for candidate `number` of `of` (DESIGN.md §19): the same evidence,
    with `candidate` saying which one is asked, so a provider can vary its sampling (`openai:`
    sends it as the `seed`) and a scripted stand-in its answer."""
    request = assembled.request.model_copy(update={"candidate": {"number": number, "of": of}})
    return Assembled(request, assembled.failing)


def chat_requests(
    loop: LoopState, settings: LoopSettings, roles: list[str], chat: Mapping[str, object]
) -> list[AgentRequest]:
    """`fwloop chat`'s requests, one per role, about a recorded run: the run's failures and
    history with the operator's thread; no code is localized (the run's tree may be gone)."""
    failing = loop.open_failures(str(settings.rootdir))
    return [agent_request(loop, settings, role, failing, chat=chat) for role in roles]
