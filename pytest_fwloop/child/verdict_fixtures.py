"""Fixtures that let a suite assert on the loop's gates (DESIGN.md §5).

The controller hands each child run the paths of the validated reviewer verdict for the patch
under test and of the tester's plan; outside the loop, or at the baseline, the fixtures give None.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pytest_fwloop.core.agent_protocol import ReviewerAnswer, TesterAnswer

REVIEW_ENV = "FWLOOP_REVIEW"
TEST_PLAN_ENV = "FWLOOP_TEST_PLAN"


def _load(variable: str) -> str | None:
    path = os.environ.get(variable)
    return Path(path).read_text(encoding="utf-8") if path else None


@pytest.fixture
def fwloop_review() -> ReviewerAnswer | None:
    """The reviewer's validated verdict on the patch under test, or None."""
    text = _load(REVIEW_ENV)
    if text is None:
        return None
    # Imported only here: plain pytest must not pay for the loop's models (pydantic, jsonschema).
    from pytest_fwloop.core.agent_protocol import ReviewerAnswer

    return ReviewerAnswer.model_validate_json(text)


@pytest.fixture
def fwloop_test_plan() -> TesterAnswer | None:
    """The tester's validated plan for this iteration, or None."""
    text = _load(TEST_PLAN_ENV)
    if text is None:
        return None
    from pytest_fwloop.core.agent_protocol import TesterAnswer

    return TesterAnswer.model_validate_json(text)
