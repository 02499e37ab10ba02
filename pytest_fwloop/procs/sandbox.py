"""The optional build sandbox (`fwloop_build_sandbox`, docs/security.md).

A patch to a Makefile or a build script is source like any other, so the build runs whatever the
coder wrote. With `fwloop_build_sandbox = bwrap` the build runs under bubblewrap: no network, the
whole file system read-only except the tree itself and a private `/tmp`, and the tree's `.git`
and `.fwloop` read-only too, so a build cannot reach a server, write outside the tree, or touch
the snapshots and the journal that restore the tree. No process is started here.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from pathlib import Path

#: Directories of the tree a build must never write, whatever the sandbox's view of the rest.
READ_ONLY_IN_TREE = (".git", ".fwloop")


class SandboxUnavailable(Exception):
    """The configured sandbox cannot run here; the message names the fix."""


def find_bwrap() -> str:
    """The bubblewrap executable, or SandboxUnavailable naming how to get it."""
    found = shutil.which("bwrap")
    if found is None:
        raise SandboxUnavailable(
            "fwloop: fwloop_build_sandbox = bwrap but 'bwrap' is not on PATH; install "
            "bubblewrap (Debian: apt-get install bubblewrap) or set fwloop_build_sandbox = none"
        )
    return found


def bwrap_argv(bwrap: str, command: Sequence[str] | str, root: Path) -> list[str]:
    """`command` (an argv, or a string for /bin/sh) wrapped to run confined under bubblewrap.

    Mount order matters: later binds cover earlier ones, so the tree is writable inside a
    read-only `/`, and its `.git`/`.fwloop` read-only again inside the writable tree. `/tmp` is
    a private tmpfs, but a program living under `/tmp` (a virtualenv there, say) stays visible.
    """
    argv = ["/bin/sh", "-c", command] if isinstance(command, str) else list(command)
    tree = str(root)
    program = shutil.which(argv[0]) or argv[0]
    kept = _tmp_tops([program, os.path.realpath(program)])
    wrapped = [
        bwrap,
        "--die-with-parent",
        "--unshare-net",
        "--unshare-ipc",
        "--ro-bind",
        "/",
        "/",
        "--dev",
        "/dev",
        "--proc",
        "/proc",
        "--tmpfs",
        "/tmp",
        *[arg for top in kept for arg in ("--ro-bind", top, top)],
        "--bind",
        tree,
        tree,
    ]
    for name in READ_ONLY_IN_TREE:
        if (root / name).exists():
            wrapped += ["--ro-bind", str(root / name), str(root / name)]
    return [*wrapped, "--chdir", tree, "--", *argv]


def _tmp_tops(paths: list[str]) -> list[str]:
    """The first-level directories under /tmp that hold any of `paths`, which the private
    /tmp would otherwise hide."""
    tops = []
    for path in paths:
        parts = Path(os.path.abspath(path)).parts
        if len(parts) > 3 and parts[:2] == ("/", "tmp"):
            tops.append(os.path.join("/tmp", parts[2]))
    return sorted(set(tops))
