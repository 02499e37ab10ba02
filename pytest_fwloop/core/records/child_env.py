"""The environment variables the controller sets for each child pytest run, and the child reads.

One place for both sides: the controller (`loop/child_runner.py`) and what runs inside the child
(`child/verdicts.py`, `child/device_logs.py`, `envs/console_report.py`) live in layers that may
not import each other.
"""

from __future__ import annotations

import hashlib
import re

#: The validated reviewer verdict on the patch under test (the `fwloop_review` fixture).
REVIEW_ENV = "FWLOOP_REVIEW"
#: The tester's validated plan for the iteration (the `fwloop_test_plan` fixture).
TEST_PLAN_ENV = "FWLOOP_TEST_PLAN"
#: Where each test's console transcript goes, `<node id>.log` (`envs/console_report.py`), and
#: a failing test's part of each device log, `<node id>.<log name>.log` (`child/device_logs.py`).
CONSOLE_LOG_DIR_ENV = "FWLOOP_CONSOLE_LOG_DIR"

_LOG_NAME_MAX = 200


def log_file_name(nodeid: str, suffix: str = ".log") -> str:
    """A file name for a node id: unsafe characters become `_`, long ids end in a hash."""
    name = re.sub(r"[^\w.-]+", "_", nodeid).strip("_") or "test"
    if len(name) > _LOG_NAME_MAX:
        digest = hashlib.sha256(nodeid.encode()).hexdigest()[:12]
        name = f"{name[: _LOG_NAME_MAX - 13]}-{digest}"
    return f"{name}{suffix}"
