"""Where a child run's files go, shared by the child (no pydantic there) and the controller."""

from __future__ import annotations

from pathlib import Path


def progress_path(results_path: Path) -> Path:
    """Where the child streams its progress, next to the results file it writes at the end."""
    return results_path.with_suffix(".jsonl")
