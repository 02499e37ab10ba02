"""What a forked child tells the controller as it ends, over a pipe: the installation's modules
it imported (`warm_imports`) and the test files it rewrote (`rewrite_cache`).

One JSON object of string lists, written whole below the pipe's buffer so that the child never
waits for the controller; a message cut short (the child killed while writing) says nothing.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

#: What a child writes at most: below a pipe's buffer, so it never waits for the controller.
LIMIT_BYTES = 60_000


def encode(report: Mapping[str, list[str]]) -> bytes:
    """The report as the child sends it; while too long, each list loses its second half."""
    kept = {key: list(values) for key, values in report.items()}
    data = json.dumps(kept).encode()
    while len(data) > LIMIT_BYTES:
        kept = {key: values[: len(values) // 2] for key, values in kept.items()}
        data = json.dumps(kept).encode()
    return data


def decode(data: bytes) -> dict[str, list[str]]:
    """What a child sent: each list's strings; nothing when it was cut short."""
    try:
        report = json.loads(data)
    except ValueError:
        return {}
    if not isinstance(report, dict):
        return {}
    return {
        str(key): [item for item in values if isinstance(item, str)]
        for key, values in report.items()
        if isinstance(values, list)
    }
