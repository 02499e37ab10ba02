"""The `fwloop` command looks where `pytest --fwloop` writes: `fwloop_run_dir` and
`fwloop_knowledge` from the environment, then the rootdir's configuration file as pytest picks it,
then the default."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_fwloop.cli.main import main
from pytest_fwloop.config.ini_lookup import IniError, option_value


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        ({}, ".fwloop/runs"),
        ({"pytest.ini": "[pytest]\nfwloop_run_dir = out/runs\n"}, "out/runs"),
        # pytest.ini wins even without the option, and even without a [pytest] section.
        ({"pytest.ini": "", "tox.ini": "[pytest]\nfwloop_run_dir = tox/runs\n"}, ".fwloop/runs"),
        ({"pyproject.toml": '[tool.pytest.ini_options]\nfwloop_run_dir = "py/runs"\n'}, "py/runs"),
        ({"pyproject.toml": '[tool.pytest]\nfwloop_run_dir = "native/runs"\n'}, "native/runs"),
        # A pyproject.toml without a pytest table does not count: tox.ini is next.
        (
            {"pyproject.toml": "[tool.black]\n", "tox.ini": "[pytest]\nfwloop_run_dir = t/r\n"},
            "t/r",
        ),
        ({"tox.ini": "[tox]\n", "setup.cfg": "[tool:pytest]\nfwloop_run_dir = cfg/r\n"}, "cfg/r"),
    ],
)
def test_the_run_dir_is_read_as_pytest_reads_it(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    files: dict[str, str],
    expected: str,
) -> None:
    monkeypatch.delenv("FWLOOP_RUN_DIR", raising=False)
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    assert option_value(tmp_path, "run_dir") == expected


def test_the_environment_comes_first_and_a_broken_file_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "pyproject.toml").write_text("[tool.pytest.ini_options\n")
    monkeypatch.setenv("FWLOOP_RUN_DIR", "env/runs")
    assert option_value(tmp_path, "run_dir") == "env/runs"
    monkeypatch.delenv("FWLOOP_RUN_DIR")
    with pytest.raises(IniError, match=r"cannot read .*pyproject.toml"):
        option_value(tmp_path, "run_dir")
    assert main(["list", "--rootdir", str(tmp_path)]) == 2


def test_kb_commands_say_when_the_ini_turns_the_knowledge_base_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("FWLOOP_KNOWLEDGE", raising=False)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pytest.ini").write_text("[pytest]\nfwloop_knowledge = off\n")
    assert main(["kb", "list"]) == 2
    assert "the knowledge base is off" in capsys.readouterr().err


@pytest.mark.slow
def test_fwloop_finds_runs_in_the_ini_s_run_dir(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A team that keeps its runs in build/fwloop-runs: list and confirm find them unasked."""
    from loopkit import LoopProject, calc_fix_patches, coder_answer

    project = LoopProject(pytester, monkeypatch)
    project.calc_suite("fwloop_run_dir = build/fwloop-runs\n")
    coder = project.agent("coder", [coder_answer(p) for p in calc_fix_patches()])
    assert project.run(f"--fwloop-coder={coder.spec}", "--fwloop-propose=first").ret == 1
    [run_dir] = (project.root / "build" / "fwloop-runs").iterdir()
    listed = project.fwloop("list", "--json")
    assert [r["run_id"] for r in json.loads(listed.stdout)] == [run_dir.name]
    confirmed = project.fwloop("confirm", "last")
    assert confirmed.returncode == 0, confirmed.stdout + confirmed.stderr
    assert json.loads((run_dir / "summary.json").read_text())["outcome"] == "success"
