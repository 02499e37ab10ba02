"""What the coder is told about the failures: clustered by signature and bounded (pure).

A thousand tests failing on one bug should cost the context one excerpt, not a thousand; and no
distinct failure may be crowded out, so every signature keeps at least its headline.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from pytest_fwloop.agents.protocol import Failure
from pytest_fwloop.results import TestRecord

_VOLATILE = (
    (re.compile(r"0x[0-9a-fA-F]+"), "0x?"),
    (re.compile(r"(?<![A-Za-z_])\d+(\.\d+)?"), "N"),
    (re.compile(r"'[^'\n]{0,200}'|\"[^\"\n]{0,200}\""), "'…'"),
    (re.compile(r"\s+"), " "),
)
_LINENO = re.compile(r":\d+:")
#: Smallest excerpt worth sending; below this a cluster keeps only its signature.
MIN_EXCERPT = 160


def signature(record: TestRecord, root: str = "") -> str:
    """A stable name for "the same failure": where it crashed and what it said, minus values."""
    headline = record.crash or _last_line(record.longrepr) or record.outcome
    if record.env_failure:
        headline = record.env_failure
    if root:
        headline = headline.replace(root.rstrip("/") + "/", "")
    location, _, message = headline.partition(": ")
    location = _LINENO.sub(":", location + ":").rstrip(":")
    for pattern, replacement in _VOLATILE:
        message = pattern.sub(replacement, message)
    return f"{record.phase} {location}: {message.strip()}"[:300]


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1].strip() if lines else ""


def excerpt(text: str, budget: int) -> str:
    """Head and tail of `text` within `budget` characters, the tail weighted three to one."""
    if len(text) <= budget:
        return text
    marker = "\n…\n"
    room = max(budget - len(marker), 0)
    head = room // 4
    return text[:head] + marker + text[len(text) - (room - head) :]


def pack_failures(records: Sequence[TestRecord], cap_bytes: int, root: str = "") -> list[Failure]:
    """One entry per failing test; the full excerpt only on the first test of each signature."""
    clusters: dict[str, list[TestRecord]] = {}
    for record in records:
        clusters.setdefault(signature(record, root), []).append(record)
    if not clusters:
        return []
    headline_cost = sum(len(sig) + 64 for sig in clusters)
    budget = max((cap_bytes - headline_cost) // len(clusters), 0)
    failures: list[Failure] = []
    spent = 0
    for sig, members in clusters.items():
        first, rest = members[0], members[1:]
        body = first.longrepr + (f"\n{first.sections}" if first.sections else "")
        if root:
            body = body.replace(root.rstrip("/") + "/", "")
        text = excerpt(body, budget) if budget >= MIN_EXCERPT else ""
        failures.append(Failure(nodeid=first.nodeid, signature=sig, excerpt=text))
        spent += len(sig) + len(text) + len(first.nodeid)
        for index, record in enumerate(rest):
            entry_cost = len(record.nodeid) + 48
            if spent + entry_cost > cap_bytes:
                failures.append(
                    Failure(
                        nodeid=f"… and {len(rest) - index} more",
                        signature=sig,
                        excerpt=f"{len(rest) - index} more tests fail with this signature",
                    )
                )
                break
            failures.append(
                Failure(nodeid=record.nodeid, signature=sig, excerpt=f"same as {first.nodeid}")
            )
            spent += entry_cost
    return failures
