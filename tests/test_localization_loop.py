"""Any model can fix the firmware when it is sent the code (DESIGN.md §16), through `openai:`.

The model is `standin_model.StandinModel`: an OpenAI-compatible server on 127.0.0.1 that never
opens a file and can fix a bug only when the request shows the buggy lines with their
neighbours. It knows the bundled examples' bugs from their recorded fixes; what reaches it is
what the loop localized.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from envs_support.examples import copy_example, require_example_tools
from envs_support.procs import running_under
from loopkit import LoopProject
from standin_model import Bug, StandinModel, bugs_of_answers

pytestmark = pytest.mark.slow

#: The examples run on the host (labgrid-farm has its story in tests/test_farm.py).
HOST_EXAMPLES = ["qemu-cortex-m", "ssh-bmc", "uart-console"]


def coder_requests(run_dir: Path) -> list[dict[str, Any]]:
    return [
        json.loads(path.read_text())
        for path in sorted(run_dir.glob("rounds/*/coder-*.request.json"))
    ]


@pytest.mark.parametrize("name", HOST_EXAMPLES)
def test_an_endpoint_model_that_sees_only_its_messages_fixes_every_example(
    project: LoopProject, name: str
) -> None:
    require_example_tools(name)
    root = copy_example(name, project.root)
    bugs = bugs_of_answers(root / "fwloop-answers")
    with StandinModel(bugs) as model:
        result = project.run(f"--fwloop-coder={model.spec}", "--max-iter=6")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    summary = project.summary()
    assert summary["outcome"] == "success"
    # Every bug's lines reached the model in the first request: one coder call fixed them all.
    assert sorted(model.seen[0].visible) == sorted(bug.name for bug in bugs)
    assert summary["coder_calls"] == 1
    [run_dir] = project.run_dirs()
    [request] = coder_requests(run_dir)
    sources = request["sources"]
    assert isinstance(sources, list)
    assert sources
    # Tests are read-only context, never offered as editable code.
    assert not any(
        "/test_" in chunk["path"] or chunk["path"].startswith("tests/") for chunk in sources
    )
    assert request["test_sources"]
    events = (run_dir / "task-events.jsonl").read_text()
    assert '"event": "LOCALIZATION"' in events
    [review] = sorted(run_dir.glob("rounds/02/reviewer-*.request.json"))
    functions = json.loads(review.read_text())["patch_functions"]
    assert functions
    assert all(f["before"] != f["after"] for f in functions)
    replayed = project.replay()
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    assert running_under(project.root) == []


def test_secrets_symlinks_and_protected_files_never_reach_the_model(
    project: LoopProject, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A key file in the tree, a symlink to a file outside it, a protected file the failures
    name, and a secret-named variable's value inside a source file: none reaches the model."""
    require_example_tools("uart-console")
    root = copy_example("uart-console", project.root)
    outside = tmp_path / "outside.c"
    outside.write_text("int crc8_smbus_outside_secret(void) { return 42; }\n")
    (root / "firmware" / "src" / "leak.c").symlink_to(outside)
    (root / "firmware" / ".env").write_text("FLASH_TOKEN=tok-0123456789abcdef\n")
    (root / "firmware" / "src" / "id_rsa").write_text("-----BEGIN OPENSSH PRIVATE KEY-----\n")
    crc = root / "firmware" / "src" / "crc8.c"
    crc.write_text(crc.read_text() + "/* deploy key: key-9f8e7d6c5b4a39281706 */\n")
    bugs = bugs_of_answers(root / "fwloop-answers")
    with StandinModel(bugs) as model:
        monkeypatch.setenv("DEPLOY_KEY", "key-9f8e7d6c5b4a39281706")
        result = project.run(f"--fwloop-coder={model.spec}", "--max-iter=4")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    [run_dir] = project.run_dirs()
    sent = json.dumps(coder_requests(run_dir))
    assert "outside_secret" not in sent
    assert "leak.c" not in sent
    assert "tok-0123456789abcdef" not in sent
    assert ".env" not in sent
    assert "PRIVATE KEY" not in sent
    assert "id_rsa" not in sent
    assert "key-9f8e7d6c5b4a39281706" not in sent
    assert "[redacted:DEPLOY_KEY]" in sent
    editable = {c["path"] for r in coder_requests(run_dir) for c in r["sources"]}
    assert "pytest.ini" not in editable
    assert "tests/conftest.py" not in editable


