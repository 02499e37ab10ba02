"""The pre-check before the build (seed 001 §5.6: "no obvious syntax error, a light static check"):
which files of an applied patch it judges, and the built-in check of Python files.

A patch that cannot compile is sent back in seconds instead of after a full build. Python files
are compiled, never imported or run; `fwloop_precheck` is the operator's own command, handed the
written files that match `fwloop_precheck_files`. Pure: reading and running happen in
`loop/steps/precheck.py`.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass

from pytest_fwloop.core.change.posix_paths import glob_match, normalize_path
from pytest_fwloop.core.change.unified_diff import PatchParseError, parse_patch
from pytest_fwloop.core.gate.allowlist import Argv


@dataclass(frozen=True)
class PrecheckSettings:
    """`fwloop_precheck` (None: no command), the globs of the files it is given (empty: none,
    it runs alone), and its timeout in seconds."""

    command: Argv | None
    files: tuple[str, ...]
    timeout: float


def written_paths(patch: str) -> list[str]:
    """The paths the patch leaves a file at (deleted ones aside), sorted; none when it does not
    parse (the gate never lets such a patch through)."""
    try:
        changes = parse_patch(patch)
    except PatchParseError:
        return []
    return sorted({normalize_path(c.new_path) for c in changes if c.new_path is not None})


def command_files(written: Sequence[str], globs: Sequence[str]) -> list[str]:
    """The written paths that `fwloop_precheck` is given: those matching one of `globs`."""
    return [path for path in written if any(glob_match(path, glob) for glob in globs)]


def python_files(written: Sequence[str]) -> list[str]:
    """The written Python files the built-in check compiles."""
    return [path for path in written if path.endswith(".py")]


def python_problem(path: str, source: bytes) -> str | None:
    """Why `source` does not compile as Python (`path:line:col: message` and the line), or
    None. Compiling runs none of its code; warnings (an invalid escape) are not errors here."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compile(source, path, "exec", dont_inherit=True)
    except SyntaxError as exc:
        where = f"{path}:{exc.lineno or 0}:{exc.offset or 0}"
        text = (exc.text or "").rstrip("\n")
        caret = f"\n    {' ' * max((exc.offset or 1) - 1, 0)}^" if text else ""
        shown = f"\n    {text}{caret}" if text else ""
        return f"{where}: {type(exc).__name__}: {exc.msg}{shown}"
    except (ValueError, RecursionError) as exc:  # NUL bytes, bad encoding, too deep
        return f"{path}: {type(exc).__name__}: {exc}"
    return None
