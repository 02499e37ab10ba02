"""The child side: one structured record per test, counted as DESIGN.md §4 says."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

from pytest_fwloop.child.files import progress_path
from pytest_fwloop.child.plugin import _encoded
from pytest_fwloop.core.suite.results import IterationResults, read_progress, results_from_progress

SUITE = """
import pytest

def test_passed():
    pass

def test_failed():
    assert "0x12" == "0xF4"

@pytest.fixture
def board():
    raise ConnectionRefusedError("board at 127.0.0.1:1 refused")

def test_env_error(board):
    pass

@pytest.fixture
def broken_fixture():
    raise ValueError("fixture bug")

def test_code_error(broken_fixture):
    pass

@pytest.fixture
def bad_teardown():
    yield
    raise RuntimeError("teardown failed")

def test_teardown_error(bad_teardown):
    pass

@pytest.mark.skip(reason="no board")
def test_skipped():
    pass

@pytest.mark.xfail(reason="known")
def test_xfailed():
    assert 0

@pytest.mark.xfail(reason="lenient", strict=False)
def test_xpassed():
    pass

@pytest.mark.xfail(reason="strict", strict=True)
def test_strict_xpass():
    pass

def test_prints_then_fails():
    print("UART> garbage")
    assert False, "no prompt"
"""


def _run(pytester: pytest.Pytester, *args: str) -> IterationResults:
    pytester.makepyfile(test_suite=SUITE)
    report = pytester.path / "out" / "results.json"
    pytester.runpytest_subprocess(
        f"--fwloop-child-report={report}", "-p", "no:cacheprovider", *args
    )
    return IterationResults.model_validate_json(report.read_text())


@pytest.mark.parametrize("extra", [(), ("-n", "2")], ids=["serial", "xdist"])
def test_every_outcome_and_phase_is_recorded(
    pytester: pytest.Pytester, extra: tuple[str, ...]
) -> None:
    results = _run(pytester, *extra)
    by_id = {t.nodeid.split("::")[-1]: t for t in results.tests}
    expected = {
        "test_passed": ("passed", "call"),
        "test_failed": ("failed", "call"),
        "test_env_error": ("error", "setup"),
        "test_code_error": ("error", "setup"),
        "test_teardown_error": ("error", "teardown"),
        "test_skipped": ("skipped", "setup"),
        "test_xfailed": ("xfailed", "call"),
        "test_xpassed": ("xpassed", "call"),
        "test_strict_xpass": ("xpassed", "call"),
        "test_prints_then_fails": ("failed", "call"),
    }
    assert {name: (t.outcome, t.phase) for name, t in by_id.items()} == expected
    assert by_id["test_env_error"].env_failure is not None
    assert by_id["test_env_error"].env_failure.startswith("builtins.ConnectionError")
    assert by_id["test_code_error"].env_failure is None
    assert by_id["test_strict_xpass"].strict_xpass
    assert not by_id["test_xpassed"].strict_xpass
    assert "0xF4" in by_id["test_failed"].longrepr
    assert "UART> garbage" in by_id["test_prints_then_fails"].sections
    # pass = passed + xfailed; total adds failed, error and strict xpasses (DESIGN.md §4).
    assert results.pass_count == 2
    assert results.total_count == 2 + 2 + 3 + 1
    assert results.exitstatus == pytest.ExitCode.TESTS_FAILED


def test_the_progress_stream_holds_each_record_the_results_file_holds(
    pytester: pytest.Pytester,
) -> None:
    results = _run(pytester)
    lines = read_progress(progress_path(pytester.path / "out" / "results.json"))
    finished = [line.finished for line in lines if line.finished is not None]
    assert finished == results.tests
    assert progress_path(pytester.path / "out" / "results.json").read_bytes().endswith(b"}\n")


@pytest.mark.parametrize(
    "record",
    [
        {
            "nodeid": 'a.py::t["x\\\\y é\n"]',
            "outcome": "passed",
            "phase": "call",
            "duration": 1e-05,
        },
        {"nodeid": "a.py::t", "outcome": "passed", "phase": "setup", "duration": 0.1 + 0.2},
        {"nodeid": "a.py::t", "outcome": "failed", "phase": "call", "duration": 3.0, "crash": "x"},
    ],
)
def test_a_record_is_encoded_as_json_dumps_encodes_it(record: dict[str, object]) -> None:
    assert _encoded(record) == json.dumps(record)


KILLED_MID_RUN = """
import os
import signal


def test_one():
    pass


def test_two():
    assert 0, "wrong checksum"


def test_three():
    os.kill(os.getpid(), signal.SIGKILL)


def test_four():
    pass