def test_a_model_that_reads_through_the_tools_converges_with_no_code_sent(
    project: LoopProject,
) -> None:
    """`fwloop_source_bytes = 0`: the request holds no code, so the stand-in searches for the
    failing tests' words and reads what it found through the tools before it answers."""
    require_example_tools("uart-console")
    root = copy_example("uart-console", project.root)
    bugs = bugs_of_answers(root / "fwloop-answers")
    with StandinModel(bugs, mode="tools") as model:
        result = project.run(
            f"--fwloop-coder={model.spec}", "--max-iter=8", "-o", "fwloop_source_bytes=0"
        )
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    assert project.summary()["outcome"] == "success"
    [run_dir] = project.run_dirs()
    assert all(request["sources"] == [] for request in coder_requests(run_dir))
    calls = json.loads(next(run_dir.glob("rounds/02/coder-1.tools.json")).read_text())
    assert any(c["name"] == "read_file" and not c["refused"] for c in calls)
    assert all(c["result_bytes"] == len(c["result"].encode()) for c in calls)
    replayed = project.replay()
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr


def test_a_hostile_model_using_the_tools_gets_nothing_from_outside_and_ends_honestly(
    project: LoopProject, tmp_path: Path
) -> None:
    """Paths out of the tree, `..`, links out, `.git`, `.fwloop`, a secret file, huge ranges, a
    backtracking pattern, an unknown tool, then calls without end: every one answered with a
    refusal or a bounded result, and the run ends with an outcome that says so."""
    require_example_tools("uart-console")
    root = copy_example("uart-console", project.root)
    secret = "the victim's secret outside the tree"
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "victim.txt").write_text(f"/* {secret} */\n")  # make compiles it
    (root / "firmware" / "src" / "leak.c").symlink_to(tmp_path / "outside" / "victim.txt")
    (root / "firmware" / "linked").symlink_to(tmp_path / "outside")
    (root / "firmware" / ".env").write_text(f"TOKEN={secret}\n")
    with StandinModel(bugs_of_answers(root / "fwloop-answers"), mode="hostile") as model:
        result = project.run(f"--fwloop-coder={model.spec}", "--max-iter=3")
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    summary = project.summary()
    assert summary["outcome"] == "provider_bad_output"
    assert "after it was told to answer" in summary["reason"]
    assert model.tool_results
    assert not any(secret in text for text in model.tool_results)
    assert not any("[core]" in text or "bare =" in text for text in model.tool_results)
    assert all(len(text.encode()) <= 17 * 1024 for text in model.tool_results)
    assert (root / "firmware" / "src" / "crc8.c").read_text() == (
        Path(__file__).parents[1] / "examples" / "uart-console" / "firmware" / "src" / "crc8.c"
    ).read_text()


@pytest.mark.parametrize("form", ["sloppy", "edits"])
def test_a_model_writing_sloppy_diffs_or_edits_converges(project: LoopProject, form: str) -> None:
    """What the model writes as models do (issue 32): hunk numbers off by three and no `a/` `b/`,
    or search/replace edits. The loop builds one git diff; that diff is what was reviewed,
    applied and recorded, and replay reproduces the run."""
    require_example_tools("uart-console")
    root = copy_example("uart-console", project.root)
    with StandinModel(bugs_of_answers(root / "fwloop-answers"), form=form) as model:
        result = project.run(f"--fwloop-coder={model.spec}", "--max-iter=6")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    assert project.summary()["outcome"] == "success"
    assert project.summary()["coder_calls"] == 1
    [run_dir] = project.run_dirs()
    answer = json.loads((run_dir / "rounds" / "02" / "coder-1.answer.json").read_text())
    applied = (run_dir / "rounds" / "02" / "patch.diff").read_text()
    assert applied.startswith("diff --git a/")
    assert applied != answer["patch"]
    [review] = sorted(run_dir.glob("rounds/02/reviewer-*.request.json"))
    assert json.loads(review.read_text())["patch"] == applied
    replayed = project.replay()
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr


