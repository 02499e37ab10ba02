"""A child that runs some tests collects only their files, where the user's arguments allow
(`core/suite/collection.py`, issue 35): the decision pure, then through `pytest --fwloop`."""

from __future__ import annotations

import json

import pytest

from loopkit import LoopProject, calc_fix_patches, coder_answer
from pytest_fwloop.core.suite.collection import Collection, collection_paths

RUN = Collection(inifile="/proj/pytest.ini", roots=("/proj/tests",))


def test_the_selected_tests_files_are_handed_over_once_each_in_pytests_walk_order() -> None:
    select = ["tests/b/test_x.py::test_one", "tests/a.py::test_k[1]", "tests/b/test_x.py::test_two"]
    conftests = [".", "tests", "tests/b"]
    assert collection_paths(select, RUN, conftests) == (["tests/a.py", "tests/b/test_x.py"], "")


@pytest.mark.parametrize(
    ("collection", "select", "why"),
    [
        (
            Collection(named=("tests/unit",), inifile="/proj/pytest.ini"),
            ["tests/unit/test_x.py::t"],
            "the run names its test paths (tests/unit)",
        ),
        (Collection(pyargs=True, inifile="/proj/pytest.ini"), ["t.py::t"], "--pyargs"),
        (Collection(), ["t.py::t"], "no ini file pins the rootdir"),
        (RUN, ["../elsewhere/test_x.py::t"], "names no test file under the rootdir"),
        (RUN, ["tests/test_x.py"], "names no test file under the rootdir"),
        (RUN, ["tests/unit/test_x.py::t"], "tests/hw/conftest.py lies beside the selected tests"),
    ],
    ids=["named-paths", "pyargs", "no-ini", "outside", "not-a-test", "conftest-beside"],
)
def test_where_the_files_could_change_what_is_selected_the_child_collects_as_before(
    collection: Collection, select: list[str], why: str
) -> None:
    files, reason = collection_paths(select, collection, [".", "tests", "tests/hw"])
    assert files == []
    assert why in reason


#: Logs the arguments each child running a selection collected from.
ARGS_LOG = """\
import os


def pytest_collection_finish(session):
    select = session.config.getoption("fwloop_child_select")
    if select:
        with open("collected-from.log", "a") as log:
            for arg in session.config.args:
                name = os.path.join(*select.split(os.sep)[-2:])
                log.write(name + " " + os.path.relpath(arg) + "\\n")
"""
#: A conftest beside the selected tests: logs each selective child that loads it.
BESIDE = """\
def pytest_configure(config):
    if config.getoption("fwloop_child_select"):
        open("beside-loaded.log", "a").write("loaded\\n")
"""


def focus_run(project: LoopProject, *files: tuple[str, str]) -> list[str]:
    """A loop whose patch iterations run a focus on tests/test_calc.py (and reruns its flaky
    candidates); the paths the focus and flaky children collected from."""
    project.calc_suite()
    project.write("conftest.py", ARGS_LOG)
    project.write("tests/other/test_other.py", "def test_other():\n    pass\n")
    for relpath, text in files:
        project.write(relpath, text)
    coder = project.agent("coder", [coder_answer(p) for p in calc_fix_patches()])
    result = project.run(f"--fwloop-coder={coder.spec}", "--fwloop-reviewer=rules")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    return collected(project, sampling=False)


def collected(project: LoopProject, sampling: bool) -> list[str]:
    """The paths the selective children collected from: those of the children that ran a
    sample of the passing tests to record a spectrum (the baseline's last flaky rerun, a
    spectrum run), or the others'."""
    lines = (project.root / "collected-from.log").read_text().splitlines()
    runs = [line.split(" ", 1) for line in lines]
    return sorted({path for name, path in runs if _samples(name) is sampling})


def _samples(select: str) -> bool:
    """Whether the child given `select` (`NN/name`) ran a sample of the passing tests."""
    return select == "01/flaky-2-select.txt" or "/spectrum-run" in select


def trace(project: LoopProject) -> str:
    return json.dumps([event["reason"] for event in project.events()])


@pytest.mark.slow
def test_a_focused_child_collects_only_the_selected_tests_files(project: LoopProject) -> None:
    # Not `testpaths` (tests, which holds tests/other/test_other.py): the selected file.
    assert focus_run(project) == ["tests/test_calc.py"]
    # The baseline's last flaky rerun records the spectrum: beside the failures it selects
    # passing tests of both files.
    assert collected(project, sampling=True) == [
        "tests/other/test_other.py",
        "tests/test_calc.py",
    ]
    assert "collects as a whole run" not in trace(project)
    assert project.summary()["pass_counts"][-1] == 7


@pytest.mark.slow
def test_a_conftest_beside_the_selection_keeps_the_whole_walk_and_the_trace_says_why(
    project: LoopProject,
) -> None:
    assert focus_run(project, ("tests/other/conftest.py", BESIDE)) == ["tests"]
    assert (project.root / "beside-loaded.log").read_text()
    assert (
        "a child running selected tests collects as a whole run: tests/other/conftest.py lies "
        "beside the selected tests"
    ) in trace(project)
    assert project.summary()["pass_counts"][-1] == 7
