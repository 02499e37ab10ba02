"""`fwloop show RUN --why PATH[:SYMBOL]`: why the coder was sent a file's code, or was not,
answered from the run's `rounds/NN/coder-K.ranking.json` (DESIGN.md §18)."""

from __future__ import annotations

import sys
from pathlib import Path

from pydantic import ValidationError

from pytest_fwloop.cli.replay import ReplayError
from pytest_fwloop.cli.runs import find_run
from pytest_fwloop.core.records.round_records import RankingRecord, call_files
from pytest_fwloop.core.request.ranking_audit import why


def why_sent(root: Path, runs: Path, name: str, target: str) -> int:
    """One line per coder request of the run about `target`; 2 when the run or its rankings
    cannot be read, 1 when the run recorded no ranking (no coder request was localized)."""
    try:
        path = find_run(root, runs, name)
    except ReplayError as exc:
        print(exc, file=sys.stderr)
        return 2
    records: list[tuple[str, RankingRecord]] = []
    for folder in sorted((path / "rounds").glob("[0-9]*")):
        for file in call_files(folder, "coder", "ranking.json"):
            label = f"{folder.name}/{file.name}"
            try:
                records.append((label, RankingRecord.model_validate_json(file.read_bytes())))
            except (OSError, ValidationError) as exc:
                first = str(exc).splitlines()[0]
                print(f"fwloop: {path.name}: {label} cannot be read ({first})", file=sys.stderr)
                return 2
    if not records:
        print(
            f"fwloop: run {path.name} recorded no ranking: no coder request of it was localized "
            "(fwloop_source_bytes = 0, or no coder call)",
            file=sys.stderr,
        )
        return 1
    for line in why(records, target):
        print(line)
    return 0
