"""The allowlist runner (DESIGN.md §6): the only way a tester's command is ever run.

A command runs only when its first tokens equal one of the allowed prefixes
(`fwloop_allowed_commands`, each line split like a shell would split it) and every argument after
that prefix fits the grammar of the tool the prefix starts (pytest, make, ctest): options a tester
may add, what their values may be, and positional arguments that are paths inside the tree. The
arguments are read as the tool itself reads them (argparse clusters and `@files` for pytest, getopt
for make, whole tokens for ctest), and what is unsure is refused. A program with no grammar here
takes no options after its prefix, only plain words and paths inside the tree. The user's own
prefix is trusted as written (`make test V=1` may be allowlisted literally).

It runs never through a shell, in the rootdir, within a timeout, with variables named like secrets
removed from its environment, and with only the tail of its output kept. The judging and the
environment are functions of their arguments and of the tree on disk (paths are resolved as the
tool will open them); `AllowlistRunner.run` is the one edge that starts a process.
"""

from __future__ import annotations

import enum
import os
import re
import shlex
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pytest_fwloop.core.redaction import SECRET_NAME
from pytest_fwloop.procs.supervision import addopts_without_loop, run_logged

#: Output kept of one command, on disk and for the coder: the end is where the verdict is.
OUTPUT_TAIL_BYTES = 64 * 1024

Argv = tuple[str, ...]


def parse_prefixes(lines: Iterable[str]) -> tuple[Argv, ...]:
    """The allowlist from its ini lines; ValueError naming a line that does not split."""
    prefixes = []
    for line in lines:
        try:
            tokens = tuple(shlex.split(line))
        except ValueError as exc:
            raise ValueError(f"{line!r}: {exc}") from None
        if tokens:
            prefixes.append(tokens)
    return tuple(prefixes)


# -- the grammars ---------------------------------------------------------------------------------


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

_PYTHON = re.compile(r"python(3(\.\d+)?)?")
#: Names pytest may read its configuration from, in any directory above its arguments.
PYTEST_CONFIG_NAMES = (
    "pytest.toml",
    ".pytest.toml",
    "pytest.ini",
    ".pytest.ini",
    "pyproject.toml",
    "tox.ini",
    "setup.cfg",
)
#: Directories no argument may point into: the user's repository and the loop's own records.
PRIVATE_DIRS = (".git", ".fwloop")


def grammar_of(prefix: Argv) -> tuple[Grammar, int]:
    """The grammar for what follows `prefix`, and how many of its tokens name the program
    (`python -m pytest` is pytest). A program with no grammar here takes no options."""
    name = os.path.basename(prefix[0])
    if _PYTHON.fullmatch(name) and prefix[1:3] == ("-m", "pytest"):
        return PYTEST, 3
    if name in GRAMMARS:
        return GRAMMARS[name], 1
    return Grammar(prefix[0], Style.EXACT, frozenset(), {}, {}, Kind.PLAIN), 1


# -- reading arguments as the tool reads them ----------------------------------------------------


@dataclass(frozen=True)
class _Item:
    """One option (with its value) or one positional argument, and where it lies in the args."""

    start: int
    end: int  # the last token it takes: `start + 1` when its value is the next token
    option: str | None  # None: a positional argument
    value: str | None = None
    kind: Value | None = None  # what the value (or the positional argument) must be
    problem: str | None = None  # refused as read: an option a tester may not add
    known: bool = True  # False: an option without a value whose arity is not known


def _read(grammar: Grammar, args: Sequence[str]) -> list[_Item]:
    """`args` as the tool splits them into options and positional arguments."""
    items: list[_Item] = []
    index = 0
    positional_only = False
    while index < len(args):
        token = args[index]
        if token == "--" and not positional_only and grammar.style is not Style.EXACT:
            positional_only = True
            index += 1
            continue
        if positional_only or not token.startswith("-") or token == "-":
            item = _Item(index, index, None, token, grammar.positional)
        else:
            item = _read_option(grammar, args, index)
        items.append(item)
        index = item.end + 1
    return items


