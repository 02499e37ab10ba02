"""`pytest --fwloop` with the options and plugins real suites carry (pytest-rerunfailures,
pytest-timeout, pytest-randomly, an ini whose addopts holds --fwloop, -x/--lf/--sw)."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest

from loopkit import APPROVE, LoopProject, calc_fix_patches, coder_answer

FLAKY = """\
_attempts = []


def test_flaky_link():
    _attempts.append(1)
    assert len(_attempts) > 1, "the link dropped once"
"""

HANG = """\
import time


def test_board_hangs():
    time.sleep(60)
"""


def fixing_agents(project: LoopProject) -> list[str]:
    patches = calc_fix_patches()
    coder = project.agent("coder", [coder_answer(p, f"fix {i}") for i, p in enumerate(patches)])
    reviewer = project.agent("reviewer", [], [APPROVE])
    return [f"--fwloop-coder={coder.spec}", f"--fwloop-reviewer={reviewer.spec}"]


def results(project: LoopProject, round_: str = "01") -> dict[str, dict[str, object]]:
    [run_dir] = project.run_dirs()
    data = json.loads((run_dir / "rounds" / round_ / "results.json").read_text())
    return {t["nodeid"]: t for t in data["tests"]}


@pytest.mark.slow
def test_an_ini_whose_addopts_carry_fwloop_runs_the_loop_once(project: LoopProject) -> None:
    project.calc_suite("addopts = --fwloop\n")
    args = fixing_agents(project)
    result = project.pytester.runpytest_subprocess(*args)
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    assert project.summary()["pass_counts"] == [1, 3, 5, 6, 6]


@pytest.mark.parametrize(
    ("option", "named"),
    [
        ("-x", "-x/--maxfail"),
        ("--maxfail=3", "-x/--maxfail"),
        ("--lf", "--lf/--last-failed"),
        ("--sw", "--sw/--stepwise"),
        ("--sw-skip", "--sw-skip/--stepwise-skip"),
    ],
)
def test_options_that_run_part_of_the_suite_are_refused(
    project: LoopProject, option: str, named: str
) -> None:
    project.calc_suite()
    result = project.run(*fixing_agents(project), option)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*fwloop: {named}*so iterations could not be compared*"])
    assert project.run_dirs() == []


@pytest.mark.slow
def test_reordering_options_are_kept(project: LoopProject) -> None:
    project.calc_suite()
    result = project.run(*fixing_agents(project), "--ff")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()


@pytest.mark.slow
def test_a_test_that_passes_on_its_rerun_counts_as_passed(project: LoopProject) -> None:
    project.calc_suite()
    project.write("tests/test_link.py", FLAKY)
    result = project.run(*fixing_agents(project), "--reruns=1")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    flaky = results(project)["tests/test_link.py::test_flaky_link"]
    assert (flaky["outcome"], flaky["reruns"]) == ("passed", 1)
    assert project.summary()["pass_counts"][0] == 2  # test_add_small and the flaky test


@pytest.mark.slow
def test_a_test_killed_by_pytest_timeout_is_named(project: LoopProject) -> None:
    """pytest-timeout's thread method ends the child process: what finished is kept, the hung
    test fails with the reason, and the run goes on."""
    project.calc_suite()
    project.write("tests/test_zz_hang.py", HANG)
    result = project.run(
        *fixing_agents(project), "--timeout=2", "--timeout-method=thread", "--max-iter=2"
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    baseline = results(project)
    hung = baseline["tests/test_zz_hang.py::test_board_hangs"]
    assert hung["outcome"] == "failed"
    assert "the child pytest died while this test ran" in str(hung["crash"])
    assert len(baseline) == 7
    assert "tests/test_zz_hang.py::test_board_hangs" in project.summary()["unresolved"]


@pytest.mark.slow
def test_the_loop_converges_under_pytest_randomly(
    project: LoopProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PYTEST_ADDOPTS")
    project.calc_suite()
    result = project.run(*fixing_agents(project), "-p", "randomly", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    [run_dir] = project.run_dirs()
    seed = project.summary()["context"]["randomly_seed"]
    assert isinstance(seed, int)
    # One seed for every child run, so the iterations are comparable and the run reproducible.
    logs = sorted(run_dir.glob("rounds/*/pytest.log"))
    assert len(logs) == 5
    assert all(f"Using --randomly-seed={seed}" in log.read_text() for log in logs)


@pytest.mark.slow
@pytest.mark.parametrize("converges", [True, False], ids=["success", "restored"])
def test_the_users_reports_describe_the_final_tree(project: LoopProject, converges: bool) -> None:
    """--junitxml and --html receive the whole-suite run that tested the tree the user is left
    with: on success the regression gate of the last patch (the confirmation after it reruns
    only a focus on the same tree), the baseline once the tree is restored."""
    project.calc_suite()
    patches = calc_fix_patches() if converges else calc_fix_patches()[:1]
    coder = project.agent("coder", [coder_answer(p) for p in patches])
    result = project.run(
        f"--fwloop-coder={coder.spec}",
        "--junitxml=ci/junit.xml",
        "--html=ci/report.html",
        "--max-iter=3" if not converges else "--max-iter=10",
    )
    assert result.ret == (pytest.ExitCode.OK if converges else pytest.ExitCode.TESTS_FAILED)
    summary = project.summary()
    iteration = len(summary["pass_counts"]) - 1 if converges else 1
    passed = summary["pass_counts"][iteration - 1]
    suite = ET.parse(project.root / "ci" / "junit.xml").getroot().find("testsuite")
    assert suite is not None
    assert int(suite.get("tests", 0)) - int(suite.get("failures", 0)) == passed
    properties = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert properties["fwloop_run"] == summary["run_id"]
    assert properties["fwloop_iteration"] == str(iteration)
    html = (project.root / "ci" / "report.html").read_text()
    assert f"{passed} Passed" in html
    assert summary["run_id"] in html
    result.stdout.fnmatch_lines([f"*JUnit XML of iteration {iteration}: *ci/junit.xml"])


EVERY_OTHER_RUN = """\
import pathlib

COUNTER = pathlib.Path({counter!r})


def test_link_every_other_run():
    runs = int(COUNTER.read_text()) + 1 if COUNTER.exists() else 1
    COUNTER.write_text(str(runs))
    assert runs % 2 == 0, f"link dropped on run {{runs}}"
"""


@pytest.mark.slow
def test_a_test_that_fails_every_other_run_is_flaky_not_a_bug(project: LoopProject) -> None:
    """The loop's own reruns, no plugin: the test fails in each iteration's run and passes on
    its rerun; it is listed as flaky, left out of the counts and never sent to the coder."""
    project.calc_suite()
    counter = project.agents_dir / "link-runs.txt"
    project.write("tests/test_link.py", EVERY_OTHER_RUN.format(counter=str(counter)))
    coder = project.agent("coder", [coder_answer(p) for p in calc_fix_patches()])
    result = project.run(f"--fwloop-coder={coder.spec}", "--fwloop-reviewer=rules")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    summary = project.summary()
    assert summary["pass_counts"] == [1, 3, 5, 6, 6]  # the flaky test is in neither count
    assert set(summary["flaky"]) == {"1", "2", "3", "4", "5"}
    sent = [f["nodeid"] for r in coder.requests() for f in r["failures"]]
    assert "tests/test_link.py::test_link_every_other_run" not in sent
    result.stdout.fnmatch_lines(["*flaky (1, counted as fwloop_flaky_policy = exclude*"])
