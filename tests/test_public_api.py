"""The public API (`pytest_fwloop.__all__`) resolves, and loads nothing until it is used."""

from __future__ import annotations

import subprocess
import sys

import pytest

import pytest_fwloop


def test_every_public_name_resolves_to_its_home() -> None:
    from pytest_fwloop import envs
    from pytest_fwloop.core.machine import outcomes
    from pytest_fwloop.core.verdict import convergence

    assert set(pytest_fwloop.__all__) == {*pytest_fwloop._HOMES, "__version__", "hookspecs"}
    for name in pytest_fwloop.__all__:
        assert getattr(pytest_fwloop, name) is not None, name
    assert pytest_fwloop.Outcome is outcomes.Outcome
    assert pytest_fwloop.determine_convergence is convergence.determine_convergence
    assert pytest_fwloop.ConsoleTimeout is envs.errors.ConsoleTimeout
    assert pytest_fwloop.hookspecs.pytest_fwloop_schema is not None


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'Controller'"):
        _ = pytest_fwloop.Controller


def test_importing_the_package_loads_none_of_the_loop() -> None:
    code = (
        "import sys, pytest_fwloop\n"
        "loaded = [m for m in sys.modules if m.startswith('pytest_fwloop.')]\n"
        "print(loaded)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
