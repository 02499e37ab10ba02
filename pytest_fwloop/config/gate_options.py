"""The options of the patch's way to the build and of the run's endings, a part of the one
option table (`options.py`): the pre-check and risky code (docs/security.md), and the endings
and run limits (docs/endings.md). Plain pytest imports this with the table: standard library
only.
"""

from __future__ import annotations

from pytest_fwloop.config.option_spec import (
    OptionSpec,
    one_of,
    parse_non_negative_float,
    parse_positive_float,
    parse_positive_int,
    parse_unit_float,
)

GATE_AND_ENDING_OPTIONS: tuple[OptionSpec, ...] = (
    # Before the build, and high-risk code (seed 001 §5.1.5, §5.6, §5.7; docs/security.md).
    OptionSpec(
        "precheck",
        "quick static check after each patch is applied, before the build (e.g. `gcc "
        "-fsyntax-only -Iinclude`; no shell), given the written files fwloop_precheck_files "
        "matches as arguments; a failure rolls the patch back and goes to the coder like a "
        "broken build; written Python files are compiled (never imported) either way",
        "",
    ),
    OptionSpec(
        "precheck_files",
        "globs of the written files appended to fwloop_precheck (it does not run when none "
        "matches); a list given replaces the defaults; empty: none, it runs alone (`make -n`)",
        ["**/*.c", "**/*.h", "**/*.cc", "**/*.cpp", "**/*.hpp"],
        kind="linelist",
    ),
    OptionSpec("precheck_timeout", "seconds fwloop_precheck may take", 120.0, parse_positive_float),
    OptionSpec(
        "risky_patterns",
        "high-risk code, `NAME KIND REGEX` a line: KIND `line` (added and removed lines) or "
        "`path`, `boot-line` or `boot-path` for boot-critical code (the operator confirms it "
        "unless a failing test names it); each pattern matched adds 0.2 to the reviewer's "
        "risk; the line `firmware` stands for the built-in patterns (docs/security.md); an "
        "empty list turns the check off",
        ["firmware"],
        kind="linelist",
    ),
    OptionSpec(
        "budget_usd",
        "stop the run (outcome budget_exhausted) once the cost the agents report exceeds X "
        "US dollars; default: no limit",
        None,
        parse_positive_float,
        "--fwloop-budget-usd",
        metavar="X",
    ),
    OptionSpec(
        "budget_tokens",
        "stop the run (outcome budget_exhausted) once the tokens the agents report (input "
        "plus output) exceed N; default: no limit",
        None,
        parse_positive_int,
        "--fwloop-budget-tokens",
        metavar="N",
    ),
    # Endings and run limits (DESIGN.md §15, docs/endings.md).
    OptionSpec(
        "keep",
        "what a run that ends short of success leaves in the tree: 'baseline' (the tree as it "
        "started; the best kept tree is one `fwloop apply RUN` away) or 'best' (the tree of the "
        "iteration with the most passing tests)",
        "baseline",
        one_of("baseline", "best"),
        "--fwloop-keep",
        metavar="baseline|best",
    ),
    OptionSpec(
        "known_failures",
        "a file of node ids (one a line, # comments) known to fail for reasons no source change "
        "mends: run and reported, not counted against the target, never sent to the coder; "
        "`fwloop show RUN --known-failures` writes one from a run",
        "",
        flag="--fwloop-known-failures",
        metavar="FILE",
    ),
    OptionSpec(
        "min_confidence",
        "a coder answer below this confidence is not applied blind: asked once more with more "
        "evidence, then INCONCLUSIVE (proposal mode: stops for the operator)",
        0.3,
        parse_unit_float,
    ),
    OptionSpec(
        "timeout",
        "minutes the whole run may take (seed 001 timeout_minutes) before it ends as timeout; "
        "0: no limit",
        120.0,
        parse_non_negative_float,
        "--fwloop-timeout",
        metavar="MIN",
    ),
    OptionSpec(
        "circuit_breaker",
        "the run stops (outcome circuit_breaker) after this many rolled-back patches, or this "
        "many iterations that broke tests which passed before",
        5,
        parse_positive_int,
    ),
    OptionSpec(
        "build_clean",
        "a clean command (e.g. `make clean`) run once before the build is retried when the "
        "build fails at the baseline; empty: no retry",
        "",
    ),
)
