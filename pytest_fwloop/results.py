"""One iteration's test results at their documented path (docs/extending.md, the hooks' types).

They live in `core/suite/results.py`.
"""

from __future__ import annotations

from pytest_fwloop.core.suite.results import *  # noqa: F403
