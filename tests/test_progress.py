"""Live progress: the tally of a child's progress stream, and how the terminal shows it."""

from __future__ import annotations

import io
import mmap
import time
from pathlib import Path

import pytest

from pytest_fwloop.child.progress import ProgressWatcher, Tally
from pytest_fwloop.child.progress_stream import CHUNK, ProgressStream
from pytest_fwloop.core.suite.results import ProgressLine, TestRecord, read_progress
from pytest_fwloop.loop.terminal import Terminal


def finished(nodeid: str, outcome: str) -> ProgressLine:
    return ProgressLine(
        finished=TestRecord.model_validate({"nodeid": nodeid, "outcome": outcome, "phase": "call"})
    )


def test_the_tally_counts_outcomes_and_names_the_running_test() -> None:
    tally = Tally()
    tally.feed(ProgressLine(collected=["t::a", "t::b", "t::c"]))
    tally.feed(ProgressLine(started="t::a"))
    tally.feed(finished("t::a", "passed"))
    tally.feed(ProgressLine(started="t::b"))
    assert tally.render(14.2) == "1 passed (1 of 3) | t::b | 14s"
    tally.feed(finished("t::b", "failed"))
    assert tally.render(20) == "1 failed, 1 passed (2 of 3) | 20s"


def test_the_watcher_reads_what_the_child_appends(tmp_path: Path) -> None:
    stream = tmp_path / "results-1.jsonl"
    stream.write_text(ProgressLine(collected=["t::a", "t::b"]).model_dump_json() + "\n")
    shown: list[str] = []
    with ProgressWatcher(stream, shown.append), stream.open("a") as child:
        child.write(finished("t::a", "passed").model_dump_json() + "\n")
        child.write('{"started": "t::b"')  # cut off: the child is still writing it
    assert shown[-1].startswith("1 passed (1 of 2) | ")


def line(progress: ProgressLine) -> bytes:
    return (progress.model_dump_json(exclude_defaults=True) + "\n").encode()


def test_a_stream_still_open_is_read_to_its_last_line_as_it_grows(tmp_path: Path) -> None:
    """The child's stream is longer than its lines until it closes (zero bytes, room for the
    next lines): the watcher shows each line as it lands, and so does a stream the child
    never closed (it died) when the results are rebuilt from it."""
    path = tmp_path / "results-1.jsonl"
    stream = ProgressStream(path)
    stream.write(line(ProgressLine(collected=["t::a", "t::b"])))
    shown: list[str] = []
    with ProgressWatcher(path, shown.append) as watcher:
        watcher._read()
        stream.write(line(finished("t::a", "passed")))
        watcher._read()
        assert shown[-1].startswith("1 passed (1 of 2) | ")
        stream.write(line(ProgressLine(started="t::b")))
        stream.write(b"x" * CHUNK + b"\n")  # not a line of the stream: past its first size
        stream.write(line(finished("t::b", "failed")))
    assert shown[-1].startswith("1 failed, 1 passed (2 of 2) | ")
    assert path.stat().st_size > CHUNK  # still open: its room for more lines included
    assert [p.finished.outcome for p in read_progress(path) if p.finished] == ["passed", "failed"]
    stream.close()
    assert path.read_bytes().endswith(line(finished("t::b", "failed")))


def test_where_no_file_can_be_mapped_each_line_is_written_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(*args: object) -> mmap.mmap:
        raise OSError(19, "No such device")  # what mmap says on a file system that cannot

    monkeypatch.setattr(mmap, "mmap", refuse)
    path = tmp_path / "results-1.jsonl"
    stream = ProgressStream(path)
    stream.write(line(ProgressLine(started="t::a")))
    assert path.read_bytes() == line(ProgressLine(started="t::a"))
    stream.close()
    assert [p.started for p in read_progress(path)] == ["t::a"]


class FakeTty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_tty_redraws_one_line_and_ends_it() -> None:
    out = FakeTty()
    terminal = Terminal(out)
    terminal.progress(2, "1 passed")
    terminal.progress(2, "2 passed")
    terminal.end_progress()
    assert out.getvalue().count("\r") == 2
    assert out.getvalue().endswith("fwloop: [2] tests: 2 passed\x1b[K\n")


def test_a_log_gets_a_plain_line_now_and_then(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [100.0]
    monkeypatch.setattr(time, "monotonic", lambda: now[0])
    out = io.StringIO()
    terminal = Terminal(out)
    terminal.progress(1, "1 passed")
    now[0] += 3
    terminal.progress(1, "2 passed")  # too soon for another line
    now[0] += 10
    terminal.progress(1, "9 passed")
    terminal.end_progress()
    assert out.getvalue().splitlines() == [
        "fwloop: [1] tests: 1 passed",
        "fwloop: [1] tests: 9 passed",
    ]


def test_quiet_shows_no_progress() -> None:
    out = FakeTty()
    Terminal(out, verbosity=-1).progress(1, "1 passed")
    assert out.getvalue() == ""


@pytest.mark.parametrize(
    ("verbosity", "expected"),
    [
        (-1, []),
        (0, ["still failing (1):", "  t.py::test_x"]),
        (1, ["still failing (1):", "  t.py::test_x: t.py:3: AssertionError"]),
    ],
)
def test_the_summary_names_failing_tests_as_verbose_as_asked(
    verbosity: int, expected: list[str]
) -> None:
    out = io.StringIO()
    Terminal(out, verbosity=verbosity).summary(
        outcome="failure",
        final_state="FAILURE",
        reason="r",
        rows=[],
        closing=["done"],
        failing=[("t.py::test_x", "t.py:3: AssertionError")],
    )
    lines = out.getvalue().splitlines()
    start = lines.index("done") - len(expected)
    assert lines[start : lines.index("done")] == expected
