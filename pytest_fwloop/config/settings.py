"""The controller's settings, resolved and validated before anything runs.

Every problem a user can fix (a bad option, an unknown provider, a missing criteria file) is a
one-line `pytest.UsageError` here, so a run never dies halfway on a typo.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
import random
import shlex
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from pytest_fwloop.agents.errors import SpecError
from pytest_fwloop.agents.registry import PROVIDER_SYNTAX, ProviderOptions, parse_role_specs
from pytest_fwloop.config.options import origin, resolve, strip_controller_args
from pytest_fwloop.config.preflight import missing_build_program, role_problems
from pytest_fwloop.core.budget import Budget
from pytest_fwloop.core.convergence import (
    PRESETS,
    ConvergenceCriteria,
    CriteriaError,
    ExecutionMode,
    PlateauHandlingStrategy,
)
from pytest_fwloop.procs.allowlist import Argv, parse_prefixes
from pytest_fwloop.procs.sandbox import SandboxUnavailable, find_bwrap
from pytest_fwloop.reports.user_files import UserReports
from pytest_fwloop.workspace import DEFAULT_PROTECTED, PatchPolicy

if TYPE_CHECKING:
    from pytest_fwloop.agents.base import Provider
    from pytest_fwloop.core.flaky import FlakyPolicy


@dataclass(frozen=True)
class LoopSettings:
    rootdir: Path
    invocation_dir: Path
    child_args: list[str]
    max_iter: int
    goal: str
    coder: str
    reviewer: str
    tester: str
    provider_options: ProviderOptions
    build: list[str] | str | None
    #: The bubblewrap executable when fwloop_build_sandbox = bwrap, else None.
    build_sandbox: str | None
    mode: ExecutionMode
    criteria: ConvergenceCriteria
    plateau: PlateauHandlingStrategy
    runs_root: Path
    #: The knowledge base of fixes, or None (`fwloop_knowledge = off`).
    knowledge: Path | None
    policy: PatchPolicy
    max_risk: float
    review_rounds: int
    agent_timeout: float
    build_timeout: float
    test_timeout: float
    state_timeout: float
    context_bytes: int
    allowed_commands: tuple[Argv, ...]
    command_timeout: float
    budget: Budget
    flaky_reruns: int
    flaky_policy: FlakyPolicy
    focus: bool
    #: "auto" (fork the controller for a child when that is as good as a fresh one) or "spawn".
    child_start: str
    propose: str  # "off", "first" or "every"
    snapshot_exclude: tuple[str, ...]
    #: Providers that failed their check before the run while others of their list passed.
    preflight_notes: tuple[str, ...] = ()
    #: The pytest-randomly seed every child run gets, when that plugin is active.
    randomly_seed: int | None = None
    #: The user's own report files, written for the final tree when the run ends.
    reports: UserReports = field(default_factory=lambda: UserReports(None, None))

    @property
    def advisory(self) -> bool:
        """ci_terminate_as=warning: plateau-like verdicts exit 0 with a warning (DESIGN.md §10)."""
        return self.plateau.ci_terminate_as == "warning"


def custom_providers(config: pytest.Config, role: str) -> Callable[[str], Provider | None]:
    """The `pytest_fwloop_make_provider` hook for one role, as `parse_role_specs` asks it."""

    def make(spec: str) -> Provider | None:
        made: Provider | None = config.hook.pytest_fwloop_make_provider(
            config=config, role=role, spec=spec
        )
        return made

    return make


def detect_mode(explicit: str) -> ExecutionMode:
    """DESIGN.md §4: ci when $CI is set or stdin is not a terminal, else interactive."""
    if explicit:
        return ExecutionMode(explicit)
    ci = os.environ.get("CI", "").strip().lower()
    if ci not in ("", "0", "false", "no") or not sys.stdin.isatty():
        return ExecutionMode.CI
    return ExecutionMode.INTERACTIVE


def _inifile(config: pytest.Config) -> tuple[str, ...]:
    """The configuration file in use is test configuration too, whatever its name (`-c x.ini`)."""
    inipath = config.inipath
    if inipath is None or not inipath.is_relative_to(config.rootpath):
        return ()
    return (inipath.relative_to(config.rootpath).as_posix(),)


#: Options that make a run cover a different part of the suite each time, refused with --fwloop:
#: the loop compares whole-suite counts between iterations (DESIGN.md §4). (dest, why.)
PARTIAL_RUN_OPTIONS: tuple[tuple[str, str], ...] = (
    ("maxfail", "-x/--maxfail stops each run at its first failures"),
    ("lf", "--lf/--last-failed runs only the previous run's failures"),
    ("stepwise", "--sw/--stepwise resumes each run from the last failure"),
    ("stepwise_skip", "--sw-skip/--stepwise-skip resumes each run from the last failure"),
    ("looponfail", "--looponfail is a loop of its own"),
)


def refuse_partial_runs(config: pytest.Config) -> None:
    """UsageError for an option under which iterations would count different tests."""
    for dest, why in PARTIAL_RUN_OPTIONS:
        if config.getoption(dest, None):
            raise pytest.UsageError(
                f"fwloop: {why}, so iterations could not be compared; drop it with --fwloop "
                "(choose a fixed subset with paths, -k or -m instead; --ff and --nf only reorder "
                "and are kept)"
            )


#: Build tools and the option that names their output directory.
_BUILD_DIR_OPTIONS = {"cmake": ("--build", "-B"), "ninja": ("-C",), "meson": ("-C",)}


def build_directories(build: list[str] | str | None) -> list[str]:
    """The output directory a build command names (`cmake --build out`, `ninja -C out`), as a
    gitignore pattern anchored at the rootdir; none for other tools (`make -C DIR` names a
    source directory)."""
    argv = shlex.split(build) if isinstance(build, str) else list(build or [])
    options = _BUILD_DIR_OPTIONS.get(Path(argv[0]).name if argv else "", ())
    found = [
        value
        for flag, value in itertools.pairwise(argv)
        if flag in options and not value.startswith("-")
    ]
    found += [arg.split("=", 1)[1] for arg in argv if "=" in arg and arg.split("=")[0] in options]
    return [f"/{Path(d).as_posix().strip('/')}/" for d in found if not Path(d).is_absolute()]


def randomly_seed(config: pytest.Config) -> tuple[int | None, list[str]]:
    """The pytest-randomly seed of every child run, and the argument that pins it. Left to
    itself the plugin would shuffle each iteration differently; one seed keeps the iterations
    comparable and the run reproducible. `--randomly-seed=last` is left to the plugin."""
    if not config.pluginmanager.hasplugin("randomly"):
        return None, []
    given = config.getoption("randomly_seed", "default")
    if given == "default":
        seed = random.SystemRandom().getrandbits(32)
        return seed, [f"--randomly-seed={seed}"]
    return (given if isinstance(given, int) else None), []


def knowledge_path(rootdir: Path, value: str) -> Path | None:
    """`fwloop_knowledge` as a path (relative to the rootdir, `~` expanded), None for `off`."""
    if value.strip().lower() == "off":
        return None
    return rootdir / Path(value).expanduser()


def criteria_of(config: pytest.Config, rootdir: Path) -> ConvergenceCriteria:
    spec = resolve(config, "criteria")
    if spec in PRESETS:
        return PRESETS[spec]
    # A criteria file is validated with pydantic, which a preset's run never waits for.
    from pytest_fwloop.config.criteria_file import load_criteria

    try:
        return load_criteria(spec, rootdir, origin(config, "criteria"))
    except CriteriaError as exc:
        raise pytest.UsageError(str(exc)) from None


def load_settings(config: pytest.Config) -> LoopSettings:
    rootdir = config.rootpath
    refuse_partial_runs(config)
    coder = resolve(config, "coder").strip()
    if not coder:
        raise pytest.UsageError(
            "fwloop: no coder configured; set --fwloop-coder=SPEC or ini fwloop_coder, "
            f"one of: {', '.join(PROVIDER_SYNTAX)}"
        )
    reviewer = resolve(config, "reviewer").strip() or coder
    tester = resolve(config, "tester").strip()
    provider_options = ProviderOptions(
        api_key_env=resolve(config, "api_key_env") or None,
        permission_mode=resolve(config, "claude_permission_mode") or None,
        max_turns=resolve(config, "claude_max_turns"),
    )
    seed, seed_args = randomly_seed(config)
    preflight_notes: list[str] = []
    for role, spec in (("coder", coder), ("reviewer", reviewer), ("tester", tester)):
        if spec:
            try:
                providers = parse_role_specs(
                    spec,
                    role,  # type: ignore[arg-type]
                    rootdir,
                    provider_options,
                    custom_providers(config, role),
                    origin(config, role),
                )
            except SpecError as exc:
                raise pytest.UsageError(str(exc)) from None
            unusable = role_problems(providers, origin(config, role))
            if len(unusable) == len(providers):
                raise pytest.UsageError(unusable[0])
            preflight_notes += unusable

    criteria = criteria_of(config, rootdir)
    confirm_runs = resolve(config, "confirm_runs")
    if confirm_runs is not None:
        criteria = dataclasses.replace(criteria, stable_iterations_required=confirm_runs + 1)

    mode = detect_mode(resolve(config, "mode"))
    plateau = PlateauHandlingStrategy(mode=mode, ci_terminate_as=resolve(config, "ci_terminate_as"))

    build_text = resolve(config, "build").strip()
    build_where = f"{origin(config, 'build')}={build_text}"
    build: list[str] | str | None = None
    if build_text:
        try:
            build = build_text if resolve(config, "build_shell") else shlex.split(build_text)
        except ValueError as exc:
            raise pytest.UsageError(f"fwloop: {build_where}: {exc}") from None
    build_sandbox = None
    if resolve(config, "build_sandbox") == "bwrap":
        try:
            build_sandbox = find_bwrap()
        except SandboxUnavailable as exc:
            raise pytest.UsageError(str(exc)) from None
    missing = missing_build_program(build, rootdir) if build else None
    if missing is not None:
        raise pytest.UsageError(
            f"fwloop: {build_where}: '{missing}' is not on PATH nor a file of "
            f"{rootdir}; install it or fix the build command"
        )

    try:
        allowed_commands = parse_prefixes(resolve(config, "allowed_commands"))
    except ValueError as exc:
        raise pytest.UsageError(
            f"fwloop: fwloop_allowed_commands line {exc}; fix its quoting"
        ) from None

    policy = PatchPolicy(
        protected=DEFAULT_PROTECTED + _inifile(config) + tuple(resolve(config, "protect")),
        allow_paths=tuple(resolve(config, "allow_paths")),
        max_files=resolve(config, "max_patch_files"),
        max_changed_lines=resolve(config, "max_patch_lines"),
    )
    return LoopSettings(
        rootdir=rootdir,
        invocation_dir=config.invocation_params.dir,
        child_args=[*strip_controller_args(list(config.invocation_params.args)), *seed_args],
        randomly_seed=seed,
        reports=UserReports.of(config),
        max_iter=resolve(config, "max_iter"),
        goal=resolve(config, "goal"),
        coder=coder,
        reviewer=reviewer,
        tester=tester,
        provider_options=provider_options,
        build=build,
        build_sandbox=build_sandbox,
        mode=mode,
        criteria=criteria,
        plateau=plateau,
        runs_root=rootdir / resolve(config, "run_dir"),
        knowledge=knowledge_path(rootdir, resolve(config, "knowledge")),
        policy=policy,
        max_risk=resolve(config, "max_risk"),
        review_rounds=resolve(config, "review_rounds"),
        agent_timeout=resolve(config, "agent_timeout"),
        build_timeout=resolve(config, "build_timeout"),
        test_timeout=resolve(config, "test_timeout"),
        state_timeout=resolve(config, "state_timeout"),
        context_bytes=resolve(config, "context_bytes"),
        allowed_commands=allowed_commands,
        command_timeout=resolve(config, "command_timeout"),
        budget=Budget(usd=resolve(config, "budget_usd"), tokens=resolve(config, "budget_tokens")),
        flaky_reruns=resolve(config, "flaky_reruns"),
        snapshot_exclude=(*resolve(config, "snapshot_exclude"), *build_directories(build)),
        flaky_policy=resolve(config, "flaky_policy"),
        focus=resolve(config, "focus"),
        child_start=resolve(config, "child_start"),
        propose=resolve(config, "propose"),
        preflight_notes=tuple(preflight_notes),
    )
