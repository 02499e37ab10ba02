"""`pytest --fwloop` end to end, in real subprocesses, one outcome per story."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from agentkit import WIRE_FIELDS
from loopkit import (
    APPROVE,
    CALC,
    CALC_TESTS,
    FIXES,
    Agent,
    LoopProject,
    calc_fix_patches,
    check_records,
    coder_answer,
    tree_state,
    unified_diff,
)

pytestmark = pytest.mark.slow


def start_loop(project: LoopProject, coder: Agent, until: str) -> subprocess.Popen[str]:
    """Start `pytest --fwloop` in the background and return once it printed `until`."""
    process = subprocess.Popen(
        [sys.executable, "-m", "pytest", "--fwloop", f"--fwloop-coder={coder.spec}"],
        cwd=project.root,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # so a test can kill the controller with everything it started
    )
    assert process.stdout is not None
    for line in process.stdout:
        if until in line:
            break
    return process


def test_red_to_green_one_fix_per_iteration(project: LoopProject) -> None:
    project.calc_suite()
    coder = project.agent(
        "coder", [coder_answer(p, f"fix {i}") for i, p in enumerate(calc_fix_patches(), 1)]
    )
    reviewer = project.agent("reviewer", [], [APPROVE])
    result = project.run(f"--fwloop-coder={coder.spec}", f"--fwloop-reviewer={reviewer.spec}")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    summary = project.summary()
    assert summary["outcome"] == "success"
    assert summary["final_state"] == "SUCCESS"
    assert summary["convergence_type"] == "success"
    assert summary["pass_counts"] == [1, 3, 5, 6, 6]
    assert summary["total_counts"] == [6] * 5
    assert summary["coder_calls"] == 3
    assert summary["unresolved"] == []
    [run_dir] = project.run_dirs()
    final = (run_dir / "final.patch").read_text()
    assert "+    return a + b" in final
    assert "return max(low, min(value, high))" in final
    assert "return a + b" in (project.root / "fw/calc.py").read_text()
    for name in ("task-events.jsonl", "task-timeline.json", "report.md"):
        assert (run_dir / name).is_file()
    for n in ("01", "02", "03", "04", "05"):
        assert (run_dir / "rounds" / n / "results.json").is_file()
        assert (run_dir / "rounds" / n / "convergence.json").is_file()
    assert (run_dir / "rounds" / "02" / "patch.diff").is_file()
    assert (run_dir / "rounds" / "02" / "coder-1.request.json").is_file()
    assert not (run_dir / "rounds" / "05" / "patch.diff").exists()  # confirmation: no patch
    result.stdout.fnmatch_lines(
        [
            "*fwloop:*CONVERGENCE_CHECK -> SUCCESS: SUCCESS: pass_rate=100.0% >= target=100.0%*",
            "*outcome: success (SUCCESS)*",
            "*iter*kind*passed/total*",
            "*5*confirmation*6/6*success*",
        ]
    )
    # The coder saw the reviewer's verdict path: every request carries the protocol's fields.
    request = coder.requests()[0]
    for key in WIRE_FIELDS:
        assert key in request
    assert request["iteration"] == 2
    assert {f["nodeid"] for f in request["failures"]} == {
        f"tests/test_calc.py::{name}"
        for name in (
            "test_add_small",
            "test_add_negative",
            "test_scale_double",
            "test_scale_zero",
            "test_clamp_high",
            "test_clamp_inside",
        )
    } - {"tests/test_calc.py::test_clamp_inside"}


def test_confirm_runs_zero_ends_at_the_first_green(project: LoopProject) -> None:
    project.calc_suite()
    coder = project.agent("coder", [coder_answer(p) for p in calc_fix_patches()])
    result = project.run(f"--fwloop-coder={coder.spec}", "--fwloop-confirm-runs=0")
    assert result.ret == pytest.ExitCode.OK
    assert project.summary()["pass_counts"] == [1, 3, 5, 6]


def test_a_coder_that_never_helps_converges_with_improvement_at_5(
    project: LoopProject, pytester: pytest.Pytester
) -> None:
    project.calc_suite()
    # Only the clamp bug left: 5 of 6 pass, a failure rate well under seed 001's 70% threshold.
    one_bug = CALC
    for old, new in FIXES[:2]:
        one_bug = one_bug.replace(old, new)
    project.write("fw/calc.py", one_bug)
    subprocess.run(["git", "init", "-q"], cwd=project.root, check=True)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid"]
    subprocess.run([*git, "add", "-A"], cwd=project.root, check=True)
    subprocess.run([*git, "commit", "-qm", "base"], cwd=project.root, check=True)
    subprocess.run([*git, "branch", "feature"], cwd=project.root, check=True)
    project.write("fw/notes.txt", "stash me\n")
    subprocess.run([*git, "stash", "-u", "-q"], cwd=project.root, check=True)
    project.write("fw/calc.py", one_bug + "\n# an uncommitted edit\n")
    project.write("fw/untracked.py", "UNTRACKED = True\n")
    subprocess.run([*git, "add", "fw/untracked.py"], cwd=project.root, check=True)
    project.write("fw/also_untracked.txt", "scratch\n")
    before_tree = tree_state(project.root)

    def git_state() -> tuple[bytes, ...]:
        outputs = [
            subprocess.run(cmd, cwd=project.root, capture_output=True, check=True).stdout
            for cmd in (
                ["git", "rev-parse", "HEAD"],
                ["git", "for-each-ref"],
                ["git", "stash", "list"],
                ["git", "status", "--porcelain=v2"],
            )
        ]
        return (*outputs, (project.root / ".git" / "index").read_bytes())

    before_git = git_state()
    current = one_bug + "\n# an uncommitted edit\n"
    useless = []
    for i in range(1, 10):
        changed = current + f"# attempt {i}\n"
        useless.append(coder_answer(unified_diff("fw/calc.py", current, changed), f"try {i}"))
        current = changed
    coder = project.agent("coder", useless)
    result = project.run(f"--fwloop-coder={coder.spec}")
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    summary = project.summary()
    assert summary["outcome"] == "converged_with_improvement"
    assert summary["iterations"] == 5
    assert summary["pass_counts"] == [5] * 5
    assert summary["final_state"] == "FAILURE"
    assert "CONVERGED_WITH_IMPROVEMENT: best_pass_count=5" in summary["reason"]
    assert tree_state(project.root) == before_tree
    assert git_state() == before_git
    [run_dir] = project.run_dirs()
    assert not (run_dir / "best.patch").exists()  # nothing beat the baseline
    result.stdout.fnmatch_lines(
        ["*outcome: converged_with_improvement (FAILURE)*", "*restored to its baseline*"]
    )


@pytest.mark.parametrize(
    ("path", "what"),
    [("tests/test_calc.py", "protected"), ("../outside.py", "outside")],
)
def test_policy_violations_are_never_applied(project: LoopProject, path: str, what: str) -> None:
    project.calc_suite()
    before = tree_state(project.root)
    hostile = f"diff --git a/{path} b/{path}\n--- a/{path}\n+++ b/{path}\n@@ -1 +1 @@\n-x\n+y\n"
    if what == "protected":
        hostile = unified_diff(path, CALC_TESTS, "def test_nothing():\n    pass\n")
    coder = project.agent("coder", [coder_answer(hostile)])
    reviewer = project.agent("reviewer", [], [APPROVE])
    result = project.run(f"--fwloop-coder={coder.spec}", f"--fwloop-reviewer={reviewer.spec}")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    summary = project.summary()
    assert summary["outcome"] == "policy_violation"
    assert len(coder.requests()) == 3  # first try + two regenerations under tighter constraints
    assert reviewer.requests("reviewer") == []  # the reviewer never sees a patch the policy refused
    assert tree_state(project.root) == before
    assert not (project.pytester.path / "outside.py").exists()
    retry = coder.requests()[1]
    assert retry["must_fix"]
    assert retry["constraints"]
    [run_dir] = project.run_dirs()
    assert len(list((run_dir / "rounds" / "02").glob("rejected-*-policy.diff"))) == 3


def test_environment_failure_is_retried_and_never_sent_to_the_coder(
    project: LoopProject,
) -> None:
    project.calc_suite()
    flag = project.pytester.path / "board-was-down"
    project.write(
        "tests/conftest.py",
        f"""
