"""Hooks a conftest or plugin may implement to change one step of the loop."""

from __future__ import annotations

from typing import Any

import pytest


@pytest.hookspec(firstresult=True)
def pytest_fwloop_schema(
    config: pytest.Config, role: str, schema: dict[str, Any]
) -> dict[str, Any] | None:
    """Return a JSON Schema replacing the shipped one for `role` ("coder", "reviewer", "tester").

    `schema` is the shipped schema. firstresult: the first non-None answer wins; the answer must
    still describe the answer shape of DESIGN.md §5, because it is parsed into the same models.
    """
