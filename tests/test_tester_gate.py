"""The tester role (DESIGN.md §5, seed 004): plans, the allowlist, and the outcomes they lead to."""

from __future__ import annotations

import json
import shlex
import sys
from typing import Any

import pytest

from loopkit import CALC, FIXES, LoopProject, calc_fix_patches, coder_answer, tree_state
from loopkit import unified_diff as diff
from pytest_fwloop.core.records.agent_protocol import load_schema, validate_answer
from pytest_fwloop.loop.steps.tester import with_known_nodeids

# -- select is checked against the collected node ids (pure) -------------------------------------

KNOWN = ["tests/test_calc.py::test_add_small", "tests/test_calc.py::test_scale_zero"]


def plan(select: list[str], commands: list[list[str]] | None = None) -> dict[str, Any]:
    return {
        "select": select,
        "commands": [{"argv": argv, "reason": "check it"} for argv in commands or []],
        "notes": "",
    }


def test_known_node_ids_pass_and_unknown_ones_fail_the_gate() -> None:
    schema = with_known_nodeids(load_schema("tester"), KNOWN)
    assert validate_answer("tester", plan(KNOWN[:1]), schema) == []
    assert validate_answer("tester", plan([]), schema) == []
    [error] = validate_answer("tester", plan(["tests/test_calc.py::test_nope"]), schema)
    assert error.startswith("$.select[0]: 'tests/test_calc.py::test_nope' is not one of")


def test_the_shipped_schema_is_left_alone() -> None:
    shipped = load_schema("tester")
    with_known_nodeids(shipped, KNOWN)
    assert shipped == load_schema("tester")


def test_a_replaced_schema_without_select_is_kept_as_it_is() -> None:
    replaced: dict[str, object] = {"type": "object", "required": ["notes"]}
    assert with_known_nodeids(replaced, KNOWN) is replaced


# -- the loop ------------------------------------------------------------------------------------

pytestmark = pytest.mark.slow

SELFCHECK = "tools/selfcheck.py"
CHECK_ARGV = [sys.executable, SELFCHECK]
CHECK_NODEID = "tester::" + shlex.join(CHECK_ARGV)
SCALE_CHECK = """\
import os, sys
sys.path.insert(0, os.getcwd())
from fw import calc
if calc.scale(4, 2) != 8:
    sys.exit(f"selfcheck: scale(4, 2) gave {calc.scale(4, 2)}")
print("selfcheck: ok")
"""
ALLOW = f"fwloop_allowed_commands =\n    {shlex.join(CHECK_ARGV)}\n    make check\n"


@pytest.fixture
def selfcheck_project(project: LoopProject) -> LoopProject:
    """The calc suite with the self-check script and `make check` allowed as tester commands."""
    project.calc_suite(ALLOW)
    project.write(SELFCHECK, SCALE_CHECK)
    return project


def results(project: LoopProject, iteration: int) -> dict[str, dict[str, Any]]:
    [run_dir] = project.run_dirs()
    document = json.loads((run_dir / "rounds" / f"{iteration:02d}" / "results.json").read_text())
    return {test["nodeid"]: test for test in document["tests"]}


