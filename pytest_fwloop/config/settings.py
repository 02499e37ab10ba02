"""The controller's settings, derived from the loop's options (read once, `loop_options`) and
validated before anything runs.

Every problem a user can fix (a bad option, an unknown provider, a missing criteria file) is a
one-line `pytest.UsageError` here, so a run never dies halfway on a typo.
"""

from __future__ import annotations

import dataclasses
import os
import random
import shlex
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from pytest_fwloop.agents.registry import PROVIDER_SYNTAX
from pytest_fwloop.config.evidence import EvidenceLog, read_evidence
from pytest_fwloop.config.loop_options import LoopOptions, read_options
from pytest_fwloop.config.notify import notify_channels
from pytest_fwloop.config.options import strip_controller_args
from pytest_fwloop.config.preflight import (
    checked_panel,
    checked_providers,
    missing_build_program,
)
from pytest_fwloop.config.tree_rules import (
    harness_build_dir,
    knowledge_path,
    patch_policy,
    snapshot_exclude,
)
from pytest_fwloop.core.gate.allowlist import Argv, parse_prefixes
from pytest_fwloop.core.gate.precheck import PrecheckSettings
from pytest_fwloop.core.gate.risky import RiskyPattern, parse_patterns
from pytest_fwloop.core.machine.agent_budget import Budget
from pytest_fwloop.core.records.redaction import Redactor
from pytest_fwloop.core.suite.collection import Collection
from pytest_fwloop.core.suite.known_failures import read_known_failures
from pytest_fwloop.core.verdict.convergence import (
    PRESETS,
    ConvergenceCriteria,
    CriteriaError,
    ExecutionMode,
    PlateauHandlingStrategy,
)
from pytest_fwloop.farm.client import FarmSettings
from pytest_fwloop.procs.sandbox import SandboxUnavailable, find_bwrap
from pytest_fwloop.reports.user_files import UserReports
from pytest_fwloop.workspace import PatchPolicy

if TYPE_CHECKING:
    from pytest_fwloop.agents.base import Provider
    from pytest_fwloop.core.records.agent_protocol import Role


@dataclass(frozen=True)
class Endings:
    """The run's limits and what it does short of success (DESIGN.md §15)."""

    #: --fwloop-keep=best: leave the best kept tree in place instead of the baseline.
    keep_best: bool = False
    #: Node ids that fail for reasons no source change mends: not counted, never sent.
    known_failures: frozenset[str] = frozenset()
    #: A coder answer below this confidence is asked again, then INCONCLUSIVE.
    min_confidence: float = 0.3
    #: Seconds the whole run may take (None: no limit).
    timeout_s: float | None = None
    #: Rollbacks, or iterations that broke tests, before the run stops.
    circuit_breaker: int = 5
    #: The clean command run before the baseline's build is retried once (None: no retry).
    build_clean: list[str] | str | None = None


@dataclass(frozen=True)
class LoopSettings:
    """What the controller knows of its run, fixed before the baseline (`load_settings`)."""

    #: The loop's options as read (`read_options`): what the settings take as given.
    options: LoopOptions
    rootdir: Path
    invocation_dir: Path
    child_args: list[str]
    coder: str
    reviewer: str
    tester: str
    #: Each role's failover list, parsed and checked once before the run (no tester: no entry).
    providers: dict[str, list[Provider]]
    #: The review panel's members (none: the reviewer's failover list is the strict gate),
    #: and how they decide.
    review_panel: tuple[Provider, ...]
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
    #: `fwloop_risky_patterns`, compiled: high-risk code raises a patch's risk (seed §5.1.5).
    risky_patterns: tuple[RiskyPattern, ...]
    #: The quick check between applying a patch and building it (seed §5.6).
    precheck: PrecheckSettings
    allowed_commands: tuple[Argv, ...]
    budget: Budget
    snapshot_exclude: tuple[str, ...]
    #: Providers that failed their check before the run while others of their list passed,
    #: and what a provider that passed foresees going wrong: one line each.
    preflight_notes: tuple[str, ...] = ()
    #: The pytest-randomly seed every child run gets, when that plugin is active.
    randomly_seed: int | None = None
    #: The user's own report files, written for the final tree when the run ends.
    reports: UserReports = field(default_factory=lambda: UserReports(None, None))
    #: The labgrid place the loop reserves and locks, or None (no board farm).
    farm: FarmSettings | None = None
    endings: Endings = field(default_factory=lambda: Endings())
    #: The failure log of an earlier run (--fwloop-evidence), or None.
    evidence: EvidenceLog | None = None
    #: What decides whether a child running a selection may be handed its files.
    collection: Collection = field(default_factory=Collection)

    @property
    def advisory(self) -> bool:
        """ci_terminate_as=warning: plateau-like verdicts exit 0 with a warning (DESIGN.md §10)."""
        return self.plateau.ci_terminate_as == "warning"


