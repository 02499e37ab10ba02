"""The board farm's part of the loop (DESIGN.md §14): a place held from the first state to the
end, its lock checked before an environment rerun, another board when one stays sick.

Labgrid's own trouble is the environment's, never the coder's: a place that cannot be had ends
the run `env_unavailable`; a lost lock is taken back once; a board still sick after environment
recovery is swapped for another with the same tags, once.
"""

from __future__ import annotations

from collections.abc import Callable

from pytest_fwloop.core.machine.fsm import ErrorType, LoopEvent
from pytest_fwloop.core.machine.outcomes import Outcome
from pytest_fwloop.core.machine.recovery import ErrorState
from pytest_fwloop.farm.client import FarmError, PlaceLost
from pytest_fwloop.farm.hold import FarmHold
from pytest_fwloop.loop.services import Services
from pytest_fwloop.loop.state import LoopState, Step, Verdict, failed
from pytest_fwloop.procs.reaper import keep_exit_commands

#: How long a continued run waits for the very place it held before it takes any with the tags.
SAME_PLACE_WAIT = 60.0


def farm_hold(services: Services) -> FarmHold | None:
    """The run's hold on a labgrid place, when `fwloop_labgrid_reserve` asks for one."""
    farm = services.settings.farm
    if farm is None:
        return None
    state_dir = services.workspace.shadow.state_dir
    return FarmHold(
        farm, services.recorder.run_id, lambda commands: keep_exit_commands(state_dir, commands)
    )


def take_board(hold: FarmHold, loop: LoopState, abort: Callable[[], bool], step: Step) -> Verdict:
    """Before anything runs: reserve and lock (a continued run asks for its place first)."""
    earlier = loop.labgrid.place if loop.labgrid is not None else None
    if loop.labgrid is not None:  # a continued run keeps the places its earlier runs held
        hold.held = list(loop.labgrid.held)
    try:
        note = ""
        if earlier:
            try:
                wait = min(hold.settings.wait, SAME_PLACE_WAIT)
                note = hold.acquire(loop.current.number, abort, name=earlier, wait=wait)
            except FarmError as exc:
                hold.release()  # a reservation made before the lock failed is not left queued
                note = f"{earlier} not to be had ({exc}); "
        if not hold.place:
            note += hold.acquire(loop.current.number, abort)
    except FarmError as exc:
        return _unavailable(str(exc))
    loop.labgrid = hold.record()
    return Verdict(Step(step.event, f"{step.reason}; {note}", step.evidence))


def check_board(hold: FarmHold, loop: LoopState, abort: Callable[[], bool]) -> Verdict | str:
    """Before an environment rerun: still this loop's lock (taken back once if lost: what was
    done). A coordinator that does not answer is one more environment retry; a lock lost twice
    ends the run."""
    try:
        note = hold.check(loop.current.number, abort)
    except PlaceLost as exc:
        return _unavailable(str(exc))
    except FarmError as exc:
        return failed(
            ErrorState(ErrorType.TEST_ENV_FAILURE, str(exc), LoopEvent.RECOVER_TO_TEST_SETUP),
            LoopEvent.ENVIRONMENT_FAILED,
        )
    loop.labgrid = hold.record()
    return note


def swap_board(hold: FarmHold, loop: LoopState, abort: Callable[[], bool]) -> str:
    """Environment recovery spent on this board: another one with the same tags, once per run;
    what was done, or empty when no swap is left or none could be had."""
    if len(hold.held) > 1:
        return ""
    try:
        note = hold.swap(loop.current.number, abort)
    except FarmError as exc:
        loop.current.notes.append(f"no other labgrid place to swap to: {exc}")
        return ""
    loop.labgrid = hold.record()
    loop.current.notes.append(note)
    return note


def _unavailable(reason: str) -> Verdict:
    return failed(
        ErrorState(
            ErrorType.TEST_ENV_FAILURE,
            reason,
            LoopEvent.RECOVER_TO_TEST_SETUP,
            terminal_outcome=Outcome.ENV_UNAVAILABLE,
        ),
        LoopEvent.ENVIRONMENT_FAILED,
    )
