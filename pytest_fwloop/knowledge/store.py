"""The knowledge base (DESIGN.md §12; seed 001 §5.16): fixes that worked, found again by the
failures they fixed.

A SQLite file with an FTS5 index over each fix's failure signatures, node ids, excerpts, analysis
and summary. Several runs (parallel CI jobs, a team's repositories sharing one file through
`fwloop_knowledge`) may write at once: SQLite's own locking serialises them, WAL lets readers go
on while one writes, and a busy timeout makes a writer wait its turn instead of failing.
Everything stored has been redacted by the caller.
"""

from __future__ import annotations

import json
import re
import sqlite3
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path

from pydantic import BaseModel, Field

from pytest_fwloop.core.records.agent_protocol import DeclinedBefore, SimilarFix

#: How long a writer waits for another process's transaction before giving up.
BUSY_TIMEOUT_MS = 30_000
#: Fixes a coder request carries at most (DESIGN.md §12).
SIMILAR_LIMIT = 3
#: Bytes of each similar fix's patch sent to the coder; the rest is cut.
PATCH_BYTES = 4096
_SCHEMA = """
CREATE TABLE IF NOT EXISTS fixes (
    id INTEGER PRIMARY KEY,
    run_id TEXT NOT NULL,
    iteration INTEGER NOT NULL,
    created TEXT NOT NULL,
    outcome TEXT NOT NULL,
    signatures TEXT NOT NULL,
    nodeids TEXT NOT NULL,
    excerpts TEXT NOT NULL,
    analysis TEXT NOT NULL,
    summary TEXT NOT NULL,
    patch TEXT NOT NULL,
    files TEXT NOT NULL
);
CREATE VIRTUAL TABLE IF NOT EXISTS fixes_text USING fts5(
    signatures, nodeids, excerpts, analysis, summary, content='fixes', content_rowid='id'
);
CREATE TABLE IF NOT EXISTS words (term TEXT PRIMARY KEY, doc INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS verdicts (
    id INTEGER PRIMARY KEY,
    run_id TEXT NOT NULL,
    created TEXT NOT NULL,
    nodeid TEXT NOT NULL,
    signature TEXT NOT NULL,
    status TEXT NOT NULL,
    reason TEXT NOT NULL,
    outcome TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS verdicts_by_signature ON verdicts (signature);
"""
#: Earlier verdicts a coder request carries at most.
VERDICT_LIMIT = 5
#: A word found in more than this share of the fixes (`call`, `AssertionError`) tells them
#: apart no better than chance and makes every lookup rank them all: it is left out of queries.
COMMON_SHARE = 0.05
#: ... unless the base is this small, when ranking everything costs nothing.
COMMON_FLOOR = 50
#: The rarest words of a lookup that are searched for: they decide the ranking, and each more
#: word adds its fixes to what must be ranked.
QUERY_WORDS = 16
#: A word as FTS5's default tokenizer (unicode61) cuts one: letters and digits; `_` separates.
_WORD = re.compile(r"[^\W_]+")


class StoredFix(BaseModel):
    """One applied patch that raised the pass count, with the failures it fixed."""

    run_id: str
    iteration: int
    outcome: str = Field(description="how the run that made it ended, or `running`")
    signatures: list[str]
    nodeids: list[str]
    excerpts: list[str]
    analysis: str
    summary: str
    patch: str
    files: list[str]


class FoundFix(BaseModel):
    """What the knowledge base answers: a stored fix's id and its wire form."""

    id: int
    run_id: str
    iteration: int
    created: str
    signatures: list[str]
    summary: str
    patch: str


class FoundVerdict(DeclinedBefore):
    """A stored verdict (a declined or inconclusive failure) as `fwloop kb verdicts` shows it."""

    id: int
    created: str


class KnowledgeError(Exception):
    """The file is not a knowledge base this version can use."""