def _read_option(grammar: Grammar, args: Sequence[str], index: int) -> _Item:
    token = args[index]
    if grammar.style is Style.EXACT:
        return _option(grammar, args, index, token, None)
    if token.startswith("--"):
        name, equals, attached = token.partition("=")
        return _option(grammar, args, index, name, attached if equals else None)
    known = grammar.flags | set(grammar.values) | set(grammar.refused)
    if grammar.style is Style.ARGPARSE:
        # argparse first tries the whole token, then the part before `=` (`-k=EXPR`).
        name, equals, attached = token.partition("=")
        if name in known:
            return _option(grammar, args, index, name, attached if equals else None)
    # A cluster (`-xvs`, `-kfx.mk`): flags, then one option that takes the rest as its value.
    offset = 1
    while token[offset + 1 :] and "-" + token[offset] in grammar.flags:
        offset += 1
    name, rest = "-" + token[offset], token[offset + 1 :]
    if offset > 1 and rest.startswith("=") and grammar.style is Style.ARGPARSE:
        problem = f"`{token}` is ambiguous: Python versions read its `=` differently"
        return _Item(index, index, name, problem=problem, known=False)
    return _option(grammar, args, index, name, rest or None, token)


def _option(
    grammar: Grammar,
    args: Sequence[str],
    index: int,
    name: str,
    attached: str | None,
    written: str | None = None,
) -> _Item:
    """The item for option `name` at `args[index]`, its value attached or in the next token."""
    written = written or args[index]
    if name in grammar.refused:
        return _Item(index, index, name, problem=f"`{name}` {grammar.refused[name]}", known=False)
    if name in grammar.flags:
        if attached is not None:
            return _Item(index, index, name, problem=f"`{name}` takes no value")
        return _Item(index, index, name)
    if name in grammar.values:
        if attached is not None:
            return _Item(index, index, name, attached, grammar.values[name])
        if index + 1 < len(args):
            return _Item(index, index + 1, name, args[index + 1], grammar.values[name])
        return _Item(index, index, name, problem=f"`{name}` needs a value")
    if name in grammar.optional_values:
        kind = grammar.optional_values[name]
        if attached is not None:
            return _Item(index, index, name, attached, kind)
        # make takes the next argument as the value of -j/-l when it is a number (`-j 4`).
        following = args[index + 1] if index + 1 < len(args) else ""
        if kind in (Kind.INT, Kind.NUMBER) and following[:1].isdigit():
            return _Item(index, index + 1, name, following, kind)
        return _Item(index, index, name)
    if not grammar.flags and not grammar.values:
        problem = (
            f"`{written}`: fwloop knows no options of `{grammar.program}`; only plain words "
            "and paths inside the tree may follow its allowlisted prefix"
        )
    else:
        problem = f"`{written}` is not among the {grammar.program} options a tester may add"
    return _Item(index, index, name, problem=problem, known=False)


# -- judging values ------------------------------------------------------------------------------

_INT = re.compile(r"[0-9]+")
_NUMBER = re.compile(r"[0-9]+(\.[0-9]+)?|\.[0-9]+")
_WORD = re.compile(r"[A-Za-z0-9_.:+,][A-Za-z0-9_.:+,-]*")


def _outside(value: str, root: Path) -> str | None:
    """Why path `value`, opened from `root`, is not a place a tester's command may name: both
    the kernel's reading (symlinks first) and a lexical one (`..` first, as pytest does)."""
    top = os.path.realpath(root)
    joined = os.path.join(root, value)
    for resolved in {os.path.realpath(joined), os.path.realpath(os.path.abspath(joined))}:
        if resolved != top and not resolved.startswith(top.rstrip(os.sep) + os.sep):
            return "is outside the tree"
        private = set(Path(os.path.relpath(resolved, top)).parts) & set(PRIVATE_DIRS)
        if private:
            return f"points into {sorted(private)[0]}"
    return None


def _nodeid_paths(nodeid: str) -> set[str]:
    """The path parts pytest reads from `nodeid`: before `::` (its node ids and rootdir
    search), and before `[` then `::` (its collection arguments)."""
    return {nodeid.partition("::")[0], nodeid.partition("[")[0].split("::")[0]}


def _value_problem(value: str, kind: Value, root: Path) -> str | None:
    """Why `value` is not of `kind`, in a few words; None when it is."""
    if isinstance(kind, frozenset):
        return None if value in kind else f"is not one of {', '.join(sorted(kind))}"
    if value.startswith("-"):
        return "starts with `-`, which the tool may still read as an option"
    checks: dict[Kind, re.Pattern[str]] = {Kind.INT: _INT, Kind.NUMBER: _NUMBER, Kind.WORD: _WORD}
    if kind in checks:
        return None if checks[kind].fullmatch(value) else f"is not {kind.value}"
    if kind is Kind.EXPR:
        return None if value else "is empty"
    if kind is Kind.PLAIN and "=" in value:
        return "assigns a variable, which changes what the tool runs"
    paths = _nodeid_paths(value) if kind is Kind.NODEID else {value}
    if "" in paths:
        return "is an empty argument, not a path"
    for path in sorted(paths):
        problem = _outside(path, root)
        if problem is not None:
            return problem
    return None