import pathlib
import pytest

FLAG = pathlib.Path({str(flag)!r})

@pytest.fixture
def board():
    if not FLAG.exists():
        FLAG.write_text("down once")
        raise ConnectionRefusedError("board at 127.0.0.1:4444 refused the connection")
    return "up"
""",
    )
    project.write(
        "tests/test_board.py",
        "def test_board_answers(board):\n    assert board == 'up'\n",
    )
    coder = project.agent("coder", [coder_answer(p) for p in calc_fix_patches()])
    result = project.run(f"--fwloop-coder={coder.spec}")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    summary = project.summary()
    assert summary["outcome"] == "success"
    assert summary["pass_counts"][0] == 2  # clamp_inside, and the board test on its rerun
    for request in coder.requests():
        assert all("test_board" not in f["nodeid"] for f in request["failures"])
    recoveries = [e for e in project.events() if e["from"] == "ERROR_RECOVERY"]
    assert [e["to"] for e in recoveries] == ["TEST_SETUP"]
    assert recoveries[0]["retry_count"] == 1
    assert "TEST_ENV_FAILURE" in recoveries[0]["reason"]


def test_environment_that_stays_down_ends_env_unavailable(project: LoopProject) -> None:
    project.calc_suite()
    project.write(
        "tests/test_board.py",
        """
