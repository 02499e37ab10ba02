"""How the spectrum weighs in the ranking (DESIGN.md §16; pure): `core/request/ochiai.py` says how
suspicious each line is, this module what that makes of each symbol.

Symbols are `(path, index)` keys into the files' symbols (`core/request/code_symbols.py`), as the
ranking (`core/request/ranking.py`) holds them.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence

from pytest_fwloop.core.request.code_symbols import FileSymbols
from pytest_fwloop.core.request.ochiai import Suspicion, Suspicions

Key = tuple[str, int]
#: A symbol's most suspicious line and its suspicion.
Suspect = tuple[int, Suspicion]

#: What a symbol holding a line of suspicion 1.0 gets, and the least suspicion that counts: a
#: line most passing tests also run says nothing.
SPECTRUM_POINTS = 80.0
MIN_SUSPICION = 0.2
#: What is left of a Python symbol's points when the run recorded a spectrum and no failing
#: test ran it.
UNRUN = 0.1


def most_suspicious(files: Mapping[str, FileSymbols], suspicions: Suspicions) -> dict[Key, Suspect]:
    """Each symbol's most suspicious line (Ochiai, then fewer passing tests break a tie: where
    no test passed, every score is 0 and Ochiai still tells the lines all failures ran)."""
    by_path: dict[str, list[Suspect]] = defaultdict(list)
    for (path, line), suspicion in suspicions.lines.items():
        if path in files:
            by_path[path].append((line, suspicion))
    best: dict[Key, Suspect] = {}
    for path, lines in by_path.items():
        holder = files[path].innermost(line for line, _ in lines)
        for line, suspicion in sorted(lines, key=lambda site: site[0]):
            if line not in holder:
                continue
            key = (path, holder[line])
            held = best.get(key)
            if held is None or _standing(suspicion) > _standing(held[1]):
                best[key] = (line, suspicion)
    return best


def _standing(suspicion: Suspicion) -> tuple[float, float, int]:
    return suspicion.score, suspicion.ochiai, -suspicion.passed


def messengers(
    files: Mapping[str, FileSymbols],
    definitions: Mapping[str, set[Key]],
    keys: Iterable[Key],
    raised: set[str],
) -> list[Key]:
    """The classes of the exceptions the failures raised, and their methods: only failing
    tests run them (the error is built and printed), so their lines look most suspicious of
    all, yet they carry the news of a defect rather than hold it."""
    spans = [
        (path, symbol.start_line, symbol.end_line)
        for name in raised
        for path, index in definitions.get(name, ())
        if (symbol := files[path].symbols[index]).kind == "class"
    ]
    found: list[Key] = []
    for key in keys:
        symbol = files[key[0]].symbols[key[1]]
        if any(
            path == key[0] and start <= symbol.start_line and symbol.end_line <= end
            for path, start, end in spans
        ):
            found.append(key)
    return found


def spectrum_points(
    best: Mapping[Key, Suspect], measured: Mapping[str, str]
) -> Iterator[tuple[Key, float, str, int]]:
    """(symbol, points, reason, line): each symbol's most suspicious line's score, squared (a
    line only failing tests ran stands well above one half the passing tests ran too). The
    reason of a line another tool measured names it: the C spectrum (gcov) chose that code."""
    for key, (line, suspicion) in best.items():
        if suspicion.score >= MIN_SUSPICION:
            tool = measured.get(key[0])
            said = suspicion.reason(line)
            reason = f"C spectrum ({tool}): {said}" if tool else said
            yield key, SPECTRUM_POINTS * suspicion.score**2, reason, line


def unrun_damping(
    files: Mapping[str, FileSymbols],
    keys: Iterable[Key],
    best: Mapping[Key, Suspect],
    measured: Mapping[str, str],
) -> dict[Key, float]:
    """The factor each symbol's points are multiplied by where the spectrum measures its file
    (Python, and the functions of C another tool measured: gcov, QEMU): the failures' text
    counts as far as the failing tests ran the code. Code none of them ran keeps `UNRUN` of its
    points (module-level code runs at import, outside any test, and counts as unrun; a defect may
    also sit in code that should have run and did not, or ran in a subprocess); code the passing
    tests run too is less likely than code only the failures ran. C's tables, macros and types
    hold no line a C tool counts (a macro's code runs on the lines that expand it): the
    spectrum says nothing of them. The factor is Ochiai's, not the score's: where no test
    passed (a suite whose every test a bug breaks), no line stands above another, yet the code
    the failures ran is still where the defect is. Unmeasured files are not in the result."""
    factors: dict[Key, float] = {}
    for key in keys:
        file = files[key[0]]
        measures = file.language == "python" or (
            key[0] in measured and file.symbols[key[1]].kind == "function"
        )
        if measures:
            found = best.get(key)
            factors[key] = UNRUN + (1.0 - UNRUN) * (found[1].ochiai if found is not None else 0.0)
    return factors


def taking_turns(
    ranked: Sequence[Key], best: Mapping[Key, Suspect], by_text: Sequence[Key] = ()
) -> list[Key]:
    """`ranked` with the spectrum's own order and `by_text` (what the spectrum says nothing
    of, by the evidence of the failures' text) taking turns with it, place by place: where many
    failures share much code, the suspicion of the line at fault is only a little above the
    rest, and all the evidence summed can bury it; by the spectrum alone it stays near the top.
    And what the spectrum cannot count (a command table, a macro, a type: no line of them runs)
    keeps a voice through what the output shows of it. As in Agentless, the candidates of each
    way of localizing go forward. Without a spectrum, `ranked` as it is."""
    present = set(ranked)
    by_spectrum = sorted(
        (key for key, (_, s) in best.items() if s.score >= MIN_SUSPICION and key in present),
        key=lambda key: (-best[key][1].score, best[key][1].passed, key),
    )
    if not by_spectrum:
        return list(ranked)
    turns: dict[Key, None] = {}
    others = [iter(by_spectrum), iter(k for k in by_text if k in present)]
    for key in ranked:
        turns.setdefault(key)
        for way in others:
            other = next(way, None)
            if other is not None:
                turns.setdefault(other)
    return list(turns)
