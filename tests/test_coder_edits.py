"""Coders' changes in every form they come in: a CLI coder's edits of the workspace (DESIGN.md
§5), a plain model's `edits` and misnumbered diffs (§16). Each becomes the one proposed patch."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from loopkit import (
    CALC,
    CALC_TESTS,
    FIXES,
    Agent,
    LoopProject,
    calc_fix_patches,
    coder_answer,
    tree_state,
    unified_diff,
)

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


# -- answers as plain models write them (DESIGN.md §16) --------------------------------------


def misnumbered(patch: str, shift: int = 3) -> str:
    """The diff a plain model writes: no `diff --git` line, no a/ b/, hunk numbers off."""
    patch = re.sub(r"^diff --git .*\n", "", patch, flags=re.M)
    patch = re.sub(r"^(---|\+\+\+) [ab]/", r"\1 ", patch, flags=re.M)
    return re.sub(
        r"@@ -(\d+),(\d+) \+(\d+),(\d+) @@",
        lambda m: f"@@ -{int(m[1]) + shift},{m[2]} +{int(m[3]) + shift},{m[4]} @@",
        patch,
    )


def with_edits(*edits: tuple[str, str], summary: str = "fix") -> dict[str, object]:
    """A coder answer carrying search/replace edits of fw/calc.py and no patch."""
    answer: dict[str, object] = coder_answer("", summary)
    answer["edits"] = [{"path": "fw/calc.py", "search": s, "replace": r} for s, r in edits]
    return answer


def converged(project: LoopProject, coder: Agent, reviewer: Agent) -> Path:
    """Run the loop to success, replay it, and return its run directory."""
    result = project.run(f"--fwloop-coder={coder.spec}", f"--fwloop-reviewer={reviewer.spec}")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    assert project.summary()["outcome"] == "success"
    replay = project.replay()
    assert replay.returncode == 0, replay.stdout + replay.stderr
    [run_dir] = project.run_dirs()
    assert (project.root / "fw" / "calc.py").read_text() == fixed_calc()
    return run_dir


def fixed_calc() -> str:
    text = CALC
    for old, new in FIXES:
        text = text.replace(old, new)
    return text


def test_diffs_off_by_three_without_prefixes_are_rebuilt_and_converge(
    calc_project: LoopProject,
) -> None:
    good = calc_fix_patches()
    coder = calc_project.agent("coder", [coder_answer(misnumbered(p)) for p in good])
    reviewer = calc_project.agent("reviewer", [])
    run_dir = converged(calc_project, coder, reviewer)
    assert calc_project.summary()["pass_counts"] == [1, 3, 5, 6, 6]
    # The reviewer, the records and replay saw the one diff git applies; the raw answer and
    # what was repaired stay beside it for an auditor.
    reviewed = [r["patch"] for r in reviewer.requests("reviewer")]
    assert reviewed == good
    for number, patch in enumerate(good, 2):
        folder = run_dir / "rounds" / f"{number:02d}"
        assert (folder / "patch.diff").read_text() == patch
        assert (folder / "coder-1.built.diff").read_text() == patch
        raw = json.loads((folder / "coder-1.answer.json").read_text())
        assert raw["patch"] == misnumbered(patch)
    reasons = [e["reason"] for e in calc_project.events() if e.get("event") == "analysis_ready"]
    assert (
        "built the one diff (rounds/02/coder-1.built.diff): paths given without a/ b/"
        in (reasons[0])
    )
    assert "(its header said line 5)" in reasons[0]


def test_edits_are_built_into_one_diff_and_converge(calc_project: LoopProject) -> None:
    coder = calc_project.agent("coder", [with_edits(fix) for fix in FIXES])
    reviewer = calc_project.agent("reviewer", [])
    run_dir = converged(calc_project, coder, reviewer)
    reviewed = [r["patch"] for r in reviewer.requests("reviewer")]
    assert reviewed == calc_fix_patches()
    assert (run_dir / "rounds" / "02" / "patch.diff").read_text() == reviewed[0]
    raw = json.loads((run_dir / "rounds" / "02" / "coder-1.answer.json").read_text())
    assert raw["edits"][0]["search"] == "return a - b"


def test_quotes_that_miss_are_refused_naming_the_nearest_lines_then_converge(
    calc_project: LoopProject,
) -> None:
    patches = calc_fix_patches()
    stale = unified_diff(
        "fw/calc.py",
        fixed_calc_after(1).replace("value * factor + 1", "value * factor + 2"),
        fixed_calc_after(2),
    )
    coder = calc_project.agent(
        "coder",
        [
            with_edits(("return a * b", "return a + b")),  # matches no place
            with_edits(("return", "return a + b")),  # matches three places
            with_edits(FIXES[0]),
            coder_answer(stale),  # its context matches nowhere
            coder_answer(patches[1]),
            with_edits(FIXES[2]),
        ],
    )
    reviewer = calc_project.agent("reviewer", [])
    converged(calc_project, coder, reviewer)
    told = [r["must_fix"] for r in coder.requests()]
    assert told[1][0]["issue"].startswith("edits[1] (fw/calc.py): the search matches no place")
    assert "5|     return a - b" in told[1][0]["issue"]
    assert told[1][0]["file"] == "fw/calc.py"
    assert told[2][0]["issue"].startswith(
        "edits[1] (fw/calc.py): the search matches more than one place (lines 5, 9)"
    )
    assert told[4][0]["issue"].startswith("the patch does not apply: git apply --check:")
    assert told[4][1]["issue"].startswith("fw/calc.py: hunk 1 `@@ -6,7 +6,7 @@`: its old side")
    assert "9|     return value * factor + 1" in told[4][1]["issue"]
    assert told[4][1]["line"] == 8  # `def scale`, the first line the hunk quotes
    # Nothing refused reached the reviewer.
    assert [r["patch"] for r in reviewer.requests("reviewer")] == patches


def fixed_calc_after(count: int) -> str:
    text = CALC
    for old, new in FIXES[:count]:
        text = text.replace(old, new)
    return text


def test_hostile_edits_are_policy_violations_and_nothing_is_read_or_written(
    calc_project: LoopProject,
) -> None:
    secret = calc_project.root.parent / "secret.txt"
    secret.write_text("TOKEN=hunter2\n")
    (calc_project.root / "fw" / "link.py").symlink_to(secret)
    before = tree_state(calc_project.root)
    hostile = [
        {**with_edits(("x", "y")), "edits": [{"path": p, "search": "TOKEN", "replace": "x"}]}
        for p in ("../secret.txt", "fw/link.py", "tests/test_calc.py")
    ]
    coder = calc_project.agent("coder", hostile)
    reviewer = calc_project.agent("reviewer", [])
    result = calc_project.run(f"--fwloop-coder={coder.spec}", f"--fwloop-reviewer={reviewer.spec}")
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    assert calc_project.summary()["outcome"] == "policy_violation"
    assert reviewer.requests("reviewer") == []
    told = [r["must_fix"][0]["issue"] for r in coder.requests()[1:]]
    assert "path outside the workspace root" in told[0]
    assert "fw/link.py is a symlink" in told[1]
    assert "hunter2" not in json.dumps(coder.requests())
    assert tree_state(calc_project.root) == before
    assert secret.read_text() == "TOKEN=hunter2\n"
    assert calc_project.replay().returncode == 0


def test_an_edit_of_a_module_the_suite_collects_from_is_refused(project: LoopProject) -> None:
    """ESP-IDF keeps its `pytest_*.py` beside the firmware: a file the suite takes tests from is
    a test file for edits as for a patch, whatever its name, and is refused before it is read."""
    project.write("fw/__init__.py", "")
    project.write("fw/calc.py", CALC)
    project.write("fw/pytest_calc.py", CALC_TESTS)
    project.write(
        "pytest.ini", "[pytest]\ntestpaths = fw\npythonpath = .\npython_files = pytest_*.py\n"
    )
    before = tree_state(project.root)
    hostile = with_edits(("x", "y"))
    # A search that matches nowhere: refused for its path before the file is read, it is never
    # answered with the file's nearest lines.
    hostile["edits"] = [{"path": "fw/pytest_calc.py", "search": "== 555", "replace": "!= 5"}]
    coder = project.agent("coder", [hostile])
    reviewer = project.agent("reviewer", [])
    result = project.run(f"--fwloop-coder={coder.spec}", f"--fwloop-reviewer={reviewer.spec}")
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    assert project.summary()["outcome"] == "policy_violation"
    assert "fw/pytest_calc.py: protected path" in coder.requests()[1]["must_fix"][0]["issue"]
    assert "calc.add" not in json.dumps(coder.requests()[1]["must_fix"])
    assert reviewer.requests("reviewer") == []
    assert tree_state(project.root) == before
