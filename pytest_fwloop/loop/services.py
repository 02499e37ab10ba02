"""What every step of one run works with, built once by the controller and shared read-only."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import pytest

from pytest_fwloop.config.settings import LoopSettings
from pytest_fwloop.core.gate.policy import PatchPolicy
from pytest_fwloop.core.machine.substates import SUBSTATES, SubState
from pytest_fwloop.core.records.run_records import Event
from pytest_fwloop.loop.rundir import RunRecorder, utc_now
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
    #: The patch policy in force: the settings' own, with the files the baseline collected
    #: tests from once it ran (`state.suite_policy`).
    policy: Callable[[], PatchPolicy]

    def substate(
        self, iteration: int, name: SubState, reason: str, evidence: Sequence[str] = ()
    ) -> None:
        """Say in the trace what was done inside the state (seed 001 §3.2): a line of kind
        `substate`, not a move; shown on the terminal with `-v`."""
        state = SUBSTATES[name].state
        event = Event.note(
            utc_now(),
            "substate",
            (state.value, state.value),
            name.value,
            reason,
            iteration,
            list(evidence),
        )
        self.recorder.append_event(event.to_json())
        where = f"{state.value}/{name.value}"
        self.terminal.substate(iteration, where, self.recorder.redact(reason))
