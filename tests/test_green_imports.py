"""A green `pytest --fwloop` run pays for no localization (issue 41): its controller imports
none of what only a coder call uses, and no child of it records which lines each test ran."""

from __future__ import annotations

import json

import pytest

from loopkit import LoopProject, calc_fix_patches, coder_answer

#: Loaded only once a coder is to be asked: the localization stack (parsers, the code index,
#: the spectrum reader and run, the ranking), the request builders, the patch gate and its
#: helpers, the knowledge base, and coverage.py.
CODER_ONLY = (
    "tree_sitter",
    "coverage",
    "sqlite3",
    "pytest_fwloop.codemap",
    "pytest_fwloop.child.spectra.python_lines",
    "pytest_fwloop.core.request.ranking",
    "pytest_fwloop.core.request.source_pack",
    "pytest_fwloop.core.request.ochiai",
    "pytest_fwloop.core.request.suspicion",
    "pytest_fwloop.core.request.spectrum_sample",
    "pytest_fwloop.core.request.failure_evidence",
    "pytest_fwloop.core.change.answer_diff",
    "pytest_fwloop.knowledge",
    "pytest_fwloop.loop.request.agent_request",
    "pytest_fwloop.loop.request.desk",
    "pytest_fwloop.loop.request.localization",
    "pytest_fwloop.loop.repair",
    "pytest_fwloop.loop.request.spectrum_files",
    "pytest_fwloop.loop.request.spectrum_run",
    "pytest_fwloop.loop.steps.analysis",
    "pytest_fwloop.loop.steps.coder_patch",
    "pytest_fwloop.loop.steps.patch_gate",
    "pytest_fwloop.loop.steps.proposal",
    "pytest_fwloop.loop.steps.review_panel",
)

#: Writes what the controller and each child imported, beside the agents (outside the tree).
PROBE = """\
import json, os, sys
from pathlib import Path

OUT = Path(os.environ["IMPORT_PROBE"])


def pytest_fwloop_iteration_done(config, iteration):
    (OUT / f"controller-{iteration}.json").write_text(json.dumps(sorted(sys.modules)))


def pytest_sessionfinish(session):
    if session.config.getoption("fwloop_child_report", None):
        (OUT / f"child-{os.getpid()}.json").write_text(json.dumps(sorted(sys.modules)))
"""


def coder_only(names: list[str]) -> list[str]:
    return sorted(
        name
        for name in names
        if any(name == module or name.startswith(f"{module}.") for module in CODER_ONLY)
    )


def probed(project: LoopProject, who: str) -> list[list[str]]:
    return [json.loads(p.read_text()) for p in sorted(project.agents_dir.glob(f"{who}-*.json"))]


def test_a_green_run_imports_no_localization_and_records_no_spectrum(
    project: LoopProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("IMPORT_PROBE", str(project.agents_dir))
    project.write("conftest.py", PROBE)
    project.write("tests/test_ok.py", "def test_ok():\n    assert True\n")
    project.write("pytest.ini", "[pytest]\ntestpaths = tests\n")
    result = project.run("--fwloop-coder=rules", "--fwloop-reviewer=rules")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    controller, children = probed(project, "controller"), probed(project, "child")
    assert controller, "the probe saw no iteration end"
    assert children, "the probe saw no child"
    assert [coder_only(names) for names in controller] == [[]] * len(controller)
    assert [coder_only(names) for names in children] == [[]] * len(children)
    [run_dir] = project.run_dirs()
    assert not list(run_dir.glob("rounds/*/spectrum*.json"))


@pytest.mark.slow
def test_a_run_with_failures_loads_them_when_the_coder_is_asked(
    project: LoopProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The probe sees what the green run did not load once there is a failure to localize."""
    monkeypatch.setenv("IMPORT_PROBE", str(project.agents_dir))
    project.calc_suite()
    project.write("conftest.py", PROBE)
    coder = project.agent("coder", [coder_answer(p) for p in calc_fix_patches()])
    result = project.run(f"--fwloop-coder={coder.spec}", "--fwloop-reviewer=rules")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    first, *later = probed(project, "controller")
    # The baseline's end: no coder asked yet; its last flaky rerun chose the passing tests
    # that recorded the spectrum beside its failures.
    assert coder_only(first) == ["pytest_fwloop.core.request.spectrum_sample"]
    assert "pytest_fwloop.loop.request.localization" in later[0]
    assert "pytest_fwloop.loop.request.spectrum_files" in later[0]
    [run_dir] = project.run_dirs()
    assert list(run_dir.glob("rounds/01/spectrum-flaky-2.json"))
    assert not list(run_dir.glob("rounds/*/spectrum-run-*.json"))  # none was due