import pytest

@pytest.fixture
def board():
    raise ConnectionRefusedError("board at 127.0.0.1:4444 refused the connection")

def test_board_answers(board):
    pass
""",
    )
    coder = project.agent("coder", [coder_answer(p) for p in calc_fix_patches()])
    result = project.run(f"--fwloop-coder={coder.spec}")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    summary = project.summary()
    assert summary["outcome"] == "env_unavailable"
    assert "ConnectionRefusedError" in summary["reason"] or "ConnectionError" in summary["reason"]
    assert coder.requests() == []


def test_broken_build_is_rolled_back_and_diagnostics_reach_the_coder(
    project: LoopProject,
) -> None:
    project.calc_suite()
    project.write(
        "build.py",
        "import py_compile, sys\n"
        "try:\n    py_compile.compile('fw/calc.py', doraise=True)\n"
        "except py_compile.PyCompileError as exc:\n"
        "    print(f'error: {exc.msg}')\n"
        "    sys.exit(2)\n",
    )
    broken = unified_diff("fw/calc.py", CALC, CALC.replace("return a - b", "return a +* b"))
    good = calc_fix_patches()
    coder = project.agent("coder", [coder_answer(broken), *[coder_answer(p) for p in good]])
    result = project.run(
        f"--fwloop-coder={coder.spec}", f"--fwloop-build={sys.executable} build.py"
    )
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    retry = coder.requests()[1]
    assert "broke the build" in retry["must_fix"][0]["issue"]
    assert (
        "SyntaxError" in retry["must_fix"][0]["issue"] or "invalid" in retry["must_fix"][0]["issue"]
    )
    assert project.summary()["coder_calls"] == 4


def test_run_records_inside_the_tree_are_neither_snapshotted_nor_patchable(
    project: LoopProject,
) -> None:
    """A custom fwloop_run_dir in the tree, no ignore rule: the records the loop writes while a
    patch builds are not the build changing a protected path, no restore touches them, and a
    patch that writes into them is refused."""
    project.calc_suite("fwloop_run_dir = records\n")
    project.write("build.py", "pass\n")
    forged = unified_diff("records/verdict.txt", "", "all green\n")
    good = calc_fix_patches()
    coder = project.agent("coder", [coder_answer(forged), *[coder_answer(p) for p in good]])
    result = project.run(
        f"--fwloop-coder={coder.spec}", f"--fwloop-build={sys.executable} build.py"
    )
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    assert "records/verdict.txt: protected path" in coder.requests()[1]["must_fix"][0]["issue"]
    [run_dir] = sorted((project.root / "records").iterdir())
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["outcome"] == "success"
    check_records(run_dir)  # every record there, and valid
    # The records written during a coder call are not the coder editing the workspace.
    assert "edited the workspace" not in result.stdout.str()
    assert not (project.root / "records" / "verdict.txt").exists()


def test_baseline_build_failure_ends_build_failed(project: LoopProject) -> None:
    """Reported once, with the build's own error: no retry of the same tree, no talk of a
    patch to roll back, no agent call."""
    project.calc_suite()
    project.write("build.sh", "echo 'fw/uart.c:3:5: error: expected ; before }' >&2\nexit 2\n")
    coder = project.agent("coder", [coder_answer(calc_fix_patches()[0])])
    result = project.run(f"--fwloop-coder={coder.spec}", "--fwloop-build=sh build.sh")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    summary = project.summary()
    assert summary["outcome"] == "build_failed"
    assert "fw/uart.c:3:5: error: expected ; before }" in summary["reason"]
    assert "roll" not in summary["reason"]
    builds = [e for e in project.events() if e.get("from") == "BUILD_RUN"]
    assert len(builds) == 1
    assert coder.requests() == []


def test_a_build_program_that_does_not_exist_stops_before_the_baseline(
    project: LoopProject,
) -> None:
    project.calc_suite()
    coder = project.agent("coder", [coder_answer(calc_fix_patches()[0])])
    missing = project.run(f"--fwloop-coder={coder.spec}", "--fwloop-build=no-such-make-xyz")
    assert missing.ret == pytest.ExitCode.USAGE_ERROR
    missing.stderr.fnmatch_lines(["*--fwloop-build=no-such-make-xyz: 'no-such-make-xyz' is not*"])
    assert project.run_dirs() == []


def test_unappliable_patch_ends_patch_apply_failed(project: LoopProject) -> None:
    project.calc_suite()
    stale = unified_diff("fw/calc.py", CALC.replace("a - b", "a * b"), CALC)
    coder = project.agent("coder", [coder_answer(stale)])
    result = project.run(f"--fwloop-coder={coder.spec}")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert project.summary()["outcome"] == "patch_apply_failed"
    assert "does not apply" in coder.requests()[1]["must_fix"][0]["issue"]


def test_reviewer_changes_requested_goes_back_to_the_coder(project: LoopProject) -> None:
    project.calc_suite()
    patches = calc_fix_patches()
    coder = project.agent("coder", [coder_answer(p) for p in [patches[0], *patches]])
    reviewer = project.agent(
        "reviewer",
        [],
        [
            {
                "decision": "changes_requested",
                "must_fix": [{"issue": "add a comment"}],
                "risk": 0.3,
                "summary": "nearly",
            },
            APPROVE,
        ],
    )
    result = project.run(f"--fwloop-coder={coder.spec}", f"--fwloop-reviewer={reviewer.spec}")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    assert coder.requests()[1]["must_fix"] == [
        {"issue": "add a comment", "file": None, "line": None}
    ]
    assert reviewer.requests("reviewer")[0]["patch"] == patches[0]


def test_reviewer_invalid_twice_is_review_schema_invalid(project: LoopProject) -> None:
    project.calc_suite()
    coder = project.agent("coder", [coder_answer(calc_fix_patches()[0])])
    reviewer = project.agent("reviewer", [], [{"decision": "maybe", "risk": 3}])
    result = project.run(f"--fwloop-coder={coder.spec}", f"--fwloop-reviewer={reviewer.spec}")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert project.summary()["outcome"] == "review_schema_invalid"
    assert len(reviewer.requests("reviewer")) == 2
    assert reviewer.requests("reviewer")[1]["validation_errors"]
    assert tree_state(project.root)["fw/calc.py"][0].decode() == CALC


def test_garbage_coder_is_retried_once_then_provider_bad_output(project: LoopProject) -> None:
    project.calc_suite()
    coder = project.agent("coder", ["this is not json"])
    result = project.run(f"--fwloop-coder={coder.spec}")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert project.summary()["outcome"] == "provider_bad_output"
    assert len(coder.requests()) == 2


def test_missing_coder_executable_stops_the_run_before_the_baseline(project: LoopProject) -> None:
    project.calc_suite()
    result = project.run("--fwloop-coder=command:/no/such/agent")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--fwloop-coder: command:/no/such/agent: *does not exist*"])
    assert project.run_dirs() == []


def test_no_coder_is_a_usage_error_naming_the_providers(project: LoopProject) -> None:
    project.calc_suite()
    result = project.run()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*fwloop: no coder configured*command:PATH*scripted:DIR*"])
    assert project.run_dirs() == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--max-iter=0"], "*--max-iter=0: must be a whole number >= 1*"),
        (
            ["-o", "fwloop_context_bytes=100"],
            "*fwloop_context_bytes = '100': must be at least 1024*",
        ),
        (["--fwloop-mode=sometimes"], "*--fwloop-mode=sometimes: must be one of*"),
        (["--fwloop-criteria=nope.toml"], "*nope.toml*"),
        (["--fwloop-coder=bogus"], "*unknown provider 'bogus'*"),
    ],
)
def test_bad_options_are_one_line_usage_errors(
    project: LoopProject, args: list[str], message: str
) -> None:
    project.calc_suite("fwloop_coder = rules\n")
    result = project.run(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])


def test_high_failure_rate_ends_as_failure_at_iteration_3(project: LoopProject) -> None:
    project.calc_suite()
    current = CALC
    answers = []
    for i in range(1, 5):
        changed = current + f"# try {i}\n"
        answers.append(coder_answer(unified_diff("fw/calc.py", current, changed)))
        current = changed
    # 1 of 6 passes: failure rate 83% > 70% for three iterations (seed 001 example 3).
    coder = project.agent("coder", answers)
    result = project.run(f"--fwloop-coder={coder.spec}")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    summary = project.summary()
    assert summary["outcome"] == "failure"
    assert summary["iterations"] == 3
    assert summary["reason"].startswith("FAILURE: failure_rate=83.3% > threshold=70.0%")


def test_max_iter_reached(project: LoopProject) -> None:
    project.calc_suite()
    coder = project.agent("coder", [coder_answer(p) for p in calc_fix_patches()])
    result = project.run(f"--fwloop-coder={coder.spec}", "--max-iter=2")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    summary = project.summary()
    assert summary["outcome"] == "max_iterations_reached"
    assert summary["convergence_type"] == "timeout"
    [run_dir] = project.run_dirs()
    assert "return a + b" in (run_dir / "best.patch").read_text()
    assert (project.root / "fw/calc.py").read_text() == CALC


def test_sigterm_aborts_restores_the_tree_and_exits_2(project: LoopProject) -> None:
    project.calc_suite()
    project.write("tests/test_slow.py", "import time\n\ndef test_slow():\n    time.sleep(60)\n")
    before = tree_state(project.root)
    coder = project.agent("coder", [coder_answer(calc_fix_patches()[0])])
    process = start_loop(project, coder, "TEST_SETUP -> TEST_RUN")
    time.sleep(0.5)
    process.send_signal(signal.SIGTERM)
    output = process.communicate(timeout=60)[0]
    assert process.returncode == pytest.ExitCode.INTERRUPTED, output
    summary = project.summary()
    assert summary["outcome"] == "canceled"
    assert summary["final_state"] == "ABORTED"
    assert tree_state(project.root) == before
    assert "-> ABORTED" in output


def test_events_carry_the_decision_trace_fields(project: LoopProject) -> None:
    project.calc_suite()
    coder = project.agent("coder", [coder_answer(p) for p in calc_fix_patches()])
    project.run(f"--fwloop-coder={coder.spec}")
    events = project.events()
    assert (events[0]["from"], events[0]["to"]) == ("IDLE", "INIT")
    assert events[-1]["to"] == "SUCCESS"
    for event in events:
        assert set(event) >= {
            "time",
            "from",
            "to",
            "event",
            "reason",
            "iteration",
            "evidence",
            "retry_count",
            "retry_reason",
        }
    [run_dir] = project.run_dirs()
    timeline = json.loads((run_dir / "task-timeline.json").read_text())
    assert [it["kind"] for it in timeline["iterations"]] == [
        "baseline",
        "patch",
        "patch",
        "patch",
        "confirmation",
    ]


def plateau_project(project: LoopProject, ini_extra: str = "") -> tuple[str, Agent]:
    """The calc suite at a 3/6 baseline and a coder that plateaus on it (see _plateau_answers)."""
    base, answers = _plateau_answers()
    project.calc_suite(ini_extra)
    project.write("fw/calc.py", base)
    return base, project.agent("coder", answers)


def _plateau_answers() -> tuple[str, list[dict[str, object]]]:
    """A baseline at 3/6, one fix (5/6), then patches that each break scale again, each a little
    differently (3/6): every one is rolled back (DESIGN.md §13), and the attempts plateau."""
    base = CALC.replace(*FIXES[0])
    fixed = base.replace(*FIXES[1])
    answers = [coder_answer(unified_diff("fw/calc.py", base, fixed), "fix scale")]
    for i in range(1, 12):
        worse = fixed.replace(FIXES[1][1], f"{FIXES[1][0]}  # idea {i}")
        answers.append(coder_answer(unified_diff("fw/calc.py", fixed, worse), f"idea {i}"))
    return base, answers


def test_ci_plateau_fails_the_pipeline(project: LoopProject) -> None:
    _, coder = plateau_project(project)
    result = project.run(f"--fwloop-coder={coder.spec}")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    summary = project.summary()
    assert summary["outcome"] == "plateaued"
    assert summary["pass_counts"] == [3, 5, 3, 3, 3, 3, 3]
    assert summary["reason"].startswith("PLATEAUED: avg_improvement=0.00% < 1.00%")
    [run_dir] = project.run_dirs()
    assert "+    return value * factor\n" in (run_dir / "best.patch").read_text()


def test_ci_terminate_as_warning_exits_0_with_a_loud_warning(project: LoopProject) -> None:
    _, coder = plateau_project(project, "fwloop_ci_terminate_as = warning\n")
    result = project.run(f"--fwloop-coder={coder.spec}")
    assert result.ret == pytest.ExitCode.OK
    assert project.summary()["outcome"] == "plateaued"
    result.stdout.fnmatch_lines(["*WARNING: outcome plateaued exits 0 only because*NOT green*"])


def test_interactive_plateau_without_a_terminal_awaits_the_operator(project: LoopProject) -> None:
    base, coder = plateau_project(project)
    result = project.run(f"--fwloop-coder={coder.spec}", "--fwloop-mode=interactive")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    summary = project.summary()
    assert summary["outcome"] == "awaiting_operator_confirm"
    assert summary["final_state"] == "ABORTED"
    assert (project.root / "fw/calc.py").read_text() == base


def test_auto_mode_switches_strategy_twice_then_stops(project: LoopProject) -> None:
    _, coder = plateau_project(project)
    result = project.run(f"--fwloop-coder={coder.spec}", "--fwloop-mode=auto")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    summary = project.summary()
    assert summary["outcome"] == "plateaued"
    assert summary["iterations"] == 9
    assert "strategy switches" in summary["reason"] or "(2)" in summary["reason"]
    switched = [r for r in coder.requests() if any("abandon" in c for c in r["constraints"])]
    assert [r["iteration"] for r in switched] == [8, 9]
    # Rollbacks, plateau verdicts and strategy switches all replay from the records.
    replayed = project.replay()
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr


def test_conftest_hook_replaces_the_reviewer_schema(project: LoopProject) -> None:
    project.calc_suite()
    project.write(
        "conftest.py",
        """
