"""The inputs seed 001 names besides the suite (§2.2, §5.3): the goal, recorded in the summary,
and the failure log of an earlier run (`--fwloop-evidence`), handed to the coder's first analysis
within the context cap and redacted."""

from __future__ import annotations

import json

import pytest

from controllerkit import ControllerKit, fixing
from loopkit import LoopProject, calc_fix_patches, coder_answer
from pytest_fwloop.core.machine.outcomes import Outcome
from pytest_fwloop.core.request.failure_pack import packed_size

SECRET = "hunter2-deploy-key-0042"
HEAD = "CI job 4711 started on runner-7"
TAIL = "FAILED tests/test_calc.py::test_add_small - assert -1 == 3"


def ci_log(lines: int) -> str:
    """A CI log: a head, `lines` of noise (one near the end naming a secret), the failure last."""
    noise = [f"[{n:06d}] building unit {n}: ok" for n in range(lines)]
    noise[-3] = f"uploading with token {SECRET}"
    return "\n".join([HEAD, *noise, TAIL]) + "\n"


@pytest.fixture
def kit(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> ControllerKit:
    monkeypatch.setenv("DEPLOY_TOKEN", SECRET)
    return ControllerKit(pytester, monkeypatch)


def test_the_coder_gets_the_logs_head_and_tail_until_its_first_patch_is_tested(
    kit: ControllerKit,
) -> None:
    (kit.root / "logs").mkdir()
    (kit.root / "logs" / "ci.log").write_text(ci_log(20000))
    kit.coder.answers = [fixing("bug bug", "ok bug"), fixing("ok bug", "ok ok")]
    kit.build(
        "bug bug",
        "fwloop_evidence = logs/ci.log",
        "fwloop_context_bytes = 4096",
        "fwloop_knowledge = off",
    )
    assert kit.run() is Outcome.SUCCESS
    first, second = kit.coder.requests
    assert first.evidence is not None
    assert first.evidence.path == "logs/ci.log"
    assert first.evidence.size_bytes == (kit.root / "logs" / "ci.log").stat().st_size
    excerpt = first.evidence.excerpt
    assert excerpt.startswith(HEAD)
    assert excerpt.rstrip().endswith(TAIL)
    assert "\n…\n" in excerpt  # a log this long is cut in the middle
    # Bounded like the rest of the context: a quarter of the cap, and failures + evidence fit.
    assert len(json.dumps(excerpt, ensure_ascii=False).encode()) - 2 <= 4096 // 4
    assert packed_size(first.failures) + len(first.evidence.model_dump_json()) <= 4096
    # Once a patch has been tested, the live failures speak instead.
    assert second.iteration == 3
    assert second.evidence is None
    assert all(r.evidence is None for r in kit.reviewer.requests)
    assert kit.summary()["evidence"] == "logs/ci.log"


def test_the_evidence_is_redacted_and_its_paths_scrubbed(kit: ControllerKit) -> None:
    (kit.root / "ci.log").write_text(
        f"{HEAD}\ntoken {SECRET} in {kit.root}/fw/state.txt at 2026-01-02T03:04:05Z\n{TAIL}\n"
    )
    kit.coder.answers = [fixing("ok bug", "ok ok")]
    kit.build("ok bug", "fwloop_evidence = ci.log", "fwloop_knowledge = off")
    assert kit.run() is Outcome.SUCCESS
    [asked] = kit.coder.requests
    assert asked.evidence is not None
    assert SECRET not in asked.evidence.excerpt
    assert "[redacted:DEPLOY_TOKEN]" in asked.evidence.excerpt
    assert "in fw/state.txt at <ts>" in asked.evidence.excerpt
    written = (kit.controller.recorder.round_path(2) / "coder-1.request.json").read_text()
    assert SECRET not in written


def test_without_evidence_the_request_says_none(kit: ControllerKit) -> None:
    kit.coder.answers = [fixing("ok bug", "ok ok")]
    kit.build("ok bug", "fwloop_goal = make the UART answer", "fwloop_knowledge = off")
    assert kit.run() is Outcome.SUCCESS
    [asked] = kit.coder.requests
    assert asked.evidence is None
    assert asked.to_wire()["evidence"] is None
    summary = kit.summary()
    assert (summary["goal"], summary["evidence"]) == ("make the UART answer", None)


@pytest.mark.parametrize(
    ("args", "ini", "says"),
    [
        (["--fwloop-evidence=ci-missing.log"], "", "*--fwloop-evidence=ci-missing.log: cannot*"),
        ([], "fwloop_evidence = logs\n", "*ini fwloop_evidence=logs: cannot read it (Is a dir*"),
    ],
    ids=["missing", "a-directory-from-the-ini"],
)
def test_an_unreadable_evidence_file_is_a_usage_error_before_anything_runs(
    project: LoopProject, args: list[str], ini: str, says: str
) -> None:
    project.calc_suite(ini)
    (project.root / "logs").mkdir()
    coder = project.agent("coder", [coder_answer("")])
    result = project.run(f"--fwloop-coder={coder.spec}", *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([says + "the last CI log*"])
    assert project.run_dirs() == []
    assert coder.requests() == []


@pytest.mark.slow
def test_pytest_fwloop_records_the_goal_and_hands_the_ci_log_to_the_coder(
    project: LoopProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DEPLOY_TOKEN", SECRET)
    project.calc_suite()
    project.pytester.path.joinpath("ci.log").write_text(ci_log(5000))
    coder = project.agent("coder", [coder_answer(p) for p in calc_fix_patches()])
    result = project.run(
        f"--fwloop-coder={coder.spec}",
        "--fwloop-goal=make calc pass on the bench",
        "--fwloop-evidence=../ci.log",
    )
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    summary = project.summary()
    assert summary["goal"] == "make calc pass on the bench"
    assert summary["evidence"] == "../ci.log"
    result.stdout.fnmatch_lines(["*evidence for the coder: ../ci.log (*bytes*"])
    first, *later = coder.requests()
    assert first["goal"] == "make calc pass on the bench"
    assert first["evidence"]["excerpt"].startswith(HEAD)
    assert TAIL in first["evidence"]["excerpt"]
    assert SECRET not in json.dumps(coder.requests())
    assert len(later) == 2
    assert all(r["evidence"] is None for r in later)
    [run_dir] = project.run_dirs()
    assert SECRET not in (run_dir / "rounds" / "02" / "coder-1.request.json").read_text()
