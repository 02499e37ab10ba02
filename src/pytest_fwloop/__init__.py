"""pytest-fwloop: a closed, auditable coder/reviewer repair loop around a firmware pytest suite."""

from __future__ import annotations

__version__ = "0.1.0"
