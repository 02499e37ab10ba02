"""Write-ahead journal: every write to the user's tree is recorded before it happens (DESIGN.md §6).

The journal names the run, its baseline snapshot and the controller's pid. While that process
lives the journal is a lock; once it is dead the journal tells the next start which baseline to
restore. `finish()` removes it when the tree is where it should be.

Its schema (`journal_record`) is imported when a journal is first written or read: a new run
starts its baseline's tests before it writes the journal, and need not wait for pydantic.
"""

from __future__ import annotations

import os
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_fwloop.procs.reaper import proc_stat, process_start
from pytest_fwloop.workspace.git_run import WorkspaceError

if TYPE_CHECKING:
    from pytest_fwloop.workspace.journal_record import JournalRecord

JOURNAL_NAME = "journal.json"


class WorkspaceLocked(WorkspaceError):
    """Another live controller holds the workspace."""


class Journal:
    """`<state_dir>/journal.json`, rewritten atomically (temp file, fsync, rename) per change."""

    def __init__(self, state_dir: Path) -> None:
        self.state_dir = state_dir
        self.path = state_dir / JOURNAL_NAME
        self._record: JournalRecord | None = None

    def begin(self, run_id: str, baseline: str) -> None:
        """Start this process's journal; refuses while another run's journal is present."""
        from pytest_fwloop.workspace.journal_record import JournalRecord

        record = JournalRecord(
            run_id=run_id,
            baseline=baseline,
            pid=os.getpid(),
            process_start=process_start(os.getpid()),
            started_at=datetime.now(timezone.utc),
        )
        self.state_dir.mkdir(parents=True, exist_ok=True)
        existing = self._load()
        if existing is not None and not _is_ours(existing):
            self._refuse(existing)
        try:
            self._write(record, exclusive=existing is None)
        except FileExistsError:
            # Another controller created the journal between our read and our write.
            raced = self._load()
            if raced is not None:
                self._refuse(raced)
            raise
        self._record = record

    @property
    def began(self) -> bool:
        """Whether this process's journal is on disk (`begin` to `finish`)."""
        return self._record is not None

    def check_lock(self) -> None:
        """Raise `WorkspaceLocked` if another live controller holds the journal."""
        existing = self._load()
        if existing is not None and not _is_ours(existing) and _is_alive(existing):
            raise self._locked(existing)

    def active(self) -> JournalRecord | None:
        """The journal of another live controller, if one holds this workspace."""
        existing = self._load()
        if existing is None or _is_ours(existing) or not _is_alive(existing):
            return None
        return existing

    def pending(self) -> JournalRecord | None:
        """The journal a dead controller left behind, if any (never a live one's)."""
        existing = self._load()
        if existing is None or _is_ours(existing) or _is_alive(existing):
            return None
        return existing

    def intend(self, action: str, paths: list[str], snapshot: str | None = None) -> None:
        """Record, durably, that `action` is about to write `paths` (or, with `snapshot`, any
        path that differs from it)."""
        from pytest_fwloop.workspace.journal_record import JournalEntry

        record = self._require()
        record.entries.append(JournalEntry(action=action, paths=list(paths), snapshot=snapshot))
        self._write(record, exclusive=False)

    def done(self, action: str | None = None) -> None:
        """Mark the last intent (of `action`, if given) completed."""
        record = self._require()
        entry = next(
            (e for e in reversed(record.entries) if action is None or e.action == action), None
        )
        if entry is None:
            raise RuntimeError("Journal.done() without a preceding intend()")
        entry.done = True
        self._write(record, exclusive=False)

    def finish(self) -> None:
        """Remove the journal: the run ended and the tree is where it should be."""
        self.path.unlink(missing_ok=True)
        _fsync_dir(self.state_dir)
        self._record = None

    def _require(self) -> JournalRecord:
        if self._record is None:
            raise RuntimeError("Journal.begin() must be called before writing to the tree")
        return self._record

    def _load(self) -> JournalRecord | None:
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as err:
            raise WorkspaceError(
                f"fwloop: cannot read {self.path} ({err.strerror}); fix its permissions"
            ) from err
        from pydantic import ValidationError

        from pytest_fwloop.workspace.journal_record import JournalRecord

        try:
            return JournalRecord.model_validate_json(raw)
        except ValidationError as err:
            first = err.errors()[0]
            where = ".".join(str(part) for part in first["loc"]) or "document"
            raise WorkspaceError(
                f"fwloop: {self.path} is not a valid fwloop journal ({where}: {first['msg']}); "
                "inspect it and your tree, then delete it"
            ) from err

    def _refuse(self, existing: JournalRecord) -> None:
        if _is_alive(existing):
            raise self._locked(existing)
        raise WorkspaceError(
            f"fwloop: {self.path} was left by run {existing.run_id} (pid {existing.pid}, no longer "
            f"running); run pytest --fwloop again in {self.state_dir.parent} to recover the tree"
        )

    def _locked(self, existing: JournalRecord) -> WorkspaceLocked:
        return WorkspaceLocked(
            f"fwloop: the workspace is in use by run {existing.run_id} (pid {existing.pid}, "
            f"journal {self.path}); use `fwloop cancel` or wait for it to finish"
        )

    def _write(self, record: JournalRecord, *, exclusive: bool) -> None:
        temporary = self.state_dir / f".{JOURNAL_NAME}.{os.getpid()}.tmp"
        with temporary.open("wb") as stream:
            stream.write(record.model_dump_json(indent=2).encode())
            stream.flush()
            os.fsync(stream.fileno())
        try:
            if exclusive:
                os.link(temporary, self.path)  # fails if the journal appeared meanwhile
            else:
                os.replace(temporary, self.path)
        finally:
            temporary.unlink(missing_ok=True)
        _fsync_dir(self.state_dir)


def _is_ours(record: JournalRecord) -> bool:
    return record.pid == os.getpid() and record.process_start == process_start(record.pid)


def _is_alive(record: JournalRecord) -> bool:
    try:
        os.kill(record.pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # alive, owned by another user
    stat = proc_stat(record.pid)
    if stat is None:
        return True
    state, started = stat
    if state in ("Z", "X"):
        return False  # killed, not yet reaped
    return record.process_start is None or record.process_start == started


def _fsync_dir(directory: Path) -> None:
    """Make a rename or unlink in `directory` durable."""
    try:
        descriptor = os.open(directory, os.O_RDONLY)
    except FileNotFoundError:
        return
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
