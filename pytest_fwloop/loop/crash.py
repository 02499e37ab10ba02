"""Internal errors (DESIGN.md §10), settled in one place wherever they happen.

Outcome `internal_error`, exit status 3, the tree restored to its baseline (or left to the
journal for the next start), the traceback in a file, one line on the terminal.
"""

from __future__ import annotations

import contextlib
import tempfile
import traceback
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import pytest

from pytest_fwloop.core.machine.fsm import State
from pytest_fwloop.core.machine.outcomes import Outcome, describe_crash
from pytest_fwloop.core.records.run_records import CrashSummary, Event, Summary
from pytest_fwloop.loop.rundir import utc_now
from pytest_fwloop.loop.terminal import PREFIX, Terminal

if TYPE_CHECKING:
    from pytest_fwloop.core.records.redaction import Redactor
    from pytest_fwloop.loop.rundir import RunRecorder
    from pytest_fwloop.loop.state import LoopState
    from pytest_fwloop.workspace import Workspace
#: The tracebacks of an internal error, in the run directory.
INTERNAL_ERROR_FILE = "internal-error.txt"


def crash_before_the_run(exc: Exception) -> int:
    """An exception before the run exists: one line, the traceback in a temporary file."""
    text = "".join(traceback.format_exception(exc))
    with tempfile.NamedTemporaryFile(
        "w", prefix="fwloop-internal-error-", suffix=".txt", delete=False, encoding="utf-8"
    ) as stream:
        stream.write(text)
    Terminal().line(
        f"{PREFIX} internal error before the run started: {describe_crash(exc)}; the tree was "
        f"not changed; traceback in {stream.name}"
    )
    return int(pytest.ExitCode.INTERNAL_ERROR)


def stop_on_internal_error(loop: LoopState, recorder: RunRecorder, exc: Exception) -> str:
    """End the run where an exception left it: outcome internal_error, the traceback in the run
    directory and the move to FAILURE in the trace. Where the traceback is, for the terminal."""
    loop.outcome = Outcome.INTERNAL_ERROR
    loop.final_reason = f"internal error: {describe_crash(exc)}"
    pointer = record_internal_error(recorder, [exc])
    with contextlib.suppress(OSError):  # finalize will meet a failing disk too, and settle it
        event = Event.note(
            utc_now(),
            "internal_error",
            (loop.state.value, State.FAILURE.value),
            "internal_error",
            loop.final_reason,
            loop.current.number,
            [INTERNAL_ERROR_FILE],
        )
        recorder.append_event(event.to_json())
    loop.state = State.FAILURE
    return pointer


def record_internal_error(recorder: RunRecorder, crashes: Sequence[BaseException]) -> str:
    """Write the tracebacks of an internal error to INTERNAL_ERROR_FILE; where they are, as
    the terminal says it."""
    text = "\n".join("".join(traceback.format_exception(exc)) for exc in crashes)
    try:
        path = recorder.write_text(INTERNAL_ERROR_FILE, text)
    except OSError as exc:
        return f"its traceback could not be written ({exc})"
    return f"traceback in {path}; please report it with that file"


def settle_crash(
    workspace: Workspace,
    recorder: RunRecorder,
    terminal: Terminal,
    redact: Redactor,
    crashes: Sequence[BaseException],
    duration: float,
) -> int:
    """The end of a run that `finalize` could not give: the tree back to its baseline first,
    then what records can still be written, then one line. Never raises; exit status 3."""
    try:
        restored = workspace.restore_baseline()
        workspace.close(keep_tree=True)
        tree = f"the tree is restored to its baseline ({len(restored)} path(s) reverted)"
    except Exception as exc:  # whatever broke the run may break this too; the journal remains
        tree = (
            f"the tree could not be restored ({describe_crash(exc)}); the next "
            f"`pytest --fwloop` in {workspace.root} restores it from its journal"
        )
    reason = f"internal error: {describe_crash(crashes[0])}"
    if len(crashes) > 1:
        reason += f"; then, ending the run: {describe_crash(crashes[-1])}"
    pointer = record_internal_error(recorder, crashes)
    # What finalize wrote before it failed is kept; only the verdict on it changes.
    ending: dict[str, Any] = {
        "outcome": Outcome.INTERNAL_ERROR,
        "final_state": State.FAILURE.value,
        "reason": reason,
        "exit_status": int(pytest.ExitCode.INTERNAL_ERROR),
        "internal_error": INTERNAL_ERROR_FILE,
        "finished": utc_now(),
        "duration_s": round(duration, 2),
    }
    record: Summary | CrashSummary
    try:
        written = Summary.model_validate_json((recorder.path / "summary.json").read_bytes())
        record = written.model_copy(update=ending)
    except (OSError, ValueError):
        record = CrashSummary(run_id=recorder.run_id, **ending)
    with contextlib.suppress(OSError):
        recorder.write_json("summary.json", record.model_dump(mode="json"))
    with contextlib.suppress(OSError):
        terminal.line(redact(f"{PREFIX} {reason}; {tree}; {pointer}"))
    return int(pytest.ExitCode.INTERNAL_ERROR)
