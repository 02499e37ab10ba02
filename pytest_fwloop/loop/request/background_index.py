"""The code index read in the background between coder requests (issue 44).

A big tree's first request indexes what the build and the failures name and what else its time
allows; the rest waits. It is read here, in a thread, while the loop waits on other things (the
model's answer, the firmware's build, the tests), and learned into the tree's map, so a later
request parses and learns only what it must: on a Zephyr tree of 29,000 files, a request after
a patch stays under a second. The thread runs at the lowest priority (Linux gives a thread its
own nice value), stops within one file's parse when asked, and never outlives the run. The
index is a cache: whatever goes wrong in the thread only leaves files for a later read.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field

from pytest_fwloop.codemap.index import CodeIndex, Learn, ReadBlobs
from pytest_fwloop.workspace.git_run import WorkspaceError

#: The longest one background reading runs: a tree's rest is normally read well within it.
BACKGROUND_SECONDS = 60.0
#: What localization survives (the request goes without code) and the background reading
#: leaves for later: the shadow store's git, the disk, the index's store, a file the parser
#: chokes on.
INDEX_ERRORS = (WorkspaceError, OSError, sqlite3.Error, ValueError, RecursionError)


@dataclass
class BackgroundReading:
    """At most one thread reading the index's unread files; `stop` ends and joins it."""

    _thread: threading.Thread | None = None
    _stop: threading.Event = field(default_factory=threading.Event)

    def start(
        self,
        index: CodeIndex,
        files: Mapping[str, str],
        read: ReadBlobs,
        learn: Learn,
    ) -> None:
        """Read `files`' unindexed ones (in their order) into `index`, each chunk handed to
        `learn` as it is read (what the next request would otherwise learn itself). Touch
        `index`, and whatever `learn` writes, only after `stop`."""
        self.stop()
        self._stop.clear()

        def reading() -> None:
            with contextlib.suppress(OSError, AttributeError):  # no per-thread nice outside Linux
                os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)
            with contextlib.suppress(*INDEX_ERRORS):
                index.symbols(files, read, seconds=BACKGROUND_SECONDS, stop=self._stop, learn=learn)

        self._thread = threading.Thread(target=reading, name="fwloop-index", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()
