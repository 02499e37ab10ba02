"""Finding the host tools the rigs need; under CI a missing tool fails instead of skipping."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

#: sshd lives in sbin, which is not on every user's PATH.
_EXTRA_PATH = "/usr/sbin:/sbin"


def require(program: str, package: str) -> str:
    """The program's path; skip the test when it is missing, fail when the CI variable is set."""
    path = shutil.which(program, path=f"{os.environ.get('PATH', '')}:{_EXTRA_PATH}")
    if path is not None:
        return path
    reason = f"{program} not found; apt-get install --no-install-recommends {package}"
    if os.environ.get("CI", "").lower() not in ("", "0", "false"):
        pytest.fail(f"{reason} (CI is set, so missing tools fail)")
    pytest.skip(reason)


#: Arguments for the pytester runs that exercise the fixtures. Hypothesis' plugin is left out
#: because setting it up costs about a second per in-process run and these suites don't use it.
INNER_ARGS = ("-p", "pytest_fwloop.fixtures", "-p", "no:hypothesispytest")


def path_without(programs: set[str], directory: Path) -> str:
    """A PATH offering every program of the current one except `programs`: symlinks to them in
    `directory`, so a run finds `make` and `git` but not, say, `qemu-system-arm`."""
    directory.mkdir(parents=True, exist_ok=True)
    for folder in os.environ.get("PATH", "").split(os.pathsep):
        if not os.path.isdir(folder):
            continue
        for entry in os.scandir(folder):
            link = directory / entry.name
            if entry.name in programs or link.exists() or not os.access(entry.path, os.X_OK):
                continue
            link.symlink_to(entry.path)
    return str(directory)
