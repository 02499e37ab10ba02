"""Patch policy (DESIGN.md §6): decide whether the coder may apply a patch, and why not.

The rules and their verdicts (`Violation`) over what a patch writes, as `unified_diff` reads it
and as git itself reads it (`GitReading`), so a patch cannot show the policy one path and make
git write another. Pure: no subprocess, no file I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Literal

from pytest_fwloop.core.change.loose_diff import header_modes
from pytest_fwloop.core.change.posix_paths import (
    matching_glob,
    normalize_path,
    root_problem,
    show_path,
)
from pytest_fwloop.core.change.unified_diff import (
    FileChange,
    PatchParseError,
    parse_patch,
    touched_paths,
)
from pytest_fwloop.core.records.nodeids import COMMAND_NODEID_PREFIX

# Modules that `python -m pytest` would import from the root before the user's own code (the
# child runs with the root first on sys.path), so a file of that name replaces pytest itself.
_SHADOWING_MODULES = ("pytest", "_pytest", "py", "pluggy", "iniconfig", "pytest_fwloop")

DEFAULT_PROTECTED: tuple[str, ...] = (
    # Tests and everything that decides how they are collected and run.
    "tests/**",
    "test/**",
    "testing/**",
    "**/test_*.py",
    "**/*_test.py",
    "**/conftest.py",
    "**/pytest.ini",
    "**/.pytest.ini",
    "**/pytest.toml",
    "**/.pytest.toml",
    "**/tox.ini",
    "**/setup.cfg",
    "**/pyproject.toml",
    "noxfile.py",
    *(f"{name}.py" for name in _SHADOWING_MODULES),
    *(f"{name}/**" for name in _SHADOWING_MODULES),
    "**/sitecustomize.py",
    "**/usercustomize.py",
    "**/*.pth",
    # CI configuration.
    ".github/**",
    ".gitlab-ci.yml",
    ".gitlab/**",
    ".circleci/**",
    ".ci/**",
    ".buildkite/**",
    ".travis.yml",
    "azure-pipelines.yml",
    "bitbucket-pipelines.yml",
    "Jenkinsfile",
    # Version control and the loop's own state: what decides which files a snapshot sees.
    ".git/**",
    "**/.git/**",
    "**/.gitignore",
    "**/.gitattributes",
    ".gitmodules",
    ".fwloop/**",
    "**/.fwloop/**",
)

_SAFE_NEW_FILE_MODE = "100644"
#: The modes of plain files: what git creates as a file, which nothing can be written through.
REGULAR_MODES = (_SAFE_NEW_FILE_MODE, "100755")
_SYMLINK_MODE = "120000"
_GITLINK_MODE = "160000"


@dataclass(frozen=True)
class PatchPolicy:
    """What the coder may change: protected globs and test files win over `allow_paths`
    (empty = anything)."""

    protected: tuple[str, ...] = DEFAULT_PROTECTED
    allow_paths: tuple[str, ...] = ()
    max_files: int = 20
    max_changed_lines: int = 500
    #: Files the suite collected tests from (the baseline's node ids), as normalised paths:
    #: matched exactly, since a file's own name is no glob.
    test_files: frozenset[str] = frozenset()

    def with_test_files(self, paths: Iterable[str]) -> PatchPolicy:
        """This policy with `paths` protected as test files too."""
        return replace(self, test_files=self.test_files | {normalize_path(p) for p in paths})


def test_modules(nodeids: Iterable[str]) -> frozenset[str]:
    """The files these node ids were collected from (`dir/pytest_x.py::test_y[p]` names
    `dir/pytest_x.py`), inside the root: whatever its name, a file pytest takes tests from is a
    test file. A tester command's record (`tester::…`) names none."""
    files = {
        normalize_path(nodeid.split("::", 1)[0])
        for nodeid in nodeids
        if not nodeid.startswith(COMMAND_NODEID_PREFIX)
    }
    return frozenset(path for path in files if root_problem(path) is None)


def protection(path: str, policy: PatchPolicy) -> str | None:
    """Why `path` is protected (the glob it matches, or that tests are collected from it), or
    None when it is not."""
    normal = normalize_path(path)
    if normal in policy.test_files:
        return "the suite collects tests from it"
    glob = matching_glob(normal, policy.protected)
    return None if glob is None else f"matches {glob!r}"


