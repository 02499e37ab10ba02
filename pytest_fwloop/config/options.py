"""Every fwloop option, once: command line flag, ini twin, environment variable, default, parser;
registered with pytest and read by precedence.

Precedence is command line > environment (`FWLOOP_<NAME>`) > ini > default, and every bad value
is a `pytest.UsageError` naming the value and where it came from. The loop reads its options all
at once (`loop_options`); an environment fixture reads its own when a test requests it.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

import pytest

from pytest_fwloop.config.env_options import ENV_OPTIONS
from pytest_fwloop.config.gate_options import GATE_AND_ENDING_OPTIONS
from pytest_fwloop.config.option_spec import (
    OptionSpec,
    one_of,
    parse_bool,
    parse_context_cap,
    parse_labgrid_tags,
    parse_metric_tolerance,
    parse_non_negative_int,
    parse_on_off,
    parse_positive_float,
    parse_positive_int,
    parse_unit_float,
    parse_words,
)

#: Kept literal so plain pytest never imports the providers; a test checks it against the registry.
PROVIDER_CHOICES = "claude, codex, openai:MODEL@URL, command:PATH, scripted:DIR, rules"


_LOOP_OPTIONS: tuple[OptionSpec, ...] = (
    OptionSpec(
        "max_iter",
        "stop after N iterations (the baseline is iteration 1)",
        10,
        parse_positive_int,
        "--max-iter",
        metavar="N",
    ),
    OptionSpec(
        "goal",
        "what the loop is asked to achieve, sent to every agent",
        "make every selected test pass",
        flag="--fwloop-goal",
        metavar="TEXT",
    ),
    OptionSpec(
        "evidence",
        "a failure log of an earlier run (e.g. the last CI log), relative to the rootdir: its "
        "head and tail go to the coder until a patch is tested, within fwloop_context_bytes",
        "",
        flag="--fwloop-evidence",
        metavar="FILE",
    ),
    OptionSpec(
        "coder",
        f"coder provider(s), comma-separated failover list of {PROVIDER_CHOICES}",
        "",
        flag="--fwloop-coder",
        metavar="SPEC",
    ),
    OptionSpec(
        "reviewer",
        "reviewer provider(s); default: the coder's",
        "",
        flag="--fwloop-reviewer",
        metavar="SPEC",
    ),
    OptionSpec(
        "tester", "tester provider(s); default: none", "", flag="--fwloop-tester", metavar="SPEC"
    ),
    OptionSpec(
        "review_panel",
        "a review panel: two or more provider specs, comma-separated, each a member that judges "
        "every patch (asked in parallel, each review recorded); the panel, not the reviewer's "
        "failover list, is then the strict gate; default: none",
        "",
        flag="--fwloop-review-panel",
        metavar="SPEC,SPEC",
    ),
    OptionSpec(
        "review_rule",
        "how a review panel decides: 'all' (every member approves) or 'majority' (more than "
        "half do); the panel's risk is its members' highest",
        "all",
        one_of("all", "majority", meanings=("every member approves", "more than half")),
        "--fwloop-review-rule",
        metavar="all|majority",
    ),
    OptionSpec(
        "build",
        "command that rebuilds the firmware after each patch (no shell unless "
        "fwloop_build_shell is true); default: no build step",
        "",
        flag="--fwloop-build",
        metavar="CMD",
    ),
    OptionSpec("build_shell", "run fwloop_build through /bin/sh", False, parse_bool, kind="bool"),
    OptionSpec(
        "build_sandbox",
        "run the build confined: 'bwrap' (bubblewrap: no network, read-only outside the tree, "
        "the tree's .git and .fwloop read-only) or 'none'; see docs/security.md",
        "none",
        one_of("none", "bwrap", blank="none"),
        "--fwloop-build-sandbox",
        metavar="none|bwrap",
    ),
    OptionSpec(
        "mode",
        "plateau handling: interactive, ci or auto; default ci when $CI is set or "
        "stdin is not a terminal, else interactive",
        "",
        one_of("interactive", "ci", "auto"),
        "--fwloop-mode",
        metavar="MODE",
    ),
    OptionSpec(
        "criteria",
        "convergence criteria: standard, strict, balanced, aggressive, or a "
        "TOML/JSON file of ConvergenceCriteria fields",
        "standard",
        flag="--fwloop-criteria",
        metavar="PRESET|FILE",
    ),
    OptionSpec(
        "confirm_runs",
        "extra runs with no new patch that must stay green before SUCCESS "
        "(0 turns confirmation off); default: from the criteria (1 for standard)",
        None,
        parse_non_negative_int,
        "--fwloop-confirm-runs",
        metavar="N",
    ),
    OptionSpec(
        "knowledge",
        "the knowledge base of fixes that worked (SQLite), relative to the rootdir; a file a "
        "team shares across repositories may be named here; 'off' keeps none",
        ".fwloop/knowledge.sqlite",
        flag="--fwloop-knowledge",
        metavar="FILE|off",
    ),
    OptionSpec(
        "run_dir",
        "where run records go, relative to the rootdir",
        ".fwloop/runs",
        flag="--fwloop-run-dir",
        metavar="DIR",
    ),
    OptionSpec(
        "flaky_reruns",
        "times a failing test is rerun in the same iteration, with no code change, before it "
        "counts as failed (0: never); one that passes on a rerun is flaky",
        2,
        parse_non_negative_int,
    ),
    OptionSpec(
        "propose",
        "'first': stop before the first patch with a proposal for the operator "
        "(outcome awaiting_operator_confirm, the tree untouched; interactive mode asks at the "
        "terminal); 'every': before each patch; 'off': patches are applied once the gates pass",
        "off",
        one_of("off", "first", "every"),
        "--fwloop-propose",
        metavar="off|first|every",
    ),
    OptionSpec(
        "focus",
        "'on': after a patch, run first only the tests that did not pass (plus the tester's "
        "selection), then the whole suite as the regression gate once they pass; 'off': the "
        "whole suite every iteration",
        "on",
        parse_on_off,
        "--fwloop-focus",
        metavar="on|off",
    ),
    OptionSpec(
        "child_start",
        "how each test run's child pytest starts: 'auto' forks the controller when the fork sees "
        "what a fresh interpreter would (Linux, one thread, nothing it keeps imported changed; "
        "the user's modules are imported afresh), else runs `python -m pytest`; 'spawn' always "
        "runs `python -m pytest`",
        "auto",
        one_of("auto", "spawn"),
    ),
    OptionSpec(
        "flaky_policy",
        "how a flaky test counts: 'exclude' (in neither count, like a skip), 'pass' or 'fail'; "
        "it is never sent to the coder",
        "exclude",
        one_of("exclude", "pass", "fail"),
    ),
    OptionSpec(
        "metric_tolerance",
        "how much worse than at the baseline a metric the tests record may get before SUCCESS "
        "is withheld, relative (0.05: five percent; seed 001's performance_degradation_threshold); "
        "per metric: '0.05 boot_ms=0.10 coverage=0.01' (docs/metrics.md)",
        "0.05",
        parse_metric_tolerance,
        "--fwloop-metric-tolerance",
        metavar="TOLERANCES",
    ),
    OptionSpec(
        "ci_terminate_as",
        "in ci mode a plateau ends as 'failure' (exit 1) or 'warning' (exit 0 with a warning line)",
        "failure",
        one_of("warning", "failure"),
    ),
    OptionSpec(
        "notify",
        "where a JSON document goes at each plateau and at the end (docs/ci.md): command:PATH "
        "(fed it on stdin) or an http(s):// webhook; one a line in the ini, spaces on the "
        "command line; a failed delivery is a note, never a changed outcome",
        [],
        parse_words,
        "--fwloop-notify",
        kind="linelist",
        metavar="CHANNEL",
    ),
    OptionSpec("notify_timeout", "seconds one notification may take", 10.0, parse_positive_float),
    OptionSpec(
        "protect",
        "extra protected globs the coder may not touch (added to the defaults: "
        "tests, conftest.py, pytest/CI configuration, .git, .fwloop)",
        [],
        kind="linelist",
    ),
    OptionSpec("allow_paths", "if set, the only globs a patch may touch", [], kind="linelist"),
    OptionSpec(
        "snapshot_exclude",
        "build outputs kept out of the loop's snapshots, one gitignore pattern per line (the "
        "build directory of `cmake --build DIR`, `cmake -B DIR`, `ninja -C DIR` or "
        "`meson compile -C DIR` is added by itself); what the loop writes is snapshotted anyway "
        "(docs/ci.md: build output and the shadow store)",
        [],
        kind="linelist",
    ),
    OptionSpec(
        "allowed_commands",
        "argv prefixes the tester's commands must start with, one per line, split like a "
        "shell would (commands never run through one); a line is trusted as written, what a "
        "command adds after it must fit that tool's grammar (docs/security.md); a list given "
        "replaces the defaults",
        ["make test", "make check", "ctest", "pytest", "python -m pytest"],
        kind="linelist",
    ),
    OptionSpec(
        "command_timeout", "seconds one tester command may take", 600.0, parse_positive_float
    ),
    *GATE_AND_ENDING_OPTIONS,
    OptionSpec(
        "api_key_env",
        "environment variable holding the API key of openai: providers "
        "(default OPENAI_API_KEY); keys never go on the command line",
        "",
    ),
    OptionSpec(
        "claude_permission_mode",
        "--permission-mode passed to claude as coder (e.g. "
        "acceptEdits to let it edit the workspace itself)",
        "",
    ),
    OptionSpec("claude_max_turns", "--max-turns passed to claude", None, parse_positive_int),
    OptionSpec("max_risk", "highest reviewer risk (0..1) a patch may carry", 0.7, parse_unit_float),
    OptionSpec("max_patch_files", "most files one patch may touch", 20, parse_positive_int),
    OptionSpec(
        "max_patch_lines", "most lines one patch may add plus remove", 500, parse_positive_int
    ),
    OptionSpec(
        "review_rounds",
        "reviewer rejections allowed per iteration before the run stops",
        3,
        parse_positive_int,
    ),
    OptionSpec(
        "tester_schema_rounds",
        "tester rounds in a row whose plan fails its schema that stop the run "
        "(tester_schema_invalid); a single one only tells the coder; 0: never stop",
        2,
        parse_non_negative_int,
    ),
    OptionSpec("agent_timeout", "seconds one agent call may take", 600.0, parse_positive_float),
    OptionSpec("build_timeout", "seconds the build may take", 1800.0, parse_positive_float),
    OptionSpec("test_timeout", "seconds one test run may take", 3600.0, parse_positive_float),
    OptionSpec(
        "state_timeout",
        "seconds any other state may take: an agent state's calls, retries and failovers "
        "together (each call within fwloop_agent_timeout); see docs/fsm.md",
        3600.0,
        parse_positive_float,
    ),
    # Board farms (DESIGN.md §14, docs/farm.md).
    OptionSpec(
        "labgrid_reserve",
        "reserve and lock a labgrid place with these tags for the whole loop (key=value …); "
        "children get LG_PLACE=+ and its token",
        "",
        parse_labgrid_tags,
        "--fwloop-labgrid-reserve",
        metavar="TAGS",
    ),
    OptionSpec(
        "labgrid_coordinator",
        "labgrid coordinator HOST:PORT; default $LG_COORDINATOR, else labgrid's --lg-coordinator",
        "",
        flag="--fwloop-labgrid-coordinator",
        metavar="HOST:PORT",
    ),
    OptionSpec(
        "labgrid_wait",
        "seconds to wait for a free place before env_unavailable",
        600.0,
        parse_positive_float,
    ),
    OptionSpec("labgrid_client", "the labgrid-client executable", "labgrid-client"),
    OptionSpec(
        "context_bytes",
        "cap in bytes on the failure context sent to the coder (at least 1024; every distinct "
        "failure signature is kept up to cap/128 of them)",
        32768,
        parse_context_cap,
    ),
)

OPTIONS: tuple[OptionSpec, ...] = (*_LOOP_OPTIONS, *ENV_OPTIONS)

_BY_NAME = {spec.name: spec for spec in OPTIONS}

CHILD_REPORT_FLAG = "--fwloop-child-report"
CHILD_SELECT_FLAG = "--fwloop-child-select"
#: Where a child writes its round's JUnit XML from its records (`junit_writer`).
CHILD_JUNIT_FLAG = "--fwloop-child-junit"
#: The order file the `fwloop` command hands a controller that continues a run (DESIGN.md §11).
OPERATOR_FLAG = "--fwloop-operator"
OPERATOR_DEST = "fwloop_operator"
#: Flags whose value is the next argument unless written `--flag=value`.
VALUE_FLAGS = frozenset(spec.flag for spec in OPTIONS if spec.flag is not None) | {OPERATOR_FLAG}


#: The ini type of every scalar option. pytest >= 9.2 takes a union, so a native `[tool.pytest]`
#: table may write `fwloop_max_iter = 10` as TOML gives it; older pytests read ini text only.
#: Either way `resolve` parses the value's text, with the option's own error messages.
SCALAR_INI_TYPE: Any = str | int | float if pytest.version_tuple >= (9, 2) else "string"


def add_options(parser: pytest.Parser) -> None:
    group = parser.getgroup("fwloop", "closed-loop firmware repair (pytest-fwloop)")
    group.addoption(
        "--fwloop",
        action="store_true",
        default=False,
        help="run the suite as a coder/reviewer repair loop; without it the plugin is inert",
    )
    for spec in OPTIONS:
        if spec.flag is not None:
            group.addoption(
                spec.flag,
                dest=spec.dest,
                default=None,
                metavar=spec.metavar,
                help=f"{spec.help} (ini: {spec.ini})",
            )
        ini_type = {"linelist": "linelist", "bool": "bool"}.get(spec.kind, SCALAR_INI_TYPE)
        parser.addini(spec.ini, spec.help, type=ini_type, default=spec.default)
    group.addoption(
        OPERATOR_FLAG,
        dest=OPERATOR_DEST,
        default="",
        metavar="FILE",
        help="continue a recorded run as an operator's order says (written by `fwloop confirm`, "
        "`followup`, `resume` and `chat`, which start pytest with it; not for direct use)",
    )
    group.addoption(CHILD_REPORT_FLAG, default="", help=argparse.SUPPRESS)
    group.addoption(CHILD_SELECT_FLAG, default="", help=argparse.SUPPRESS)
    group.addoption(CHILD_JUNIT_FLAG, default="", help=argparse.SUPPRESS)


def spec_of(name: str) -> OptionSpec:
    """The option called `name` (without its `fwloop_` prefix)."""
    return _BY_NAME[name]


def resolve(config: pytest.Config, name: str) -> Any:
    """The option's value by precedence, parsed and validated."""
    spec = _BY_NAME[name]
    cli = config.getoption(spec.dest) if spec.flag is not None else None
    if cli is not None:
        return _parse(spec, cli, spec.flag or "")
    env = os.environ.get(spec.env)
    if env is not None and env != "":
        if spec.kind == "linelist":
            return [line.strip() for line in env.splitlines() if line.strip()]
        return _parse(spec, env, f"${spec.env}")
    raw = config.getini(spec.ini)
    if spec.kind == "linelist":
        return list(raw)
    if spec.kind == "bool" or raw is None:
        return raw
    if raw == []:  # pytest < 8 gives [] for an unset option registered with default None
        return _default(spec)
    if raw == spec.default or (isinstance(raw, str) and raw.strip() == ""):
        return _default(spec)
    return _parse(spec, str(raw), f"ini {spec.ini}")


