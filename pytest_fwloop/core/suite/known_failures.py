"""Known failures (DESIGN.md §15): tests that fail for reasons no source change mends.

The file is one node id a line, `#` starting a comment. Such a test runs and is reported, but a
failing one counts in neither count (as a skip does) and is never sent to the coder; one that
passes counts as any passing test, and the run says so, so the file can lose it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # settings read the file before the baseline's fork, without pydantic
    from pytest_fwloop.core.records.run_records import DeclinedRecord
    from pytest_fwloop.core.suite.results import IterationResults


def read_known_failures(text: str) -> frozenset[str]:
    """The node ids a known-failures file names (blank lines and comments ignored)."""
    ids = (line.split("#", 1)[0].strip() for line in text.splitlines())
    return frozenset(nodeid for nodeid in ids if nodeid)


def with_known(results: IterationResults, known: frozenset[str]) -> IterationResults:
    """`results` with each known failure that did not pass marked, so it counts nowhere."""
    if not known:
        return results
    tests = [
        t.model_copy(update={"known_failure": True}) if t.nodeid in known else t
        for t in results.tests
    ]
    return results.model_copy(update={"tests": tests})


def known_failures_file(
    run_id: str,
    outcome: str,
    declined: Mapping[str, DeclinedRecord],
    unresolved: Iterable[str],
    known: Iterable[str],
) -> str:
    """A run's declined, unresolved and still-known failures in the file's format, each group
    under a comment saying why it is there, for the next run's --fwloop-known-failures."""
    lines = [f"# known failures from fwloop run {run_id} (it ended {outcome})"]
    listed: set[str] = set()
    by_reason: dict[str, list[str]] = {}
    for nodeid, record in sorted(declined.items()):
        by_reason.setdefault(_one_line(record.reason), []).append(nodeid)
    for reason, named in by_reason.items():
        lines += [f"# declined by the coder: {reason}", *named]
        listed.update(named)
    groups = (
        ("still failing when the run ended", unresolved),
        ("known failures that still fail", known),
    )
    for why, nodeids in groups:
        rest = sorted(set(nodeids) - listed)
        if rest:
            lines += [f"# {why}", *rest]
            listed.update(rest)
    return "\n".join(lines) + "\n"


def _one_line(text: str) -> str:
    return " ".join(text.split())[:200]
