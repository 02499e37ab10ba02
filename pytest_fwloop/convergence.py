"""The convergence rules' public home (DESIGN.md §4); they live in `core/verdict/convergence.py`."""

from __future__ import annotations

from pytest_fwloop.core.verdict.convergence import (
    ConvergenceChecker,
    ConvergenceCriteria,
    ConvergenceType,
    ExecutionMode,
    PlateauHandlingStrategy,
    convergence_score,
    determine_convergence,
)

__all__ = [
    "ConvergenceChecker",
    "ConvergenceCriteria",
    "ConvergenceType",
    "ExecutionMode",
    "PlateauHandlingStrategy",
    "convergence_score",
    "determine_convergence",
]
