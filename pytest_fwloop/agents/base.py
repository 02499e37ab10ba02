"""What every provider is: something that turns an AgentRequest into answer text, or fails.

What the model providers (claude, codex, openai) share besides is in `model_io`.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from pytest_fwloop.agents.errors import Conversed, ProviderError, ProviderErrorKind

if TYPE_CHECKING:
    from pytest_fwloop.core.records.agent_protocol import AgentRequest


@dataclass(frozen=True)
class RawAnswer:
    """The provider's answer before the JSON gate.

    `usage` has whichever of `input_tokens` (all prompt tokens, cached included),
    `cached_input_tokens`, `output_tokens` and `cost_usd` the provider reports.
    """

    text: str
    stderr: str = ""
    usage: dict[str, float] = field(default_factory=dict)
    #: The tool calls made, whether tools were offered, the request as sent (`openai:`).
    conversation: Conversed = field(default_factory=Conversed)


class Provider(Protocol):
    """One entry of a role's failover list (`claude`, `command:PATH`, `rules`, …)."""

    @property
    def spec(self) -> str:
        """The spec as the user wrote it; names the provider in errors and run files."""

    def call(self, request: AgentRequest, timeout: float) -> RawAnswer:
        """Answer one request within `timeout` seconds; raise ProviderError when it cannot.

        Validation is the caller's job: a provider returns whatever text the model gave.
        """


def find_cli(name: str, provider: str, remedy: str) -> str:
    """The path of the `name` executable on PATH; looked up at each call, so failover stays lazy
    and installing the tool mid-run works."""
    found = shutil.which(name)
    if found is None:
        raise ProviderError(
            ProviderErrorKind.PROVIDER_NOT_FOUND,
            provider,
            f"the '{name}' executable is not on PATH; {remedy}",
        )
    return found
