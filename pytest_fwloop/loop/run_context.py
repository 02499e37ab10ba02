"""What a run was started with, gathered once at its start for `summary.json["context"]`.

The user's own git repository is only read (`rev-parse`, with optional locks off), never
written: the loop keeps its snapshots in a repository of its own.
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

from pytest_fwloop.core.records.run_records import RunContext

GIT_SECONDS = 10.0


def gather(config: pytest.Config, rootdir: Path, randomly_seed: int | None) -> RunContext:
    plugins = {
        dist.project_name: dist.version for _, dist in config.pluginmanager.list_plugin_distinfo()
    }
    return RunContext(
        command_line=list(sys.argv),
        python=platform.python_version(),
        pytest=pytest.__version__,
        fwloop=_version("pytest-fwloop"),
        plugins=dict(sorted(plugins.items())),
        git_head=git_head(rootdir),
        randomly_seed=randomly_seed,
    )


def _version(distribution: str) -> str:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown"


def git_head(rootdir: Path) -> str | None:
    """The commit of the repository `rootdir` belongs to, or None (no repository, no git)."""
    env = {**os.environ, "GIT_OPTIONAL_LOCKS": "0"}
    env.pop("GIT_DIR", None)
    env.pop("GIT_WORK_TREE", None)
    try:
        done = subprocess.run(
            ["git", "-C", str(rootdir), "rev-parse", "--verify", "--quiet", "HEAD"],
            capture_output=True,
            text=True,
            timeout=GIT_SECONDS,
            env=env,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    head = done.stdout.strip()
    return head if done.returncode == 0 and head else None