def _pytest_config(positionals: Sequence[str], root: Path) -> str | None:
    """Which file pytest would read as its configuration instead of the rootdir's: it looks in
    the common ancestor of its path arguments and upwards (`_pytest/config/findpaths.py`)."""
    dirs = []
    for arg in positionals:
        path = Path(os.path.abspath(os.path.join(root, arg.partition("::")[0])))
        if path.exists():
            dirs.append(path if path.is_dir() else path.parent)
    if not dirs:
        return None
    top = Path(os.path.abspath(root))
    ancestor = Path(os.path.commonpath(dirs))
    for base in (ancestor, *ancestor.parents):
        if base == top:
            return None
        for name in PYTEST_CONFIG_NAMES:
            if (base / name).is_file():
                found = (base / name).relative_to(top).as_posix()
                return f"pytest would read `{found}` as its configuration, not the rootdir's"
    return "pytest would look for its configuration outside the tree"


def _tail_problem(prefix: Argv, argv: Sequence[str], root: Path) -> str | None:
    """Why the arguments after `prefix` do not fit its tool's grammar; None when they do."""
    grammar, head = grammar_of(prefix)
    args, trusted = argv[head:], len(prefix) - head
    items = _read(grammar, args)
    for item in items:
        crosses = item.start < trusted <= item.end
        open_ended = not item.known and item.end == trusted - 1 and len(args) > trusted
        if crosses or open_ended:
            return (
                f"the allowlisted `{shlex.join(prefix)}` ends with `{args[item.start]}`, which "
                "may take the command's next argument as its value"
            )
        if item.end < trusted:
            continue  # the user's own line, trusted as written
        if item.problem is not None:
            return item.problem
        if item.value is None:
            continue
        problem = None
        if item.value.startswith("@"):
            problem = "would read arguments from a file"
        elif item.kind is not None:
            problem = _value_problem(item.value, item.kind, root)
        if problem is not None and item.option is None:
            return f"`{item.value}` {problem}"
        if problem is not None:
            return f"`{item.option}` value `{item.value}` {problem}"
        if item.option is None and item.kind is None:
            return f"`{item.value}`: {grammar.program} takes no arguments but its options"
    positionals = [i for i in items if i.option is None]
    if grammar is PYTEST and any(i.start >= trusted for i in positionals):
        return _pytest_config([i.value for i in positionals if i.value is not None], root)
    return None


def blocked_reason(argv: Sequence[str], prefixes: Sequence[Argv], root: Path) -> str | None:
    """Why `argv` may not run from `root`, in one line; None when it starts with an allowed
    prefix and what follows fits that tool's grammar."""
    if any(token == "--fwloop" or token.startswith("--fwloop-") for token in argv):
        return f"{shlex.join(argv)} would start a nested fwloop run"
    if any("\0" in token for token in argv):
        return f"{shlex.join(argv).replace(chr(0), '<NUL>')}: an argument holds a NUL byte"
    matching = sorted((p for p in prefixes if tuple(argv[: len(p)]) == p), key=len, reverse=True)
    if not matching:
        allowed = (
            ", ".join(shlex.join(prefix) for prefix in prefixes) or "nothing (empty allowlist)"
        )
        return (
            f"{shlex.join(argv)} starts with no allowed prefix (fwloop_allowed_commands: {allowed})"
        )
    problems = [_tail_problem(prefix, argv, root) for prefix in matching]
    if None in problems:
        return None
    return f"{shlex.join(argv)}: {problems[0]}"


@dataclass(frozen=True)
class BlockedCommand:
    argv: Argv
    reason: str


@dataclass(frozen=True)
class CommandCheck:
    """A tester's commands split into those that may run and those the allowlist refuses."""

    runnable: tuple[Argv, ...]
    blocked: tuple[BlockedCommand, ...]

    @property
    def only_blocked(self) -> bool:
        """Seed 004's `tester_command_blocked` condition: no runnable command, some blocked."""
        return not self.runnable and bool(self.blocked)


