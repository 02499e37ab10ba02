"""The ranked code as a request carries it (DESIGN.md §16): `sources`, `test_sources` and
`repo_map` within their byte budgets (pure).

Code goes as whole units a model can patch: a whole small file, else a whole function (type,
macro, table), with its first line's number, so a diff written from it has the right hunk
numbers. A function longer than `MAX_CHUNK_BYTES` is cut to a window around the line the
evidence named. Sizes are wire bytes, as in `core/request/failure_pack.py`.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence

from pytest_fwloop.core.change.lines import text_lines
from pytest_fwloop.core.records.agent_protocol import MapEntry, SourceChunk
from pytest_fwloop.core.request.code_symbols import FileSymbols, Symbol
from pytest_fwloop.core.request.ranking import Ranked, TreeMap

#: A file this small goes whole: its includes, macros and neighbours are context a fix needs.
SMALL_FILE_BYTES = 4096
#: The longest single chunk; a longer function is cut to a window around the named line.
MAX_CHUNK_BYTES = 4096
#: Lines sent either side of a whole function: a diff's hunk needs context beyond its ends
#: (`git apply` anchors a hunk with no context after its change at the end of the file).
MARGIN = 2
#: The longest test function sent; the head carries the calls and the assertions.
MAX_TEST_BYTES = 3072
#: Files of the repo map shown with their signatures (the best-ranked); the rest by path.
DETAILED_FILES = 10
#: Signatures listed for a file the evidence points at.
RANKED_SIGNATURES = 40
_SIGNATURE_CHARS = 120


def wire_size(item: SourceChunk | MapEntry) -> int:
    """Bytes `item` takes in the request's JSON, with its separator."""
    return len(json.dumps(item.model_dump(), ensure_ascii=False).encode()) + 1


def pack_sources(
    tree: TreeMap,
    ranked: Sequence[Ranked],
    texts: Mapping[str, str],
    budget: int,
) -> list[SourceChunk]:
    """The best-ranked code within `budget` bytes; `texts` holds the files it may quote."""
    chunks: list[SourceChunk] = []
    covered: dict[str, list[tuple[int, int, int]]] = {}
    split: dict[str, tuple[list[str], int]] = {}  # each file's lines and bytes, made once
    spent = misses = 0
    for item in ranked:
        text = texts.get(item.path)
        if text is None:
            continue
        if item.path not in split:
            split[item.path] = (text_lines(text), len(text.encode()))
        lines, size = split[item.path]
        symbol = tree.symbol((item.path, item.index))
        start, end, name = _span(tree.files[item.path], symbol, lines, size, item.line)
        holder = next(
            (i for a, b, i in covered.get(item.path, ()) if a <= start and end <= b), None
        )
        if holder is not None:
            spent += _credited(chunks, holder, symbol.name, item.reasons, budget - spent)
            continue
        body = _lines(lines, start, end)
        chunk = SourceChunk(
            path=item.path,
            start_line=start,
            end_line=end,
            symbol=name,
            reason="; ".join(item.reasons),
            text=body,
        )
        size = wire_size(chunk)
        if spent + size > budget:
            misses += 1
            if misses >= 8:  # the rest are ranked lower and no smaller on average
                break
            continue
        spent += size
        chunks.append(chunk)
        covered.setdefault(item.path, []).append((start, end, len(chunks) - 1))
    return chunks


def _credited(
    chunks: list[SourceChunk], at: int, name: str, reasons: Sequence[str], room: int
) -> int:
    """A chunk holding a symbol that an execution spectrum (gcov, QEMU) chose, though the chunk
    was chosen for another of its symbols (a whole small file), says so: a model is told which
    code the failing tests ran. The bytes it took, 0 when there is no room or nothing to say."""
    chunk = chunks[at]
    spectral = next((r for r in reasons if r.startswith("C spectrum")), None)
    if spectral is None or "C spectrum" in chunk.reason:
        return 0
    credited = chunk.model_copy(update={"reason": f"{chunk.reason}; {name}: {spectral}"})
    grown = wire_size(credited) - wire_size(chunk)
    if grown > room:
        return 0
    chunks[at] = credited
    return grown


