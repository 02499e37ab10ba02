"""The code index: every source file's symbols, keyed by its content, kept in SQLite under
`.fwloop/` so a run parses only what changed since the last one.

A file is found by its blob id in the shadow repository's snapshot (DESIGN.md §6): a request on
an unchanged tree parses nothing, and one after a patch parses the files the patch touched. The
store is a cache: a row that does not read back is parsed again, and a store that will not open
is replaced, with a notice.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
import zlib
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from pathlib import Path

from pytest_fwloop.codemap.parse import language_of, parse_source
from pytest_fwloop.core.request.code_symbols import FileSymbols, Literal, Symbol

#: Bumped whenever what the parser stores changes: older rows are then deleted unread.
#: Rows are zlib-compressed JSON (version 4): a Zephyr-sized index is a fifth of its JSON.
INDEX_VERSION = 4
INDEX_NAME = "code-index.sqlite"

ReadBlobs = Callable[[Iterable[str]], Mapping[str, bytes]]
#: Told each chunk's symbols (path → symbols) as soon as they are known.
Learn = Callable[[dict[str, FileSymbols]], None]
#: Files read and parsed at a time: what bounds the contents held in memory at once.
_CHUNK = 256


class CodeIndex:
    """Symbols by (blob id, language); in memory for a run, on disk between runs."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._known: dict[str, FileSymbols | None] = {}
        self.notice = ""
        #: Indexable files the last `symbols` call left for a later one (its time was spent).
        self.unread = 0
        self._swept = False

    def symbols(
        self,
        files: Mapping[str, str],
        read: ReadBlobs,
        first: Collection[str] = (),
        seconds: float | None = None,
        stop: threading.Event | None = None,
        learn: Learn | None = None,
    ) -> dict[str, FileSymbols]:
        """The symbols of the indexed files of `files` (path → blob id); `read` fetches the
        contents of the blobs neither memory nor the store holds.

        With `seconds`, a big tree is read as far as that time allows: `first` (the files the
        build and the failures name) whatever it costs, then the others in `files`' order, in
        chunks, until `stop` is set, each chunk's symbols handed to `learn` as it is known;
        what is left waits for a later call (`unread` says how many). Memory holds one chunk's
        contents at a time, never the whole tree's. A blob `read` does not give (a snapshot the
        store has dropped since) is left for later."""
        keys = {
            path: f"{blob}:{language}"
            for path, blob in files.items()
            if (language := language_of(path)) is not None
        }
        wanted = [p for p in keys if p in first] if seconds is not None else list(keys)
        # One connection for the call, opened only when memory lacks a file's symbols.
        db = self._connect() if any(k not in self._known for k in keys.values()) else None
        try:
            self._read_in(db, wanted, keys, files, read)
            if seconds is not None:
                rest = [p for p in keys if p not in first and keys[p] not in self._known]
                deadline = time.monotonic() + seconds
                self._read_in(db, rest, keys, files, read, deadline, stop, learn)
        finally:
            if db is not None:
                db.close()
        found = {p: self._known.get(k) for p, k in keys.items()}
        self.unread = sum(1 for p, k in keys.items() if k not in self._known)
        return {path: symbols for path, symbols in found.items() if symbols is not None}

    def _read_in(
        self,
        db: sqlite3.Connection | None,
        paths: Sequence[str],
        keys: Mapping[str, str],
        files: Mapping[str, str],
        read: ReadBlobs,
        deadline: float | None = None,
        stop: threading.Event | None = None,
        learn: Learn | None = None,
    ) -> None:
        """Know the symbols of `paths`: from the store, else parsed (and stored), by chunks;
        with a `deadline`, as many as it and `stop` allow (checked before each file)."""

        def over() -> bool:
            late = deadline is not None and time.monotonic() >= deadline
            return late or (stop is not None and stop.is_set())

        for start in range(0, len(paths), _CHUNK):
            if over():
                return
            chunk = paths[start : start + _CHUNK]
            missing = [k for k in dict.fromkeys(keys[p] for p in chunk) if k not in self._known]
            if missing and db is not None:
                self._known.update(_load(db, missing))
            unread = [p for p in chunk if keys[p] not in self._known]
            contents = read(files[path] for path in unread) if unread else {}
            parsed: dict[str, FileSymbols | None] = {}
            for path in unread:
                if over():
                    break
                data = contents.get(files[path])
                if data is not None:
                    parsed[keys[path]] = parse_source(path, data)
            self._known.update(parsed)
            if parsed and db is not None:
                _store(db, parsed)
            if learn is not None:
                known = {p: self._known.get(keys[p]) for p in chunk}
                learn({p: symbols for p, symbols in known.items() if symbols is not None})

    def _connect(self) -> sqlite3.Connection | None:
        """A connection to the store, made if missing; one that will not open is replaced once."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        for attempt in range(2):
            try:
                db = sqlite3.connect(self.path, isolation_level=None)
                try:
                    db.execute(
                        "CREATE TABLE IF NOT EXISTS files "
                        "(key TEXT PRIMARY KEY, version INTEGER, data TEXT)"
                    )
                    if not self._swept:  # rows of another version are never read again
                        db.execute("DELETE FROM files WHERE version != ?", [INDEX_VERSION])
                        self._swept = True
                except sqlite3.DatabaseError:
                    db.close()
                    raise
                return db
            except sqlite3.DatabaseError as exc:
                self.notice = f"the code index {self.path} was unreadable ({exc}); rebuilt"
                if attempt == 0:
                    self.path.unlink(missing_ok=True)
        return None


def _load(db: sqlite3.Connection, keys: list[str]) -> dict[str, FileSymbols | None]:
    found: dict[str, FileSymbols | None] = {}
    for start in range(0, len(keys), 500):
        chunk = keys[start : start + 500]
        rows = db.execute(
            "SELECT key, data FROM files WHERE version = ? AND key IN "
            f"({','.join('?' * len(chunk))})",
            [INDEX_VERSION, *chunk],
        )
        for key, data in rows:
            try:
                found[key] = _decode(data)
            except (ValueError, TypeError, KeyError, zlib.error):
                continue  # parsed again
    return found


def _store(db: sqlite3.Connection, parsed: Mapping[str, FileSymbols | None]) -> None:
    rows = [(key, INDEX_VERSION, _encode(value)) for key, value in parsed.items()]
    with db:
        db.execute("BEGIN")
        db.executemany("INSERT OR REPLACE INTO files VALUES (?, ?, ?)", rows)


def _encode(value: FileSymbols | None) -> bytes:
    return zlib.compress(_document(value).encode(), 6)


def _document(value: FileSymbols | None) -> str:
    if value is None:
        return "null"
    # By hand, not `dataclasses.asdict` (which deep-copies every value: a third of a request's
    # time on a Zephyr tree).
    document = {
        "language": value.language,
        "line_count": value.line_count,
        "symbols": [
            {
                "name": s.name,
                "kind": s.kind,
                "start_line": s.start_line,
                "end_line": s.end_line,
                "signature": s.signature,
                "calls": sorted(s.calls),
                "names": sorted(s.names),
            }
            for s in value.symbols
        ],
        "literals": [
            {"text": lit.text, "line": lit.line, "line_names": list(lit.line_names)}
            for lit in value.literals
        ],
        "names": sorted(value.names),
    }
    return json.dumps(document, separators=(",", ":"))


def _decode(data: bytes) -> FileSymbols | None:
    document = json.loads(zlib.decompress(data))
    if document is None:
        return None
    symbols = tuple(
        Symbol(
            str(s["name"]),
            str(s["kind"]),
            int(s["start_line"]),
            int(s["end_line"]),
            str(s["signature"]),
            frozenset(s["calls"]),
            frozenset(s["names"]),
        )
        for s in document["symbols"]
    )
    literals = tuple(
        Literal(str(lit["text"]), int(lit["line"]), tuple(lit["line_names"]))
        for lit in document["literals"]
    )
    return FileSymbols(
        str(document["language"]),
        int(document["line_count"]),
        symbols,
        literals,
        frozenset(document["names"]),
    )
