"""`pytest --fwloop` when the loop itself breaks: outcome internal_error, exit 3, tree restored.

Real breakages: a conftest hook handing the tester a broken JSON Schema (jsonschema raises
SchemaError inside the controller, after the coder's patch is in the tree), a conftest hook that
raises before the loop starts, and a hostile agent that puts a directory where the final report
goes, so the end of the run fails partway.
"""

from __future__ import annotations

import json
import stat
import sys
from pathlib import Path

import pytest

from loopkit import (
    APPROVE,
    CALC,
    FIXES,
    LoopProject,
    check_records,
    coder_answer,
    tree_state,
    unified_diff,
)

pytestmark = pytest.mark.slow

BROKEN_TESTER_SCHEMA = """
def pytest_fwloop_schema(config, role, schema):
    # A typo'd type: not a JSON Schema at all.
    return {"type": "objcet"} if role == "tester" else None
"""

# A coder that, before answering, puts a directory where the run's report.md will be written.
SABOTEUR = """\
import json, pathlib, sys
request = json.load(sys.stdin)
for run in (pathlib.Path(request["workspace"]) / ".fwloop" / "runs").iterdir():
    (run / "report.md").mkdir(exist_ok=True)
print(json.dumps(ANSWERS[request["role"]]))
"""


def fix_everything() -> dict[str, object]:
    fixed = CALC
    for old, new in FIXES:
        fixed = fixed.replace(old, new)
    return coder_answer(unified_diff("fw/calc.py", CALC, fixed), "fix all three")


def assert_reported_in_one_line(output: str, run_dir: Path) -> None:
    assert "Traceback" not in output
    assert "INTERNALERROR" not in output
    [pointer] = [line for line in output.splitlines() if "internal-error.txt" in line]
    assert pointer.startswith("fwloop: internal error: ")
    assert str(run_dir / "internal-error.txt") in pointer


def test_an_exception_inside_the_loop_ends_as_internal_error_with_the_tree_restored(
    project: LoopProject,
) -> None:
    project.calc_suite()
    project.write("conftest.py", BROKEN_TESTER_SCHEMA)
    before = tree_state(project.root)
    tester = {"select": [], "commands": [], "notes": "nothing to add"}
    agent = project.agent("agent", [fix_everything()], tester=[tester])
    result = project.run(f"--fwloop-coder={agent.spec}", f"--fwloop-tester={agent.spec}")
    output = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.INTERNAL_ERROR, output
    # The patch was in the tree when the tester's schema broke; it is gone again.
    assert agent.requests("tester")
    assert tree_state(project.root) == before
    [run_dir] = project.run_dirs()
    summary = project.summary()
    assert summary["outcome"] == "internal_error"
    assert summary["final_state"] == "FAILURE"
    assert summary["exit_status"] == 3
    assert summary["reason"].startswith("internal error: SchemaError: 'objcet' is not valid")
    assert summary["internal_error"] == "internal-error.txt"
    assert summary["pass_counts"] == [1]
    # The call that crashed is on record and counted.
    assert summary["usage"]["roles"]["tester"]["calls"] == 1
    meta = json.loads((run_dir / "rounds" / "02" / "tester-1.meta.json").read_text())
    assert meta["error_kind"] == "internal_error"
    traceback = (run_dir / "internal-error.txt").read_text()
    assert "Traceback (most recent call last)" in traceback
    assert "jsonschema.exceptions.SchemaError" in traceback
    [event] = [e for e in project.events() if e["kind"] == "internal_error"]
    assert (event["from"], event["to"], event["iteration"]) == ("TEST_SETUP", "FAILURE", 2)
    assert event["evidence"] == ["internal-error.txt"]
    for name in ("task-timeline.json", "report.md"):
        assert (run_dir / name).is_file()
    assert check_records(run_dir) > 10
    result.stdout.fnmatch_lines(
        ["*outcome: internal_error (FAILURE)*", "*restored to its baseline*"]
    )
    assert_reported_in_one_line(output, run_dir)


def test_a_hook_that_raises_before_the_loop_starts_is_an_internal_error_too(
    project: LoopProject,
) -> None:
    project.calc_suite()
    project.write(
        "conftest.py",
        "def pytest_fwloop_schema(config, role, schema):\n    return schema['propertys']\n",
    )
    before = tree_state(project.root)
    coder = project.agent("coder", [fix_everything()])
    result = project.run(f"--fwloop-coder={coder.spec}")
    output = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.INTERNAL_ERROR, output
    assert coder.requests() == []
    assert tree_state(project.root) == before
    assert not (project.root / ".fwloop" / "journal.json").exists()  # nothing left to recover
    [run_dir] = project.run_dirs()
    summary = project.summary()
    assert summary["outcome"] == "internal_error"
    assert summary["reason"] == "internal error: KeyError: 'propertys'"
    assert summary["internal_error"] == "internal-error.txt"
    assert "conftest.py" in (run_dir / "internal-error.txt").read_text()
    assert_reported_in_one_line(output, run_dir)


def test_a_run_whose_end_fails_partway_still_restores_the_tree_and_exits_3(
    project: LoopProject,
) -> None:
    project.calc_suite()
    before = tree_state(project.root)
    path = project.agents_dir / "saboteur.py"
    answers = {"coder": fix_everything(), "reviewer": APPROVE}
    path.write_text(f"#!{sys.executable}\nANSWERS = {answers!r}\n{SABOTEUR}")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    result = project.run(f"--fwloop-coder=command:{path}")
    output = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.INTERNAL_ERROR, output
    # The loop had fixed everything, but a run that cannot finish its records is not a success.
    assert tree_state(project.root) == before
    [run_dir] = project.run_dirs()
    summary = project.summary()
    assert summary["outcome"] == "internal_error"
    assert summary["exit_status"] == 3
    assert "IsADirectoryError" in summary["reason"]
    assert summary["pass_counts"] == [1, 6, 6]  # what finalize wrote before it failed is kept
    assert "IsADirectoryError" in (run_dir / "internal-error.txt").read_text()
    assert (run_dir / "final.patch").is_file()
    assert_reported_in_one_line(output, run_dir)
    assert "restored to its baseline" in output
