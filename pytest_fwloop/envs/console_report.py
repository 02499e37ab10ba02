"""Each test's own part of an environment's transcript: in a failing test's report, and in
`$FWLOOP_CONSOLE_LOG_DIR/<node id>.log` when the loop asks for the files.

The report hook is registered by the first test that uses an environment, so a suite that uses
none runs no hook of ours at all.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import pytest

from pytest_fwloop.core.records.child_env import CONSOLE_LOG_DIR_ENV, log_file_name

if TYPE_CHECKING:
    from collections.abc import Generator

    from pytest_fwloop.envs.console import Transcript

REPORT_SECTION = "fwloop console"
REPORT_TAIL_CHARS = 2048
_PLUGIN_NAME = "fwloop-console-report"


class Recorded(Protocol):
    """Anything whose traffic is logged: a Console, an SshTarget."""

    @property
    def name(self) -> str: ...

    @property
    def transcript(self) -> Transcript: ...


@dataclass(frozen=True)
class _Segment:
    source: Recorded
    start: int

    def text(self) -> str:
        return self.source.transcript.since(self.start)


_SEGMENTS = pytest.StashKey[list[_Segment]]()


def record(item: pytest.Item, source: Recorded) -> None:
    """From now on, `source`'s traffic is part of `item`'s report and console log."""
    item.stash.setdefault(_SEGMENTS, []).append(_Segment(source, source.transcript.end))
    plugins = item.config.pluginmanager
    if plugins.get_plugin(_PLUGIN_NAME) is None:
        plugins.register(_ConsoleReport(), _PLUGIN_NAME)


class _ConsoleReport:
    """The hook that adds a test's segments to its report and writes its console log."""

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        report = yield
        segments = item.stash.get(_SEGMENTS, None)
        if segments is None:
            return report
        if report.failed:
            for segment in segments:
                tail = segment.text()[-REPORT_TAIL_CHARS:]
                report.sections.append((REPORT_SECTION, f"[{segment.source.name}]\n{tail}"))
        log_dir = os.environ.get(CONSOLE_LOG_DIR_ENV)
        if call.when == "teardown" and log_dir:
            _write_console_log(Path(log_dir), item.nodeid, segments)
        return report


def _write_console_log(log_dir: Path, nodeid: str, segments: list[_Segment]) -> None:
    log_dir.mkdir(parents=True, exist_ok=True)
    (log_dir / log_file_name(nodeid)).write_text(
        "".join(f"=== {segment.source.name} ===\n{segment.text()}\n" for segment in segments),
        encoding="utf-8",
    )
