"""Relative POSIX paths as the patch policy sees them: normalised, matched against globs, shown.

The diff reader and the policy both speak of paths this way; keeping it here lets them share one
meaning of a path without importing each other. Pure: no file I/O.
"""

from __future__ import annotations

import re
from functools import lru_cache


def normalize_path(path: str) -> str:
    """Collapse `./`, duplicate slashes and inner `..` of a relative POSIX path.

    A leading `..` that would climb out of the root is kept, so the result still shows the escape.
    """
    parts: list[str] = []
    for part in path.split("/"):
        if part in ("", "."):
            continue
        if part == ".." and parts and parts[-1] != "..":
            parts.pop()
        else:
            parts.append(part)
    prefix = "/" if path.startswith("/") else ""
    return prefix + "/".join(parts)


@lru_cache(maxsize=512)
def _glob_regex(pattern: str) -> re.Pattern[str]:
    segments = [s for s in pattern.split("/") if s not in ("", ".")]
    regex = ""
    for index, segment in enumerate(segments):
        last = index == len(segments) - 1
        if segment == "**":
            # Segments are delimited by "/", so this alternation cannot backtrack badly.
            regex += ".*" if last else "(?:[^/]+/)*"
            continue
        for char in segment:
            regex += "[^/]*" if char == "*" else "[^/]" if char == "?" else re.escape(char)
        if not last:
            regex += "/"
    return re.compile(regex)


def glob_match(path: str, pattern: str) -> bool:
    """Match a relative POSIX path against a glob: `**` spans segments, `*` and `?` do not."""
    return _glob_regex(pattern).fullmatch(normalize_path(path)) is not None


@lru_cache(maxsize=64)
def _any_regex(patterns: tuple[str, ...]) -> re.Pattern[str]:
    return re.compile("|".join(f"(?:{_glob_regex(p).pattern})" for p in patterns))


def matching_glob(path: str, patterns: tuple[str, ...]) -> str | None:
    """The first of `patterns` that `path` matches (as `glob_match`), or None: one match of
    all of them first, since most paths match none (a Zephyr tree's 29,000 files are judged
    against some 40 protected globs at each localization)."""
    if not patterns:
        return None
    normal = normalize_path(path)
    if _any_regex(patterns).fullmatch(normal) is None:
        return None
    return next(p for p in patterns if _glob_regex(p).fullmatch(normal) is not None)


def show_path(path: str) -> str:
    """The path on one printable line (control characters escaped)."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in path)


def root_problem(path: str) -> str | None:
    """Why `path` cannot name a file inside the root as git reads it, or None."""
    if "\0" in path:
        return "contains a NUL byte"
    if "\\" in path:
        return "contains a backslash"
    if path.startswith("/"):
        return "absolute path"
    normal = normalize_path(path)
    if normal == ".." or normal.startswith("../"):
        return "'..' climbs out of the root"
    if not normal:
        return "names the root itself, not a file"
    return None