def _default(spec: OptionSpec) -> Any:
    """The default as its parser reads it: a default written as the user would (`on`) is
    typed like a value the user gave."""
    if isinstance(spec.default, str) and spec.default:
        return spec.parse(spec.default)
    return spec.default


def origin(config: pytest.Config, name: str) -> str:
    """Where the option's value comes from, as an error message should name it: the flag, the
    environment variable, or the ini key (a user who wrote the ini must not be sent to a flag)."""
    spec = _BY_NAME[name]
    if spec.flag is not None and config.getoption(spec.dest) is not None:
        return spec.flag
    if os.environ.get(spec.env):
        return f"${spec.env}"
    return f"ini {spec.ini}"


def _parse(spec: OptionSpec, text: str, source: str) -> Any:
    try:
        return spec.parse(text.strip())
    except ValueError as exc:
        reason = str(exc)
        where = f"{source}={text}" if source.startswith("-") else f"{source} = {text!r}"
        raise pytest.UsageError(f"fwloop: {where}: {reason}") from None


def strip_controller_args(args: list[str]) -> list[str]:
    """The user's arguments minus the controller's own, for the child runs."""
    kept: list[str] = []
    skip_next = False
    for arg in args:
        if skip_next:
            skip_next = False
            continue
        if arg == "--fwloop":
            continue
        flag = arg.split("=", 1)[0]
        if flag in VALUE_FLAGS:
            skip_next = "=" not in arg
            continue
        kept.append(arg)
    return kept
