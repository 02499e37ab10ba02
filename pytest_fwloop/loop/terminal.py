"""What the operator sees: a header, one line per state change, and the final summary.

The controller takes over before pytest's terminal reporter exists (DESIGN.md §2), so it writes
plain lines itself; they are meant to read well in a CI log as much as in a terminal.
"""

from __future__ import annotations

import shutil
import sys
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from pytest_fwloop.config.settings import LoopSettings
    from pytest_fwloop.core.machine.fsm import State
    from pytest_fwloop.loop.rundir import RunRecorder

PREFIX = "fwloop:"


#: A terminal that is not a TTY (a CI log) gets a progress line at most this often.
PLAIN_PROGRESS_SECONDS = 10.0


class Terminal:
    """`verbosity` is pytest's (`-q` -1, `-v` 1): `-q` hides live progress and lists no failing
    tests at the end; the default lists their node ids; `-v` adds each one's reason."""

    def __init__(self, stream: TextIO | None = None, verbosity: int = 0) -> None:
        self.stream = stream or sys.stdout
        self.verbosity = verbosity
        isatty = getattr(self.stream, "isatty", None)
        self.tty = bool(isatty and isatty())
        self._progress_shown = False
        self._last_plain = -PLAIN_PROGRESS_SECONDS

    def line(self, text: str = "") -> None:
        self._write(text + "\n")

    def _write(self, text: str) -> None:
        self.stream.write(printable(text, self.stream))
        self.stream.flush()

    def header(self, settings: LoopSettings, recorder: RunRecorder) -> None:
        build = (
            settings.build if isinstance(settings.build, str) else " ".join(settings.build or [])
        )
        members = ",".join(provider.spec for provider in settings.review_panel)
        panel = f" review_panel={settings.options.review_rule}:{members}" if members else ""
        self.line(
            f"{PREFIX} run {recorder.run_id}: coder={settings.coder} "
            f"reviewer={settings.reviewer}{panel} tester={settings.tester or '(none)'} "
            f"build={build or '(none)'} "
            f"max_iter={settings.options.max_iter} mode={settings.mode.value}"
        )
        self.line(f"{PREFIX} records in {recorder.path}")
        if settings.evidence is not None:
            self.line(
                f"{PREFIX} evidence for the coder: {settings.evidence.path} "
                f"({settings.evidence.size_bytes} bytes; its head and tail, until the first "
                "patch is tested)"
            )
        for note in settings.preflight_notes:
            self.line(note)

    def transition(self, iteration: int, source: State, target: State, reason: str) -> None:
        self.line(f"{PREFIX} [{iteration}] {source.value} -> {target.value}: {reason}")

    def analysis(self, iteration: int, headline: str, recommendation: str) -> None:
        """After each iteration (seed 001 §6.3): the numbers on one line, what next on another."""
        if self.verbosity < 0:
            return
        self.line(f"{PREFIX} [{iteration}] analysis: {headline}")
        self.line(f"{PREFIX} [{iteration}] next: {recommendation}")

    def substate(self, iteration: int, where: str, reason: str) -> None:
        """Work inside a state (`STATE/SUB_STATE`), shown with `-v` only: the trace has it."""
        if self.verbosity > 0:
            self.line(f"{PREFIX} [{iteration}]   {where}: {reason}")

    def progress(self, iteration: int, text: str) -> None:
        """Where the running child is: redrawn in place on a TTY, a plain line now and then
        elsewhere."""
        if self.verbosity < 0:
            return
        line = f"{PREFIX} [{iteration}] tests: {text}"
        if self.tty:
            width = shutil.get_terminal_size().columns
            self._write("\r" + line[: max(width - 1, 20)] + "\x1b[K")
            self._progress_shown = True
        elif time.monotonic() - self._last_plain >= PLAIN_PROGRESS_SECONDS:
            self._last_plain = time.monotonic()
            self.line(line)

    def end_progress(self) -> None:
        if self._progress_shown:
            self._write("\n")
            self._progress_shown = False

    def ask(self, prompt: str) -> bool:
        return self.answer(prompt).lower() in ("y", "yes")

    def proposal(self, text: str) -> None:
        """Show a proposal (proposal.md) before the operator is asked about it."""
        self._write(text.rstrip("\n") + "\n")

    def answer(self, prompt: str) -> str:
        """The operator's one-line answer to `prompt`, stripped; "" when none can be read."""
        self._write(prompt)
        try:
            return sys.stdin.readline().strip()
        except (OSError, ValueError):
            return ""

    def summary(
        self,
        *,
        outcome: str,
        final_state: str,
        reason: str,
        rows: Sequence[Sequence[object]],
        closing: Sequence[str],
        failing: Sequence[tuple[str, str]] = (),
        metrics: Sequence[Sequence[object]] = (),
    ) -> None:
        """`failing`: (node id, one-line reason) of each test still failing at the end;
        `metrics`: a row per metric the tests recorded (docs/metrics.md)."""
        from tabulate import tabulate  # only here: not on the way to the baseline's tests

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
        if metrics:
            self.line(
                tabulate(
                    metrics,
                    headers=[
                        "metric",
                        "better",
                        "per iteration",
                        "vs baseline",
                        "tolerance",
                        "verdict",
                    ],
                    tablefmt="simple",
                )
            )
        if failing and self.verbosity >= 0:
            self.line(f"still failing ({len(failing)}):")
            for nodeid, reason in failing:
                self.line(f"  {nodeid}" + (f": {reason}" if self.verbosity > 0 and reason else ""))
        for text in closing:
            self.line(text)


def printable(text: str, stream: TextIO) -> str:
    """`text` as `stream` can encode it. Agent text may hold lone surrogates, and a CI log may be
    ASCII: what the encoding cannot take is shown as backslash escapes rather than crash the run."""
    encoding = getattr(stream, "encoding", None) or "utf-8"
    return text.encode(encoding, "backslashreplace").decode(encoding)
