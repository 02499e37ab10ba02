"""What every step of one run works with, built once by the controller and shared read-only."""

from __future__ import annotations

import threading
from dataclasses import dataclass

import pytest

from pytest_fwloop.config.settings import LoopSettings
from pytest_fwloop.loop.rundir import RunRecorder
from pytest_fwloop.loop.terminal import Terminal
from pytest_fwloop.workspace import Workspace


@dataclass(frozen=True)
class Services:
    """The run's collaborators: the step modules take this one value instead of six."""

    config: pytest.Config
    settings: LoopSettings
    recorder: RunRecorder
    workspace: Workspace
    terminal: Terminal
    #: Set when the operator aborts (SIGINT, SIGTERM, `fwloop cancel`).
    abort: threading.Event
