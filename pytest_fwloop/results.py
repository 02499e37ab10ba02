"""One iteration's test results at their documented path (docs/extending.md, the hooks' types).

They live in `core/results.py`.
"""

from __future__ import annotations

from pytest_fwloop.core.results import *  # noqa: F403
