"""Every bundled example, copied to a scratch directory, converges under a real `pytest --fwloop`.

The examples replay their recorded answers (`scripted:fwloop-answers`), so each run is the demo a
user would see: the baseline with the seeded bugs, one coder call per bug with the pass count
rising each time, green, and green again on the confirmation run.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from envs_support.browser import open_page
from envs_support.examples import (
    EXAMPLES,
    ConsoleServer,
    copy_example,
    recorded_answers,
    require_example_tools,
)
from envs_support.procs import running_under
from envs_support.tools import require
from loopkit import LoopProject, coder_answer, unified_diff

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

pytestmark = pytest.mark.slow

#: Examples written for a test dependency's plugin that the project's own runs leave out
#: (conftest.py's INTRUSIVE_PLUGINS): they run with it loaded.
WITH_PLUGINS = {"pytest-embedded"}


@pytest.fixture
def tidy_project(project: LoopProject) -> Iterator[LoopProject]:
    """The project, checked at teardown to have no process left running under it."""
    yield project
    assert running_under(project.root) == []


def example(project: LoopProject, name: str) -> Path:
    require_example_tools(name)
    return copy_example(name, project.root)


def load_its_plugins(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The pytest runs of an example written for a plugin load it."""
    if name in WITH_PLUGINS:
        monkeypatch.setenv("PYTEST_ADDOPTS", "-p no:randomly")


def assert_converged(project: LoopProject, result: pytest.RunResult) -> None:
    """Success, exit 0, one coder call per recorded fix, each one raising the pass count."""
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    summary = project.summary()
    fixes = [answer["patch"] for answer in recorded_answers(project.root)]
    assert summary["outcome"] == "success"
    assert summary["coder_calls"] == len(fixes)
    passed, total = summary["pass_counts"], summary["total_counts"]
    assert len(passed) == len(fixes) + 2  # baseline, one iteration per fix, confirmation
    assert all(before < after for before, after in itertools.pairwise(passed[:-1])), passed
    assert passed[-2] == passed[-1] == total[-1]
    assert summary["unresolved"] == []
    [run_dir] = project.run_dirs()
    final = (run_dir / "final.patch").read_text(encoding="utf-8")
    for fix in fixes:
        added = [line for line in fix.splitlines() if line[:1] == "+" and line[:3] != "+++"]
        assert added
        assert all(line in final for line in added)


def seeded_bugs(root: Path) -> dict[str, int]:
    """The example README's table of seeded bugs: failing test function -> bug number."""
    bugs = {}
    for row in re.finditer(r"^\| (\d) \|.*\|(?P<tests>[^|]*)\|$", readme(root), re.MULTILINE):
        for test in re.findall(r"`(test_\w+)`", row["tests"]):
            bugs[test] = int(row[1])
    return bugs


def readme(root: Path) -> str:
    return (root / "README.md").read_text(encoding="utf-8")


def assert_one_cluster_per_bug(root: Path, run_dir: Path) -> None:
    """The baseline's failures as the coder got them: no signature spans two seeded bugs, and
    every bug has a signature whose entry carries an excerpt (issue 11, sharper clusters)."""
    request = json.loads((run_dir / "rounds" / "02" / "coder-1.request.json").read_text())
    bugs = seeded_bugs(root)
    by_signature: dict[str, set[int]] = {}
    with_excerpt: set[int] = set()
    for failure in request["failures"]:
        bug = bugs[failure["nodeid"].rpartition("::")[2].partition("[")[0]]
        by_signature.setdefault(failure["signature"], set()).add(bug)
        if failure["excerpt"]:
            with_excerpt.add(bug)
    assert all(len(found) == 1 for found in by_signature.values()), by_signature
    assert with_excerpt == set(bugs.values())


