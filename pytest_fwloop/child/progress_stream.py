"""The child's side of its progress stream: each line is in the file once written, with no
system call a line.

The controller shows the stream live and, when the child dies before writing its results
(pytest-timeout's thread method ends the process with `os._exit`, a crash, the OOM killer's
SIGKILL), rebuilds them from it: a line written must be in the file whatever ends the process
next. A write and a flush per line did that for the price of a system call each, two a test and
most of the reporting's cost on a suite of small tests. Here the file is mapped into memory
(`MAP_SHARED`), so a line is copied straight into the kernel's page cache, which keeps it when
the process dies; readers see it at once, as they saw a flushed line.

Until the stream is closed the file is longer than its lines, zero bytes after the last one:
a reader stops at the first zero byte (`core.results.read_progress`, `ProgressWatcher`); a JSON
line never holds one (`json.dumps` escapes control characters). Closing cuts the file to its
lines. Where no file can be mapped (some network or FUSE file systems), each line is written
at once instead, with a system call, as before.
"""

from __future__ import annotations

import mmap
import os
from pathlib import Path

#: The file's first size, then doubled as lines fill it (a line of a failing test is ~5 KiB).
CHUNK = 1 << 20


class ProgressStream:
    """Lines appended to `path` through a shared mapping of it."""

    def __init__(self, path: Path) -> None:
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        self._end = 0
        self._map: mmap.mmap | None = None
        try:
            self._map = self._mapped(CHUNK)
        except (OSError, ValueError):  # a file system that maps no file: a write a line
            os.ftruncate(self._fd, 0)

    def _mapped(self, size: int) -> mmap.mmap:
        os.ftruncate(self._fd, size)
        return mmap.mmap(self._fd, size)

    def write(self, line: bytes) -> None:
        if self._map is None:
            os.write(self._fd, line)  # unbuffered: in the file, as a flushed line was
            return
        end = self._end + len(line)
        if end > len(self._map):
            # A new mapping of the longer file rather than `resize`, which some systems lack.
            size = max(end, 2 * len(self._map))
            self._map.close()
            self._map = self._mapped(size)
        self._map[self._end : end] = line
        self._end = end

    def close(self) -> None:
        if self._fd < 0:
            return
        if self._map is not None:
            self._map.close()
            os.ftruncate(self._fd, self._end)
        os.close(self._fd)
        self._fd = -1