def detect_mode(explicit: str) -> ExecutionMode:
    """DESIGN.md §4: ci when $CI is set or stdin is not a terminal, else interactive."""
    if explicit:
        return ExecutionMode(explicit)
    ci = os.environ.get("CI", "").strip().lower()
    if ci not in ("", "0", "false", "no") or not sys.stdin.isatty():
        return ExecutionMode.CI
    return ExecutionMode.INTERACTIVE


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


def criteria_of(options: LoopOptions, rootdir: Path) -> ConvergenceCriteria:
    """The preset or file fwloop_criteria names, with fwloop_confirm_runs applied."""
    criteria = PRESETS.get(options.criteria)
    if criteria is None:
        # A criteria file is validated with pydantic, which a preset's run never waits for.
        from pytest_fwloop.config.criteria_file import load_criteria

        try:
            criteria = load_criteria(options.criteria, rootdir, options.origin("criteria"))
        except CriteriaError as exc:
            raise pytest.UsageError(str(exc)) from None
    if options.confirm_runs is None:
        return criteria
    return dataclasses.replace(criteria, stable_iterations_required=options.confirm_runs + 1)


def role_specs(options: LoopOptions) -> dict[Role, str]:
    """Each role's failover list as written: a run needs a coder, the reviewer defaults to it."""
    coder = options.coder.strip()
    if not coder:
        raise pytest.UsageError(
            "fwloop: no coder configured; set --fwloop-coder=SPEC or ini fwloop_coder, "
            f"one of: {', '.join(PROVIDER_SYNTAX)}"
        )
    return {
        "coder": coder,
        "reviewer": options.reviewer.strip() or coder,
        "tester": options.tester.strip(),
    }


def build_step(options: LoopOptions, rootdir: Path) -> tuple[list[str] | str | None, str | None]:
    """The build command (a shell line when fwloop_build_shell, else an argv; None: no build)
    and the bubblewrap executable confining it, checked now so a typo costs no baseline."""
    sandbox = None
    if options.build_sandbox == "bwrap":
        try:
            sandbox = find_bwrap()
        except SandboxUnavailable as exc:
            raise pytest.UsageError(str(exc)) from None
    return _build_command(options, "build", rootdir), sandbox


def _build_command(options: LoopOptions, name: str, rootdir: Path) -> list[str] | str | None:
    """fwloop_build or fwloop_build_clean as the build step runs it; UsageError when it does
    not split or its program is nowhere."""
    text = str(getattr(options, name)).strip()
    if not text:
        return None
    where = f"{options.origin(name)}={text}"
    try:
        command: list[str] | str = text if options.build_shell else shlex.split(text)
    except ValueError as exc:
        raise pytest.UsageError(f"fwloop: {where}: {exc}") from None
    missing = missing_build_program(command, rootdir)
    if missing is not None:
        raise pytest.UsageError(
            f"fwloop: {where}: '{missing}' is not on PATH nor a file of "
            f"{rootdir}; install it or fix the build command"
        )
    return command


def endings(options: LoopOptions, rootdir: Path) -> Endings:
    """How the run may end short of success (DESIGN.md §15), checked before anything runs."""
    known: frozenset[str] = frozenset()
    if options.known_failures:
        path = rootdir / options.known_failures
        try:
            known = read_known_failures(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError) as exc:
            raise pytest.UsageError(
                f"fwloop: {options.origin('known_failures')}={options.known_failures}: cannot "
                f"read it ({type(exc).__name__}); give a file of node ids, one a line"
            ) from None
    return Endings(
        keep_best=options.keep == "best",
        known_failures=known,
        min_confidence=options.min_confidence,
        timeout_s=options.timeout * 60 if options.timeout else None,
        circuit_breaker=options.circuit_breaker,
        build_clean=_build_command(options, "build_clean", rootdir),
    )


def allowed_command_prefixes(options: LoopOptions) -> tuple[Argv, ...]:
    """The tester's allowlist of argv prefixes; UsageError naming a line that does not split."""
    try:
        return parse_prefixes(options.allowed_commands)
    except ValueError as exc:
        raise pytest.UsageError(
            f"fwloop: fwloop_allowed_commands line {exc}; fix its quoting"
        ) from None


def precheck_settings(options: LoopOptions, rootdir: Path) -> PrecheckSettings:
    """fwloop_precheck as an argv (no shell), its program checked now like the build's."""
    text = options.precheck.strip()
    command = None
    if text:
        where = f"{options.origin('precheck')} = {text!r}"
        try:
            command = tuple(shlex.split(text))
        except ValueError as exc:
            raise pytest.UsageError(f"fwloop: {where}: {exc}; fix its quoting") from None
        missing = missing_build_program(list(command), rootdir) if command else None
        if missing is not None:
            raise pytest.UsageError(
                f"fwloop: {where}: '{missing}' is not on PATH nor a file of {rootdir}; install "
                "it or fix the pre-check command"
            )
    return PrecheckSettings(command or None, options.precheck_files, options.precheck_timeout)


