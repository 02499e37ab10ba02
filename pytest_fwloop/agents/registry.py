"""From `--fwloop-coder=SPEC[,SPEC…]` to the role's failover list of providers.

A provider is registered in PROVIDERS under its spec prefix (the text before the first `:`).
Specs are separated by commas, so a `command:PATH` path or a `scripted:DIR` directory cannot
contain one (URLs have none). Every spec is checked here, at startup, so a typo never surfaces
halfway through a run.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_fwloop.agents.errors import SpecError

if TYPE_CHECKING:
    from pytest_fwloop.agents.base import Provider
    from pytest_fwloop.core.records.agent_protocol import Role
    from pytest_fwloop.core.request.read_tools import TreeReader


@dataclass(frozen=True)
class ProviderOptions:
    """What providers take from the options rather than from their spec; every default works.

    `api_key_env`: the variable holding the openai key; `response_format` and
    `model_context`: `fwloop_response_format` and `fwloop_model_context` of openai providers.
    `permission_mode` and `max_turns`: claude's `--permission-mode` (coder calls only) and
    `--max-turns`.
    """

    api_key_env: str | None = None
    response_format: str = "auto"
    model_context: int | None = None
    permission_mode: str | None = None
    max_turns: int | None = None
    #: The tree an `openai:` coder's read-only tools read (`fwloop_read_tools`); None: none.
    reader: TreeReader | None = None


#: Builds a provider from the text after `prefix:` ("" when there is none), the rootdir and the
#: options; raises SpecError with a one-line reason when that text cannot work.
ProviderFactory = Callable[[str, Path, ProviderOptions], "Provider"]


@dataclass(frozen=True)
class ProviderEntry:
    """How a provider is written (`command:PATH`: an argument is required after the colon,
    `rules`: none is allowed, `claude` with `optional_argument="MODEL"`: `claude:MODEL` too),
    what it is, and how to build one."""

    syntax: str
    description: str
    factory: ProviderFactory
    optional_argument: str = ""

    @property
    def takes_argument(self) -> bool:
        return ":" in self.syntax

    @property
    def forms(self) -> str:
        if self.optional_argument:
            return f"{self.syntax} or {self.syntax}:{self.optional_argument}"
        return self.syntax


def cli_model(argument: str) -> str:
    """A model name for a CLI's `--model`: a lone word, so it can never pass for an option."""
    if argument.startswith("-") or any(char.isspace() for char in argument):
        raise SpecError(f"'{argument}' is not a model name (no leading '-', no spaces)")
    return argument


# Each factory imports its provider's module when it is used: a loop with a CLI coder never
# loads the HTTP client, and the loop's start stays short (issue 11).


def _claude(argument: str, _rootdir: Path, options: ProviderOptions) -> Provider:
    from pytest_fwloop.agents.claude import ClaudeProvider

    return ClaudeProvider(
        cli_model(argument) if argument else "",
        permission_mode=options.permission_mode,
        max_turns=options.max_turns,
    )


def _codex(argument: str, _rootdir: Path, _options: ProviderOptions) -> Provider:
    from pytest_fwloop.agents.codex import CodexProvider

    return CodexProvider(cli_model(argument) if argument else "")


def _openai(argument: str, _rootdir: Path, options: ProviderOptions) -> Provider:
    from pytest_fwloop.agents.chat.spec import parse_openai_argument
    from pytest_fwloop.agents.openai import OpenAIProvider

    model, url = parse_openai_argument(argument)
    return OpenAIProvider(
        model,
        url,
        api_key_env=options.api_key_env,
        reader=options.reader,
        response_format=options.response_format,
        model_context=options.model_context,
    )


def _command(argument: str, rootdir: Path, _options: ProviderOptions) -> Provider:
    from pytest_fwloop.agents.command import CommandProvider

    return CommandProvider(argument, rootdir)


def _scripted(argument: str, rootdir: Path, _options: ProviderOptions) -> Provider:
    from pytest_fwloop.agents.scripted import ScriptedProvider

    return ScriptedProvider(argument, rootdir)


