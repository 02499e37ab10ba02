"""CLI coders that edit the workspace (DESIGN.md §5): the edit becomes the proposed patch."""

from __future__ import annotations

import pytest

from loopkit import CALC, CALC_TESTS, FIXES, LoopProject, coder_answer, tree_state

pytestmark = pytest.mark.slow


@pytest.fixture
def calc_project(project: LoopProject) -> LoopProject:
    """The project with the calc suite (three seeded bugs) in place."""
    project.calc_suite()
    return project


def editing(relpath: str, text: str) -> dict[str, object]:
    """A coder answer with an empty patch whose agent edited `relpath` itself."""
    return {**coder_answer("", f"edited {relpath}"), "__edit__": {relpath: text}}


def test_an_edit_of_the_workspace_is_reviewed_and_applied_as_a_patch(
    calc_project: LoopProject,
) -> None:
    stages = []
    text = CALC
    for old, new in FIXES:
        text = text.replace(old, new)
        stages.append(text)
    coder = calc_project.agent("coder", [editing("fw/calc.py", stage) for stage in stages])
    reviewer = calc_project.agent("reviewer", [])
    result = calc_project.run(f"--fwloop-coder={coder.spec}", f"--fwloop-reviewer={reviewer.spec}")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    summary = calc_project.summary()
    assert summary["outcome"] == "success"
    assert summary["pass_counts"] == [1, 3, 5, 6, 6]
    # The reviewer saw each edit as a diff; the loop applied it (which `git apply` refuses to
    # do twice, so the edit had been undone in between).
    first_review = reviewer.requests("reviewer")[0]["patch"]
    assert "diff --git a/fw/calc.py b/fw/calc.py" in first_review
    assert "+    return a + b" in first_review
    [run_dir] = calc_project.run_dirs()
    assert (run_dir / "rounds" / "02" / "patch.diff").read_text() == first_review
    assert (calc_project.root / "fw" / "calc.py").read_text() == stages[-1]
    result.stdout.fnmatch_lines(["*its edits of the workspace are the proposed patch*"])


def test_an_edit_of_a_test_file_is_a_policy_violation_and_is_undone(
    calc_project: LoopProject,
) -> None:
    before = tree_state(calc_project.root)
    coder = calc_project.agent(
        "coder", [editing("tests/test_calc.py", "def test_nothing():\n    pass\n")]
    )
    reviewer = calc_project.agent("reviewer", [])
    result = calc_project.run(f"--fwloop-coder={coder.spec}", f"--fwloop-reviewer={reviewer.spec}")
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    assert calc_project.summary()["outcome"] == "policy_violation"
    assert len(coder.requests()) == 3
    assert reviewer.requests("reviewer") == []
    assert tree_state(calc_project.root) == before
    assert (calc_project.root / "tests" / "test_calc.py").read_text() == CALC_TESTS
    [run_dir] = calc_project.run_dirs()
    rejected = sorted((run_dir / "rounds" / "02").glob("rejected-*-policy.diff"))
    assert len(rejected) == 3
    assert "+++ b/tests/test_calc.py" in rejected[0].read_text()
    # The coder was told, and it saw the tree without its own rejected edit.
    assert "tests/test_calc.py" in coder.requests()[1]["must_fix"][0]["issue"]
