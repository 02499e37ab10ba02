"""The environment variables the controller sets for each child pytest run, and the child reads.

One place for both sides: the controller (`loop/child_runner.py`) and what runs inside the child
(`child/verdicts.py`, `envs/console_report.py`) live in layers that may not import each other.
"""

from __future__ import annotations

#: The validated reviewer verdict on the patch under test (the `fwloop_review` fixture).
REVIEW_ENV = "FWLOOP_REVIEW"
#: The tester's validated plan for the iteration (the `fwloop_test_plan` fixture).
TEST_PLAN_ENV = "FWLOOP_TEST_PLAN"
#: Where each test's console transcript goes, `<node id>.log` (`envs/console_report.py`).
CONSOLE_LOG_DIR_ENV = "FWLOOP_CONSOLE_LOG_DIR"
