"""DESIGN.md §4's counting and the environment judgement, on plain records."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pytest_fwloop.core.suite.results import (
    IterationResults,
    TestRecord,
    collection_errors,
    environment_lost,
    error_line,
    executed_in,
)

if TYPE_CHECKING:
    from pathlib import Path


def record(nodeid: str, outcome: str = "passed", env: str | None = None) -> TestRecord:
    return TestRecord.model_validate(
        {"nodeid": nodeid, "outcome": outcome, "phase": "call", "env_failure": env}
    )


DOWN = "ConnectionRefusedError: board down"


def test_the_environment_is_lost_when_it_was_up_for_every_test_before() -> None:
    before = IterationResults(exitstatus=1, tests=[record("a"), record("b", "failed")])
    assert environment_lost([record("a", "failed", DOWN), record("b", "failed", DOWN)], before)


def test_a_test_down_before_too_or_new_or_without_a_before_is_not_a_loss() -> None:
    before = IterationResults(exitstatus=1, tests=[record("a"), record("b", "failed", DOWN)])
    assert not environment_lost([record("b", "failed", DOWN)], before)
    assert not environment_lost([record("new", "failed", DOWN)], before)
    assert not environment_lost([record("a", "failed", DOWN)], None)


def test_counts_follow_design_section_4() -> None:
    results = IterationResults(
        exitstatus=1,
        tests=[
            record("p"),
            record("x", "xfailed"),
            record("f", "failed"),
            record("e", "error"),
            record("s", "skipped"),
            record("xp", "xpassed"),
            TestRecord(nodeid="xs", outcome="xpassed", phase="call", strict_xpass=True),
        ],
    )
    assert (results.pass_count, results.total_count) == (2, 5)


SYNTAX = """/x/ast.py:50: in parse
    return compile(source, filename, mode, flags,
E     File "/t/tests/test_b.py", line 1
E       def test_a(:
E                  ^
E   SyntaxError: invalid syntax
"""


def test_the_error_line_is_the_last_e_line() -> None:
    assert error_line(SYNTAX) == "SyntaxError: invalid syntax"
    assert error_line("no marker\nlast words\n") == "last words"
    assert error_line("") == "no error text"


def test_collection_errors_are_the_collect_phase_records() -> None:
    results = IterationResults(
        exitstatus=2,
        tests=[record("t.py::a"), TestRecord(nodeid="b.py", outcome="error", phase="collect")],
    )
    assert [t.nodeid for t in collection_errors(results)] == ["b.py"]


def test_executions_count_each_child_run_and_each_rerun_a_plugin_made(tmp_path: Path) -> None:
    """DESIGN.md §13: executed_counts has reruns included, pytest-rerunfailures' too (a record's
    `reruns`); carried records and the merged results.json are not runs."""
    focus = IterationResults(
        exitstatus=1,
        tests=[
            TestRecord(nodeid="a", outcome="passed", phase="call", reruns=2),
            TestRecord(nodeid="b", outcome="failed", phase="call"),
            TestRecord(nodeid="c", outcome="passed", phase="call", carried=True),
        ],
    )
    rerun = IterationResults(exitstatus=1, tests=[record("b", "failed")])
    (tmp_path / "results-1.json").write_text(focus.model_dump_json())
    (tmp_path / "flaky-1-results.json").write_text(rerun.model_dump_json())
    (tmp_path / "results.json").write_text(focus.model_dump_json())
    assert executed_in(tmp_path) == 3 + 1 + 1
