"""Honest endings on suites that are not clean (DESIGN.md §15): a coder's "not a code defect".

Real `pytest --fwloop` runs on the calc suite plus a test bound to the environment (it needs an
optional module the machine lacks), with a scripted coder that fixes what it can and declines
that one test with its reason.
"""

from __future__ import annotations

import json

import pytest

from loopkit import APPROVE, LoopProject, calc_fix_patches, coder_answer

pytestmark = pytest.mark.slow

EXTRA = "tests/test_extra.py::test_the_optional_codec_is_there"
EXTRA_TEST = """\
def test_the_optional_codec_is_there():
    import fwloop_optional_codec_xyz  # not installed on this machine
"""
WORDS = (
    "not a defect of the code: the environment lacks the optional module fwloop_optional_codec_xyz"
)


def _declining(patch: str) -> dict[str, object]:
    return {**coder_answer(patch), "declined": [{"nodeid": EXTRA, "reason": WORDS}]}


@pytest.mark.parametrize("advisory", [False, True], ids=["ci", "ci_terminate_as=warning"])
def test_declined_tests_leave_the_fixes_and_end_converged_with_improvement(
    project: LoopProject, advisory: bool
) -> None:
    project.calc_suite("fwloop_ci_terminate_as = warning\n" if advisory else "")
    project.write("tests/test_extra.py", EXTRA_TEST)
    first, second, third = calc_fix_patches()
    coder = project.agent(
        "coder", [_declining(first), coder_answer(second), coder_answer(third)], [APPROVE]
    )
    result = project.run(f"--fwloop-coder={coder.spec}")
    assert result.ret == (0 if advisory else 1), result.stdout.str()
    summary = project.summary()
    assert summary["outcome"] == "converged_with_improvement"
    assert summary["pass_counts"][0] < summary["pass_counts"][-1] == 6
    assert summary["unresolved"] == [EXTRA]
    assert summary["declined"][EXTRA]["reason"] == WORDS
    assert summary["reason"].startswith(
        f"only tests the coder declined are left failing (1: {WORDS}); pass count"
    )
    # No re-ask: three answers, and the declined test was never sent again.
    requests = coder.requests()
    assert len(requests) == summary["coder_calls"] == 3
    assert EXTRA in [f["nodeid"] for f in requests[0]["failures"]]
    assert all(EXTRA not in [f["nodeid"] for f in r["failures"]] for r in requests[1:])
    result.stdout.fnmatch_lines(
        [
            "*outcome: converged_with_improvement*",
            f"*declined by the coder, not sent again while failing the same way: {EXTRA}: {WORDS}*",
        ]
    )
    [run] = project.run_dirs()
    assert (run / "best.patch").read_text().count("+++ b/fw/calc.py") == 1
    page = (run / "report.html").read_text()
    declined = page.split('<section id="declined">', 1)[1].split("</section>", 1)[0]
    assert f"<code>{EXTRA}</code>" in declined
    assert WORDS in declined
    replayed = project.replay()
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr


def test_declining_every_failure_at_the_baseline_ends_failure_with_the_coders_words(
    project: LoopProject,
) -> None:
    project.write("tests/test_extra.py", EXTRA_TEST)
    project.write("tests/test_ok.py", "def test_ok():\n    pass\n")
    project.write("pytest.ini", "[pytest]\ntestpaths = tests\n")
    coder = project.agent("coder", [_declining("")], [APPROVE])
    result = project.run(f"--fwloop-coder={coder.spec}")
    assert result.ret == 1, result.stdout.str()
    summary = project.summary()
    assert summary["outcome"] == "failure"
    assert summary["reason"] == f"the coder declined every remaining failure: {WORDS}"
    assert summary["coder_calls"] == 1
    assert json.dumps(summary["declined"][EXTRA]).count(WORDS) == 1


def _converged_with_the_extra_declined(project: LoopProject) -> str:
    """The headline run: three fixes, the environment-bound test declined; its run id."""
    project.calc_suite()
    project.write("tests/test_extra.py", EXTRA_TEST)
    first, second, third = calc_fix_patches()
    coder = project.agent(
        "coder", [_declining(first), coder_answer(second), coder_answer(third)], [APPROVE]
    )
    result = project.run(f"--fwloop-coder={coder.spec}")
    assert project.summary()["outcome"] == "converged_with_improvement", result.stdout.str()
    [run] = project.run_dirs()
    # The summary ends with the command that puts the fixes back.
    assert result.stdout.lines[-1].endswith(
        f"to keep the fixes (iteration 4: 6/7 passed), run: fwloop apply {run.name}"
    ), result.stdout.lines[-3:]
    return run.name


def _plain_pytest(project: LoopProject) -> pytest.RunResult:
    return project.pytester.runpytest_subprocess("-p", "no:cacheprovider")


