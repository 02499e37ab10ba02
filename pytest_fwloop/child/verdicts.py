"""The loop's gates as a suite sees them: the `fwloop_review` and `fwloop_test_plan` fixtures'
side (DESIGN.md §5).

The controller hands each child run the paths of the validated reviewer verdict for the patch
under test and of the tester's plan in two environment variables; outside the loop, or at the
baseline, they are unset and the fixtures give None.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_fwloop.core.records.child_env import REVIEW_ENV, TEST_PLAN_ENV

if TYPE_CHECKING:
    from pytest_fwloop.core.records.agent_protocol import ReviewerAnswer, TesterAnswer


def review() -> ReviewerAnswer | None:
    """The reviewer's validated verdict on the patch under test, or None."""
    text = _load(REVIEW_ENV)
    if text is None:
        return None
    # Imported only here: a test that asks pays for the loop's models (pydantic), no other does.
    from pytest_fwloop.core.records.agent_protocol import ReviewerAnswer

    return ReviewerAnswer.model_validate_json(text)


def tester_plan() -> TesterAnswer | None:
    """The tester's validated plan for this iteration, or None."""
    text = _load(TEST_PLAN_ENV)
    if text is None:
        return None
    from pytest_fwloop.core.records.agent_protocol import TesterAnswer

    return TesterAnswer.model_validate_json(text)


def _load(variable: str) -> str | None:
    path = os.environ.get(variable)
    return Path(path).read_text(encoding="utf-8") if path else None