class KnowledgeBase:
    """One knowledge-base file; each method is one short transaction."""

    def __init__(self, path: Path) -> None:
        self.path = path

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            connection = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_MS / 1000)
        except sqlite3.Error as exc:
            raise KnowledgeError(f"{self.path}: {exc}") from None
        try:
            connection.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            _use_wal(connection)
            with connection:
                connection.executescript(_SCHEMA)
            yield connection
        except sqlite3.DatabaseError as exc:
            raise KnowledgeError(
                f"{self.path}: not a knowledge base this version reads ({exc})"
            ) from None
        finally:
            connection.close()

    def store(self, fix: StoredFix) -> int:
        """Add `fix`; its id."""
        row = (
            fix.run_id,
            fix.iteration,
            datetime.now(timezone.utc).isoformat(timespec="seconds"),
            fix.outcome,
            json.dumps(fix.signatures),
            json.dumps(fix.nodeids),
            json.dumps(fix.excerpts),
            fix.analysis,
            fix.summary,
            fix.patch,
            json.dumps(fix.files),
        )
        with self._connect() as db, db:
            cursor = db.execute(
                "INSERT INTO fixes (run_id, iteration, created, outcome, signatures, nodeids, "
                "excerpts, analysis, summary, patch, files) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                row,
            )
            rowid = cursor.lastrowid
            assert rowid is not None
            indexed = (row[4], row[5], row[6], fix.analysis, fix.summary)
            db.execute(
                "INSERT INTO fixes_text (rowid, signatures, nodeids, excerpts, analysis, summary) "
                "VALUES (?,?,?,?,?,?)",
                (rowid, *indexed),
            )
            db.executemany(
                "INSERT INTO words (term, doc) VALUES (?, 1) "
                "ON CONFLICT (term) DO UPDATE SET doc = doc + 1",
                [(word,) for word in _words(" ".join(indexed))],
            )
            return rowid

    def search(self, text: str, limit: int = 10, other_than: str = "") -> list[FoundFix]:
        """The fixes whose text best matches `text` (any of its telling words), best first;
        none of run `other_than`."""
        words = _words(text)
        if not words:
            return []
        with self._connect() as db:
            query = _any_of(_telling(db, words))
            if not query:
                return []
            rows = db.execute(
                "SELECT f.id, f.run_id, f.iteration, f.created, f.signatures, f.summary, f.patch "
                "FROM fixes_text JOIN fixes f ON f.id = fixes_text.rowid "
                "WHERE fixes_text MATCH ? AND f.run_id != ? ORDER BY bm25(fixes_text) LIMIT ?",
                (query, other_than, limit),
            ).fetchall()
        return [_found(row) for row in rows]

    def similar(
        self, signatures: Sequence[str], run_id: str = "", limit: int = SIMILAR_LIMIT
    ) -> list[SimilarFix]:
        """Up to `limit` fixes for failures like these (a coder request's `similar_fixes`),
        from runs other than `run_id` (its own fixes are in the coder's history already)."""
        found = self.search(" ".join(signatures), limit, other_than=run_id)
        return [
            SimilarFix(
                run_id=f.run_id,
                iteration=f.iteration,
                signatures=f.signatures,
                summary=f.summary,
                patch=f.patch[:PATCH_BYTES],
            )
            for f in found
        ]

    def store_verdicts(self, verdicts: Sequence[DeclinedBefore]) -> None:
        """Keep the tests a run's coder declined or could not analyse, with why and how the
        run ended (seed 001 §5.16: the round's evidence, not only its fixes)."""
        created = datetime.now(timezone.utc).isoformat(timespec="seconds")
        with self._connect() as db, db:
            db.executemany(
                "INSERT INTO verdicts (run_id, created, nodeid, signature, status, reason, "
                "outcome) VALUES (?,?,?,?,?,?,?)",
                [
                    (v.run_id, created, v.nodeid, v.signature, v.status, v.reason, v.outcome)
                    for v in verdicts
                ],
            )

    def verdicts_for(
        self, signatures: Sequence[str], run_id: str = "", limit: int = VERDICT_LIMIT
    ) -> list[DeclinedBefore]:
        """The latest verdicts of other runs on failures with exactly these signatures."""
        if not signatures:
            return []
        marks = ",".join("?" * len(signatures))
        with self._connect() as db:
            rows = db.execute(
                "SELECT nodeid, signature, status, reason, run_id, outcome FROM verdicts "
                f"WHERE signature IN ({marks}) AND run_id != ? ORDER BY id DESC LIMIT ?",
                (*signatures, run_id, limit),
            ).fetchall()
        keys = ("nodeid", "signature", "status", "reason", "run_id", "outcome")
        return [DeclinedBefore.model_validate(dict(zip(keys, row, strict=True))) for row in rows]

    def recent_verdicts(self, limit: int = 20) -> list[FoundVerdict]:
        """The latest verdicts, newest first: what later runs' coders are told."""
        with self._connect() as db:
            rows = db.execute(
                "SELECT id, created, nodeid, signature, status, reason, run_id, outcome "
                "FROM verdicts ORDER BY id DESC LIMIT ?",
                (limit,),
            ).fetchall()
        keys = ("id", "created", "nodeid", "signature", "status", "reason", "run_id", "outcome")
        return [FoundVerdict.model_validate(dict(zip(keys, row, strict=True))) for row in rows]

    def forget_verdict(self, verdict_id: int) -> bool:
        """Delete one verdict (a decline that was wrong, say); whether it was there."""
        with self._connect() as db, db:
            return db.execute("DELETE FROM verdicts WHERE id = ?", (verdict_id,)).rowcount > 0

    def recent(self, limit: int = 20) -> list[FoundFix]:
        with self._connect() as db:
            rows = db.execute(
                "SELECT id, run_id, iteration, created, signatures, summary, patch FROM fixes "
                "ORDER BY id DESC LIMIT ?",
                (limit,),
            ).fetchall()
        return [_found(row) for row in rows]

    def forget(self, fix_id: int) -> bool:
        """Delete one fix; whether it was there."""
        with self._connect() as db, db:
            row = db.execute(
                "SELECT signatures, nodeids, excerpts, analysis, summary FROM fixes WHERE id = ?",
                (fix_id,),
            ).fetchone()
            if row is None:
                return False
            db.execute(
                "INSERT INTO fixes_text (fixes_text, rowid, signatures, nodeids, excerpts, "
                "analysis, summary) VALUES ('delete', ?, ?, ?, ?, ?, ?)",
                (fix_id, *row),
            )
            db.execute("DELETE FROM fixes WHERE id = ?", (fix_id,))
            db.executemany(
                "UPDATE words SET doc = doc - 1 WHERE term = ?",
                [(word,) for word in _words(" ".join(row))],
            )
            return True


