"""Hooks a conftest or plugin may implement to change one step of the loop."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from pytest_fwloop.agents.base import Provider
    from pytest_fwloop.core.suite.results import IterationResults


@pytest.hookspec(firstresult=True)
def pytest_fwloop_schema(
    config: pytest.Config, role: str, schema: dict[str, Any]
) -> dict[str, Any] | None:
    """Return a JSON Schema replacing the shipped one for `role` ("coder", "reviewer", "tester").

    `schema` is the shipped schema. firstresult: the first non-None answer wins; the answer must
    still describe the answer shape of DESIGN.md §5, because it is parsed into the same models.
    """


@pytest.hookspec(firstresult=True)
def pytest_fwloop_make_provider(config: pytest.Config, role: str, spec: str) -> Provider | None:
    """Return the provider for one entry of a role's failover list, or None for the built-ins.

    `spec` is the entry as written (`--fwloop-coder=ourbot:fw-team,claude` asks once for
    `ourbot:fw-team` and once for `claude`). The provider needs a `spec` property and
    `call(request, timeout) -> RawAnswer` (`pytest_fwloop.agents.base.Provider`); its answers go
    through the same strict gates as a built-in's. Asked once per entry, at startup, where the specs
    are checked; the loop uses the providers made then.
    """


def pytest_fwloop_iteration_done(
    config: pytest.Config,
    iteration: int,
    results: IterationResults | None,
    verdict: str | None,
    reason: str,
) -> None:
    """Called in the controller after each iteration's convergence check.

    `results` is the iteration's per-test results, `verdict` the convergence type that ends the
    run (None: the loop goes on) and `reason` the checker's reason. For dashboards and
    notifications; what it returns or raises does not steer the loop (an exception ends the run
    as `internal_error`).
    """


def pytest_fwloop_device_logs(item: pytest.Item) -> dict[str, str | os.PathLike[str]] | None:
    """Return the logs a device writes while `item` runs, as {name: path}, or None.

    Called in each child pytest of the loop (never in a plain run) when the test's setup starts
    and after each of its phases; every implementation's logs are taken (not firstresult), and
    a path once named stays the test's (a fixture torn down no longer names its own). For a
    test that failed, the loop reads what each file gained from the start of its setup to the
    end of its teardown (all of it when the path was first named later, or the file shrank):
    its tail goes into the failure the coder is sent, and the whole of it into the round's
    `console/<node id>.<name>.log`. pytest-embedded's DUT logs and labgrid's console logs
    (`--lg-log`) are built in; a conftest hands over any other fixture's log by returning it
    here, from `item.funcargs` once the fixture is set up (docs/environments.md).
    """