@dataclass(frozen=True)
class Violation:
    """One broken rule; `path` is "" for rules about the whole patch."""

    path: str
    rule: str
    message: str


def check_patch(text: str, policy: PatchPolicy) -> list[Violation]:
    """Every rule the patch breaks under `policy`; an empty list means it may be applied."""
    if not text.strip():
        return [_patch_violation("empty", "the patch is empty; send a diff that changes a file")]
    try:
        changes = parse_patch(text)
    except PatchParseError as err:
        # A diff git would not take may still be rebuilt from it: its entries' types are judged
        # all the same, so a symlink is named as one however the rest of the diff is written.
        kinds = [v for path, mode in header_modes(text) for v in mode_violations(path, [mode])]
        return [_patch_violation("parse", f"not a unified diff: {err}"), *kinds]
    if all(change.is_noop for change in changes):
        return [_patch_violation("empty", "the patch changes nothing; send a diff with changes")]
    violations = [v for change in changes for v in _check_change(change, policy)]
    violations += nesting_violations(changes)
    if len(changes) > policy.max_files:
        violations.append(
            _patch_violation(
                "too_many_files",
                f"changes {len(changes)} files, more than max_files={policy.max_files}; "
                "send a smaller patch",
            )
        )
    changed_lines = sum(c.added_lines + c.removed_lines for c in changes)
    if changed_lines > policy.max_changed_lines:
        violations.append(
            _patch_violation(
                "too_many_lines",
                f"changes {changed_lines} lines, more than "
                f"max_changed_lines={policy.max_changed_lines}; send a smaller patch",
            )
        )
    return violations


def _patch_violation(rule: str, message: str) -> Violation:
    return Violation("", rule, f"patch: {message}")


@dataclass(frozen=True)
class GitReading:
    """What `git apply --numstat` says a patch would write: every path, and the binary ones."""

    paths: tuple[str, ...]
    binary: tuple[str, ...] = ()


def check_git_reading(text: str, reading: GitReading, policy: PatchPolicy) -> list[Violation]:
    """Judge what git itself would write, for a patch that passed `check_patch`.

    Each path git names is checked like the headers' own, and one the headers do not name means
    git reads the diff differently from them (a timestamp after a `+++` name, say), which is
    refused outright: the reviewer and the journal must see the files git really writes.
    """
    named = set(touched_paths(text))
    violations: list[Violation] = []
    for path in reading.paths:
        if normalize_path(path) not in named:
            violations.append(
                Violation(
                    path,
                    "git_disagrees",
                    f"{show_path(path)}: git apply would write this path, which the diff's headers "
                    "name differently; send a plain `git diff` whose headers name each file once",
                )
            )
        violations += path_violations(path, policy)
    violations += [
        Violation(path, "binary", f"{show_path(path)}: git reads a binary patch here; text only")
        for path in reading.binary
    ]
    return violations


def path_violations(path: str, policy: PatchPolicy) -> list[Violation]:
    """The rules one path breaks: outside the root, protected, or not under the allowed paths."""
    problem = root_problem(path)
    if problem is not None:
        return [
            Violation(
                path,
                "outside_root",
                f"{show_path(path)}: path outside the workspace root ({problem}); "
                "patch only files inside the root, by relative path",
            )
        ]
    normal = normalize_path(path)
    why = protection(normal, policy)
    if why is not None:
        return [
            Violation(
                path,
                "protected",
                f"{show_path(path)}: protected path ({why}); the coder may not edit tests, "
                "test or CI configuration, or other protected paths",
            )
        ]
    if policy.allow_paths and matching_glob(normal, policy.allow_paths) is None:
        allowed = ", ".join(repr(g) for g in policy.allow_paths)
        return [
            Violation(
                path,
                "not_allowed",
                f"{show_path(path)}: not under the allowed paths ({allowed}); "
                "edit only files that fwloop_allow_paths allows",
            )
        ]
    return []


