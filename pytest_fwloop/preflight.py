"""Checks made before the baseline, so a setup mistake costs seconds, not a build and a suite.

Every provider of every role's failover list is checked (a provider that defines `preflight()`:
the program exists, the CLI is on PATH, the server answers), and so is the build's program. Each
problem is one line naming the option and the fix; the run stops with exit status 4.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from pytest_fwloop.agents.base import Provider
from pytest_fwloop.agents.errors import ProviderError


def provider_problem(provider: Provider, role: str) -> str | None:
    """Why `provider` cannot work for `role`, or None; providers without a check pass."""
    check = getattr(provider, "preflight", None)
    if check is None:
        return None
    try:
        check()
    except ProviderError as exc:
        return (
            f"fwloop: --fwloop-{role}: {provider.spec}: {exc.message} (every provider of a "
            "failover list must work at the start; remove the ones that cannot)"
        )
    return None


def missing_build_program(build: list[str] | str, rootdir: Path) -> str | None:
    """The build's program when it is neither on PATH nor a file of the tree, else None."""
    program = "/bin/sh" if isinstance(build, str) else build[0]
    if shutil.which(program, path=os.environ.get("PATH")) is not None:
        return None
    if Path(rootdir, program).is_file():
        return None
    return program
