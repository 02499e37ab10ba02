"""The run directory's models at their documented path (docs/run-directory.md).

They live in `core/records/run_records.py`; a conftest or a dashboard imports them from here.
"""

from __future__ import annotations

from pytest_fwloop.core.records.run_records import *  # noqa: F403
