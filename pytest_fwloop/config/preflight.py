"""Checks made before the baseline, so a setup mistake costs seconds, not a build and a suite.

Every provider of every role's failover list is checked (a provider that defines `preflight()`:
the program exists, the CLI is on PATH, the server answers), and so is the build's program. A
role none of whose providers passes, or a missing build program, stops the run with one line
naming the option and the fix (exit status 4). A provider that fails while another of its list
passes is named in one line at the start and stays in the list, so a portable list
(`claude,openai:…`) keeps working where one of them is not installed. Trouble a provider foresees
without failing (`preflight_warnings()`) is one line at the start too, once per run. The lists
are parsed here once: the run's agents use the very providers checked, so a conftest's factory
hook runs once per entry. A review panel's members are checked alike, and every one must pass.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from pytest_fwloop.agents.base import Provider
from pytest_fwloop.agents.errors import ProviderError, SpecError
from pytest_fwloop.agents.registry import ProviderOptions, parse_role_specs
from pytest_fwloop.config.loop_options import LoopOptions
from pytest_fwloop.workspace.confined_read import ToolReader

if TYPE_CHECKING:
    from pytest_fwloop.core.records.agent_protocol import Role


def checked_providers(
    config: pytest.Config, options: LoopOptions, specs: Mapping[Role, str]
) -> tuple[dict[str, list[Provider]], tuple[str, ...]]:
    """Each role's providers (a role with no spec has none), and a line for each provider that
    failed its check while others of its list passed; UsageError for a spec that does not parse
    or a role none of whose providers passes."""
    provider_options = _provider_options(options, config.rootpath)
    providers: dict[str, list[Provider]] = {}
    notes: list[str] = []
    for role, spec in specs.items():
        if not spec:
            continue
        try:
            made = parse_role_specs(
                spec,
                role,
                config.rootpath,
                provider_options,
                _hook_providers(config, role),
                options.origin(role),
            )
        except SpecError as exc:
            raise pytest.UsageError(str(exc)) from None
        unusable = role_problems(made, options.origin(role))
        if len(unusable) == len(made):
            raise pytest.UsageError(unusable[0])
        providers[role] = made
        notes += [
            f"{line} (kept in its failover list; the next provider answers meanwhile)"
            for line in unusable
        ]
        notes += role_warnings(made)
    return providers, tuple(dict.fromkeys(notes))


def checked_panel(
    config: pytest.Config, options: LoopOptions
) -> tuple[tuple[Provider, ...], tuple[str, ...]]:
    """The review panel's members (none when `fwloop_review_panel` is unset) and what they
    foresee going wrong; UsageError for a panel of fewer than two, a spec that does not parse,
    or a member that fails its check: a panel never decides without one of its members."""
    text, origin = options.review_panel.strip(), options.origin("review_panel")
    if not text:
        if options.review_rule != "all":
            raise pytest.UsageError(
                f"fwloop: {options.origin('review_rule')}={options.review_rule}: the rule is a "
                "review panel's, and none is set; name its members in fwloop_review_panel"
            )
        return (), ()
    try:
        members = parse_role_specs(
            text,
            "reviewer",
            config.rootpath,
            _provider_options(options, config.rootpath),
            _hook_providers(config, "reviewer"),
            origin,
            "review panel's members",
        )
    except SpecError as exc:
        raise pytest.UsageError(str(exc)) from None
    if len(members) < 2:
        raise pytest.UsageError(
            f"fwloop: {origin}={text}: a review panel needs two or more members; a single "
            "reviewer is fwloop_reviewer"
        )
    problems = role_problems(members, origin)
    if problems:
        raise pytest.UsageError(f"{problems[0]} (a review panel needs every member)")
    return tuple(members), tuple(role_warnings(members))


def _provider_options(options: LoopOptions, rootdir: Path) -> ProviderOptions:
    return ProviderOptions(
        api_key_env=options.api_key_env or None,
        response_format=options.response_format,
        model_context=options.model_context,
        permission_mode=options.claude_permission_mode or None,
        max_turns=options.claude_max_turns,
        reader=ToolReader(rootdir) if options.read_tools else None,
    )


def _hook_providers(config: pytest.Config, role: str) -> Callable[[str], Provider | None]:
    """The `pytest_fwloop_make_provider` hook for one role, as `parse_role_specs` asks it."""

    def make(spec: str) -> Provider | None:
        made: Provider | None = config.hook.pytest_fwloop_make_provider(
            config=config, role=role, spec=spec
        )
        return made

    return make


def role_problems(providers: list[Provider], origin: str) -> list[str]:
    """One line for each of the role's providers that cannot work now; those without a check
    pass."""
    problems = []
    for provider in providers:
        check = getattr(provider, "preflight", None)
        if check is None:
            continue
        try:
            check()
        except ProviderError as exc:
            problems.append(f"fwloop: {origin}: {provider.spec}: {exc.message}")
    return problems


def role_warnings(providers: list[Provider]) -> list[str]:
    """What each provider that defines `preflight_warnings()` foresees going wrong though it
    passed its check (Codex's home under the temp dir)."""
    return [
        warning
        for provider in providers
        for warning in getattr(provider, "preflight_warnings", list)()
    ]


def missing_build_program(build: list[str] | str, rootdir: Path) -> str | None:
    """The build's program when it is neither on PATH nor a file of the tree, else None."""
    program = "/bin/sh" if isinstance(build, str) else build[0]
    if shutil.which(program, path=os.environ.get("PATH")) is not None:
        return None
    if Path(rootdir, program).is_file():
        return None
    return program