def pytest_fwloop_schema(config, role, schema):
    if role == "reviewer":
        stricter = dict(schema)
        stricter["required"] = [*schema["required"], "ticket"]
        return stricter
    return None
""",
    )
    coder = project.agent("coder", [coder_answer(p) for p in calc_fix_patches()])
    result = project.run(f"--fwloop-coder={coder.spec}")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert project.summary()["outcome"] == "review_schema_invalid"
    assert "ticket" in coder.requests("reviewer")[0]["schema"]["required"]


def test_fwloop_cancel_stops_the_run_and_restores_the_tree(project: LoopProject) -> None:
    project.calc_suite()
    project.write("tests/test_slow.py", "import time\n\ndef test_slow():\n    time.sleep(60)\n")
    before = tree_state(project.root)
    coder = project.agent("coder", [coder_answer(calc_fix_patches()[0])])
    process = start_loop(project, coder, "TEST_SETUP -> TEST_RUN")
    cancel = subprocess.run(
        [sys.executable, "-m", "pytest_fwloop.cli", "cancel", str(project.root)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert cancel.returncode == 0, cancel.stderr
    assert "stopped; the tree is restored" in cancel.stdout
    process.communicate(timeout=60)
    assert process.returncode == pytest.ExitCode.INTERRUPTED
    assert project.summary()["outcome"] == "canceled"
    assert tree_state(project.root) == before


def test_fwloop_cancel_run_stops_only_the_run_it_names(project: LoopProject) -> None:
    project.calc_suite()
    project.write("tests/test_slow.py", "import time\n\ndef test_slow():\n    time.sleep(60)\n")
    coder = project.agent("coder", [coder_answer(calc_fix_patches()[0])])
    process = start_loop(project, coder, "TEST_SETUP -> TEST_RUN")
    [run_dir] = project.run_dirs()
    other = project.fwloop("cancel", "20001231-000000-beef", timeout=120)
    assert other.returncode == 1
    assert other.stderr.strip() == (
        f"fwloop: run 20001231-000000-beef is not running in {project.root} (run "
        f"{run_dir.name} is); nothing was stopped"
    )
    assert process.poll() is None  # still running
    stopped = project.fwloop("cancel", run_dir.name[:15], timeout=120)
    assert stopped.returncode == 0, stopped.stderr
    process.communicate(timeout=60)
    assert project.summary()["outcome"] == "canceled"


def test_a_killed_controller_is_recovered_on_the_next_start(project: LoopProject) -> None:
    project.calc_suite()
    hang = project.pytester.path / "hang"
    hang.touch()
    project.write(
        "tests/test_slow.py",
        # Hangs only once the first patch is in, so the kill lands mid-iteration 2.
        f"import pathlib, time\nfrom fw import calc\n\ndef test_slow():\n"
        f"    if calc.add(2, 3) == 5 and pathlib.Path({str(hang)!r}).exists():\n"
        "        time.sleep(60)\n",
    )
    before = tree_state(project.root)
    coder = project.agent("coder", [coder_answer(p) for p in calc_fix_patches()])
    # By iteration 2's test run the first patch is applied.
    process = start_loop(project, coder, "[2] TEST_SETUP -> TEST_RUN")
    assert "return a + b" in (project.root / "fw/calc.py").read_text()
    os.killpg(process.pid, signal.SIGKILL)
    process.communicate()
    hang.unlink()
    result = project.run(f"--fwloop-coder={coder.spec}", "--max-iter=1")
    result.stdout.fnmatch_lines(["*recovered the tree of interrupted run*restored 1 path(s)*"])
    _killed, latest = project.run_dirs()
    recovered = json.loads((latest / "recovered.json").read_text())
    assert recovered["restored_paths"] == ["fw/calc.py"]
    assert tree_state(project.root) == before


def test_suite_can_assert_on_the_reviewer_verdict(project: LoopProject) -> None:
    project.calc_suite()
    project.write(
        "tests/test_gate.py",
        """
