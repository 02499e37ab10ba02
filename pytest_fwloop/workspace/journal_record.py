"""The journal file's schema (`journal.py`): validated whenever the file is read."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class JournalEntry(BaseModel):
    """One intended write: what is about to change, and whether it completed."""

    model_config = ConfigDict(extra="forbid")

    action: str
    paths: list[str]
    done: bool = False
    # `agent_edit`: the snapshot taken before an agent that may edit the tree was called; the
    # paths it changed are not known in advance, so recovery compares the tree with it.
    snapshot: str | None = Field(default=None, pattern=r"^[0-9a-f]{40}([0-9a-f]{24})?$")


class JournalRecord(BaseModel):
    """The journal file's schema; validated whenever it is read."""

    model_config = ConfigDict(extra="forbid")

    version: Literal[1] = 1
    run_id: str = Field(min_length=1)
    baseline: str = Field(pattern=r"^[0-9a-f]{40}([0-9a-f]{24})?$")
    pid: int = Field(gt=0)
    # The kernel's start time of `pid` where /proc has it: tells a reused pid from the writer.
    process_start: int | None = None
    started_at: datetime
    entries: list[JournalEntry] = Field(default_factory=list)