def _rules(_argument: str, _rootdir: Path, _options: ProviderOptions) -> Provider:
    from pytest_fwloop.agents.rules import RulesProvider

    return RulesProvider()


PROVIDERS: dict[str, ProviderEntry] = {
    "claude": ProviderEntry(
        "claude",
        "Claude Code CLI in headless mode (claude -p … --output-format json)",
        _claude,
        optional_argument="MODEL",
    ),
    "codex": ProviderEntry(
        "codex", "OpenAI Codex CLI (codex exec --json …)", _codex, optional_argument="MODEL"
    ),
    "openai": ProviderEntry(
        "openai:MODEL@URL",
        "any OpenAI-compatible chat-completions endpoint; key from an environment variable",
        _openai,
    ),
    "command": ProviderEntry(
        "command:PATH",
        "any executable: one JSON request on stdin, one JSON answer on stdout",
        _command,
    ),
    "scripted": ProviderEntry(
        "scripted:DIR",
        "replays recorded answers from a directory: demos, tests, replay of an earlier run",
        _scripted,
    ),
    "rules": ProviderEntry(
        "rules", "built-in, no model: keyword and error-code triage; never writes a patch", _rules
    ),
}

#: Spec syntax -> what it is, for option help, usage errors and the docs.
PROVIDER_SYNTAX: dict[str, str] = {entry.syntax: entry.description for entry in PROVIDERS.values()}

# An API key, or a URL carrying credentials: a spec lands in shell history, CI logs and run
# files, so one that holds a secret is refused without being echoed.
_CREDENTIAL = re.compile(
    r"\bsk-[A-Za-z0-9_-]{12,}|://[^/@\s]*@|"
    r"[?&;](?:api[_-]?key|key|token|access[_-]?token|secret|password)=",
    re.IGNORECASE,
)


def parse_role_specs(
    text: str,
    role: Role,
    rootdir: Path,
    options: ProviderOptions | None = None,
    custom: Callable[[str], Provider | None] | None = None,
    origin: str = "",
    listing: str = "failover list",
) -> list[Provider]:
    """The providers of a comma-separated failover list, in order; SpecError names the bad one.

    `custom` is asked first for each entry (the `pytest_fwloop_make_provider` hook). `origin`
    names where the text came from in errors (default: the role's flag), `listing` what the
    list is (a review panel's members are no failover list).
    """
    origin = origin or f"--fwloop-{role}"
    if _CREDENTIAL.search(text):
        from pytest_fwloop.agents.openai import DEFAULT_KEY_ENV

        raise SpecError(
            f"fwloop: {origin}: the spec seems to contain a credential (not shown); put "
            f"the API key in ${DEFAULT_KEY_ENV} or the variable named by fwloop_api_key_env, "
            "never on the command line"
        )
    options = options or ProviderOptions()
    where = f"fwloop: {origin}={text}"
    choices = ", ".join(entry.syntax for entry in PROVIDERS.values())
    specs = [spec.strip() for spec in text.split(",")]
    if specs == [""]:
        raise SpecError(f"{where}: no provider given; choose from {choices}")
    providers: list[Provider] = []
    for spec in specs:
        if not spec:
            raise SpecError(f"{where}: empty entry in the {listing}; remove the extra comma")
        made = custom(spec) if custom is not None else None
        if made is not None:
            providers.append(made)
            continue
        name, colon, argument = spec.partition(":")
        entry = PROVIDERS.get(name)
        if entry is None:
            raise SpecError(f"{where}: unknown provider '{name}'; choose from {choices}")
        if entry.takes_argument and not argument.strip():
            raise SpecError(f"{where}: '{spec}' needs an argument; write it as {entry.syntax}")
        if colon and not (entry.takes_argument or entry.optional_argument):
            raise SpecError(f"{where}: '{name}' takes no argument; write it as {entry.syntax}")
        if colon and not argument.strip():
            raise SpecError(
                f"{where}: '{spec}' has nothing after the colon; write it as {entry.forms}"
            )
        try:
            providers.append(entry.factory(argument.strip(), rootdir, options))
        except SpecError as exc:
            raise SpecError(f"{where}: {exc}") from None
    return providers
