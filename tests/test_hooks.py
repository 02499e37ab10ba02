"""The hooks a team extends the loop with, through a real `pytest --fwloop` run."""

from __future__ import annotations

import json

import pytest

from loopkit import APPROVE, LoopProject, calc_fix_patches, coder_answer

pytestmark = pytest.mark.slow

CONFTEST = """\
import json
from pathlib import Path

from pytest_fwloop.agents.base import RawAnswer

SCRIPT = Path({script!r})


class TeamBot:
    def __init__(self, spec, role):
        self.spec = spec
        self.role = role
        self.calls = 0

    def call(self, request, timeout):
        answers = json.loads(SCRIPT.read_text())[self.role]
        self.calls += 1
        return RawAnswer(json.dumps(answers[min(self.calls, len(answers)) - 1]))


def pytest_fwloop_make_provider(config, role, spec):
    if spec.startswith("teambot:"):
        return TeamBot(spec, role)
    return None


def pytest_fwloop_iteration_done(config, iteration, results, verdict, reason):
    line = {{"iteration": iteration, "passed": results.pass_count, "verdict": verdict}}
    with (SCRIPT.parent / "done.jsonl").open("a") as stream:
        stream.write(json.dumps(line) + "\\n")
"""


def test_a_team_provider_from_a_conftest_drives_the_loop_and_sees_every_iteration(
    project: LoopProject,
) -> None:
    project.calc_suite()
    script = project.agents_dir / "teambot.json"
    script.write_text(
        json.dumps({"coder": [coder_answer(p) for p in calc_fix_patches()], "reviewer": [APPROVE]})
    )
    project.write("conftest.py", CONFTEST.format(script=str(script)))
    result = project.run("--fwloop-coder=teambot:fw-team", "--max-iter=6")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    summary = project.summary()
    assert summary["outcome"] == "success"
    assert summary["pass_counts"] == [1, 3, 5, 6, 6]
    done = [
        json.loads(line) for line in (project.agents_dir / "done.jsonl").read_text().splitlines()
    ]
    assert [d["passed"] for d in done] == summary["pass_counts"]
    assert [d["verdict"] for d in done] == [None, None, None, None, "success"]
    meta = json.loads((project.run_dirs()[0] / "rounds" / "02" / "coder-1.meta.json").read_text())
    assert meta["provider"] == "teambot:fw-team"


def test_an_unknown_spec_no_hook_claims_is_still_a_usage_error(project: LoopProject) -> None:
    project.calc_suite()
    result = project.run("--fwloop-coder=teambot:fw-team")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*unknown provider 'teambot'*"])


ASKED = """\
from pathlib import Path


def pytest_fwloop_make_provider(config, role, spec):
    with Path({asked!r}).open("a") as stream:
        stream.write(f"{{role}} {{spec}}\\n")
    return None
"""


def test_the_provider_hook_is_asked_once_for_each_entry_of_each_role(
    project: LoopProject,
) -> None:
    """The providers checked before the baseline are the ones the run's agents call: a team's
    factory (which may open a session or count a licence) is not asked a second time."""
    project.calc_suite()
    asked = project.agents_dir / "asked.txt"
    project.write("conftest.py", ASKED.format(asked=str(asked)))
    result = project.run("--fwloop-coder=rules", "--fwloop-tester=rules", "--max-iter=1")
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    assert project.summary()["outcome"] == "max_iterations_reached"
    assert asked.read_text().splitlines() == ["coder rules", "reviewer rules", "tester rules"]
