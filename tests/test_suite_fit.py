"""A real suite as users bring it (issue: fit real suites and CI), through `pytest --fwloop`."""

from __future__ import annotations

import json
import platform
import socket
import subprocess
from pathlib import Path

import pytest

from loopkit import (
    CALC,
    FIXES,
    Agent,
    LoopProject,
    calc_fix_patches,
    coder_answer,
    tree_state,
    unified_diff,
)

pytestmark = pytest.mark.slow


@pytest.mark.parametrize(
    ("path", "text", "named"),
    [
        ("tests/test_broken.py", "def test_x(:\n    pass\n", "tests/test_broken.py: SyntaxError"),
        (
            "tests/hw/conftest.py",
            "import no_such_module\n",
            "tests/hw: ModuleNotFoundError: No module named 'no_such_module'",
        ),
    ],
    ids=["syntax-error", "nested-conftest-import-error"],
)
def test_a_suite_that_does_not_collect_stops_before_any_agent_call(
    project: LoopProject, path: str, text: str, named: str
) -> None:
    project.calc_suite()
    project.write(path, text)
    coder = project.agent("coder", [coder_answer(calc_fix_patches()[0])])
    result = project.run(f"--fwloop-coder={coder.spec}")
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    summary = project.summary()
    assert summary["outcome"] == "collection_error"
    assert named in summary["reason"]
    assert coder.requests() == []
    assert summary["iterations"] <= 1


def test_a_conftest_the_controller_cannot_load_stops_pytest_itself(project: LoopProject) -> None:
    """A conftest on the initial paths is loaded by pytest before any plugin runs: pytest's own
    usage error (exit 4) names it, before a run, a snapshot or an agent call."""
    project.calc_suite()
    project.write("tests/conftest.py", "import no_such_module\n")
    coder = project.agent("coder", [coder_answer(calc_fix_patches()[0])])
    result = project.run(f"--fwloop-coder={coder.spec}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ImportError while loading conftest '*tests/conftest.py'*"])
    assert coder.requests() == []
    assert project.run_dirs() == []


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.mark.parametrize(
    ("option", "problem"),
    [
        ("--fwloop-coder=command:./agents/missing.py", "missing.py does not exist"),
        ("--fwloop-reviewer=command:./notes.txt", "notes.txt is not executable"),
        ("--fwloop-coder=claude", "the 'claude' executable is not on PATH"),
        ("--fwloop-tester=codex", "the 'codex' executable is not on PATH"),
        ("--fwloop-coder=openai:m@http://127.0.0.1:{port}/v1", "cannot be reached"),
    ],
    ids=["command-missing", "command-not-executable", "claude", "codex", "openai-refused"],
)
def test_every_provider_is_checked_before_the_baseline(
    project: LoopProject, monkeypatch: pytest.MonkeyPatch, option: str, problem: str
) -> None:
    project.calc_suite()
    project.write("notes.txt", "not a program\n")
    coder = project.agent("coder", [coder_answer(calc_fix_patches()[0])])
    monkeypatch.setenv("PATH", "/usr/bin:/bin")  # no claude, no codex
    args = [f"--fwloop-coder={coder.spec}", option.format(port=free_port())]
    result = project.run(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()
    result.stderr.fnmatch_lines([f"*{problem}*"])
    assert len([line for line in result.stderr.lines if "fwloop:" in line]) == 1
    assert project.run_dirs() == []
    assert coder.requests() == []


@pytest.mark.parametrize(
    ("verbosity", "progress", "listed", "reason"),
    [("-q", False, False, False), (None, True, True, False), ("-v", True, True, True)],
    ids=["quiet", "default", "verbose"],
)
def test_progress_and_the_failing_tests_follow_pytests_verbosity(
    project: LoopProject, verbosity: str | None, progress: bool, listed: bool, reason: bool
) -> None:
    project.calc_suite()
    args = ["--fwloop-coder=rules", "--max-iter=1", *([verbosity] if verbosity else [])]
    result = project.run(*args)
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    out = result.stdout.str()
    # Not a TTY here: a plain progress line, the first as soon as tests finish.
    assert ("fwloop: [1] tests: " in out) is progress
    assert ("still failing (5):" in out) is listed
    failing = [line for line in out.splitlines() if line.startswith("  tests/test_calc.py::")]
    assert len(failing) == (5 if listed else 0)
    assert all(("AssertionError" in line or "assert" in line) is reason for line in failing)


def git(root: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True)
    return done.stdout.strip()


def git_state(root: Path) -> dict[str, bytes]:
    """Every file of the user's .git directory, to show the loop never writes there."""
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted((root / ".git").rglob("*"))
        if p.is_file()
    }