def test_a_failing_command_goes_to_the_coder_and_counts_until_it_passes(
    selfcheck_project: LoopProject,
) -> None:
    selfcheck_project.write(
        "tests/test_plan.py",
        "def test_plan_is_visible(fwloop_test_plan):\n"
        "    if fwloop_test_plan is not None:\n"
        "        assert fwloop_test_plan.select == ['tests/test_calc.py::test_scale_double']\n",
    )
    patches = calc_fix_patches()
    tester_plan = plan(["tests/test_calc.py::test_scale_double"], [CHECK_ARGV, ["rm", "-rf", "fw"]])
    agent = selfcheck_project.agent(
        "agent", [coder_answer(p) for p in patches], tester=[tester_plan]
    )
    result = selfcheck_project.run(f"--fwloop-coder={agent.spec}", f"--fwloop-tester={agent.spec}")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    summary = selfcheck_project.summary()
    assert summary["outcome"] == "success"
    # The command counts as one more test in each patch iteration, never at the baseline or
    # the confirmation run.
    assert summary["pass_counts"] == [2, 4, 7, 8, 7]
    assert summary["total_counts"] == [7, 8, 8, 8, 7]
    assert results(selfcheck_project, 2)[CHECK_NODEID]["outcome"] == "failed"
    assert (
        "selfcheck: scale(4, 2) gave 9" in results(selfcheck_project, 2)[CHECK_NODEID]["longrepr"]
    )
    assert results(selfcheck_project, 3)[CHECK_NODEID]["outcome"] == "passed"
    assert CHECK_NODEID not in results(selfcheck_project, 5)
    # test_failed: the command's output reaches the coder as a must-fix item.
    [told] = [r for r in agent.requests("coder") if r["iteration"] == 3]
    assert told["must_fix"][0]["issue"].startswith(
        f"the tester's command `{shlex.join(CHECK_ARGV)}` failed (exit 1); make it pass. "
        "Its output ends:\n"
    )
    assert "selfcheck: scale(4, 2) gave 9" in told["must_fix"][0]["issue"]
    # The tester is asked once per applied patch, with the patch, the allowlist, and a schema
    # that names the node ids it may select.
    testers = agent.requests("tester")
    assert [r["iteration"] for r in testers] == [2, 3, 4]
    assert [r["patch"] for r in testers] == patches
    assert testers[0]["allowed_commands"] == [shlex.join(CHECK_ARGV), "make check"]
    for request in testers:  # the collected tests; the tester's own records are not tests
        enum = request["schema"]["properties"]["select"]["items"]["enum"]
        assert "tests/test_plan.py::test_plan_is_visible" in enum
        assert len(enum) == 7
    [run_dir] = selfcheck_project.run_dirs()
    assert json.loads((run_dir / "rounds" / "02" / "test-plan.json").read_text()) == tester_plan
    assert not (run_dir / "rounds" / "05" / "test-plan.json").exists()
    commands = json.loads((run_dir / "rounds" / "02" / "commands.json").read_text())["commands"]
    assert [(c["argv"], c["status"]) for c in commands] == [
        (["rm", "-rf", "fw"], "blocked"),
        (CHECK_ARGV, "failed"),
    ]
    assert (selfcheck_project.root / "fw" / "calc.py").is_file()  # the blocked command never ran
    assert (run_dir / "rounds" / "02" / "commands" / "1.log").is_file()
    timeline = json.loads((run_dir / "task-timeline.json").read_text())["iterations"]
    assert "tester pre-check: 0/1 selected test(s) passed" in timeline[1]["notes"]
    assert "tester pre-check: 1/1 selected test(s) passed" in timeline[2]["notes"]
    assert [e["event"] for e in selfcheck_project.events()].count("test_plan_ready") == 3
    # TESTER_PRECHECK names what it wrote, as run-directory.md promises of every sub-state.
    prechecks = [e for e in selfcheck_project.events() if e["event"] == "TESTER_PRECHECK"]
    assert prechecks[0]["evidence"] == [
        "rounds/02/tester-select.txt",
        "rounds/02/precheck.log",
        "rounds/02/precheck-results.json",
    ]


def test_the_same_command_failing_twice_in_a_row_is_repeated_test_failure(
    selfcheck_project: LoopProject,
) -> None:
    before = tree_state(selfcheck_project.root)
    add_fixed = CALC.replace(*FIXES[0])
    clamp_fixed = add_fixed.replace(*FIXES[2])
    coder = [
        coder_answer(calc_fix_patches()[0]),
        coder_answer(diff("fw/calc.py", add_fixed, clamp_fixed)),
    ]
    agent = selfcheck_project.agent("agent", coder, tester=[plan([], [CHECK_ARGV])])
    result = selfcheck_project.run(f"--fwloop-coder={agent.spec}", f"--fwloop-tester={agent.spec}")
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    summary = selfcheck_project.summary()
    assert summary["outcome"] == "repeated_test_failure"
    assert summary["final_state"] == "FAILURE"
    assert summary["pass_counts"] == [1, 3, 4]
    assert summary["reason"] == (
        f"TEST_COMMAND_FAILURE: the tester's command `{shlex.join(CHECK_ARGV)}` failed in two "
        "consecutive rounds; not retried: the cause lies outside the coder's patch (seed 004)"
    )
    assert tree_state(selfcheck_project.root) == before
    recovery = [e for e in selfcheck_project.events() if e["event"] == "repeated_test_failure"]
    assert [(e["from"], e["to"]) for e in recovery] == [("RESULT_ANALYSIS", "ERROR_RECOVERY")]


