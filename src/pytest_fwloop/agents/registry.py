"""From `--fwloop-coder=SPEC[,SPEC…]` to the role's failover list of providers.

A provider is registered in PROVIDERS under its spec prefix (the text before the first `:`);
adding `claude`, `codex` or `openai:MODEL@URL` is one entry there. Specs are separated by commas,
so a `command:PATH` path or a `scripted:DIR` directory cannot contain one (URLs have none).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_fwloop.agents.base import Provider
from pytest_fwloop.agents.command import CommandProvider
from pytest_fwloop.agents.errors import SpecError
from pytest_fwloop.agents.rules import RulesProvider
from pytest_fwloop.agents.scripted import ScriptedProvider

if TYPE_CHECKING:
    from pytest_fwloop.agents.protocol import Role

#: Builds a provider from the text after `prefix:` ("" when there is none) and the rootdir;
#: raises SpecError with a one-line reason when that text cannot work.
ProviderFactory = Callable[[str, Path], Provider]


@dataclass(frozen=True)
class ProviderEntry:
    """How a provider is written (`command:PATH`: an argument is required after the colon,
    `rules`: none is allowed), what it is, and how to build one."""

    syntax: str
    description: str
    factory: ProviderFactory

    @property
    def takes_argument(self) -> bool:
        return ":" in self.syntax


PROVIDERS: dict[str, ProviderEntry] = {
    "command": ProviderEntry(
        "command:PATH",
        "any executable: one JSON request on stdin, one JSON answer on stdout",
        CommandProvider,
    ),
    "scripted": ProviderEntry(
        "scripted:DIR",
        "replays recorded answers from a directory: demos, tests, replay of an earlier run",
        ScriptedProvider,
    ),
    "rules": ProviderEntry(
        "rules",
        "built-in, no model: keyword and error-code triage; never writes a patch",
        lambda _argument, _rootdir: RulesProvider(),
    ),
}

#: Spec syntax -> what it is, for option help, usage errors and the docs.
PROVIDER_SYNTAX: dict[str, str] = {entry.syntax: entry.description for entry in PROVIDERS.values()}


def parse_role_specs(text: str, role: Role, rootdir: Path) -> list[Provider]:
    """The providers of a comma-separated failover list, in order; SpecError names the bad one."""
    where = f"fwloop: --fwloop-{role}={text}"
    choices = ", ".join(entry.syntax for entry in PROVIDERS.values())
    specs = [spec.strip() for spec in text.split(",")]
    if specs == [""]:
        raise SpecError(f"{where}: no provider given; choose from {choices}")
    providers: list[Provider] = []
    for spec in specs:
        if not spec:
            raise SpecError(f"{where}: empty entry in the failover list; remove the extra comma")
        name, colon, argument = spec.partition(":")
        entry = PROVIDERS.get(name)
        if entry is None:
            raise SpecError(f"{where}: unknown provider '{name}'; choose from {choices}")
        if entry.takes_argument and not argument.strip():
            raise SpecError(f"{where}: '{spec}' needs an argument; write it as {entry.syntax}")
        if colon and not entry.takes_argument:
            raise SpecError(f"{where}: '{name}' takes no argument; write it as {entry.syntax}")
        try:
            providers.append(entry.factory(argument.strip(), rootdir))
        except SpecError as exc:
            raise SpecError(f"{where}: {exc}") from None
    return providers
