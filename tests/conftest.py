"""Fixtures shared by the test modules; a module that needs a variant names it for what it adds
(`calc_project`, `cli_project`, `uart_workspace`, ...) and builds it on these."""

from __future__ import annotations

import socket
from typing import TYPE_CHECKING

import pytest

from loopkit import LoopProject

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path


@pytest.fixture
def taken_port() -> Iterator[int]:
    """A port on 127.0.0.1 that another socket is listening on."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        yield int(squatter.getsockname()[1])


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> LoopProject:
    """An empty project to run the loop in, with the agents' folder beside it (tests/loopkit.py)."""
    return LoopProject(pytester, monkeypatch)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """An empty firmware folder for an agent to work in; not a git repository: the loop keeps
    its own snapshot."""
    path = tmp_path / "firmware"
    path.mkdir()
    return path
