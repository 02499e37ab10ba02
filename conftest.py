"""The repository's root conftest: `pytest .` from here runs the project's own tests.

The examples are projects of their own, each with its own suite and configuration, run from a
copy by `./dev.sh demo` and by tests/test_examples.py; collecting them here would mix the two.
"""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]
collect_ignore = ["examples"]


@pytest.fixture
def pytester(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """pytest-randomly is a test dependency (tests/test_plugin_compat.py runs the loop under
    it); every other pytest a test starts runs without it, as this one does (pyproject's
    addopts), so their orders and seeds are the ones the stories were written against."""
    monkeypatch.setenv("PYTEST_ADDOPTS", "-p no:randomly")
    return pytester
