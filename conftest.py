"""The repository's root conftest: `pytest .` from here runs the project's own tests.

The examples are projects of their own, each with its own suite and configuration, run from a
copy by `./dev.sh demo` and by tests/test_examples.py; collecting them here would mix the two.
"""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]
collect_ignore = ["examples"]


#: Test dependencies whose plugins change every run they load in: pytest-randomly (orders,
#: seeds) and pytest-embedded (autouse fixtures, a multiprocessing manager per session). Only
#: the stories written for them load them.
INTRUSIVE_PLUGINS = "-p no:randomly -p no:pytest_embedded"


@pytest.fixture
def pytester(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """pytest-randomly and pytest-embedded are test dependencies (tests/test_plugin_compat.py
    runs the loop under the one, tests/test_examples.py under the other); every other pytest a
    test starts runs without them, as this one does (pyproject's addopts), so their orders,
    seeds and fixtures are the ones the stories were written against."""
    monkeypatch.setenv("PYTEST_ADDOPTS", INTRUSIVE_PLUGINS)
    return pytester
