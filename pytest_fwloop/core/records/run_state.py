"""`state.json`: what another process needs to continue a run (DESIGN.md §11, seed 002).

The controller rewrites it (atomically, through the recorder) after every move, so a run stopped
anywhere, by its verdict, by the operator or by SIGKILL, can be continued from its last state.
It is read back whole or not at all: a state of a newer schema, of another run, or one that
does not parse is refused with one line naming why, never half-used.
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from pytest_fwloop.core.machine.fsm import IterationKind
from pytest_fwloop.core.records.agent_protocol import CoderAnswer, MustFix
from pytest_fwloop.core.records.run_records import (
    AnalysisRecord,
    CandidateRound,
    DecisionRecord,
    DeclinedRecord,
    LabgridRecord,
)

STATE_FILE = "state.json"
#: Raised whenever a reader of an older version could misread a newer file.
STATE_SCHEMA = 1


class StateError(Exception):
    """A run that cannot be continued; the message is the one line the operator reads."""


class SavedIteration(BaseModel):
    """An iteration as the loop holds it; its results stay in `rounds/NN/results.json`."""

    number: int = Field(ge=1, description="1-based iteration number")
    kind: IterationKind = Field(description="what the iteration was for")
    measured: bool = Field(description="its tests ran to the end (`rounds/NN/results.json`)")
    patch: str = Field(default="", description="the patch the reviewer approved, or empty")
    patch_summary: str = Field(default="", description="the coder's summary and the files")
    checkpoint: str = Field(
        default="",
        description="shadow snapshot of the tree it tested: the paths the loop wrote, over the "
        "baseline",
    )
    coder_calls: int = Field(default=0, description="coder calls made in it")
    review_rounds: int = Field(default=0, description="reviews that asked for changes")
    convergence_type: str | None = Field(default=None, description="its verdict, or null")
    reason: str = Field(default="", description="the convergence checker's reason")
    score: float | None = Field(default=None, description="the convergence score")
    notes: list[str] = Field(default_factory=list, description="what happened in it")
    executed: int = Field(default=0, description="test executions, reruns included")
    decisions: list[DecisionRecord] = Field(
        default_factory=list, description="each coder answer, judged (decision records)"
    )
    analysis: AnalysisRecord | None = Field(
        default=None, description="the analysis after it (`task-timeline.json`'s)"
    )
    candidate_rounds: list[CandidateRound] = Field(
        default_factory=list,
        description='each choice among K candidates made in it (`summary.json["candidates"]`)',
    )


#: What a SavedIteration copies of an `Iteration` (`loop/operator/continuation.py` copies it back).
SAVED_FIELDS = tuple(name for name in SavedIteration.model_fields if name != "measured")


class Invocation(BaseModel):
    """How the run was started: `fwloop rerun` and every continuation start pytest so again."""

    args: list[str] = Field(description="pytest's arguments, as given")
    dir: str = Field(description="the directory pytest was started in")


class RunState(BaseModel):
    """`state.json`: everything another process needs to continue the run."""

    model_config = ConfigDict(extra="forbid")

    schema_version: int = Field(
        description=f"{STATE_SCHEMA}; a newer version is refused, never half-read"
    )
    revision: int = Field(
        ge=1,
        description="raised by every write; an operator's command names the revision it judged",
    )
    run_id: str = Field(description="the run (its directory's name)")
    invocation: Invocation = Field(description="how pytest was started")
    rootdir: str = Field(description="the tree the loop edits")
    max_iter: int = Field(description="the iteration limit in force")
    fsm_state: str = Field(description="the state the loop is in, or ended in")
    outcome: str | None = Field(
        description="how the run ended; null while it runs, or when its controller was killed"
    )
    reason: str = Field(default="", description="why it ended")
    baseline: str = Field(
        description="snapshot of the tree the current controller started from (a killed run "
        "is recovered to it)"
    )
    left_tree: str = Field(
        description="snapshot of the tree the run left: its baseline, or the fixed tree on "
        "success; a continuation is refused if a path it writes changed since"
    )
    iterations: list[SavedIteration] = Field(description="every iteration, baseline first")
    pending: CoderAnswer | None = Field(
        default=None,
        description="the coder's answer for the iteration in flight: a proposal awaiting the "
        "operator, or a patch on its way through gate, build and tests",
    )
    must_fix: list[MustFix] = Field(default_factory=list, description="for the next coder call")
    constraints: list[str] = Field(default_factory=list, description="for the next coder call")
    build_diagnostics: str = Field(default="", description="for the next coder call")
    strategy_switches: int = Field(default=0, description="plateau strategy switches so far")
    usage: dict[str, object] = Field(
        default_factory=dict, description="the agents' usage so far (`summary.json` `usage`)"
    )
    labgrid: LabgridRecord | None = Field(
        default=None, description="the labgrid place held (`fwloop resume` asks for it first)"
    )
    declined: dict[str, DeclinedRecord] = Field(
        default_factory=dict, description="the tests the coder declined, by node id"
    )

    @property
    def in_flight(self) -> SavedIteration | None:
        """The last iteration, if its tests never finished."""
        last = self.iterations[-1] if self.iterations else None
        return last if last is not None and not last.measured else None


def load_state(run_dir: Path) -> RunState:
    """The run's state, whole; StateError with the reason when it cannot be used."""
    path = run_dir / STATE_FILE
    name = run_dir.name
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise StateError(
            f"fwloop: run {name} has no {STATE_FILE} (recorded by an older pytest-fwloop, or "
            "it died before its first step); it cannot be continued: start a new run with "
            "pytest --fwloop"
        ) from None
    except (OSError, ValueError) as exc:
        raise StateError(
            f"fwloop: {path} is unreadable ({exc}); run {name} cannot be continued"
        ) from None
    version = document.get("schema_version") if isinstance(document, dict) else None
    if not isinstance(version, int) or isinstance(version, bool):
        raise StateError(f"fwloop: {path} is not a pytest-fwloop state (no schema_version)")
    if version > STATE_SCHEMA:
        raise StateError(
            f"fwloop: run {name} was written by a newer pytest-fwloop (state schema {version}; "
            f"this version reads {STATE_SCHEMA}); upgrade pytest-fwloop to continue it"
        )
    try:
        state = RunState.model_validate(document)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise StateError(f"fwloop: {path} is damaged ({where}: {first['msg']})") from None
    if state.run_id != name:
        raise StateError(f"fwloop: {path} belongs to run {state.run_id}, not to {name}")
    return state
