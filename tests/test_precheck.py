"""The pre-check before the build (seed 001 §5.6): the pure rules, the allowlist runner handing
the operator's command the written files, the controller rolling a failing patch back (in
process, tests/controllerkit.py), and real `pytest --fwloop` runs (slow)."""

from __future__ import annotations

import re
import shutil
import sys
import threading
from pathlib import Path

import pytest

from controllerkit import ControllerKit, firmware_patch, fixing
from loopkit import CALC, LoopProject, calc_fix_patches, coder_answer, unified_diff
from pytest_fwloop.config.settings import load_settings
from pytest_fwloop.core.gate.precheck import command_files, python_problem, written_paths
from pytest_fwloop.core.machine.outcomes import Outcome
from pytest_fwloop.core.records.agent_protocol import MustFix
from pytest_fwloop.procs.allowlist_runner import AllowlistRunner, CommandBlocked

# -- the pure rules ------------------------------------------------------------------------------


def test_a_syntax_error_names_file_line_column_and_the_line() -> None:
    problem = python_problem("fw/calc.py", b"def add(a, b):\n    return a +* b\n")
    assert problem is not None
    assert problem.startswith("fw/calc.py:2:")
    assert "SyntaxError: invalid syntax" in problem
    assert "    return a +* b" in problem


