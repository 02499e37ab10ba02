"""Why the model saw this and not that (DESIGN.md §18; pure): the ranking of one coder request
made a record, and the question `fwloop show RUN --why PATH[:SYMBOL]` asks answered from it."""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence

from pytest_fwloop.core.records.round_records import RankedCandidate, RankingRecord, Sent
from pytest_fwloop.core.request.ranking import Ranked, Ranking, TreeMap

#: Candidates a record lists, ranked and withheld together: the rest are counted.
MAX_AUDITED = 1000

Key = tuple[str, int]


def audit(
    tree: TreeMap,
    ranking: Ranking,
    *,
    iteration: int,
    sources: Collection[Key],
    mapped: Collection[Key],
    shown_before: Collection[Key],
    withheld_because: Callable[[str], str],
) -> RankingRecord:
    """The record of one request: `sources` and `mapped` are the symbols whose code, or whose
    signature only, it carried; `shown_before` those sent earlier in the iteration (left out of
    a coder's second ask); `withheld_because(path)` says why a file may not be shown."""
    rows: list[RankedCandidate] = []
    for place, item in enumerate(ranking.ranked[:MAX_AUDITED], 1):
        key = (item.path, item.index)
        if key in sources:
            sent: Sent = "source"
            why = None
        else:
            sent = "repo_map" if key in mapped else "no"
            why = "sent earlier in this iteration" if key in shown_before else "budget"
        rows.append(_row(tree, item, place, sent, why))
    room = MAX_AUDITED - len(rows)
    for item in ranking.withheld[: max(room, 0)]:
        rows.append(_row(tree, item, None, "no", withheld_because(item.path)))
    listed = len(rows)
    return RankingRecord(
        iteration=iteration,
        files_indexed=len(tree.files),
        ranked=len(ranking.ranked),
        withheld=len(ranking.withheld),
        left_out=len(ranking.ranked) + len(ranking.withheld) - listed,
        candidates=rows,
    )


def _row(
    tree: TreeMap, item: Ranked, place: int | None, sent: Sent, why: str | None
) -> RankedCandidate:
    symbol = tree.symbol((item.path, item.index))
    return RankedCandidate(
        path=item.path,
        symbol=symbol.name,
        start_line=symbol.start_line,
        end_line=symbol.end_line,
        rank=place,
        score=round(item.score, 4),
        signals={kind: round(points, 4) for kind, points in sorted(item.signals.items())},
        factor=round(item.factor, 4),
        reasons=list(item.reasons),
        sent=sent,
        why_not=why,
    )


def why(records: Sequence[tuple[str, RankingRecord]], target: str) -> list[str]:
    """One line per recorded request (`label`, its record) about `PATH` or `PATH:SYMBOL`: its
    rank, score and signals, whether it was sent and why not; or that nothing pointed at it."""
    path, _, symbol = target.partition(":")
    lines: list[str] = []
    for label, record in records:
        found = [
            c for c in record.candidates if c.path == path and (not symbol or c.symbol == symbol)
        ]
        if not found:
            bound = (
                f" (or ranked below the {len(record.candidates)} listed)" if record.left_out else ""
            )
            lines.append(f"{label}: {target} was not ranked: no evidence pointed at it{bound}")
        for c in found:
            place = f"rank {c.rank} of {record.ranked}" if c.rank is not None else "withheld"
            signals = ", ".join(f"{k} {v:g}" for k, v in c.signals.items())
            factor = f" x spectrum {c.factor:g}" if c.factor != 1.0 else ""
            fate = {
                "source": "sent whole",
                "repo_map": "sent as a signature only",
                "no": "not sent",
            }
            reason = f" ({c.why_not})" if c.why_not else ""
            lines.append(
                f"{label}: {c.path}:{c.symbol} (lines {c.start_line}-{c.end_line}) {place}, "
                f"score {c.score:g} = ({signals}){factor}: {fate[c.sent]}{reason}; "
                f"reasons: {'; '.join(c.reasons) or 'none'}"
            )
    return lines