def assert_device_log_sent(run_dir: Path) -> None:
    """pytest-embedded's DUT log, the failing test's part of it, is in the coder's request:
    the assert and reboot the exception's few buffered bytes do not show (issue 33)."""
    request = json.loads((run_dir / "rounds" / "02" / "coder-1.request.json").read_text())
    [failure] = [f for f in request["failures"] if "test_filter_window_slides" in f["nodeid"]]
    assert "--- fwloop device log ---\n[dut]\n" in failure["excerpt"]
    assert (
        "assert failed: filter_push main/filter.c:17 (next < FILTER_WINDOW)" in (failure["excerpt"])
    )
    kept = run_dir / "rounds" / "01" / "console"
    logs = [p.read_text() for p in kept.glob("*test_filter_window_slides*.dut.log")]
    assert logs
    assert all("abort() was called; rebooting..." in log for log in logs)


def assert_every_coder_request_ranked(run_dir: Path) -> None:
    """Each coder call's request has its ranking beside it (DESIGN.md §18): every candidate,
    its score by signal and its fate, the sent ones matching the request's sources."""
    requests = sorted(run_dir.glob("rounds/*/coder-*.request.json"))
    assert requests
    for request_file in requests:
        ranking_file = request_file.with_name(request_file.name.replace("request", "ranking"))
        ranking = json.loads(ranking_file.read_text(encoding="utf-8"))
        request = json.loads(request_file.read_text(encoding="utf-8"))
        sent = [c for c in ranking["candidates"] if c["sent"] == "source"]
        assert sent
        for candidate in sent:  # each one sent is inside a chunk of the request's sources
            assert any(
                chunk["path"] == candidate["path"]
                and chunk["start_line"] <= candidate["end_line"]
                and candidate["start_line"] <= chunk["end_line"]
                for chunk in request["sources"]
            ), candidate
        assert all(c["signals"] for c in ranking["candidates"])


def assert_why_answers(project: LoopProject) -> None:
    """`fwloop show --why` answers for a symbol the coder was sent and one it was not."""
    sent = project.fwloop("show", "last", "--why", "firmware/src/commands.c:command")
    assert sent.returncode == 0, sent.stderr
    assert re.search(
        r"^02/coder-1\.ranking\.json: .*commands\.c:command .*rank \d+ of \d+, "
        r"score [\d.]+ = \(.*\): sent whole; reasons: ",
        sent.stdout,
        re.M,
    ), sent.stdout
    withheld = project.fwloop(
        "show", "last", "--why", "tests/test_console.py:test_add_negative_overflow"
    )
    assert withheld.returncode == 0, withheld.stderr
    assert "withheld" in withheld.stdout
    assert "not sent (protected)" in withheld.stdout


#: What each example's run shows beyond converging.
EXTRA_CHECKS: dict[str, Callable[[Path], None]] = {"pytest-embedded": assert_device_log_sent}


