"""Live progress of a child pytest run, from the progress stream it flushes as tests finish.

`Tally` folds the stream's lines into counts (pure); `ProgressWatcher` reads new lines from the
file while the child runs and hands the tally's one-line rendering to the terminal.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pytest_fwloop.core.suite.results import ProgressLine

#: How often the stream is read while the child runs.
POLL_SECONDS = 0.5


class Tally:
    """What a run has done so far: outcomes, how many it collected, the test running now."""

    def __init__(self) -> None:
        self.outcomes: Counter[str] = Counter()
        self.collected = 0
        self.running: str | None = None

    def feed(self, line: ProgressLine) -> None:
        if line.collected is not None:
            self.collected += len(line.collected)
        if line.started is not None:
            self.running = line.started
        if line.finished is not None:
            self.outcomes[line.finished.outcome] += 1
            if self.running == line.finished.nodeid:
                self.running = None

    @property
    def done(self) -> int:
        return sum(self.outcomes.values())

    def render(self, elapsed: float) -> str:
        """`12 passed, 2 failed (14 of 120) | tests/test_uart.py::test_echo | 14s`."""
        counts = ", ".join(f"{n} {name}" for name, n in sorted(self.outcomes.items())) or "0 done"
        of = f" ({self.done} of {self.collected})" if self.collected else ""
        running = f" | {self.running}" if self.running else ""
        return f"{counts}{of}{running} | {elapsed:.0f}s"


class ProgressWatcher:
    """Reads `path` as the child appends to it, until `stop()`; `show` gets each new rendering."""

    def __init__(self, path: Path, show: Callable[[str], None]) -> None:
        self.path = path
        self.show = show
        self.tally = Tally()
        self._offset = 0
        self._pending = b""
        self._stopped = threading.Event()
        self._started = time.monotonic()
        self._thread = threading.Thread(target=self._watch, name="fwloop-progress", daemon=True)

    def __enter__(self) -> ProgressWatcher:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stopped.set()
        self._thread.join()
        self._read()  # the last lines, written as the child ended

    def _watch(self) -> None:
        while not self._stopped.wait(POLL_SECONDS):
            self._read()

    def _read(self) -> None:
        from pytest_fwloop.core.suite.results import (
            ProgressLine,  # pydantic: see `loop/child_runner.read_results`
        )

        try:
            with self.path.open("rb") as stream:
                stream.seek(self._offset)
                chunk = stream.read()
        except OSError:
            return
        # Zero bytes are the stream's room for lines not written yet (`progress_stream`).
        chunk = chunk.split(b"\0", 1)[0]
        if not chunk:
            return
        self._offset += len(chunk)
        *complete, self._pending = (self._pending + chunk).split(b"\n")
        for raw in complete:
            try:
                self.tally.feed(ProgressLine.model_validate_json(raw))
            except ValueError:
                continue
        self.show(self.tally.render(time.monotonic() - self._started))