def test_only_blocked_commands_end_the_run_in_ci_mode(selfcheck_project: LoopProject) -> None:
    before = tree_state(selfcheck_project.root)
    hostile = plan([], [["touch", "PWNED"], ["sh", "-c", "make check"]])
    agent = selfcheck_project.agent(
        "agent", [coder_answer(calc_fix_patches()[0])], tester=[hostile]
    )
    result = selfcheck_project.run(f"--fwloop-coder={agent.spec}", f"--fwloop-tester={agent.spec}")
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    summary = selfcheck_project.summary()
    assert summary["outcome"] == "tester_command_blocked"
    assert summary["reason"].startswith(
        "all 2 command(s) the tester proposed are blocked: touch PWNED starts with no allowed "
        "prefix (fwloop_allowed_commands: "
    )
    assert len(agent.requests("tester")) == 1  # no explained retry outside auto mode
    assert not (selfcheck_project.root / "PWNED").exists()
    assert tree_state(selfcheck_project.root) == before
    result.stdout.fnmatch_lines(["*TEST_SETUP -> ERROR_RECOVERY*blocked*"])


def test_auto_mode_gives_the_tester_one_explained_retry(selfcheck_project: LoopProject) -> None:
    blocked = plan([], [["sh", "-c", "make check"]])
    agent = selfcheck_project.agent(
        "agent",
        [coder_answer(p) for p in calc_fix_patches()],
        tester=[blocked, plan([], [CHECK_ARGV])],
    )
    result = selfcheck_project.run(
        f"--fwloop-coder={agent.spec}", f"--fwloop-tester={agent.spec}", "--fwloop-mode=auto"
    )
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    first, retry, *_ = agent.requests("tester")
    assert "blocked_commands" not in first
    assert retry["iteration"] == 2
    assert retry["blocked_commands"] == [
        {
            "argv": ["sh", "-c", "make check"],
            "reason": "sh -c 'make check' starts with no allowed prefix (fwloop_allowed_commands: "
            f"{shlex.join(CHECK_ARGV)}, make check)",
        }
    ]
    assert retry["allowed_commands"] == [shlex.join(CHECK_ARGV), "make check"]
    assert "every command you proposed was blocked" in retry["constraints"][0]
    assert CHECK_NODEID in results(selfcheck_project, 2)