#: A library whose failing test names `battery` and `report`: text alone points at the battery
#: modules, which the test never runs; the defect is two calls down, in a unit helper that no
#: traceback shows.
BATTERY_LIBRARY = {
    "lib/__init__.py": "",
    "lib/units.py": (
        "def to_millivolts(volts):\n"
        "    return round(volts * 100)\n"
        "\n"
        "\n"
        "def to_volts(millivolts):\n"
        "    return millivolts / 1000\n"
    ),
    "lib/report.py": (
        "from lib import units\n"
        "\n"
        "\n"
        "def summary(volts):\n"
        "    return _shown(volts)\n"
        "\n"
        "\n"
        "def _shown(volts):\n"
        "    return f'{units.to_millivolts(volts)} mV'\n"
    ),
    "lib/current.py": "def to_milliamps(amps):\n    return round(amps * 1000)\n",
    **{
        f"lib/battery_{part}.py": (
            f"def battery_{part}_report(cells):\n"
            f"    '''The battery {part} report of the pack, cell by cell.'''\n"
            f"    return [battery_{part}_of(cell) for cell in cells]\n"
            "\n"
            "\n"
            f"def battery_{part}_of(cell):\n"
            f"    return cell.get('{part}', 0)\n"
        )
        for part in ("health", "level", "cycles", "wear", "heat", "charge", "drain", "age")
    },
    "tests/test_battery.py": (
        "from lib.current import to_milliamps\n"
        "from lib.report import summary\n"
        "\n"
        "\n"
        "def test_battery_report():\n"
        "    assert summary(3.3) == '3300 mV'\n"
        "\n"
        "\n"
        "def test_battery_current():\n"
        "    assert to_milliamps(1.5) == 1500\n"
    ),
    "pytest.ini": "[pytest]\ntestpaths = tests\npythonpath = .\n",
}


def test_a_defect_no_traceback_names_reaches_the_model_through_the_lines_the_test_ran(
    project: LoopProject,
) -> None:
    """The failure is a wrong value: its traceback shows the test line only, and its words
    name the battery modules. What the failing test ran, and the passing one did not, leads to
    `to_millivolts`; with room for a few files, a model that sees only its messages fixes it."""
    for path, text in BATTERY_LIBRARY.items():
        project.write(path, text)
    fixed = BATTERY_LIBRARY["lib/units.py"].replace("* 100)", "* 1000)")
    bug = Bug(
        "millivolts",
        tuple(BATTERY_LIBRARY["lib/units.py"].splitlines()[:4]),
        tuple(fixed.splitlines()[:4]),
    )
    with StandinModel([bug]) as model:
        result = project.run(
            f"--fwloop-coder={model.spec}", "--max-iter=4", "-o", "fwloop_source_bytes=4096"
        )
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    assert project.summary()["outcome"] == "success"
    assert model.seen[0].visible == ["millivolts"]
    [run_dir] = project.run_dirs()
    [request, *_] = coder_requests(run_dir)
    [chunk] = [c for c in request["sources"] if c["path"] == "lib/units.py"]
    assert "run by 1 failing and 0 passing" in chunk["reason"]
    # The baseline records no lines (it could have been green); its last flaky rerun of the
    # failure does, with the passing tests to rank by, so no spectrum run is due.
    assert sorted(p.name for p in run_dir.glob("rounds/01/spectrum-*.json")) == [
        "spectrum-flaky-2.json"
    ]
    assert sorted(p.name for p in run_dir.glob("rounds/02/spectrum-*.json")) == [
        "spectrum-1.json",  # the focus run after the patch
    ]