def check_commands(
    commands: Iterable[Sequence[str]], prefixes: Sequence[Argv], root: Path
) -> CommandCheck:
    runnable: list[Argv] = []
    blocked: list[BlockedCommand] = []
    for argv in commands:
        reason = blocked_reason(argv, prefixes, root)
        if reason is None:
            runnable.append(tuple(argv))
        else:
            blocked.append(BlockedCommand(tuple(argv), reason))
    return CommandCheck(tuple(runnable), tuple(blocked))


def command_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """`environ` without variables named like secrets, without `--fwloop` in PYTEST_ADDOPTS,
    and without relative PATH entries, so a command neither sees a key, nor starts another
    loop, nor is a program the coder wrote into the tree (`''` and `.` search the rootdir).
    Nothing else changes: the environment is the user's, and nothing in it comes from an agent."""
    env = {name: value for name, value in environ.items() if not SECRET_NAME.search(name)}
    if "PYTEST_ADDOPTS" in env:
        env["PYTEST_ADDOPTS"] = addopts_without_loop(env["PYTEST_ADDOPTS"])
    if "PATH" in env:
        entries = env["PATH"].split(os.pathsep)
        env["PATH"] = os.pathsep.join(entry for entry in entries if os.path.isabs(entry))
    return env


def output_tail(data: bytes, limit: int = OUTPUT_TAIL_BYTES) -> str:
    """The last `limit` bytes as text, marked when the head was cut."""
    if len(data) <= limit:
        return data.decode("utf-8", errors="replace")
    kept = data[-limit:].decode("utf-8", errors="replace")
    return f"[… {len(data) - limit} bytes cut …]\n{kept}"


class CommandBlocked(Exception):
    """A command outside the allowlist was handed to the runner; it did not run."""


@dataclass(frozen=True)
class CommandResult:
    argv: Argv
    returncode: int | None
    timed_out: bool
    duration: float
    output: str  # the tail, see OUTPUT_TAIL_BYTES
    start_error: str = ""  # why the program could not be started, if it could not
    #: Protected paths the command changed (and the loop put back): a failure whatever its exit.
    tampered: tuple[str, ...] = ()

    @property
    def passed(self) -> bool:
        ended_well = self.returncode == 0 and not self.timed_out
        return ended_well and not self.start_error and not self.tampered

    def describe(self, timeout: float) -> str:
        """How it ended, in a few words."""
        if self.start_error:
            return f"could not start: {self.start_error}"
        if self.tampered:
            return f"changed protected files ({', '.join(self.tampered[:5])}), which were put back"
        if self.timed_out:
            return f"timed out after fwloop_command_timeout={timeout:g}s"
        return f"exit {self.returncode}"


class AllowlistRunner:
    """Runs allowlisted argv lists in `cwd` (the rootdir, the tree their paths must stay in),
    one at a time, with the scrubbed environment."""

    def __init__(
        self,
        prefixes: Sequence[Argv],
        *,
        cwd: Path,
        timeout: float,
        abort: threading.Event,
        environ: Mapping[str, str],
    ) -> None:
        self.prefixes = tuple(prefixes)
        self.cwd = cwd
        self.timeout = timeout
        self.abort = abort
        self.env = command_environment(environ)

    def check(self, commands: Iterable[Sequence[str]]) -> CommandCheck:
        """The tester's commands judged as `run` will judge them."""
        return check_commands(commands, self.prefixes, self.cwd)

    def run(self, argv: Sequence[str], log_path: Path) -> CommandResult:
        """Run one command to completion, its timeout or an abort; its output tail stays in
        `log_path`. CommandBlocked when `argv` is not allowed; judged again here, since the
        tree may have changed (a symlink, a config file) since the plan was checked."""
        reason = blocked_reason(argv, self.prefixes, self.cwd)
        if reason is not None:
            raise CommandBlocked(reason)
        try:
            result = run_logged(
                list(argv),
                cwd=self.cwd,
                log_path=log_path,
                timeout=self.timeout,
                abort=self.abort,
                env=self.env,
            )
        except OSError as exc:
            message = f"{exc.strerror or exc}: {argv[0]}"
            log_path.write_text(message + "\n", encoding="utf-8")
            return CommandResult(tuple(argv), None, False, 0.0, message, start_error=message)
        output = output_tail(log_path.read_bytes())
        log_path.write_text(output, encoding="utf-8")
        return CommandResult(
            tuple(argv), result.returncode, result.timed_out, result.duration, output
        )