def _check_change(change: FileChange, policy: PatchPolicy) -> list[Violation]:
    violations = [v for path in change.paths for v in path_violations(path, policy)]
    path = change.paths[-1]  # the new name, or the old one for a deletion
    shown = show_path(path)
    if change.is_binary:
        violations.append(
            Violation(
                path, "binary", f"{shown}: binary patch; the coder may send text changes only"
            )
        )
    kind = mode_violations(path, (change.old_mode, change.new_mode))
    violations += kind
    problem = None if kind else _mode_problem(change)
    if problem is not None:
        violations.append(
            Violation(
                path,
                "mode_change",
                f"{shown}: {problem}; keep file modes as they are and create files as "
                f"{_SAFE_NEW_FILE_MODE}",
            )
        )
    return violations


def mode_violations(path: str, modes: Iterable[str | None]) -> list[Violation]:
    """The entry's file type, as any of its header lines gives it (`new file mode`, `old mode`,
    `index … MODE`): a symlink, a submodule, or anything but a plain file is refused, since git
    would create it as such, and a later entry could write through it."""
    shown = show_path(path)
    given = set(modes) - {None}
    if _SYMLINK_MODE in given:
        return [
            Violation(
                path,
                "symlink",
                f"{shown}: symlink (mode {_SYMLINK_MODE}); "
                "the coder may not create, edit or delete symlinks",
            )
        ]
    if _GITLINK_MODE in given:
        return [
            Violation(
                path,
                "submodule",
                f"{shown}: submodule or nested repository (mode {_GITLINK_MODE}); "
                "the coder may change plain files only",
            )
        ]
    odd = sorted(str(mode) for mode in given - set(REGULAR_MODES))
    if odd:
        return [
            Violation(
                path,
                "file_type",
                f"{shown}: mode {odd[0]} is not a plain file; the coder may change plain files "
                f"only, created as {_SAFE_NEW_FILE_MODE}",
            )
        ]
    return []


def nesting_violations(changes: Iterable[FileChange]) -> list[Violation]:
    """Entries under a path another entry of the same patch leaves as a file (or link): git
    writes them through it, or fails half way, so the whole patch is refused."""
    files = {normalize_path(change.new_path) for change in changes if change.new_path is not None}
    written = sorted({normalize_path(p) for change in changes for p in change.paths})
    return [
        Violation(
            path,
            "through_entry",
            f"{show_path(path)}: lies under {show_path(parent)}, which this patch makes a file "
            "or a link; send entries that are plain files side by side",
        )
        for path in written
        for parent in _parents(path)
        if parent in files
    ]


#: What `lstat` says of a path in the tree, as the workspace hands it to `tree_violations`.
TreeKind = Literal["missing", "file", "dir", "symlink", "other"]


def tree_violations(path: str, kinds: Sequence[tuple[str, TreeKind]]) -> list[Violation]:
    """`path` written through what the tree holds: `kinds` is each parent's kind (root first)
    then the path's own. A symlink or a non-directory on the way, or a path that is not a plain
    file, is refused before git touches anything."""
    shown = show_path(path)
    *parents, (_, own) = kinds
    for parent, kind in parents:
        if kind in ("symlink", "file", "other"):
            what = "a symlink" if kind == "symlink" else "not a directory"
            return [
                Violation(
                    path,
                    "symlink" if kind == "symlink" else "file_type",
                    f"{shown}: written through {show_path(parent)}, which is {what} in the tree; "
                    "the coder may write plain files in plain directories only",
                )
            ]
    if own in ("symlink", "dir", "other"):
        what = {"symlink": "a symlink", "dir": "a directory"}.get(own, "not a plain file")
        return [
            Violation(
                path,
                "symlink" if own == "symlink" else "file_type",
                f"{shown}: {what} in the tree; the coder may change plain files only",
            )
        ]
    return []


def _parents(path: str) -> list[str]:
    parts = path.split("/")
    return ["/".join(parts[:i]) for i in range(1, len(parts))]


def _mode_problem(change: FileChange) -> str | None:
    if change.old_path is None:
        if change.new_mode in (None, _SAFE_NEW_FILE_MODE):
            return None
        return f"new file with mode {change.new_mode}"
    # A deletion names only the old mode, which is not a change of mode.
    if change.new_path is not None and change.old_mode != change.new_mode:
        return f"mode change ({change.old_mode} -> {change.new_mode})"
    return None