def test_an_invalid_plan_is_noted_and_the_loop_iterates(
    selfcheck_project: LoopProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Seed 004's plain iterate: the run never stops for invalid plans (the default stops at the
    # second round in a row, below).
    monkeypatch.setenv("FWLOOP_TESTER_SCHEMA_ROUNDS", "0")
    agent = selfcheck_project.agent(
        "agent",
        [coder_answer(p) for p in calc_fix_patches()],
        tester=[plan(["tests/test_calc.py::test_nope"])],
    )
    result = selfcheck_project.run(f"--fwloop-coder={agent.spec}", f"--fwloop-tester={agent.spec}")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    assert selfcheck_project.summary()["pass_counts"] == [1, 3, 5, 6, 6]
    testers = agent.requests("tester")
    assert len(testers) == 6  # each of three rounds: asked, re-asked with the errors
    assert "tests/test_calc.py::test_nope" in testers[1]["validation_errors"][0]
    skipped = [e for e in selfcheck_project.events() if e["event"] == "tester_schema_invalid"]
    assert [(e["from"], e["to"], e["iteration"]) for e in skipped] == [
        ("TEST_SETUP", "TEST_RUN", 2),
        ("TEST_SETUP", "TEST_RUN", 3),
        ("TEST_SETUP", "TEST_RUN", 4),
    ]
    [run_dir] = selfcheck_project.run_dirs()
    assert not (run_dir / "rounds" / "02" / "test-plan.json").exists()
    timeline = json.loads((run_dir / "task-timeline.json").read_text())["iterations"]
    assert any(
        note.startswith("tester_schema_invalid: $.select[0]") for note in timeline[1]["notes"]
    )


def test_invalid_plans_in_two_rounds_in_a_row_end_the_run(selfcheck_project: LoopProject) -> None:
    before = tree_state(selfcheck_project.root)
    agent = selfcheck_project.agent(
        "agent",
        [coder_answer(p) for p in calc_fix_patches()],
        tester=[plan(["tests/test_calc.py::test_nope"])],
    )
    result = selfcheck_project.run(f"--fwloop-coder={agent.spec}", f"--fwloop-tester={agent.spec}")
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    summary = selfcheck_project.summary()
    assert summary["outcome"] == "tester_schema_invalid"
    assert summary["pass_counts"] == [1, 3]  # the second patch's tests never ran
    assert len(agent.requests("tester")) == 4
    [told] = [r for r in agent.requests("coder") if r["iteration"] == 3]
    assert told["must_fix"][0]["issue"].startswith(
        "tester_schema_invalid: the tester could not plan tests for your patch of iteration 2"
    )
    ended = [e for e in selfcheck_project.events() if e["event"] == "tester_schema_invalid_again"]
    assert [(e["from"], e["to"], e["iteration"]) for e in ended] == [
        ("TEST_SETUP", "ERROR_RECOVERY", 3)
    ]
    assert tree_state(selfcheck_project.root) == before
    assert selfcheck_project.replay().returncode == 0


def test_a_missing_tester_stops_the_run_before_the_baseline(selfcheck_project: LoopProject) -> None:
    coder = selfcheck_project.agent("coder", [coder_answer(calc_fix_patches()[0])])
    result = selfcheck_project.run(
        f"--fwloop-coder={coder.spec}", "--fwloop-tester=command:/no/such/tester"
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--fwloop-tester: command:/no/such/tester: *does not exist*"])
    assert selfcheck_project.run_dirs() == []


def test_a_tester_that_fails_mid_run_ends_with_its_error_kind(
    selfcheck_project: LoopProject,
) -> None:
    broken = selfcheck_project.agents_dir / "tester.sh"
    broken.write_text("#!/bin/sh\necho 'tester crashed' >&2\nexit 3\n")
    broken.chmod(0o755)
    coder = selfcheck_project.agent("coder", [coder_answer(calc_fix_patches()[0])])
    result = selfcheck_project.run(
        f"--fwloop-coder={coder.spec}", f"--fwloop-tester=command:{broken}"
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    assert selfcheck_project.summary()["outcome"] == "provider_bad_output"
    assert f"tester provider command:{broken}" in selfcheck_project.summary()["reason"]
    assert "tester_failed" in [e["event"] for e in selfcheck_project.events()]


def test_an_allowlist_line_that_does_not_split_is_a_usage_error(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = LoopProject(pytester, monkeypatch)
    project.calc_suite("fwloop_allowed_commands = make 'check\nfwloop_coder = rules\n")
    result = project.run()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ['*fwloop: fwloop_allowed_commands line "make \'check": No closing quotation*']
    )


def test_a_command_that_rewrites_protected_files_fails_and_they_are_put_back(
    selfcheck_project: LoopProject,
) -> None:
    """`make check` is allowed, but the Makefile is source the coder may write: a recipe that
    plants a conftest xfailing every test is caught after the command and undone."""
    before = tree_state(selfcheck_project.root)
    plant = (
        "check:\n"
        "\tprintf 'import pytest\\ndef pytest_collection_modifyitems(items):\\n"
        "    [i.add_marker(pytest.mark.xfail) for i in items]\\n' > tests/conftest.py\n"
    )
    patches = calc_fix_patches()
    hostile = diff("Makefile", "", plant).replace(
        "--- a/Makefile", "new file mode 100644\n--- /dev/null", 1
    )
    agent = selfcheck_project.agent(
        "agent",
        [coder_answer(patches[0] + hostile), *[coder_answer(p) for p in patches[1:]]],
        tester=[plan([], [["make", "check"]])],
    )
    result = selfcheck_project.run(f"--fwloop-coder={agent.spec}", f"--fwloop-tester={agent.spec}")
    [run_dir] = selfcheck_project.run_dirs()
    commands = json.loads((run_dir / "rounds" / "02" / "commands.json").read_text())["commands"]
    assert [(c["argv"], c["status"]) for c in commands] == [(["make", "check"], "failed")]
    assert (
        "changed protected files (tests/conftest.py), which were put back" in (commands[0]["ended"])
    )
    assert all(t["outcome"] != "xfailed" for t in results(selfcheck_project, 3).values())
    assert "changed protected files" in agent.requests("coder")[1]["must_fix"][0]["issue"]
    # The coder left the recipe in place, so the command failed again in the next round.
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert selfcheck_project.summary()["outcome"] == "repeated_test_failure"
    assert tree_state(selfcheck_project.root) == before
