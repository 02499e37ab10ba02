"""The run's own limits (DESIGN.md §15; seed 001 §4.2, §5.17, §6.1), through real
`pytest --fwloop` runs of the calc suite: a whole-run time limit, the circuit breaker, a clean
build retried once at the baseline, and the `rules` triage behind an unreadable coder.
"""

from __future__ import annotations

import sys

import pytest

from loopkit import CALC, LoopProject, calc_fix_patches, coder_answer, unified_diff

pytestmark = pytest.mark.slow


def test_the_whole_run_time_limit_ends_it_as_timeout(project: LoopProject) -> None:
    project.calc_suite()
    first = calc_fix_patches()[0]
    # The coder fixes one bug, then thinks for far longer than the run may take.
    coder = project.agent("coder", [coder_answer(first), {"__sleep__": 120, **coder_answer("")}])
    result = project.run(f"--fwloop-coder={coder.spec}", "--fwloop-timeout=0.1")
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    summary = project.summary()
    assert summary["outcome"] == "timeout"
    assert summary["final_state"] == "FAILURE"
    assert summary["reason"].startswith(
        "the run took longer than --fwloop-timeout=0.1 minute(s) (seed 001 timeout_minutes)"
    )
    assert [e["event"] for e in project.events()][-1] == "run_timeout"
    # The tree is handled as for any other ending: baseline back, the fix one command away.
    assert (project.root / "fw/calc.py").read_text() == CALC
    assert summary["best"]["iteration"] == 2
    assert result.stdout.lines[-1].endswith(summary["best"]["apply"])
    replayed = project.replay()
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr


def test_the_circuit_breaker_stops_a_coder_whose_patches_keep_breaking_tests(
    project: LoopProject,
) -> None:
    # Focus off: every iteration runs the whole suite, so the regression shows at once.
    project.calc_suite("fwloop_circuit_breaker = 1\nfwloop_focus = off\n")
    # Makes clamp_high pass and breaks clamp_inside: no higher, and a regression.
    breaking = unified_diff(
        "fw/calc.py", CALC, CALC.replace("return max(low, value)", "return high")
    )
    coder = project.agent("coder", [coder_answer(breaking), *map(coder_answer, calc_fix_patches())])
    result = project.run(f"--fwloop-coder={coder.spec}")
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    summary = project.summary()
    assert summary["outcome"] == "circuit_breaker"
    assert summary["reason"] == (
        "circuit breaker (seed 001 §5.17): 1 patch(es) rolled back and 1 iteration(s) broke "
        "tests that passed before them; fwloop_circuit_breaker = 1"
    )
    assert summary["coder_calls"] == 1
    assert summary["regressions"] == {"2": ["tests/test_calc.py::test_clamp_inside"]}
    assert (project.root / "fw/calc.py").read_text() == CALC
    replayed = project.replay()
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr


BUILD = """\
import pathlib, sys
if pathlib.Path("out/stale.o").exists():
    sys.exit("error: out/stale.o was built by another toolchain")
pathlib.Path("out").mkdir(exist_ok=True)
pathlib.Path("out/firmware.bin").write_text("built")
"""
CLEAN = "import shutil; shutil.rmtree('out', ignore_errors=True)\n"


@pytest.mark.parametrize("helps", [True, False], ids=["clean-helps", "clean-does-not-help"])
def test_a_baseline_that_does_not_build_is_cleaned_and_built_once_more(
    project: LoopProject, helps: bool
) -> None:
    project.calc_suite(
        f"fwloop_build = {sys.executable} build.py\n"
        f"fwloop_build_clean = {sys.executable} {'clean.py' if helps else '-c pass'}\n"
        "fwloop_snapshot_exclude = out/\n"
    )
    project.write("build.py", BUILD)
    project.write("clean.py", CLEAN)
    project.write("out/stale.o", "from an older toolchain")
    coder = project.agent("coder", [coder_answer(p) for p in calc_fix_patches()])
    result = project.run(f"--fwloop-coder={coder.spec}")
    summary = project.summary()
    [run] = project.run_dirs()
    assert (run / "rounds/01/build-clean.log").is_file()
    reasons = [e["reason"] for e in project.events()]
    assert any(
        "the tree does not build without any patch: build exited 1; fwloop_build_clean exited 0; "
        "retrying the build once" in r
        for r in reasons
    ), reasons
    if helps:
        assert result.ret == 0, result.stdout.str()
        assert summary["outcome"] == "success"
    else:
        assert result.ret == pytest.ExitCode.TESTS_FAILED
        assert summary["outcome"] == "build_failed"
        assert (
            "the tree does not build before any patch after fwloop_build_clean"
            in (summary["reason"])
        )
        assert summary["coder_calls"] == 0


def test_an_unreadable_coder_still_ends_with_the_rules_triage(project: LoopProject) -> None:
    project.calc_suite()
    coder = project.agent("coder", ["I think the bug is in add(), but here is no JSON"])
    result = project.run(f"--fwloop-coder={coder.spec}")
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    summary = project.summary()
    assert summary["outcome"] == "provider_bad_output"
    assert "; rules triage: 5 of 5 failures look like a" in summary["reason"], summary["reason"]