def test_review_gate(fwloop_review):
    if fwloop_review is None:  # the baseline: no patch under test yet
        return
    assert fwloop_review.decision == "approve"
    assert fwloop_review.risk <= 0.5
""",
    )
    risky = {**APPROVE, "risk": 0.6}
    coder = project.agent("coder", [coder_answer(p) for p in calc_fix_patches()], [risky])
    result = project.run(f"--fwloop-coder={coder.spec}", "--max-iter=2")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    [run_dir] = project.run_dirs()
    results = json.loads((run_dir / "rounds" / "02" / "results.json").read_text())
    gate = next(t for t in results["tests"] if t["nodeid"].endswith("test_review_gate"))
    assert gate["outcome"] == "failed"
    assert "0.6" in gate["longrepr"]


def test_fixtures_are_none_outside_the_loop(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        "def test_none(fwloop_review, fwloop_test_plan):\n"
        "    assert fwloop_review is None\n"
        "    assert fwloop_test_plan is None\n"
    )
    pytester.runpytest_subprocess().assert_outcomes(passed=1)


def test_user_arguments_reach_every_iteration_including_xdist(project: LoopProject) -> None:
    project.calc_suite()
    coder = project.agent("coder", [coder_answer(p) for p in calc_fix_patches()])
    result = project.run(f"--fwloop-coder={coder.spec}", "-n", "2", "-k", "not clamp_high")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    summary = project.summary()
    # clamp_high is deselected by the user's -k in every child run: 5 tests count.
    assert summary["total_counts"] == [5, 5, 5, 5]
    assert summary["pass_counts"] == [1, 3, 5, 5]  # the clamp fix is never needed
    [run_dir] = project.run_dirs()
    assert "gw0" in (run_dir / "rounds" / "01" / "pytest.log").read_text()


def test_missing_claude_fails_over_to_the_next_provider_and_converges(
    project: LoopProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    project.calc_suite()
    bare = project.pytester.path / "bin"
    bare.mkdir()
    monkeypatch.setenv("PATH", f"{bare}{os.pathsep}/usr/bin{os.pathsep}/bin")
    assert shutil.which("claude") is None
    coder = project.agent("coder", [coder_answer(p) for p in calc_fix_patches()])
    result = project.run(f"--fwloop-coder=claude,{coder.spec}", f"--fwloop-reviewer={coder.spec}")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    assert project.summary()["outcome"] == "success"
    # Named once at the start, and kept: a portable list works where claude is not installed.
    result.stdout.fnmatch_lines(["*--fwloop-coder: claude: the 'claude' executable is not on*"])
    [run_dir] = project.run_dirs()
    first = json.loads((run_dir / "rounds" / "02" / "coder-1.meta.json").read_text())
    second = json.loads((run_dir / "rounds" / "02" / "coder-2.meta.json").read_text())
    assert (first["provider"], first["error_kind"]) == ("claude", "provider_not_found")
    assert (second["provider"], second["error_kind"]) == (coder.spec, None)
    failovers = [e for e in project.events() if e.get("kind") == "agent_call"]
    assert failovers
    assert all(e["retry_reason"] for e in failovers)


def test_the_configuration_file_in_use_is_protected_whatever_its_name(
    project: LoopProject,
) -> None:
    project.calc_suite()
    ini = (project.root / "pytest.ini").read_text()
    (project.root / "pytest.ini").unlink()
    project.write("fw-loop.ini", ini)
    hostile = unified_diff("fw-loop.ini", ini, ini + "addopts = --deselect tests\n")
    coder = project.agent("coder", [coder_answer(hostile)])
    result = project.run(f"--fwloop-coder={coder.spec}", "-c", "fw-loop.ini")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert project.summary()["outcome"] == "policy_violation"
    assert "fw-loop.ini: protected path" in coder.requests()[1]["must_fix"][0]["issue"]
    assert (project.root / "fw-loop.ini").read_text() == ini
