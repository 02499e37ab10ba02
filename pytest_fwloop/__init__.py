"""pytest-fwloop: a closed, auditable coder/reviewer repair loop around a firmware pytest suite.

The public API is `__all__`. Its names load on first use, so that plain `pytest` (the plugin
installed, no `--fwloop`) imports none of the loop's modules.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pytest_fwloop import hookspecs
    from pytest_fwloop.core.machine.outcomes import Outcome, exit_status
    from pytest_fwloop.core.verdict.convergence import (
        ConvergenceChecker,
        ConvergenceCriteria,
        ConvergenceType,
        ExecutionMode,
        PlateauHandlingStrategy,
        convergence_score,
        determine_convergence,
    )
    from pytest_fwloop.envs.errors import ConsoleTimeout, EnvironmentFailure

__version__ = "0.1.0"

_HOMES = {
    "ConvergenceChecker": "pytest_fwloop.core.verdict.convergence",
    "ConvergenceCriteria": "pytest_fwloop.core.verdict.convergence",
    "ConvergenceType": "pytest_fwloop.core.verdict.convergence",
    "ExecutionMode": "pytest_fwloop.core.verdict.convergence",
    "PlateauHandlingStrategy": "pytest_fwloop.core.verdict.convergence",
    "convergence_score": "pytest_fwloop.core.verdict.convergence",
    "determine_convergence": "pytest_fwloop.core.verdict.convergence",
    "ConsoleTimeout": "pytest_fwloop.envs.errors",
    "EnvironmentFailure": "pytest_fwloop.envs.errors",
    "Outcome": "pytest_fwloop.core.machine.outcomes",
    "exit_status": "pytest_fwloop.core.machine.outcomes",
}

__all__ = [
    "ConsoleTimeout",
    "ConvergenceChecker",
    "ConvergenceCriteria",
    "ConvergenceType",
    "EnvironmentFailure",
    "ExecutionMode",
    "Outcome",
    "PlateauHandlingStrategy",
    "__version__",
    "convergence_score",
    "determine_convergence",
    "exit_status",
    "hookspecs",
]


def __getattr__(name: str) -> Any:
    if name == "hookspecs":
        return importlib.import_module("pytest_fwloop.hookspecs")
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'pytest_fwloop' has no attribute {name!r}")
    return getattr(importlib.import_module(home), name)
