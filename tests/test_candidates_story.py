"""K candidates on a real firmware tree (DESIGN.md §19): uart-console, real builds, real pytest.

The model is `standin_model.SamplingStandin`: it knows only its messages and, in about half
its samples, writes a wrong CRC start value that compiles. With one candidate the loop applies
its wrong sample and needs an iteration more; with four it checks them in scratch trees and
applies a right one. The build is a probe that notes which tree it builds and what that tree's
crc8.c says, so the test sees every state the user's tree was built in.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from envs_support.examples import copy_example, require_example_tools
from envs_support.procs import running_under
from loopkit import LoopProject
from standin_model import SamplingStandin, bugs_of_answers

pytestmark = pytest.mark.slow

#: The CRC bug's fix, and the plausible wrong start value written in half the samples.
WRONG = {"01#1": ("#define CRC8_INIT 0x00u", "#define CRC8_INIT 0x01u")}

#: `make`, after noting the tree built and its CRC start value (the line of crc8.c).
PROBE = """\
import os, pathlib, subprocess, sys
line = next(l for l in pathlib.Path("firmware/src/crc8.c").read_text().splitlines()
            if l.startswith("#define CRC8_INIT"))
with open(os.environ["CANDIDATE_PROBE"], "a") as log:
    log.write(f"{os.getcwd()}\\t{line}\\n")
sys.exit(subprocess.call(["make"]))
"""


def run(project: LoopProject, tmp_path: Path, k: int) -> tuple[dict[str, object], list[str]]:
    require_example_tools("uart-console")
    root = copy_example("uart-console", project.root)
    (root / "probe_build.py").write_text(PROBE)
    probe = tmp_path / "builds.log"
    model = SamplingStandin(bugs_of_answers(root / "fwloop-answers"), wrong=WRONG)
    with model, pytest.MonkeyPatch.context() as patch:
        patch.setenv("CANDIDATE_PROBE", str(probe))
        result = project.run(
            f"--fwloop-coder={model.spec}",
            "--max-iter=6",
            f"--fwloop-candidates={k}",
            "-o",
            f"fwloop_build={sys.executable} probe_build.py",
        )
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    return project.summary(), probe.read_text().splitlines()


def user_tree_builds(project: LoopProject, builds: list[str]) -> set[str]:
    """The CRC lines the user's own tree was built with."""
    return {line.split("\t")[1] for line in builds if line.split("\t")[0] == str(project.root)}


def test_one_candidate_applies_its_wrong_sample_and_needs_an_iteration_more(
    project: LoopProject, tmp_path: Path
) -> None:
    summary, builds = run(project, tmp_path, 1)
    assert summary["outcome"] == "success"
    # Baseline, the wrong sample (two of three bugs fixed), the CRC put right, its confirmation.
    assert summary["iterations"] == 4
    assert summary["coder_calls"] == 2
    assert summary["candidates"] is None
    assert user_tree_builds(project, builds) == {
        "#define CRC8_INIT 0xFFu",
        "#define CRC8_INIT 0x01u",
        "#define CRC8_INIT 0x00u",
    }


def test_four_candidates_reach_success_in_fewer_iterations_and_only_the_chosen_one_is_applied(
    project: LoopProject, tmp_path: Path
) -> None:
    summary, builds = run(project, tmp_path, 4)
    assert summary["outcome"] == "success"
    # Baseline, the chosen right candidate, its confirmation: one iteration fewer than K=1.
    assert summary["iterations"] == 3
    assert summary["coder_calls"] == 4
    candidates = summary["candidates"]
    assert isinstance(candidates, dict)
    assert (candidates["pass_at_1"], candidates["pass_at_k"], candidates["chosen_not_first"]) == (
        0,
        1,
        1,
    )
    # The user's tree was built with the baseline and the chosen fix only; the wrong samples
    # were built in scratch trees under .fwloop/candidates/ and nowhere else.
    assert user_tree_builds(project, builds) == {
        "#define CRC8_INIT 0xFFu",
        "#define CRC8_INIT 0x00u",
    }
    scratch = [line.split("\t") for line in builds if ".fwloop/candidates/" in line]
    assert {crc for _, crc in scratch} == {"#define CRC8_INIT 0x01u", "#define CRC8_INIT 0x00u"}
    # Candidates 1 and 3 are the same wrong sample, 2 and 4 the same right one: built once each.
    assert len(scratch) == 2
    [run_dir] = project.run_dirs()
    record = json.loads((run_dir / "rounds" / "02" / "candidates.json").read_text())
    assert record["chosen"] == 2
    assert [c["verdict"] for c in record["candidates"]] == ["lost", "chosen", "dropped", "dropped"]
    assert [c["agreement"] for c in record["candidates"]] == [2, 2, 2, 2]
    assert record["candidates"][1]["broke"] == []
    assert record["candidates"][0]["why"].endswith("ranks above it (it fixes more)")
    assert not (project.root / ".fwloop" / "candidates").exists() or not any(
        (project.root / ".fwloop" / "candidates").iterdir()
    )
    report = (run_dir / "report.html").read_text()
    assert "pass@1" in report
    replayed = project.replay()
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    assert running_under(project.root) == []


#: The ADC fix, and the plausible wrong scale written in half the samples: it still reads full
#: scale one short.
QEMU_WRONG = {
    "01#1": (
        "    return raw * ADC_VREF_MV / ADC_MAX_RAW;",
        "    return raw * (ADC_VREF_MV - 1u) / ADC_MAX_RAW;",
    )
}


def test_two_candidates_side_by_side_each_boot_their_own_firmware_in_a_qemu_of_their_own(
    project: LoopProject,
) -> None:
    """qemu-cortex-m, two candidates checked at once (`fwloop_candidate_jobs = 2`): each is
    built in its own tree and its tests boot that tree's firmware in a QEMU of their own: each
    console shows its own candidate's fixes (the user's tree has none of them), the wrong ADC
    sample loses, and nothing is left running."""
    require_example_tools("qemu-cortex-m")
    root = copy_example("qemu-cortex-m", project.root)
    model = SamplingStandin(bugs_of_answers(root / "fwloop-answers"), wrong=QEMU_WRONG)
    with model:
        result = project.run(
            f"--fwloop-coder={model.spec}",
            "--max-iter=6",
            "--fwloop-candidates=2",
            "--fwloop-candidate-jobs=2",
        )
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    assert project.summary()["outcome"] == "success"
    [run_dir] = project.run_dirs()
    record = json.loads((run_dir / "rounds" / "02" / "candidates.json").read_text())
    wrong, right = record["candidates"]
    assert record["chosen"] == 2
    adc = {
        f"tests/test_firmware.py::test_adc_{name}" for name in ("full_scale_is_vref", "one_volt")
    }
    assert set(wrong["still_failing"]) == adc
    assert len(wrong["fixed"]) == len(record["failing"]) - len(adc)  # its Fletcher and GPIO fixes
    assert wrong["verdict"] == "lost"
    assert set(right["fixed"]) == set(record["failing"])
    assert right["broke"] == []
    assert (
        "    return raw * ADC_VREF_MV / ADC_MAX_RAW;" in (root / "firmware/src/adc.c").read_text()
    )
    assert running_under(project.root) == []
