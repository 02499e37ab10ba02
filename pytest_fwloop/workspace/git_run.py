"""Running git for the shadow repository, and reading what it prints.

Every call gets the caller's environment without its GIT_* variables and with no user or system
configuration, so nothing of the user's git setup (hooks, filters, a GIT_DIR of theirs) reaches
the shadow repository; the user's own checkout is only ever located here, never written.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path

_MESSAGE_LIMIT = 400
#: The loop's own folder under the tree's root: never the user's content.
STATE_DIR_NAME = ".fwloop"
#: Git's mode of a submodule's link.
GITLINK = "160000"


class WorkspaceError(Exception):
    """The workspace cannot be snapshotted, restored or locked; the message says what to do."""


def git_env(git_dir: Path, work_tree: Path) -> dict[str, str]:
    """The caller's environment without any GIT_* variable, plus ours: no user or system config."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("GIT_")}
    env.update(
        GIT_DIR=str(git_dir),
        GIT_WORK_TREE=str(work_tree),
        GIT_CONFIG_NOSYSTEM="1",
        GIT_CONFIG_GLOBAL=os.devnull,
        GIT_TERMINAL_PROMPT="0",
        # Paths we pass are file names, never globs.
        GIT_LITERAL_PATHSPECS="1",
    )
    return env


def shadow_config(excludes: str) -> list[str]:
    """`-c` options of every shadow call: no hooks, filters, signing, line-ending or
    attribute rewriting, fsmonitor or background upkeep; the user's ignore rules (`excludes`,
    their checkout's `info/exclude`) still apply."""
    settings = [
        "core.autocrlf=false",
        "core.fileMode=true",
        f"core.hooksPath={os.devnull}",
        "commit.gpgsign=false",
        f"core.excludesFile={excludes}",
        f"core.attributesFile={os.devnull}",
        "core.fsmonitor=false",
        "core.untrackedCache=false",
        "core.quotePath=false",
        "gc.auto=0",
        "maintenance.auto=false",
    ]
    return [arg for setting in settings for arg in ("-c", setting)]


def run_git(
    args: list[str], *, env: dict[str, str], cwd: Path, stdin: bytes | None = None
) -> subprocess.CompletedProcess[bytes]:
    git = shutil.which("git", path=env.get("PATH"))
    if git is None:
        raise WorkspaceError(
            "fwloop: git is not on PATH; install git (2.32 or newer) so fwloop can snapshot "
            "and restore the workspace"
        )
    return subprocess.run(
        [git, *args],
        input=stdin if stdin is not None else b"",
        capture_output=True,
        env=env,
        cwd=cwd,
        check=False,
    )


def start_git(args: list[str], *, env: dict[str, str], cwd: Path) -> None:
    """Start git at a low priority in a session of its own and do not wait for it: work
    that may outlive the run (packing a big store), nothing a later step reads."""
    git = shutil.which("git", path=env.get("PATH"))
    if git is None:
        return
    niced = ["nice"] if shutil.which("nice", path=env.get("PATH")) else []
    # Through a shell that leaves it running and exits: no child of ours to wait for.
    subprocess.run(
        ["sh", "-c", '"$@" </dev/null >/dev/null 2>&1 &', "sh", *niced, git, *args],
        env=env,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        start_new_session=True,
        check=False,
    )


def user_git_dir(root: Path) -> Path | None:
    """The git directory of a checkout whose top is `root` (a `.git` dir or `gitdir:` file)."""
    dot_git = root / ".git"
    if dot_git.is_dir():
        return dot_git
    if dot_git.is_file():
        first_line = dot_git.read_text(errors="replace").partition("\n")[0]
        if first_line.startswith("gitdir: "):
            git_dir = root / first_line[len("gitdir: ") :].strip()
            return git_dir if git_dir.is_dir() else None
    return None


def common_dir(git_dir: Path) -> Path:
    """Where a checkout's `info/` and `objects/` live: a linked worktree's common directory."""
    common = git_dir / "commondir"
    return git_dir / common.read_text().strip() if common.is_file() else git_dir


def exclude_file(git_dir: Path) -> str:
    return str(common_dir(git_dir) / "info" / "exclude")


def encode(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")


def split_z(raw: bytes) -> list[str]:
    return [os.fsdecode(item) for item in raw.split(b"\0") if item]


def join_z(paths: list[str]) -> bytes:
    return b"".join(os.fsencode(p) + b"\0" for p in paths)


def one_line(stderr: bytes) -> str:
    """Git's message without hints, on one bounded line."""
    lines = [line.strip() for line in stderr.decode("utf-8", "replace").splitlines()]
    text = "; ".join(line for line in lines if line and not line.startswith("hint:"))
    text = text or "no message from git"
    return text if len(text) <= _MESSAGE_LIMIT else text[: _MESSAGE_LIMIT - 1] + "…"
