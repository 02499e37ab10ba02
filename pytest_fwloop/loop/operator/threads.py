"""A run's threads (DESIGN.md §11, seed 004): the operator's messages and chats, kept on disk.

`threads/<id>/meta.json` says what a thread is about; `threads/<id>/messages.jsonl` holds its
messages, one JSON object a line, only ever appended; `threads/<id>/calls/` the provider calls a
chat made (request and raw answer). The thread `operator` carries the
follow-ups and confirm notes that the coder's requests bring as `operator_messages`; a chat
thread may end with a `task` the operator handed to the loop (`fwloop chat --start`), whose
conversation goes to the coder with it (`handed_over`).
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ValidationError

from pytest_fwloop.core.records.redaction import Redactor
from pytest_fwloop.loop.rundir import LONE_SURROGATES, utc_now

OPERATOR_THREAD = "operator"
_THREAD_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


class ThreadError(Exception):
    """A thread id or file that cannot be used; the message is one line."""


#: Characters of a chat thread a task handed to the loop brings to the coder (its latest).
HANDED_OVER_CHARS = 2000


class Message(BaseModel):
    time: str
    author: str  # "operator", or the role that answered
    kind: str  # "followup", "confirm_note", "chat" or "task"
    text: str


class ThreadMeta(BaseModel):
    """`meta.json`, with seed 004's fields (`id`, `title`, `created_at`) and the run's."""

    id: str
    title: str
    created_at: str
    run_id: str
    role: str  # the role asked, or the roles, comma-separated


def chat_title(roles: Sequence[str], run_id: str) -> str:
    """The title of a chat thread (`meta.json`)."""
    return f"chat with the {' and '.join(roles)} about run {run_id}"


class Thread:
    """One thread of one run directory."""

    def __init__(self, run_dir: Path, thread_id: str) -> None:
        if not _THREAD_ID.fullmatch(thread_id):
            raise ThreadError(
                f"fwloop: thread id {thread_id!r}: use letters, digits, '.', '_' or '-' "
                "(up to 64, not starting with a dot)"
            )
        self.id = thread_id
        self.run_id = run_dir.name
        self.folder = run_dir / "threads" / thread_id
        # The roles of one chat answer at once, each recording its calls from its own thread.
        self._calls = threading.Lock()

    def exists(self) -> bool:
        return (self.folder / "meta.json").is_file()

    def append(
        self, author: str, kind: str, text: str, redact: Redactor, role: str, title: str
    ) -> Message:
        """Add a message (redacted), creating the thread on its first one."""
        self.folder.mkdir(parents=True, exist_ok=True)
        meta = self.folder / "meta.json"
        if not meta.is_file():
            document = ThreadMeta(
                id=self.id, title=title, created_at=utc_now(), run_id=self.run_id, role=role
            )
            partial = meta.with_name("meta.json.partial")
            partial.write_text(document.model_dump_json(indent=2) + "\n", encoding="utf-8")
            partial.replace(meta)
        message = Message(time=utc_now(), author=author, kind=kind, text=redact(text))
        line = json.dumps(message.model_dump(), ensure_ascii=False) + "\n"
        # One write of one line in append mode: two writers never interleave within a line.
        with (self.folder / "messages.jsonl").open(
            "a", encoding="utf-8", errors=LONE_SURROGATES
        ) as stream:
            stream.write(line)
        return message

    def record_call(self, request: dict[str, object], raw: str, redact: Redactor) -> None:
        """Keep one provider call of a chat (`calls/K.request.json`, `calls/K.answer.txt`),
        redacted like every record of a run."""
        calls = self.folder / "calls"
        calls.mkdir(parents=True, exist_ok=True)
        text = redact(json.dumps(request, indent=2, ensure_ascii=False))
        with self._calls:
            number = len(list(calls.glob("*.request.json"))) + 1
            (calls / f"{number}.answer.txt").write_text(
                redact(raw), encoding="utf-8", errors=LONE_SURROGATES
            )
            (calls / f"{number}.request.json").write_text(
                text + "\n", encoding="utf-8", errors=LONE_SURROGATES
            )

    def messages(self) -> list[Message]:
        """Every message, oldest first; a line that does not parse is named, not skipped."""
        path = self.folder / "messages.jsonl"
        if not path.is_file():
            return []
        found = []
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            try:
                found.append(Message.model_validate_json(line))
            except ValidationError:
                raise ThreadError(
                    f"fwloop: {path} line {number} is not a message; repair or remove it"
                ) from None
        return found

    def handed_over(self) -> str:
        """The conversation so far, latest last, as the coder is told it with a task handed
        to the loop: at most HANDED_OVER_CHARS of it, the latest kept; "" for none."""
        said = "\n".join(f"{m.author}: {m.text}" for m in self.messages())
        if len(said) > HANDED_OVER_CHARS:
            said = "…" + said[-HANDED_OVER_CHARS:]
        return said


@dataclass(frozen=True)
class ThreadRow:
    """One thread as `fwloop chat RUN --list` shows it."""

    id: str
    title: str
    role: str
    created_at: str
    messages: int


def list_threads(run_dir: Path) -> list[ThreadRow]:
    """The run's threads, oldest first; one whose records do not read is listed as such."""
    rows = []
    for folder in sorted((run_dir / "threads").glob("*/")):
        thread = Thread(run_dir, folder.name) if _THREAD_ID.fullmatch(folder.name) else None
        meta_path = folder / "meta.json"
        if thread is None or not meta_path.is_file():
            continue
        try:
            meta = ThreadMeta.model_validate_json(meta_path.read_bytes())
            count = len(thread.messages())
        except (OSError, ValidationError, ThreadError):
            rows.append(ThreadRow(folder.name, "(its records do not read)", "?", "", 0))
            continue
        rows.append(ThreadRow(meta.id, meta.title, meta.role, meta.created_at, count))
    return sorted(rows, key=lambda row: row.created_at)
