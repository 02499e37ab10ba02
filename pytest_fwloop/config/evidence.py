"""`--fwloop-evidence=FILE`: the failure log of an earlier run, read before anything runs.

Seed 001 §5.3 has INIT read "the target failure information, if any: the last CI log, a log the user
gives". A CI log can be many megabytes, and only its head and tail ever reach the coder
(`core/request/failure_pack.excerpt`), so only those are read; a file that cannot be read is a usage
error, before the baseline.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from pytest_fwloop.core.records.redaction import Redactor

#: Bytes read from each end of the log for every byte of `fwloop_context_bytes`: the excerpt
#: the coder gets is a quarter of the cap at most, weighted three to one towards the tail.
HEAD_PER_CAP = 1
TAIL_PER_CAP = 3
_CUT = "\n…\n"


@dataclass(frozen=True)
class EvidenceLog:
    """The log as given (`path`), its size, and its head and tail, redacted."""

    path: str
    size_bytes: int
    text: str


def read_evidence(
    given: str, origin: str, rootdir: Path, cap: int, redact: Redactor
) -> EvidenceLog | None:
    """The log `given` names (relative to `rootdir`), None when none is; UsageError when it
    cannot be read."""
    if not given:
        return None
    path = rootdir / Path(given).expanduser()
    try:
        with path.open("rb") as stream:
            size = path.stat().st_size
            head = stream.read(HEAD_PER_CAP * cap)
            tail_start = max(size - TAIL_PER_CAP * cap, len(head))
            stream.seek(tail_start)
            tail = stream.read()
    except OSError as exc:
        raise pytest.UsageError(
            f"fwloop: {origin}={given}: cannot read it ({exc.strerror or type(exc).__name__}); "
            "give the failure log of an earlier run (e.g. the last CI log), relative to "
            f"{rootdir}"
        ) from None
    cut = _CUT if tail_start > len(head) else ""
    text = head.decode("utf-8", "replace") + cut + tail.decode("utf-8", "replace")
    return EvidenceLog(given, size, redact(text))
