"""Which pooled resource (a serial port, an SSH target) a pytest-xdist worker uses.

Worker `gwN` takes entry N. There is no wrap-around: two workers on one board would fight over
its console, so too short a pool is an error, not a silent share.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Sequence

#: What pytest-xdist calls the process when there are no workers.
CONTROLLER_ID = "master"
_WORKER_ID = re.compile(r"gw(\d+)")


class PoolError(ValueError):
    """The pool cannot give this worker an entry of its own."""


def worker_index(worker_id: str) -> int:
    """`gw3` → 3; the controller (`master`, or empty when xdist is absent) → 0."""
    if worker_id in ("", CONTROLLER_ID):
        return 0
    match = _WORKER_ID.fullmatch(worker_id)
    if match is None:
        raise PoolError(f"unknown pytest-xdist worker id {worker_id!r}")
    return int(match[1])


def pick_for_worker(
    entries: Sequence[str], worker_id: str, *, worker_count: int | None = None
) -> str:
    """The entry of worker `worker_id`; PoolError when the pool is shorter than the workers.

    With `worker_count` the check covers every worker, so all of them fail alike.
    """
    index = worker_index(worker_id)
    needed = max(index + 1, worker_count or 0)
    if len(entries) < needed:
        workers = f"{needed} pytest-xdist workers" if needed > 1 else "a worker"
        raise PoolError(f"{len(entries)} entries for {workers}")
    return entries[index]