def _use_wal(connection: sqlite3.Connection) -> None:
    """Put the file in WAL mode (it stays so): once, by whichever process comes first. SQLite
    answers "database is locked" at once, without waiting for the busy timeout, when another
    process holds the file while the mode changes, so that one step is retried until it."""
    deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
    while connection.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
        try:
            connection.execute("PRAGMA journal_mode = WAL")
        except sqlite3.OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.02)


def _words(text: str) -> list[str]:
    return list(dict.fromkeys(word.lower() for word in _WORD.findall(text) if len(word) > 1))


def _telling(db: sqlite3.Connection, words: list[str]) -> list[str]:
    """`words` less those too common among the stored fixes to rank by, rarest first (`words`
    counts the fixes each word is in, kept up to date by `store` and `forget`)."""
    # The highest id stands for the count (a forgotten fix leaves a gap): count(*) scans.
    (total,) = db.execute("SELECT coalesce(max(id), 0) FROM fixes").fetchone()
    marks = ",".join("?" * len(words))
    found = dict(db.execute(f"SELECT term, doc FROM words WHERE term IN ({marks})", words))
    most = max(COMMON_FLOOR, int(total * COMMON_SHARE))
    telling = [w for w in words if 0 < found.get(w, 0) <= most]
    return sorted(telling, key=lambda w: found[w])[:QUERY_WORDS]


def _any_of(words: list[str]) -> str:
    """An FTS5 query matching any of `words`, each quoted so none is read as syntax."""
    return " OR ".join(f'"{word}"' for word in words)


def _found(row: tuple[object, ...]) -> FoundFix:
    fix_id, run_id, iteration, created, signatures, summary, patch = row
    return FoundFix(
        id=int(str(fix_id)),
        run_id=str(run_id),
        iteration=int(str(iteration)),
        created=str(created),
        signatures=json.loads(str(signatures)),
        summary=str(summary),
        patch=str(patch),
    )
