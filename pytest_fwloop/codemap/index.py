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
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict
from pathlib import Path

from pytest_fwloop.codemap.parse import language_of, parse_source
from pytest_fwloop.core.request.code_symbols import FileSymbols, Literal, Symbol

#: Bumped whenever what the parser stores changes: older rows are then not read.
INDEX_VERSION = 3
INDEX_NAME = "code-index.sqlite"

ReadBlobs = Callable[[Iterable[str]], Mapping[str, bytes]]


class CodeIndex:
    """Symbols by (blob id, language); in memory for a run, on disk between runs."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._known: dict[str, FileSymbols | None] = {}
        self.notice = ""

    def symbols(self, files: Mapping[str, str], read: ReadBlobs) -> dict[str, FileSymbols]:
        """The symbols of every indexed file of `files` (path → blob id); `read` fetches the
        contents of the blobs neither memory nor the store holds."""
        keys = {
            path: f"{blob}:{language}"
            for path, blob in files.items()
            if (language := language_of(path)) is not None
        }
        missing = [key for key in dict.fromkeys(keys.values()) if key not in self._known]
        if missing:
            self._known.update(self._load(missing))
        unread = {path: key for path, key in keys.items() if key not in self._known}
        if unread:
            contents = read(files[path] for path in unread)
            parsed: dict[str, FileSymbols | None] = {}
            for path, key in unread.items():
                data = contents.get(files[path])
                parsed[key] = parse_source(path, data) if data is not None else None
            self._known.update(parsed)
            self._store(parsed)
        return {
            path: found for path, key in keys.items() if (found := self._known[key]) is not None
        }

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
                except sqlite3.DatabaseError:
                    db.close()
                    raise
                return db
            except sqlite3.DatabaseError as exc:
                self.notice = f"the code index {self.path} was unreadable ({exc}); rebuilt"
                if attempt == 0:
                    self.path.unlink(missing_ok=True)
        return None

    def _load(self, keys: list[str]) -> dict[str, FileSymbols | None]:
        db = self._connect()
        if db is None:
            return {}
        found: dict[str, FileSymbols | None] = {}
        try:
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
                    except (ValueError, TypeError, KeyError):
                        continue  # parsed again
        finally:
            db.close()
        return found

    def _store(self, parsed: Mapping[str, FileSymbols | None]) -> None:
        db = self._connect()
        if db is None:
            return
        rows = [(key, INDEX_VERSION, _encode(value)) for key, value in parsed.items()]
        try:
            with db:
                db.execute("BEGIN")
                db.executemany("INSERT OR REPLACE INTO files VALUES (?, ?, ?)", rows)
        finally:
            db.close()


def _encode(value: FileSymbols | None) -> str:
    if value is None:
        return "null"
    document = asdict(value)
    for symbol in document["symbols"]:
        symbol["calls"], symbol["names"] = sorted(symbol["calls"]), sorted(symbol["names"])
    document["names"] = sorted(document["names"])
    return json.dumps(document, separators=(",", ":"))


def _decode(text: str) -> FileSymbols | None:
    document = json.loads(text)
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
