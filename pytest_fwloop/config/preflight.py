"""Checks made before the baseline, so a setup mistake costs seconds, not a build and a suite.

Every provider of every role's failover list is checked (a provider that defines `preflight()`:
the program exists, the CLI is on PATH, the server answers), and so is the build's program. A
role none of whose providers passes, or a missing build program, stops the run with one line
naming the option and the fix (exit status 4). A provider that fails while another of its list
passes is named in one line at the start and stays in the list, so a portable list
(`claude,openai:…`) keeps working where one of them is not installed.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from pytest_fwloop.agents.base import Provider
from pytest_fwloop.agents.errors import ProviderError


def role_problems(providers: list[Provider], origin: str) -> list[str]:
    """One line for each of the role's providers that cannot work now; those without a check
    pass."""
    problems = []
    for provider in providers:
        check = getattr(provider, "preflight", None)
        if check is None:
            continue
        try:
            check()
        except ProviderError as exc:
            problems.append(f"fwloop: {origin}: {provider.spec}: {exc.message}")
    return problems


def missing_build_program(build: list[str] | str, rootdir: Path) -> str | None:
    """The build's program when it is neither on PATH nor a file of the tree, else None."""
    program = "/bin/sh" if isinstance(build, str) else build[0]
    if shutil.which(program, path=os.environ.get("PATH")) is not None:
        return None
    if Path(rootdir, program).is_file():
        return None
    return program