def test_fwloop_apply_puts_the_fixes_back_and_show_lists_what_is_known(
    project: LoopProject,
) -> None:
    run_id = _converged_with_the_extra_declined(project)
    assert _plain_pytest(project).parseoutcomes() == {"failed": 6, "passed": 1}
    project.write("notes.txt", "the operator's own edit, elsewhere\n")

    applied = project.fwloop("apply", run_id)
    assert applied.returncode == 0, applied.stdout + applied.stderr
    assert "the tree of iteration 4 of run" in applied.stdout
    assert _plain_pytest(project).parseoutcomes() == {"failed": 1, "passed": 6}
    assert (project.root / "notes.txt").read_text() == "the operator's own edit, elsewhere\n"
    again = project.fwloop("apply", run_id)
    assert again.returncode == 0, again.stderr
    assert "already in place" in again.stdout
    assert project.events()[-1]["kind"] == "applied"
    assert json.loads((project.run_dirs()[0] / "summary.json").read_text())["best"]["in_place"]
    assert "fwloop apply" not in project.fwloop("show", run_id).stdout
    replayed = project.replay()
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr

    # The run's declined test, as the next run's known failure: that run has nothing to fix.
    shown = project.fwloop("show", run_id, "--known-failures")
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.splitlines()[1:] == [f"# declined by the coder: {WORDS}", EXTRA]
    project.write("known-failures.txt", shown.stdout)
    idle = project.agent("idle", [coder_answer("")])
    result = project.run(
        f"--fwloop-coder={idle.spec}", "--fwloop-known-failures=known-failures.txt"
    )
    assert result.ret == 0, result.stdout.str()
    second = json.loads((project.run_dirs()[-1] / "summary.json").read_text())
    assert second["outcome"] == "success"
    assert second["coder_calls"] == 0
    assert second["known_failures"] == {EXTRA: "failed"}
    assert second["pass_counts"] == [6, 6]
    assert second["total_counts"] == [6, 6]
    result.stdout.fnmatch_lines(
        [f"*known failures, not counted and not sent to the coder (1): {EXTRA}*"]
    )


def test_fwloop_apply_refuses_when_the_user_changed_those_paths(project: LoopProject) -> None:
    run_id = _converged_with_the_extra_declined(project)
    edited = (project.root / "fw/calc.py").read_text() + "# the operator's edit\n"
    project.write("fw/calc.py", edited)
    refused = project.fwloop("apply", run_id)
    assert refused.returncode != 0
    assert "the tree changed since the run stopped (fw/calc.py)" in refused.stdout + refused.stderr
    assert (project.root / "fw/calc.py").read_text() == edited


def test_keep_best_leaves_the_best_tree_in_place(project: LoopProject) -> None:
    project.calc_suite("fwloop_keep = best\n")
    project.write("tests/test_extra.py", EXTRA_TEST)
    first, second, third = calc_fix_patches()
    coder = project.agent(
        "coder", [_declining(first), coder_answer(second), coder_answer(third)], [APPROVE]
    )
    result = project.run(f"--fwloop-coder={coder.spec}")
    assert result.ret == 1, result.stdout.str()
    summary = project.summary()
    assert summary["outcome"] == "converged_with_improvement"
    assert summary["best"]["in_place"] is True
    assert summary["best"]["iteration"] == 4
    assert "fwloop apply" not in result.stdout.str()
    result.stdout.fnmatch_lines(["*the best tree (iteration 4: 6/7 passed) is kept in place*"])
    # Each coder answer's confidence, per iteration, as its decision record judged it.
    [run] = project.run_dirs()
    page = (run / "report.html").read_text()
    cells = page.split('<td class="confidence">')[1:]
    assert [cell.split("</td>", 1)[0] for cell in cells] == ["", "0.80", "0.80", "0.80"]
    assert _plain_pytest(project).parseoutcomes() == {"failed": 1, "passed": 6}
    # The state names the tree left, so `fwloop apply` finds nothing to do.
    again = project.fwloop("apply", "last")
    assert again.returncode == 0, again.stderr
    assert "already in place" in again.stdout


def test_known_failures_are_never_sent_and_one_that_passes_is_reported(
    project: LoopProject,
) -> None:
    project.calc_suite()
    project.write("tests/test_extra.py", EXTRA_TEST)
    fixed_by_the_first = "tests/test_calc.py::test_add_small"
    project.write("known.txt", f"# environment-bound\n{EXTRA}\n{fixed_by_the_first}  # flaky?\n")
    coder = project.agent("coder", [coder_answer(p) for p in calc_fix_patches()], [APPROVE])
    result = project.run(f"--fwloop-coder={coder.spec}", "--fwloop-known-failures=known.txt")
    assert result.ret == 0, result.stdout.str()
    summary = project.summary()
    assert summary["outcome"] == "success"
    assert summary["known_failures"] == {EXTRA: "failed", fixed_by_the_first: "passed"}
    # At the baseline both known failures count nowhere: 1 of 5 counted tests passes.
    assert summary["pass_counts"][0] == 1
    assert summary["total_counts"][0] == 5
    sent = {f["nodeid"] for r in coder.requests() for f in r["failures"]}
    assert EXTRA not in sent
    assert fixed_by_the_first not in sent
    result.stdout.fnmatch_lines(
        [f"*known failure now passes: {fixed_by_the_first} (drop it from --fwloop-known-failures)*"]
    )


def test_an_unreadable_known_failures_file_is_a_usage_error(project: LoopProject) -> None:
    project.calc_suite()
    coder = project.agent("coder", [coder_answer("")])
    result = project.run(f"--fwloop-coder={coder.spec}", "--fwloop-known-failures=missing.txt")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--fwloop-known-failures=missing.txt: cannot read it*"])
    assert project.run_dirs() == []


def test_the_next_run_is_told_what_an_earlier_coder_declined(project: LoopProject) -> None:
    first_run = _converged_with_the_extra_declined(project)
    coder = project.agent("second", [coder_answer(p) for p in calc_fix_patches()])
    project.run(f"--fwloop-coder={coder.spec}")
    [told] = coder.requests()[0]["declined_before"]
    assert told["nodeid"] == EXTRA
    assert told["status"] == "declined"
    assert told["reason"] == WORDS
    assert told["run_id"] == first_run
    assert told["outcome"] == "converged_with_improvement"
    assert told["signature"] in {f["signature"] for f in coder.requests()[0]["failures"]}
