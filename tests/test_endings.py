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