@pytest.mark.parametrize("name", ["uart-console", "qemu-cortex-m", "ssh-bmc", "pytest-embedded"])
def test_example_converges(
    tidy_project: LoopProject, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    load_its_plugins(name, monkeypatch)
    root = example(tidy_project, name)
    assert_converged(tidy_project, tidy_project.run())
    assert_one_cluster_per_bug(root, tidy_project.run_dirs()[0])
    check = EXTRA_CHECKS.get(name)
    if check is not None:
        check(tidy_project.run_dirs()[0])
    assert_every_coder_request_ranked(tidy_project.run_dirs()[0])
    if name == "uart-console":
        assert_why_answers(tidy_project)
    replayed = tidy_project.replay()
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    assert "every decision reproduces" in replayed.stdout
    assert_report_opens(tidy_project)


def test_a_coder_that_loosens_the_pytest_embedded_script_is_refused(
    tidy_project: LoopProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ESP-IDF keeps its `pytest_<name>.py` beside the firmware, where no default glob looks: a
    coder that loosens one of its `expect`s is refused by the patch policy, the patch is never
    applied, never in best.patch, and `fwloop apply` puts back only the firmware fix (issue 33)."""
    load_its_plugins("pytest-embedded", monkeypatch)
    root = example(tidy_project, "pytest-embedded")
    script = root / "pytest_sensor_hub.py"
    seeded = script.read_text(encoding="utf-8")
    loosened = seeded.replace('"temp 495", "temp = -0.5 C"', '"temp 495", "0.-5 C"')
    hostile = coder_answer(
        unified_diff("pytest_sensor_hub.py", seeded, loosened), "accept the board's reading"
    )
    answers = root / "fwloop-answers" / "coder"
    fixes = recorded_answers(root)
    for number, answer in enumerate([hostile, *fixes], 1):
        (answers / f"{number:02d}.json").write_text(json.dumps(answer), encoding="utf-8")

    result = tidy_project.run("--max-iter=2")
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    [run_dir] = tidy_project.run_dirs()
    result.stdout.fnmatch_lines(["*PATCH_GENERATION -> *pytest_sensor_hub.py: protected path*"])
    assert result.stdout.str().count("policy passed; reviewer approved") == 1  # the fix only
    [rejected] = (run_dir / "rounds" / "02").glob("rejected-1-policy.diff")
    assert "pytest_sensor_hub.py" in rejected.read_text(encoding="utf-8")
    assert tidy_project.summary()["pass_counts"] == [3, 4]
    best = (run_dir / "best.patch").read_text(encoding="utf-8")
    assert "main/filter.c" in best
    assert "pytest_sensor_hub.py" not in best
    assert script.read_text(encoding="utf-8") == seeded  # the baseline is back
    assert f"fwloop apply {run_dir.name}" in result.stdout.str()

    applied = tidy_project.fwloop("apply", run_dir.name)
    assert applied.returncode == 0, applied.stdout + applied.stderr
    assert "main/filter.c" in applied.stdout
    assert "pytest_sensor_hub.py" not in applied.stdout
    assert script.read_text(encoding="utf-8") == seeded
    assert "next >= FILTER_WINDOW" in (root / "main" / "filter.c").read_text(encoding="utf-8")


def assert_report_opens(project: LoopProject) -> None:
    """The run's report.html in a real headless browser: it loads with no console message, the
    chart has a point per iteration, the matrix a row per test, and a screenshot is taken."""
    [run_dir] = project.run_dirs()
    summary = project.summary()
    opened = open_page(run_dir / "report.html", run_dir / "report.png")
    assert opened.console == []
    assert opened.dom.count("<circle ") == len(summary["pass_counts"])
    assert 'id="target"' in opened.dom
    matrix = opened.dom.split('id="matrix"', 1)[1].split("</table>", 1)[0]
    assert matrix.count('<td class="cell ') == len(summary["tests"]) * len(summary["pass_counts"])
    assert f'class="outcome {summary["outcome"]}"' in opened.dom
    assert opened.screenshot.stat().st_size > 10_000


def test_uart_console_over_a_serial_line_converges(tidy_project: LoopProject) -> None:
    root = example(tidy_project, "uart-console")
    server = ConsoleServer(root)
    try:
        result = tidy_project.run("-c", "serial.ini", "-o", f"fwloop_serial_url={server.url}")
    finally:
        server.stop()
    assert_converged(tidy_project, result)
    [run_dir] = tidy_project.run_dirs()
    results = (run_dir / "rounds" / "01" / "results.json").read_text(encoding="utf-8")
    assert "via-serial/test_console_serial.py::test_crc8_check_value" in results


@pytest.mark.parametrize("name", ["uart-console", "qemu-cortex-m"])
def test_recorded_answers_verify(name: str, tmp_path: Path) -> None:
    require_example_tools(name)
    # pytest-embedded, in this venv for its own example, would write its session logs there.
    addopts = f"{os.environ.get('PYTEST_ADDOPTS', '')} -p no:pytest_embedded".strip()
    env = {
        **os.environ,
        "PYTHON": sys.executable,
        "TMPDIR": str(tmp_path),
        "PYTEST_ADDOPTS": addopts,
    }
    verify = subprocess.run(
        [EXAMPLES / name / "verify_answers.sh"], env=env, capture_output=True, text=True
    )
    assert verify.returncode == 0, verify.stdout + verify.stderr
    assert "verify_answers: OK" in verify.stdout
    assert running_under(tmp_path) == []
    assert list(tmp_path.iterdir()) == []  # the scratch copy is gone


def test_a_second_run_sees_the_first_runs_fixes_in_a_shared_knowledge_base(
    tidy_project: LoopProject, tmp_path: Path
) -> None:
    """Two runs of uart-console, from its seeded tree each time, with one shared knowledge base:
    the second run's coder is sent the first run's crc8 fix for the crc8 failures."""
    shared = tmp_path / "team" / "knowledge.sqlite"
    root = example(tidy_project, "uart-console")
    assert_converged(tidy_project, tidy_project.run(f"--fwloop-knowledge={shared}"))
    [first] = tidy_project.run_dirs()
    for fixed in ("firmware", "build"):  # the sources' copies are older than the binary
        shutil.rmtree(root / fixed)
    copy_example("uart-console", root)  # the seeded bugs back
    result = tidy_project.run(f"--fwloop-knowledge={shared}")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    second = next(p for p in tidy_project.run_dirs() if p != first)
    request = json.loads((second / "rounds" / "02" / "coder-1.request.json").read_text())
    similar = request["similar_fixes"]
    assert similar
    assert {fix["run_id"] for fix in similar} == {first.name}
    [crc_fix] = [fix for fix in similar if "crc8.c" in fix["patch"]]
    crc_failures = {f["signature"] for f in request["failures"] if "crc8" in f["nodeid"]}
    assert crc_failures <= set(crc_fix["signatures"])


@pytest.mark.parametrize("follow_up", [False, True], ids=["readme", "docs-operator"])
def test_the_demo_operator_walk_through(tmp_path: Path, follow_up: bool) -> None:
    """The README's walk-through: `./dev.sh demo --fwloop-propose=first` stops with the first
    proposal and prints the commands; `fwloop confirm last` there goes on to green. And
    docs/operator.md's: with its answer set, a follow-up first gets the ring-buffer fix."""
    require("gcc", "gcc")
    repo = Path(__file__).resolve().parents[1]
    env = {**os.environ, "TMPDIR": str(tmp_path), "CI": "true", "FWLOOP_VENV": sys.prefix}

    def typed(command: list[str], where: Path | str) -> subprocess.CompletedProcess[str]:
        """A command as the operator types it, with no terminal."""
        return subprocess.run(
            command,
            cwd=where,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
            stdin=subprocess.DEVNULL,
            check=False,
        )

    answers = ["--fwloop-coder=scripted:fwloop-answers-operator"] if follow_up else []
    demo = typed(["bash", "dev.sh", "demo", "--fwloop-propose=first", *answers], repo)
    assert demo.returncode == pytest.ExitCode.TESTS_FAILED, demo.stdout + demo.stderr
    assert "outcome: awaiting_operator_confirm" in demo.stdout
    [scratch] = re.findall(r"^    cd (\S+)$", demo.stdout, re.MULTILINE)
    [confirm] = re.findall(r"^    (\S+ confirm last)  ", demo.stdout, re.MULTILINE)
    [run_dir] = (Path(scratch) / ".fwloop" / "runs").iterdir()
    assert "## The reviewer's comment" in (run_dir / "proposal.md").read_text()
    assert "crc8.c" in (run_dir / "proposal.patch").read_text()
    if follow_up:
        revised = typed([*confirm.split()[:-2], "followup", "last", "fix the ring buffer"], scratch)
        assert revised.returncode == 1, revised.stdout + revised.stderr
        assert "ringbuf.c" in (run_dir / "proposal.patch").read_text()
    done = typed([*confirm.split(), "--note", "ok"], scratch)
    assert done.returncode == 0, done.stdout + done.stderr
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["outcome"] == "success"
    assert summary["pass_counts"][0] < summary["pass_counts"][-1] == summary["total_counts"][-1]
    # None asked twice: one call per recorded fix, and one for the revised proposal.
    assert summary["coder_calls"] == len(recorded_answers(Path(scratch))) + follow_up
    replayed = typed([sys.executable, "-m", "pytest_fwloop.cli", "replay", "last"], scratch)
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    assert running_under(Path(scratch)) == []