def _span(
    file: FileSymbols, symbol: Symbol, lines: Sequence[str], size: int, line: int | None
) -> tuple[int, int, str]:
    """Lines to send for `symbol` of a file of `size` bytes: the whole small file, the symbol,
    or a window of it."""
    if size <= SMALL_FILE_BYTES:
        return 1, max(file.line_count, 1), f"{symbol.name} (whole file)"
    start, end = symbol.start_line, symbol.end_line
    body = "\n".join(lines[start - 1 : end])
    if len(body.encode()) <= MAX_CHUNK_BYTES:
        return max(start - MARGIN, 1), min(end + MARGIN, len(lines)), symbol.name
    # A window around the named line (else the head), grown a line at a time on each side.
    centre = line if line is not None and start <= line <= end else start
    low = high = centre
    size = len(lines[centre - 1].encode()) + 1
    while True:
        grown = False
        for candidate in (high + 1, low - 1):
            if start <= candidate <= end and candidate not in (low, high):
                cost = len(lines[candidate - 1].encode()) + 1
                if size + cost <= MAX_CHUNK_BYTES:
                    size += cost
                    low, high = min(low, candidate), max(high, candidate)
                    grown = True
        if not grown:
            return low, high, f"{symbol.name} (lines {low}-{high} of {start}-{end})"


def _lines(lines: Sequence[str], start: int, end: int) -> str:
    return "".join(line + "\n" for line in lines[start - 1 : end])


def repo_map(
    tree: TreeMap,
    ranked: Sequence[Ranked],
    editable: Sequence[str],
    sent: Sequence[SourceChunk],
    budget: int,
    unbuilt: Collection[str] = (),
) -> tuple[list[MapEntry], int]:
    """The editable files as paths and signatures, best-ranked files first, then by path,
    within `budget`; and how many files did not fit. `unbuilt` files (C the build's file list
    leaves out) come after all the others."""
    scores: dict[str, dict[int, float]] = {}
    for item in ranked:
        scores.setdefault(item.path, {})[item.index] = item.score
    whole = {
        c.path for c in sent if c.start_line == 1 and c.end_line >= tree.files[c.path].line_count
    }
    order = sorted(
        (path for path in editable if path in tree.files and path not in whole),
        key=lambda path: (path in unbuilt, -max(scores.get(path, {0: 0.0}).values()), path),
    )
    entries: list[MapEntry] = []
    spent = 0
    for count, path in enumerate(order):
        ranked_here = scores.get(path, {}) if count < DETAILED_FILES else {}
        entry = MapEntry(path=path, symbols=_signatures(tree.files[path], ranked_here))
        size = wire_size(entry)
        if spent + size > budget:
            return entries, len(order) - count
        spent += size
        entries.append(entry)
    return entries, 0


def _signatures(file: FileSymbols, scores: Mapping[int, float]) -> list[str]:
    """A ranked file's signatures, best first; none for a file no evidence points at, whose
    path alone tells the model it exists (so every editable file fits before any detail)."""
    if not scores:
        return []
    listed = [
        (index, symbol)
        for index, symbol in enumerate(file.symbols)
        if symbol.kind not in ("lines", "variable") or index in scores
    ]
    listed.sort(key=lambda pair: (-scores.get(pair[0], 0.0), pair[1].start_line))
    return [
        f"{symbol.start_line}: {symbol.signature[:_SIGNATURE_CHARS]}"
        for _, symbol in listed[:RANKED_SIGNATURES]
    ]


def failing_test_code(
    tree: TreeMap, nodeids: Sequence[str], texts: Mapping[str, str], budget: int
) -> list[SourceChunk]:
    """The failing tests' own code (read-only: tests are never patched), within `budget`."""
    chunks: list[SourceChunk] = []
    seen: set[tuple[str, int]] = set()
    spent = 0
    for nodeid in nodeids:
        path, *names = nodeid.split("::")
        file, text = tree.files.get(path), texts.get(path)
        if file is None or text is None or not names:
            continue
        wanted = names[-1].split("[", 1)[0]
        found = [i for i, s in enumerate(file.symbols) if s.name == wanted and s.kind == "function"]
        if not found or (path, found[0]) in seen:
            continue
        seen.add((path, found[0]))
        symbol = file.symbols[found[0]]
        body = _lines(text_lines(text), symbol.start_line, symbol.end_line)
        encoded = body.encode()
        end = symbol.end_line
        if len(encoded) > MAX_TEST_BYTES:
            body = encoded[:MAX_TEST_BYTES].decode("utf-8", "ignore").rsplit("\n", 1)[0] + "\n"
            end = symbol.start_line + body.count("\n") - 1
        chunk = SourceChunk(
            path=path,
            start_line=symbol.start_line,
            end_line=end,
            symbol=symbol.name,
            reason=f"the failing test {nodeid} (read-only)",
            text=body,
        )
        size = wire_size(chunk)
        if spent + size > budget:
            break
        spent += size
        chunks.append(chunk)
    return chunks
