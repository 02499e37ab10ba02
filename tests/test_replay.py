"""`fwloop replay` (DESIGN.md §12): real run directories, made by the controller in-process,
reproduce; each kind of tampering is named with its iteration and decision."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from controllerkit import ControllerKit, fixing
from pytest_fwloop.cli.main import main
from pytest_fwloop.core.machine.outcomes import Outcome


@pytest.fixture
def run_dir(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A finished run: baseline 2/3, a patch rolled back, the fix, a confirmation."""
    kit = ControllerKit(pytester, monkeypatch)
    kit.coder.answers = [
        fixing("ok bug ok", "bug ok bug", "breaks two"),
        fixing("ok bug ok", "ok ok ok", "fix test_1"),
    ]
    kit.build("ok bug ok", "fwloop_max_iter = 8")
    assert kit.run() is Outcome.SUCCESS
    return kit.controller.recorder.path


def replayed(path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(["replay", str(path)])
    out, err = capsys.readouterr()
    return code, out, err


def test_a_real_run_reproduces_and_its_timeline_is_printed(
    run_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = replayed(run_dir, capsys)
    assert (code, err) == (0, "")
    assert "[2] rollback" in out
    assert "[4] confirmation" in out
    assert "every decision reproduces" in out


def _drop_transition(path: Path) -> None:
    events = path / "task-events.jsonl"
    lines = events.read_text().splitlines(keepends=True)
    victim = next(
        i
        for i, line in enumerate(lines)
        if '"to":"BUILD_SETUP"' in line.replace(" ", "")
        and '"iteration":3' in line.replace(" ", "")
    )
    events.write_text("".join(lines[:victim] + lines[victim + 1 :]))


def _edit_json(
    relative: str, change: Callable[[dict[str, object]], None]
) -> Callable[[Path], None]:
    def tamper(path: Path) -> None:
        target = path / relative
        data = json.loads(target.read_text())
        change(data)
        target.write_text(json.dumps(data))

    return tamper


def _verdict(data: dict[str, object]) -> None:
    data["convergence_type"] = "success"


def _counts(data: dict[str, object]) -> None:
    tests = data["tests"]
    assert isinstance(tests, list)
    tests[1]["outcome"] = "passed"


def _patch(path: Path) -> None:
    diff = path / "rounds" / "03" / "patch.diff"
    diff.write_text(diff.read_text().replace("+ok ok ok", "+ok bug bug"))


def _review(data: dict[str, object]) -> None:
    data["decision"] = "request_changes"


@pytest.mark.parametrize(
    ("tamper", "named"),
    [
        (
            _drop_transition,
            "iteration 3, transition: BUILD_SETUP --no_build--> TEST_SETUP starts where the "
            "trace is not (it was in PATCH_APPLY)",
        ),
        (
            _edit_json("rounds/03/convergence.json", _verdict),
            "iteration 3, convergence: the record says success, the rules give continue",
        ),
        (
            _edit_json("rounds/01/results.json", _counts),
            "iteration 1, convergence: the verdict was taken on pass/total counts [2]/[3]; the "
            "results give [3]/[3]",
        ),
        (_patch, "iteration 3, patch: patch.diff is not the patch the reviewer approved"),
        (
            _edit_json("rounds/03/review.json", _review),
            "iteration 3, patch: applied without an approval (request_changes)",
        ),
    ],
    ids=["missing-transition", "verdict", "counts", "patch", "review"],
)
def test_a_tampered_run_names_the_first_decision_that_differs(
    run_dir: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    tamper: Callable[[Path], None],
    named: str,
) -> None:
    copy = shutil.copytree(run_dir, tmp_path / "copy")
    tamper(copy)
    code, _, err = replayed(copy, capsys)
    assert code == 1
    assert f"fwloop replay: does not reproduce: {named}" in err


def test_a_run_is_found_by_prefix_or_last_and_a_bad_name_is_one_line(
    run_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = run_dir.parents[2]
    assert main(["replay", "last", "--rootdir", str(root)]) == 0
    assert main(["replay", run_dir.name[:3], "--rootdir", str(root)]) == 0
    capsys.readouterr()
    assert main(["replay", "nope", "--rootdir", str(root)]) == 2
    assert capsys.readouterr().err == (
        f"fwloop: no run 'nope' in {root / '.fwloop' / 'runs'}; `last` names the latest\n"
    )


def test_an_unreadable_record_is_refused_in_one_line(
    run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    copy = shutil.copytree(run_dir, tmp_path / "copy")
    (copy / "rounds" / "02" / "convergence.json").write_text("{")
    code, _, err = replayed(copy, capsys)
    assert code == 2
    assert err.startswith(f"{copy}: a record does not validate: ")
    assert err.count("\n") == 1


def test_fwloop_list_and_show_name_the_runs_and_their_records(
    run_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = str(run_dir.parents[2])
    (run_dir.parent / "20991231-235959-dead").mkdir()  # a run whose controller was killed
    assert main(["list", "--rootdir", root, "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    # Sorted by id, which starts with the time a real run started.
    assert [(r["run_id"], r["outcome"]) for r in listed] == [
        ("20991231-235959-dead", "unfinished"),
        (run_dir.name, "success"),
    ]
    assert next(r for r in listed if r["run_id"] == run_dir.name)["pass_counts"] == [2, 1, 3, 3]
    assert main(["list", "--rootdir", root]) == 0
    table = capsys.readouterr().out
    assert "2 → 1 → 3 → 3 of 3" in table
    assert "2099-12-31 23:59:59" in table
    assert main(["show", "last", "--rootdir", root, "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["outcome"] == "success"
    assert [i["kind"] for i in shown["iterations"]] == [
        "baseline",
        "rollback",
        "patch",
        "confirmation",
    ]
    assert shown["records"]["report.html"] == str(run_dir / "report.html")
    assert main(["show", "last", "--rootdir", root]) == 0
    assert "rollback" in capsys.readouterr().out
