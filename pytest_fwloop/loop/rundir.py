"""The run directory of DESIGN.md §8, and the one place anything is written into it.

Every text passes through the redactor on its way to disk, including the logs that subprocesses
wrote directly (scrubbed in place when they finish).

Text may hold lone surrogates, which UTF-8 cannot encode: an agent's `\\ud800`, or bytes of the
tree that were not UTF-8, kept as surrogate escapes in a diff. Records are written with
`\\udXXX` escapes for them: marked in text files, and in JSON files exactly the escape that reads
back as the same string. Diffs are written byte for byte instead, so that they still apply.
"""

from __future__ import annotations

import codecs
import datetime as dt
import json
import os
import secrets as random_tokens
from pathlib import Path
from typing import Any

from pytest_fwloop.core.records.redaction import Redactor

#: The encoding error handler of every record: UTF-8 fails only on surrogates, escaped thus.
LONE_SURROGATES = "backslashreplace"
#: The handler for diffs: surrogate escapes back to their bytes, any other surrogate escaped.
UNDECODED_BYTES = "fwloop-undecoded-bytes"


def _undecoded_bytes(error: UnicodeError) -> tuple[str | bytes, int]:
    if not isinstance(error, UnicodeEncodeError):
        raise error
    code = ord(error.object[error.start])
    if 0xDC80 <= code <= 0xDCFF:  # what surrogateescape made of an undecodable byte
        return bytes([code - 0xDC00]), error.start + 1
    return f"\\u{code:04x}", error.start + 1


codecs.register_error(UNDECODED_BYTES, _undecoded_bytes)


def new_run_id(now: dt.datetime | None = None) -> str:
    stamp = (now or dt.datetime.now(dt.timezone.utc)).strftime("%Y%m%d-%H%M%S")
    return f"{stamp}-{random_tokens.token_hex(2)}"


def utc_now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="milliseconds")


class RunRecorder:
    """Writes `.fwloop/runs/<run-id>/`; paths given to it are relative to that directory."""

    def __init__(
        self, runs_root: Path, run_id: str, redact: Redactor, *, reopen: bool = False
    ) -> None:
        """`reopen`: a continued run writes on in its existing directory (DESIGN.md §11)."""
        self.run_id = run_id
        self.path = runs_root / run_id
        self.path.mkdir(parents=True, exist_ok=reopen)
        #: The run's redactor: every write goes through it, and what leaves the run by another
        #: way (the knowledge base, report.html) too.
        self.redact = redact
        self._events = self.path / "task-events.jsonl"

    def round_path(self, iteration: int, name: str = "") -> Path:
        folder = self.path / "rounds" / f"{iteration:02d}"
        folder.mkdir(parents=True, exist_ok=True)
        return folder / name if name else folder

    def relative(self, path: Path) -> str:
        return path.relative_to(self.path).as_posix()

    def write_text(self, relpath: str | Path, text: str) -> Path:
        return self._write(relpath, self.redact(text).encode("utf-8", LONE_SURROGATES))

    def write_patch(self, relpath: str | Path, diff: str) -> Path:
        """A diff as the shadow repository gives it: bytes of the tree that were not UTF-8 (kept
        as surrogate escapes) are written back as they were, so `git apply` takes the file."""
        return self._write(relpath, self.redact(diff).encode("utf-8", UNDECODED_BYTES))

    def _write(self, relpath: str | Path, data: bytes) -> Path:
        target = self.path / relpath
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_name(target.name + ".partial")
        partial.write_bytes(data)
        os.replace(partial, target)
        return target

    def write_json(self, relpath: str | Path, document: Any, *, indent: bool = True) -> Path:
        """`document` as JSON, indented for people unless `indent` is False: a round's results
        (a record a test) are written in one line, by `json`'s C encoder, ~5x faster."""
        text = json.dumps(document, indent=2 if indent else None, ensure_ascii=False)
        return self.write_text(relpath, text + "\n")

    def append_event(self, event: dict[str, Any]) -> None:
        line = self.redact(json.dumps(event, ensure_ascii=False))
        with self._events.open("a", encoding="utf-8", errors=LONE_SURROGATES) as stream:
            stream.write(line + "\n")

    def scrub(self, path: Path) -> None:
        """Redact a file a subprocess wrote straight into the run directory."""
        if path.is_file():
            text = path.read_text(encoding="utf-8", errors="replace")
            cleaned = self.redact(text)
            if cleaned != text:
                path.write_text(cleaned, encoding="utf-8", errors=LONE_SURROGATES)
