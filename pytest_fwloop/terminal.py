"""What the operator sees: a header, one line per state change, and the final summary.

The controller takes over before pytest's terminal reporter exists (DESIGN.md §2), so it writes
plain lines itself; they are meant to read well in a CI log as much as in a terminal.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, TextIO

from tabulate import tabulate

if TYPE_CHECKING:
    from pytest_fwloop.fsm import State
    from pytest_fwloop.rundir import RunRecorder
    from pytest_fwloop.settings import LoopSettings

PREFIX = "fwloop:"


class Terminal:
    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stdout

    def line(self, text: str = "") -> None:
        self._write(text + "\n")

    def _write(self, text: str) -> None:
        self.stream.write(printable(text, self.stream))
        self.stream.flush()

    def header(self, settings: LoopSettings, recorder: RunRecorder) -> None:
        build = (
            settings.build if isinstance(settings.build, str) else " ".join(settings.build or [])
        )
        self.line(
            f"{PREFIX} run {recorder.run_id}: coder={settings.coder} "
            f"reviewer={settings.reviewer} tester={settings.tester or '(none)'} "
            f"build={build or '(none)'} "
            f"max_iter={settings.max_iter} mode={settings.mode.value}"
        )
        self.line(f"{PREFIX} records in {recorder.path}")

    def transition(self, iteration: int, source: State, target: State, reason: str) -> None:
        self.line(f"{PREFIX} [{iteration}] {source.value} -> {target.value}: {reason}")

    def ask(self, prompt: str) -> bool:
        self._write(prompt)
        try:
            answer = sys.stdin.readline()
        except (OSError, ValueError):
            return False
        return answer.strip().lower() in ("y", "yes")

    def summary(
        self,
        *,
        outcome: str,
        final_state: str,
        reason: str,
        rows: Sequence[Sequence[object]],
        closing: Sequence[str],
    ) -> None:
        self.line("=" * 30 + " fwloop summary " + "=" * 30)
        self.line(f"outcome: {outcome} ({final_state})")
        self.line(f"reason: {reason}")
        self.line(
            tabulate(
                rows,
                headers=["iter", "kind", "passed/total", "pass rate", "coder calls", "verdict"],
                tablefmt="simple",
            )
        )
        for text in closing:
            self.line(text)


def printable(text: str, stream: TextIO) -> str:
    """`text` as `stream` can encode it. Agent text may hold lone surrogates, and a CI log may be
    ASCII: what the encoding cannot take is shown as backslash escapes rather than crash the run."""
    encoding = getattr(stream, "encoding", None) or "utf-8"
    return text.encode(encoding, "backslashreplace").decode(encoding)