def test_the_summary_records_what_the_run_was_started_with(project: LoopProject) -> None:
    project.calc_suite()
    project.write(".gitignore", ".fwloop/\n__pycache__/\n")
    for args in (
        ["init", "-q"],
        ["add", "-A"],
        ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "firmware"],
    ):
        git(project.root, *args)
    before = git_state(project.root)
    result = project.run("--fwloop-coder=rules", "--max-iter=1", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    context = project.summary()["context"]
    assert context["git_head"] == git(project.root, "rev-parse", "HEAD")
    assert "--fwloop" in context["command_line"]
    assert context["pytest"] == pytest.__version__
    assert context["python"] == platform.python_version()
    assert context["plugins"]["pytest-fwloop"] == context["fwloop"]
    assert context["randomly_seed"] is None  # pytest-randomly is off here
    assert git_state(project.root) == before


@pytest.mark.parametrize(
    ("where", "named"),
    [
        ("ini", "fwloop: ini fwloop_coder=bogus: unknown provider 'bogus'*"),
        ("env", "fwloop: $FWLOOP_CODER=bogus: unknown provider 'bogus'*"),
        ("flag", "fwloop: --fwloop-coder=bogus: unknown provider 'bogus'*"),
    ],
)
def test_a_bad_value_is_named_where_the_user_wrote_it(
    project: LoopProject, monkeypatch: pytest.MonkeyPatch, where: str, named: str
) -> None:
    project.calc_suite("fwloop_coder = bogus\n" if where == "ini" else "")
    if where == "env":
        monkeypatch.setenv("FWLOOP_CODER", "bogus")
    result = project.run(*(["--fwloop-coder=bogus"] if where == "flag" else []))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*{named}"])


def test_an_ini_build_that_cannot_run_names_the_ini_key(project: LoopProject) -> None:
    project.calc_suite("fwloop_build = no-such-make-xyz\n")
    result = project.run("--fwloop-coder=rules")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*fwloop: ini fwloop_build=no-such-make-xyz: 'no-such-make-xyz'*"])


def test_a_tree_the_loop_cannot_write_is_one_line_and_exit_4(project: LoopProject) -> None:
    project.calc_suite()
    (project.root / ".fwloop").write_text("a file where the loop keeps its state\n")
    result = project.run("--fwloop-coder=rules")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stdout.fnmatch_lines(["fwloop: cannot keep the loop's state in *.fwloop: *writable"])
    assert "Traceback" not in result.stdout.str() + result.stderr.str()


@pytest.mark.skipif(
    pytest.version_tuple < (9, 2), reason="typed values in [tool.pytest] need pytest >= 9.2"
)
def test_a_native_toml_table_may_write_numbers_as_numbers(pytester: pytest.Pytester) -> None:
    pytester.makepyprojecttoml(
        "[tool.pytest]\n"
        'fwloop_coder = "rules"\n'
        "fwloop_max_iter = 1\n"
        "fwloop_agent_timeout = 30\n"
        "fwloop_max_risk = 0.5\n"
    )
    pytester.makepyfile(test_a="def test_a():\n    assert False\n")
    result = pytester.runpytest_subprocess("--fwloop")
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str() + result.stderr.str()
    result.stdout.fnmatch_lines(["*max_iter=1*", "outcome: max_iterations_reached*"])
    wrong = pytester.runpytest_subprocess("--fwloop", "-o", "fwloop_max_iter=1.5")
    assert wrong.ret == pytest.ExitCode.USAGE_ERROR
    wrong.stderr.fnmatch_lines(["*fwloop_max_iter*must be a whole number*"])


def test_a_hook_that_raises_before_the_run_is_an_internal_error(project: LoopProject) -> None:
    project.calc_suite()
    project.write(
        "conftest.py",
        "def pytest_fwloop_make_provider(config, role, spec):\n"
        "    raise RuntimeError('hook bug')\n",
    )
    before = tree_state(project.root)
    result = project.run("--fwloop-coder=rules")
    assert result.ret == pytest.ExitCode.INTERNAL_ERROR
    [line] = [line for line in result.stdout.lines if line.startswith("fwloop:")]
    assert "internal error before the run started: RuntimeError: hook bug" in line
    assert "Traceback" not in result.stdout.str() + result.stderr.str()
    written = Path(line.rsplit("traceback in ", 1)[1])
    assert (
        'raise RuntimeError("hook bug")' in written.read_text() or "hook bug" in written.read_text()
    )
    assert tree_state(project.root) == before


def calc_at_half(project: LoopProject) -> str:
    """The calc suite with add right at the baseline (3/6); the firmware's text."""
    base = CALC.replace(*FIXES[0])
    project.calc_suite()
    project.write("fw/calc.py", base)
    return base


def calc_coder(project: LoopProject, *edits: tuple[str, str, str]) -> Agent:
    """A coder answering with one edit of fw/calc.py per call: (before, after, summary)."""
    answers = [coder_answer(unified_diff("fw/calc.py", a, b), why) for a, b, why in edits]
    return project.agent("coder", answers)


def test_a_regressing_coder_is_rolled_back_and_told(project: LoopProject) -> None:
    """Through `pytest --fwloop --fwloop-focus=off` (the whole suite every iteration): the
    coder's first patch fixes scale but breaks add, which passed before; the pass count does
    not rise, so the patch is rolled back and the coder is told which tests it broke; its next
    patches converge. With the focus on, the same break is found later, by the gate (below)."""
    base = calc_at_half(project)
    scale_fixed = base.replace(*FIXES[1])
    regressing = scale_fixed.replace(FIXES[0][1], FIXES[0][0])
    coder = calc_coder(
        project,
        (base, regressing, "fix scale, break add"),
        (base, scale_fixed, "fix scale"),
        (scale_fixed, scale_fixed.replace(*FIXES[2]), "clamp"),
    )
    result = project.run(
        f"--fwloop-coder={coder.spec}", "--fwloop-reviewer=rules", "--fwloop-focus=off"
    )
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    summary = project.summary()
    assert summary["pass_counts"] == [3, 3, 5, 6, 6]
    assert summary["regressions"] == {
        "2": ["tests/test_calc.py::test_add_small", "tests/test_calc.py::test_add_negative"]
    }
    [told] = [m["issue"] for m in coder.requests()[1]["must_fix"] if "rolled back" in m["issue"]]
    assert "tests/test_calc.py::test_add_small" in told
    kinds = [
        it["kind"]
        for it in json.loads((project.run_dirs()[0] / "task-timeline.json").read_text())[
            "iterations"
        ]
    ]
    assert kinds == ["baseline", "rollback", "patch", "patch", "confirmation"]


def test_a_regression_the_focus_hides_is_caught_by_the_gate(project: LoopProject) -> None:
    """Through `pytest --fwloop`: patch 1 fixes scale and breaks add; the focus reruns only what
    failed (scale and clamp_high; clamp still fails), so add's break stays hidden behind its
    carried pass. Patch 2 fixes clamp: the focus is green, the whole suite runs as the gate and
    finds add broken. It is not blamed on patch 2 (add did not run before it), the coder gets
    the regression, and its fix is judged by the gate again."""
    base = calc_at_half(project)
    broken = base.replace(*FIXES[1]).replace(FIXES[0][1], FIXES[0][0])
    clamped = broken.replace(*FIXES[2])
    coder = calc_coder(
        project,
        (base, broken, "fix scale"),
        (broken, clamped, "fix clamp"),
        (clamped, clamped.replace(*FIXES[0]), "fix add again"),
    )
    result = project.run(f"--fwloop-coder={coder.spec}", "--fwloop-reviewer=rules")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    summary = project.summary()
    add = ["tests/test_calc.py::test_add_small", "tests/test_calc.py::test_add_negative"]
    assert summary["pass_counts"] == [3, 5, 4, 6, 6]
    assert summary["total_counts"] == [6, 6, 6, 6, 6]
    assert summary["tests"][add[0]] == {
        "1": "passed",
        "2": "passed",
        "3": "failed",
        "4": "passed",
        "5": "passed",
    }
    assert summary["regressions"] == {"3": add}
    # Baseline 6 + its 3 failures rerun twice, the last with a sample of the 3 passing (it
    # records the spectrum, issue 41); the focus on those 3; the focus again (all pass) + the
    # gate 6 + add's 2 new failures rerun twice, the last with the gate's 4 passing; the focus
    # on the 5 that ever failed + the gate 6 (no spectrum run: the reruns recorded); the
    # confirmation reruns those 5.
    assert summary["executed_counts"] == [6 + 3 + 6, 3, 3 + 6 + 2 + 6, 5 + 6, 5]
    run_dir = project.run_dirs()[0]
    second = json.loads((run_dir / "rounds" / "02" / "results.json").read_text())["tests"]
    assert {t["nodeid"] for t in second if t["carried"]} == {
        *add,
        "tests/test_calc.py::test_clamp_inside",
    }
    timeline = json.loads((run_dir / "task-timeline.json").read_text())["iterations"]
    assert [it["kind"] for it in timeline] == [
        "baseline",
        "patch",
        "patch",
        "patch",
        "confirmation",
    ]
    assert any("regression gate" in note for note in timeline[2]["notes"])
    told = coder.requests()[2]["regressions"]
    assert [(r["nodeid"], r["broken_in"]) for r in told] == [(add[0], 3), (add[1], 3)]
    # The decisions taken on carried and gate evidence replay from the records.
    replayed = project.replay()
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