def test_compiling_runs_none_of_the_code(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    source = f"open({str(marker)!r}, 'w').write('x')\nimport os\nos._exit(3)\n"
    assert python_problem("fw/evil.py", source.encode()) is None
    assert not marker.exists()


def test_a_warning_is_not_an_error_even_when_warnings_are_errors() -> None:
    # This suite runs with filterwarnings = error, under which compile() would raise.
    assert python_problem("fw/re.py", b"PATTERN = '\\d+'\n") is None


@pytest.mark.parametrize(
    ("source", "says"),
    [
        (b"x = 1\0\n", "null bytes"),
        (b"x = '\xff'\n", "utf-8"),
        (b"if True:\nx = 1\n", "IndentationError"),
    ],
)
def test_what_python_cannot_read_is_a_problem(source: bytes, says: str) -> None:
    problem = python_problem("fw/x.py", source)
    assert problem is not None
    assert says.lower() in problem.lower()


def test_the_written_paths_leave_deleted_files_out() -> None:
    patch = (
        "diff --git a/src/gone.c b/src/gone.c\ndeleted file mode 100644\n"
        "--- a/src/gone.c\n+++ /dev/null\n@@ -1 +0,0 @@\n-int x;\n"
        "diff --git a/src/old.c b/src/new.c\nsimilarity index 90%\n"
        "rename from src/old.c\nrename to src/new.c\n"
        + unified_diff("src/uart.c", "int a;\n", "int b;\n")
    )
    assert written_paths(patch) == ["src/new.c", "src/uart.c"]
    assert written_paths("not a diff") == []


def test_the_command_is_given_the_files_its_globs_match() -> None:
    written = ["README.md", "include/uart.h", "src/uart.c", "tools/gen.py"]
    assert command_files(written, ("**/*.c", "**/*.h")) == ["include/uart.h", "src/uart.c"]
    assert command_files(written, ()) == []


@pytest.mark.parametrize(
    ("line", "says"),
    [
        ("no-such-cc-xyz -fsyntax-only", "'no-such-cc-xyz' is not on PATH nor a file of"),
        ("gcc -DNAME='x", "No closing quotation; fix its quoting"),
    ],
)
def test_a_precheck_that_cannot_run_stops_before_the_baseline(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, line: str, says: str
) -> None:
    monkeypatch.delenv("FWLOOP_PRECHECK", raising=False)
    pytester.makeini(f"[pytest]\nfwloop_coder = rules\nfwloop_precheck = {line}\n")
    with pytest.raises(pytest.UsageError, match=re.escape(says)) as raised:
        load_settings(pytester.parseconfig("--fwloop"))
    assert str(raised.value).startswith(f"fwloop: ini fwloop_precheck = {line!r}: ")


# -- the runner: the operator's line, the patch's file names -------------------------------------

ECHO_ARGS = (
    sys.executable,
    "-c",
    "import os, sys; print(sys.argv[1:], os.environ.get('FW_TOKEN'))",
)


def runner(root: Path) -> AllowlistRunner:
    return AllowlistRunner(
        (ECHO_ARGS,),
        cwd=root,
        timeout=30,
        abort=threading.Event(),
        environ={"PATH": "/usr/bin:/bin", "FW_TOKEN": "s3cret"},
    )


def test_the_command_gets_the_files_as_arguments_and_no_secret(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "uart.c").write_text("int x;\n")
    result = runner(tmp_path).run_with_paths(ECHO_ARGS, ["src/uart.c"], tmp_path / "log")
    assert result.passed
    assert result.output.strip() == "['src/uart.c'] None"


@pytest.mark.parametrize(
    ("name", "says"),
    [
        ("-o", "option"),
        ("@opts", "read arguments from a file"),
        ("CC=evil", "assigns a variable"),
        ("../outside.c", "outside the tree"),
        (".git/config", "points into .git"),
    ],
)
def test_a_file_name_the_tool_would_misread_is_never_handed_to_it(
    tmp_path: Path, name: str, says: str
) -> None:
    log = tmp_path / "log"
    with pytest.raises(CommandBlocked, match=says):
        runner(tmp_path).run_with_paths(ECHO_ARGS, ["src/ok.c", name], log)
    assert not log.exists()  # nothing started


def test_only_an_allowlisted_line_runs(tmp_path: Path) -> None:
    with pytest.raises(CommandBlocked, match="not an allowed command"):
        runner(tmp_path).run_with_paths(("sh", "-c", "true"), [], tmp_path / "log")


# -- the controller: a failing pre-check is a broken build, found before it ----------------------

#: A checker standing in for `gcc -fsyntax-only`: an error for each named file that says `broken`.
CHECKER = """\
import sys, time
for name in sys.argv[1:]:
    text = open(name).read()
    if "slow" in text:
        time.sleep(30)
    if "broken" in text:
        print(f"{name}:1:1: error: 'broken' is not a state")
        sys.exit(1)
"""


@pytest.fixture
def kit(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> ControllerKit:
    return ControllerKit(pytester, monkeypatch)


def checked_kit(kit: ControllerKit, *ini: str, files: str = "fw/*.txt") -> Path:
    """A project whose build logs each run and whose pre-check is CHECKER on `files`; the
    file the build's runs are counted in."""
    tools = kit.root.parent / f"{kit.root.name}-tools"
    tools.mkdir()
    (tools / "check.py").write_text(CHECKER)
    builds = tools / "builds.txt"
    kit.build(
        "bug",
        f"fwloop_build = sh -c 'echo built >> {builds}'",
        f"fwloop_precheck = {sys.executable} {tools / 'check.py'}",
        f"fwloop_precheck_files = {files}",
        "fwloop_max_iter = 5",
        *ini,
    )
    return builds


def test_a_patch_failing_the_precheck_is_rolled_back_before_the_build(kit: ControllerKit) -> None:
    kit.coder.answers = [fixing("bug", "broken"), fixing("bug", "ok")]
    builds = checked_kit(kit)
    assert kit.run() is Outcome.SUCCESS
    moves = kit.moves()
    at = moves.index(("BUILD_SETUP", "precheck_failed", "ERROR_RECOVERY"))
    assert moves[at + 1] == ("ERROR_RECOVERY", "recover_to_analysis", "CODE_ANALYSIS")
    assert builds.read_text().count("built") == 2  # the baseline and the good patch only
    retry = kit.coder.requests[1]
    [told] = retry.must_fix
    assert "pre-check" in told.issue
    assert "fw/state.txt:1:1: error: 'broken' is not a state" in told.issue
    assert "'broken' is not a state" in retry.build_diagnostics
    assert kit.firmware() == "ok"
    log = kit.controller.recorder.round_path(2, "build-precheck.log").read_text()
    assert "check.py fw/state.txt" in log
    failed = next(e for e in kit.events() if e["event"] == "precheck_failed")
    assert failed["evidence"] == ["rounds/02/build-precheck.log"]


def test_a_passing_precheck_is_in_the_trace_and_the_baseline_is_never_checked(
    kit: ControllerKit,
) -> None:
    kit.coder.answers = [fixing("bug", "ok")]
    checked_kit(kit)
    assert kit.run() is Outcome.SUCCESS
    ready = [e for e in kit.events() if e["event"] == "build_ready"]
    assert "pre-check" not in ready[0]["reason"]  # the baseline: no patch, nothing checked
    assert ready[1]["reason"].startswith("pre-check passed (`")
    assert "on 1 file(s) exited 0" in ready[1]["reason"]
    assert not (kit.controller.recorder.round_path(1) / "build-precheck.log").exists()


def test_a_precheck_over_its_timeout_rolls_the_patch_back(kit: ControllerKit) -> None:
    kit.coder.answers = [fixing("bug", "slow"), fixing("bug", "ok")]
    checked_kit(kit, "fwloop_precheck_timeout = 0.5")
    assert kit.run() is Outcome.SUCCESS
    failed = next(e for e in kit.events() if e["event"] == "precheck_failed")
    assert "timed out after fwloop_precheck_timeout=0.5s" in failed["reason"]
    assert any("fwloop_precheck_timeout" in m.issue for m in kit.coder.requests[1].must_fix)
    assert kit.firmware() == "ok"


def test_the_same_patch_after_a_precheck_timeout_is_tried_again_not_a_repeat(
    kit: ControllerKit,
) -> None:
    """The timed-out patch was rolled back unjudged: proposing it again is no repeat, and the
    run that keeps timing out ends naming the timeout, not `repeated_patch`."""
    kit.coder.answers = [fixing("bug", "slow")] * 3
    checked_kit(kit, "fwloop_precheck_timeout = 0.5")
    assert kit.run() is Outcome.FAILURE
    events = kit.events()
    assert [e["event"] for e in events].count("precheck_failed") == 2
    assert not any(e["event"] == "patch_repeated" for e in events)
    assert "timed out after fwloop_precheck_timeout=0.5s" in kit.summary()["reason"]


def test_with_no_globs_the_command_runs_alone_after_every_patch(kit: ControllerKit) -> None:
    kit.coder.answers = [fixing("bug", "ok")]
    checked_kit(kit, files="")
    assert kit.run() is Outcome.SUCCESS
    log = kit.controller.recorder.round_path(2, "build-precheck.log").read_text()
    assert log.splitlines()[0].endswith("check.py")  # no file appended


#: A new file whose name the checker would read as its option `-o`.
OPTION_NAMED = (
    "diff --git a/-o.txt b/-o.txt\nnew file mode 100644\n"
    "--- /dev/null\n+++ b/-o.txt\n@@ -0,0 +1 @@\n+x\n"
)


def test_a_written_file_named_like_an_option_is_never_handed_to_the_command(
    kit: ControllerKit,
) -> None:
    kit.coder.answers = [
        {**fixing("bug", "ok"), "patch": firmware_patch("bug", "ok") + OPTION_NAMED},
        fixing("bug", "ok"),
    ]
    checked_kit(kit, files="**/*.txt")
    assert kit.run() is Outcome.SUCCESS
    failed = next(e for e in kit.events() if e["event"] == "precheck_failed")
    assert (
        "the pre-check cannot be given a written file: `-o.txt` starts with `-`"
        in (failed["reason"])
    )
    log = kit.controller.recorder.round_path(2, "build-precheck.log").read_text()
    assert "not run:" in log
    assert not (kit.root / "-o.txt").exists()  # rolled back with the rest of the patch


def python_project(kit: ControllerKit, helper: str) -> str:
    """FIRMWARE plus a Python helper module in the tree; the patch that fixes FIRMWARE and
    rewrites the helper as `helper`."""
    (kit.root / "fw").mkdir(exist_ok=True)
    (kit.root / "fw" / "helper.py").write_text("VALUE = 1\n")
    return firmware_patch("bug", "ok") + unified_diff("fw/helper.py", "VALUE = 1\n", helper)


def test_a_written_python_file_that_does_not_compile_is_sent_back(kit: ControllerKit) -> None:
    broken = python_project(kit, "VALUE = (1\n")
    kit.coder.answers = [
        {**fixing("bug", "ok"), "patch": broken},
        {**fixing("bug", "ok"), "patch": python_project(kit, "VALUE = 2\n")},
    ]
    kit.build("bug", "fwloop_max_iter = 5")  # no command, no build: Python is checked anyway
    assert kit.run() is Outcome.SUCCESS
    assert ("BUILD_SETUP", "precheck_failed", "ERROR_RECOVERY") in kit.moves()
    [told] = kit.coder.requests[1].must_fix
    assert "fw/helper.py:1:" in told.issue
    assert "1 written Python file(s) do not compile (fw/helper.py)" in told.issue
    assert (kit.root / "fw" / "helper.py").read_text() == "VALUE = 2\n"


def test_a_python_file_that_did_not_compile_before_is_left_to_the_build(
    kit: ControllerKit,
) -> None:
    # A Python 2 script of the firmware's tooling: this interpreter's grammar does not judge it.
    (kit.root / "tools").mkdir()
    (kit.root / "tools" / "gen.py").write_text('print "v1"\n')
    patch = firmware_patch("bug", "ok") + unified_diff(
        "tools/gen.py", 'print "v1"\n', 'print "v2"\n'
    )
    kit.coder.answers = [{**fixing("bug", "ok"), "patch": patch}]
    kit.build("bug", "fwloop_max_iter = 5")
    assert kit.run() is Outcome.SUCCESS
    log = kit.controller.recorder.round_path(2, "build-precheck.log").read_text()
    assert "not judged: tools/gen.py did not compile before the patch either" in log
    # The trace does not call the file it did not judge compiled.
    [_, patched] = [e["reason"] for e in kit.events() if e["event"] == "no_build"]
    assert patched.startswith(
        "pre-check: 1 Python file(s) left to the build, which did not compile before the "
        "patch either (tools/gen.py); no build command configured"
    )
    assert "compiled" not in patched


def test_a_command_whose_globs_match_no_written_file_says_it_did_not_run(
    kit: ControllerKit,
) -> None:
    kit.coder.answers = [fixing("bug", "ok")]
    checked_kit(kit, files="src/*.c")
    assert kit.run() is Outcome.SUCCESS
    ready = [e["reason"] for e in kit.events() if e["event"] == "build_ready"]
    assert (
        "check.py` not run: no file the patch wrote matches fwloop_precheck_files (src/*.c)"
        in (ready[1])
    )
    assert ready[1].startswith("pre-check: `")


# -- real `pytest --fwloop` runs ------------------------------------------------------------------


@pytest.mark.slow
def test_a_python_syntax_error_is_sent_back_in_seconds_with_no_build(
    project: LoopProject,
) -> None:
    project.calc_suite()
    broken = unified_diff("fw/calc.py", CALC, CALC.replace("return a - b", "return a +* b"))
    coder = project.agent("coder", [coder_answer(broken), *map(coder_answer, calc_fix_patches())])
    result = project.run(f"--fwloop-coder={coder.spec}")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    result.stdout.fnmatch_lines(["*BUILD_SETUP -> ERROR_RECOVERY: 1 written Python file(s)*"])
    told = [MustFix.model_validate(m) for m in coder.requests()[1]["must_fix"]]
    assert any("fw/calc.py:5:" in m.issue and "SyntaxError" in m.issue for m in told)
    [run_dir] = project.run_dirs()
    assert "SyntaxError" in (run_dir / "rounds" / "02" / "build-precheck.log").read_text()
    assert "ok" in (run_dir / "rounds" / "02" / "build-precheck-2.log").read_text()
    assert 'href="rounds/02/build-precheck.log"' in (run_dir / "report.html").read_text()
    # The broken patch never reached a test run: the coder was asked again at once.
    moves = [(e["from"], e["event"]) for e in project.events() if e["kind"] == "transition"]
    at = moves.index(("BUILD_SETUP", "precheck_failed"))
    assert moves[at + 1 : at + 3] == [
        ("ERROR_RECOVERY", "recover_to_analysis"),
        ("CODE_ANALYSIS", "analysis_ready"),
    ]
    assert project.replay().returncode == 0


C_SOURCE = "int crc8(const unsigned char *data, int len) {\n    int crc = 0;\n    return crc;\n}\n"


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc is not installed")
def test_gcc_fsyntax_only_catches_a_broken_c_file_before_the_build(
    project: LoopProject,
) -> None:
    project.calc_suite("fwloop_precheck = gcc -fsyntax-only\n")
    project.write("fw/crc.c", C_SOURCE)
    builds = project.agents_dir / "builds.txt"
    project.write("build.sh", f"echo built >> {builds}\n")
    broken = unified_diff("fw/crc.c", C_SOURCE, C_SOURCE.replace("int crc = 0;", "int crc = 0"))
    coder = project.agent("coder", [coder_answer(broken), *map(coder_answer, calc_fix_patches())])
    result = project.run(f"--fwloop-coder={coder.spec}", "--fwloop-build=sh build.sh")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    [told] = coder.requests()[1]["must_fix"]
    assert "pre-check `gcc -fsyntax-only` exited 1" in told["issue"]
    assert "fw/crc.c:3:" in told["issue"]
    assert "error" in told["issue"]
    assert builds.read_text().count("built") == 4  # baseline and three good patches
    assert (project.root / "fw" / "crc.c").read_text() == C_SOURCE
    [run_dir] = project.run_dirs()
    log = (run_dir / "rounds" / "02" / "build-precheck.log").read_text()
    assert log.startswith("$ gcc -fsyntax-only fw/crc.c\n")
    assert project.replay().returncode == 0