"""


def test_a_child_killed_mid_run_leaves_every_finished_tests_record(
    pytester: pytest.Pytester,
) -> None:
    """SIGKILL leaves the process no moment to write anything: every line of the progress
    stream must be in the file once written, as the controller rebuilds the results from it."""
    pytester.makepyfile(test_board=KILLED_MID_RUN)
    report = pytester.path / "out" / "results.json"
    result = pytester.runpytest_subprocess(f"--fwloop-child-report={report}", "-p", "no:randomly")
    assert result.ret == -signal.SIGKILL
    assert not report.exists()
    rebuilt = results_from_progress(read_progress(progress_path(report)), "killed")
    assert rebuilt is not None
    records = {t.nodeid.split("::")[1]: t for t in rebuilt.tests}
    assert {name: t.outcome for name, t in records.items()} == {
        "test_one": "passed",
        "test_two": "failed",
        "test_three": "failed",
        "test_four": "error",
    }
    assert "wrong checksum" in records["test_two"].longrepr
    assert "died while this test ran" in records["test_three"].crash


def test_collection_error_is_an_error_record(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_broken_import="import no_such_module_fwloop\n")
    report = pytester.path / "results.json"
    result = pytester.runpytest_subprocess(f"--fwloop-child-report={report}")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    results = IterationResults.model_validate_json(report.read_text())
    [record] = results.tests
    assert (record.nodeid, record.outcome, record.phase) == (
        "test_broken_import.py",
        "error",
        "collect",
    )
    assert "no_such_module_fwloop" in record.longrepr
    assert (results.pass_count, results.total_count) == (0, 1)


def test_selection_file_narrows_the_run(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_a="def test_one():\n    pass\n\ndef test_two():\n    assert 0\n")
    selection = pytester.path / "selection.txt"
    selection.write_text("test_a.py::test_two\n")
    report = pytester.path / "results.json"
    result = pytester.runpytest_subprocess(
        f"--fwloop-child-report={report}", f"--fwloop-child-select={selection}"
    )
    result.assert_outcomes(failed=1)  # test_one is not even collected
    results = IterationResults.model_validate_json(report.read_text())
    assert [t.nodeid for t in results.tests] == ["test_a.py::test_two"]


SELECTED_SUITE = {
    "pkg/__init__.py": "",
    "pkg/test_deep.py": """import pytest


class TestBoard:
    class TestUart:
        @pytest.mark.parametrize("baud", [9600, 115200])
        def test_baud(self, baud):
            assert baud

        def test_other(self):
            pass

    def test_outside(self):
        pass


def test_plain():
    pass
""",
    "test_elsewhere.py": "open('elsewhere-imported', 'w').close()\n\ndef test_x():\n    pass\n",
    "helpers_test.py": "def test_h():\n    pass\n",
}


@pytest.mark.parametrize("python_files", ["test_*.py *_test.py", "*.py"])
def test_a_selection_collects_only_what_it_names(
    pytester: pytest.Pytester, python_files: str
) -> None:
    """Files holding no wanted test are not imported; within a file only what a wanted id lies
    under is made into items; packages and classes nested in classes still work."""
    for relpath, text in SELECTED_SUITE.items():
        pytester.path.joinpath(relpath).parent.mkdir(parents=True, exist_ok=True)
        pytester.path.joinpath(relpath).write_text(text)
    pytester.makeini(f"[pytest]\npython_files = {python_files}\n")
    wanted = [
        "pkg/test_deep.py::TestBoard::TestUart::test_baud[115200]",
        "helpers_test.py::test_h",
    ]
    selection = pytester.path / "selection.txt"
    selection.write_text("\n".join(wanted) + "\n")
    report = pytester.path / "results.json"
    result = pytester.runpytest_subprocess(
        f"--fwloop-child-report={report}", f"--fwloop-child-select={selection}"
    )
    result.assert_outcomes(passed=2)
    results = IterationResults.model_validate_json(report.read_text())
    assert sorted(t.nodeid for t in results.tests) == sorted(wanted)
    assert not (pytester.path / "elsewhere-imported").exists()


def test_merge_prefers_the_rerun(tmp_path: Path) -> None:
    first = IterationResults.model_validate(
        {
            "exitstatus": 1,
            "tests": [
                {"nodeid": "a", "outcome": "passed", "phase": "call"},
                {"nodeid": "b", "outcome": "error", "phase": "setup", "env_failure": "x"},
            ],
        }
    )
    rerun = IterationResults.model_validate(
        {"exitstatus": 0, "tests": [{"nodeid": "b", "outcome": "passed", "phase": "call"}]}
    )
    merged = first.merged(rerun)
    assert [(t.nodeid, t.outcome) for t in merged.tests] == [("a", "passed"), ("b", "passed")]
    assert merged.environment_failures() == []
