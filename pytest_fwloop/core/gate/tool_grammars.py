"""The tools' argument grammars (DESIGN.md §6): what a tester may write after an allowlisted prefix.

One grammar each for pytest, make and ctest: the options a tester may add, what their values may be,
the options refused with what they would do, what a positional argument may be, and how the tool
splits its options (argparse, getopt, whole tokens). Data only; `core/gate/allowlist.py` reads a
command's arguments by them and judges it.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field


class Kind(enum.Enum):
    """What a value or a positional argument may be."""

    INT = "an integer"
    NUMBER = "a number"
    WORD = "a word"  # letters, digits and `._:+,-`: report chars, a config name, until-fail:3
    EXPR = "an expression"  # pytest -k/-m, ctest regexes: any text, never a path
    PATH = "a path inside the tree"
    NODEID = "a path or node id inside the tree"  # judged by its path part, as pytest reads it
    PLAIN = "a plain word or a path inside the tree, no `=`"  # make goals, unknown programs


#: A kind, or the exact values allowed.
Value = Kind | frozenset[str]


class Style(enum.Enum):
    """How a tool splits its options, which decides what a token means to it."""

    ARGPARSE = "argparse"  # -xvs clusters, -kEXPR, -k=EXPR, --opt=VALUE, --opt VALUE, @file
    GETOPT = "getopt"  # clusters, -jN, --opt=VALUE; an optional value only attached
    EXACT = "exact"  # whole tokens, a value in the next token, no `--`


@dataclass(frozen=True)
class Grammar:
    """What a tester may write after an allowlisted prefix of one tool."""

    program: str
    style: Style
    flags: frozenset[str]  # options that take no value
    values: Mapping[str, Value]  # options that take one value
    refused: Mapping[str, str]  # options a tester may never add, with what they would do
    positional: Value | None  # what a non-option argument may be; None: none allowed
    optional_values: Mapping[str, Value] = field(default_factory=dict)


def _names(*options: str) -> frozenset[str]:
    """Option spellings, one option with its aliases per argument."""
    return frozenset(name for spellings in options for name in spellings.split())


_LOADS_CONFIG = "reads another configuration file"

PYTEST = Grammar(
    "pytest",
    Style.ARGPARSE,
    flags=_names(
        "-q --quiet",
        "-v --verbose",
        "-x --exitfirst",
        "-s",
        "-l --showlocals",
        "--no-showlocals",
        "--lf --last-failed",
        "--ff --failed-first",
        "--nf --new-first",
        "--sw --stepwise",
        "--sw-skip --stepwise-skip",
        "--co --collect-only",
        "--strict-markers",
        "--strict-config",
        "--runxfail",
        "--no-header",
        "--no-summary",
        "--disable-warnings --disable-pytest-warnings",
        "--full-trace",
        "--setup-show --setup-plan --setup-only",
    ),
    values={
        "-k": Kind.EXPR,
        "-m": Kind.EXPR,
        "-r": Kind.WORD,
        "--report-chars": Kind.WORD,
        "--tb": frozenset({"auto", "long", "short", "line", "native", "no"}),
        "--capture": frozenset({"fd", "sys", "no", "tee-sys"}),
        "--show-capture": frozenset({"no", "stdout", "stderr", "log", "all"}),
        "--color": frozenset({"yes", "no", "auto"}),
        "--code-highlight": frozenset({"yes", "no"}),
        "--maxfail": Kind.INT,
        "--durations": Kind.INT,
        "--durations-min": Kind.NUMBER,
        "--verbosity": Kind.INT,
        "--deselect": Kind.NODEID,
        "--ignore": Kind.PATH,
    },
    refused={
        "-p": "loads or blocks a plugin",
        "-c": _LOADS_CONFIG,
        "--config-file": _LOADS_CONFIG,
        "-o": "overrides configuration (addopts, cache_dir, …)",
        "--override-ini": "overrides configuration (addopts, cache_dir, …)",
        "--rootdir": "moves the rootdir (configuration, conftest.py files, cache)",
        "--confcutdir": "changes which conftest.py files are loaded",
        "--pyargs": "imports the modules it is given from anywhere on sys.path",
        "--doctest-modules": "imports every module under the given paths",
        "-W": "imports the warning category it names",
        "--pythonwarnings": "imports the warning category it names",
        "--pdbcls": "imports the debugger class it names",
        "--pdb": "waits for an interactive debugger",
        "--trace": "waits for an interactive debugger",
        "--basetemp": "names a directory pytest empties and deletes",
        "--cache-clear": "deletes the cache",
        "--junitxml": "writes a report file wherever it is told",
        "--junit-xml": "writes a report file wherever it is told",
        "--debug": "writes a debug log wherever it is told",
        "--log-file": "writes a log file wherever it is told",
        "--pastebin": "sends the output to a paste service",
    },
    positional=Kind.NODEID,
)

_READS_MAKEFILE = "reads another makefile"
_RUNS_ELSEWHERE = "runs the makefile of another directory"
_EVALUATES = "evaluates make code"

MAKE = Grammar(
    "make",
    Style.GETOPT,
    flags=_names(
        "-k --keep-going",
        "-S --no-keep-going --stop",
        "-s --silent --quiet",
        "-B --always-make",
        "-w --print-directory",
        "--no-print-directory",
        "-r --no-builtin-rules",
        "-R --no-builtin-variables",
        "--trace",
        "--warn-undefined-variables",
    ),
    values={},
    optional_values={
        "-j": Kind.INT,
        "--jobs": Kind.INT,
        "-l": Kind.NUMBER,
        "--load-average": Kind.NUMBER,
        "--max-load": Kind.NUMBER,
        "-O": frozenset({"none", "line", "target", "recurse"}),
        "--output-sync": frozenset({"none", "line", "target", "recurse"}),
    },
    refused={
        "-f": _READS_MAKEFILE,
        "--file": _READS_MAKEFILE,
        "--makefile": _READS_MAKEFILE,
        "-C": _RUNS_ELSEWHERE,
        "--directory": _RUNS_ELSEWHERE,
        "-I": "makes `include` read makefiles from another directory",
        "--include-dir": "makes `include` read makefiles from another directory",
        "-E": _EVALUATES,
        "--eval": _EVALUATES,
        "-e": "lets the environment override the makefile's variables",
        "--environment-overrides": "lets the environment override the makefile's variables",
        "--jobserver-auth": "hands make another job server's file descriptors",
        "--jobserver-fds": "hands make another job server's file descriptors",
    },
    positional=Kind.PLAIN,
)

_SCRIPT = "runs a CTest script"
_DASHBOARD = "runs a dashboard script (configure, build, submit)"

CTEST = Grammar(
    "ctest",
    Style.EXACT,
    flags=_names(
        "-V --verbose",
        "-VV --extra-verbose",
        "-Q --quiet",
        "-N --show-only",
        "--output-on-failure",
        "--stop-on-failure",
        "--rerun-failed",
        "--schedule-random",
        "--progress",
        "-U --union",
        "--no-label-summary --no-subproject-summary",
        "--print-labels",
        "--no-tests=error --no-tests=ignore",
    ),
    values={
        "-R": Kind.EXPR,
        "--tests-regex": Kind.EXPR,
        "-E": Kind.EXPR,
        "--exclude-regex": Kind.EXPR,
        "-L": Kind.EXPR,
        "--label-regex": Kind.EXPR,
        "-LE": Kind.EXPR,
        "--label-exclude": Kind.EXPR,
        "-C": Kind.WORD,
        "--build-config": Kind.WORD,
        "-j": Kind.INT,
        "--parallel": Kind.INT,
        "--timeout": Kind.NUMBER,
        "--repeat": Kind.WORD,
        "--repeat-until-fail": Kind.INT,
        "--max-width": Kind.INT,
    },
    refused={
        "-S": _SCRIPT,
        "-SP": _SCRIPT,
        "-SR": _SCRIPT,
        "--script": _SCRIPT,
        "-D": _DASHBOARD,
        "--dashboard": _DASHBOARD,
        "-M": _DASHBOARD,
        "-T": _DASHBOARD,
        "--build-and-test": "configures, builds and runs another project",
        "--test-dir": "runs the tests a CTestTestfile.cmake in another directory lists",
        "--preset": "reads a preset (and its test directory) from CMakePresets.json",
        "-O": "writes a file wherever it is told",
        "--output-log": "writes a file wherever it is told",
        "--output-junit": "writes a file wherever it is told",
        "-I": "may read the tests to run from a file",
        "--tests-information": "may read the tests to run from a file",
        "--resource-spec-file": "reads a resource specification file",
        "--overwrite": "overwrites CTest configuration",
    },
    positional=None,
)

#: The tools with a grammar, by program name (basename) as the allowlist line starts them.
GRAMMARS: dict[str, Grammar] = {
    "pytest": PYTEST,
    "py.test": PYTEST,
    "make": MAKE,
    "gmake": MAKE,
    "ctest": CTEST,
}