def risky_patterns(options: LoopOptions) -> tuple[RiskyPattern, ...]:
    """fwloop_risky_patterns compiled; UsageError naming a line that is not NAME KIND REGEX."""
    try:
        return parse_patterns(options.risky_patterns)
    except ValueError as exc:
        raise pytest.UsageError(f"fwloop: {options.origin('risky_patterns')}: line {exc}") from None


def collection_of(config: pytest.Config) -> Collection:
    """How the run collects, as pytest parsed its arguments: paths the user named, or the
    `testpaths` (relative to the rootdir) or the directory it started in that it walks."""
    named = config.args_source is pytest.Config.ArgsSource.ARGS
    testpaths = config.args_source is pytest.Config.ArgsSource.TESTPATHS
    base = config.rootpath if testpaths else config.invocation_params.dir
    return Collection(
        named=tuple(config.args) if named else (),
        pyargs=bool(config.option.pyargs),
        inifile=str(config.inipath) if config.inipath is not None else None,
        roots=() if named else tuple(str(base / arg) for arg in config.args),
        norecursedirs=tuple(config.getini("norecursedirs")),
    )


def load_settings(config: pytest.Config) -> LoopSettings:
    """The run's settings: the loop's options read once, then each group derived from them, so
    every mistake a user can fix stops the run here, before anything changes."""
    refuse_partial_runs(config)
    options = read_options(config)
    rootdir = config.rootpath
    specs = role_specs(options)
    seed, seed_args = randomly_seed(config)
    providers, preflight_notes = checked_providers(config, options, specs)
    panel, panel_notes = checked_panel(config, options)
    criteria = criteria_of(options, rootdir)
    mode = detect_mode(options.mode)
    build, build_sandbox = build_step(options, rootdir)
    harness = config.getoption("build_dir", None)  # the Zephyr harness's build folder
    outputs = harness_build_dir(rootdir, config.invocation_params.dir, harness)
    return LoopSettings(
        options=options,
        rootdir=rootdir,
        invocation_dir=config.invocation_params.dir,
        child_args=[*strip_controller_args(list(config.invocation_params.args)), *seed_args],
        randomly_seed=seed,
        reports=UserReports.of(config),
        coder=specs["coder"],
        reviewer=specs["reviewer"],
        tester=specs["tester"],
        providers=providers,
        review_panel=panel,
        build=build,
        build_sandbox=build_sandbox,
        mode=mode,
        criteria=criteria,
        plateau=PlateauHandlingStrategy(
            mode=mode,
            ci_terminate_as=options.ci_terminate_as,
            ci_notification_channels=notify_channels(
                options.notify, options.origin("notify"), rootdir
            ),
        ),
        runs_root=rootdir / options.run_dir,
        knowledge=knowledge_path(rootdir, options.knowledge),
        policy=patch_policy(config, options),
        risky_patterns=risky_patterns(options),
        precheck=precheck_settings(options, rootdir),
        allowed_commands=allowed_command_prefixes(options),
        budget=Budget(usd=options.budget_usd, tokens=options.budget_tokens),
        collection=collection_of(config),
        snapshot_exclude=snapshot_exclude(options, rootdir, build, outputs),
        preflight_notes=tuple(dict.fromkeys((*preflight_notes, *panel_notes))),
        farm=farm_settings(config, options),
        endings=endings(options, rootdir),
        evidence=read_evidence(
            options.evidence,
            options.origin("evidence"),
            rootdir,
            options.context_bytes,
            Redactor(os.environ),
        ),
    )


def farm_settings(config: pytest.Config, options: LoopOptions) -> FarmSettings | None:
    """The board farm (DESIGN.md §14): the coordinator from our option, else $LG_COORDINATOR,
    else labgrid's own `--lg-coordinator` (whose default is labgrid's 127.0.0.1:20408)."""
    if not options.labgrid_reserve:
        return None
    coordinator = (
        options.labgrid_coordinator
        or os.environ.get("LG_COORDINATOR", "")
        or str(config.getoption("lg_coordinator", None) or "127.0.0.1:20408")
    )
    # On PATH, else beside this interpreter (a venv that is not activated, as CI runs one).
    beside = Path(sys.executable).parent / options.labgrid_client
    executable = shutil.which(options.labgrid_client) or (str(beside) if beside.is_file() else "")
    if not executable:
        raise pytest.UsageError(
            f"fwloop: {options.origin('labgrid_reserve')}: the labgrid client "
            f"'{options.labgrid_client}' is not on PATH nor beside {sys.executable}; install "
            "labgrid (pip install 'pytest-fwloop[labgrid]') or set fwloop_labgrid_client"
        )
    return FarmSettings(
        tuple(options.labgrid_reserve.split()), coordinator, options.labgrid_wait, executable
    )
