"""The allowlist's judgement (DESIGN.md §6): whether a tester's command may run, and why not.

A command may run only when its first tokens equal one of the allowed prefixes
(`fwloop_allowed_commands`, each line split like a shell would split it) and every argument after
that prefix fits the grammar of the tool the prefix starts (`core/gate/tool_grammars.py`). The
arguments are read as the tool itself reads them (argparse clusters and `@files` for pytest, getopt
for make, whole tokens for ctest), and what is unsure is refused. A program with no grammar there
takes no options after its prefix, only plain words and paths inside the tree. The user's own
prefix is trusted as written (`make test V=1` may be allowlisted literally).

The judgement is a function of the argv, the prefixes and the tree on disk (paths are resolved as
the tool will open them); `procs/allowlist_runner.py` runs what it allows.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from pytest_fwloop.core.gate.tool_grammars import GRAMMARS, PYTEST, Grammar, Kind, Style, Value

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


# -- the tool a prefix starts --------------------------------------------------------------------

_PYTHON = re.compile(r"python(3(\.\d+)?)?")


def grammar_of(prefix: Argv) -> tuple[Grammar, int]:
    """The grammar for what follows `prefix`, and how many of its tokens name the program
    (`python -m pytest` is pytest). A program with no grammar in GRAMMARS takes no options."""
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


def path_argument_problem(value: str, root: Path) -> str | None:
    """Why `value` may not be handed to a trusted command as a file to read (the pre-check's
    files): what the allowlist asks of any argument after a program it knows no grammar of.
    `-x` is an option, `@x` a response file (gcc), `X=y` a variable (make)."""
    if value.startswith("@"):
        return f"`{value}` would read arguments from a file"
    if "\0" in value:
        return "an argument holds a NUL byte"
    problem = _value_problem(value, Kind.PLAIN, root)
    return None if problem is None else f"`{value}` {problem}"


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
