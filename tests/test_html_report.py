"""`report.html` (DESIGN.md §12), from in-process runs: rewritten at each iteration end, built
from the records, and nothing an agent or a test wrote is ever markup."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from controllerkit import METRICS, ControllerKit, firmware_patch, fixing
from loopkit import coder_answer, unified_diff
from pytest_fwloop.cli.main import main
from pytest_fwloop.core.machine.outcomes import Outcome

HOSTILE = "<script>alert('fw')</script><img src=x onerror=alert(1)>"


@pytest.fixture
def kit(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> ControllerKit:
    return ControllerKit(pytester, monkeypatch)


class Snapshots:
    """Reads report.html each time an iteration ends (the public iteration-done hook)."""

    def __init__(self) -> None:
        self.path: Path | None = None
        self.seen: list[str] = []

    @pytest.hookimpl
    def pytest_fwloop_iteration_done(self, **_: Any) -> None:
        assert self.path is not None
        self.seen.append((self.path / "report.html").read_text(encoding="utf-8"))


def test_the_report_shows_progress_then_the_outcome(kit: ControllerKit) -> None:
    snapshots = Snapshots()
    kit.coder.answers = [fixing("ok bug bug", "ok ok bug"), fixing("ok ok bug", "ok ok ok")]
    kit.build("ok bug bug", plugins=(snapshots,))
    snapshots.path = kit.controller.recorder.path
    assert kit.run() is Outcome.SUCCESS
    assert len(snapshots.seen) == 4
    assert 'class="outcome running"' in snapshots.seen[0]
    assert "after iteration 1: continue" in snapshots.seen[0]
    assert snapshots.seen[0].count('<tr><td><a href="#round-') == 1
    final = (kit.controller.recorder.path / "report.html").read_text(encoding="utf-8")
    assert 'class="outcome success"' in final
    assert final.count('<tr><td><a href="#round-') == 4
    # The chart: one point per iteration, and the target line.
    assert final.count("<circle ") == 4
    assert 'id="target"' in final
    # The matrix: 3 tests over 4 iterations, the failing ones first.
    rows = re.findall(r"<tr><td>(tests/test_fw\.py::test_\d)</td>", final)
    assert rows == [
        "tests/test_fw.py::test_1",
        "tests/test_fw.py::test_2",
        "tests/test_fw.py::test_0",
    ]
    assert "<script" not in final


def test_what_agents_and_tests_wrote_is_shown_as_text(kit: ControllerKit) -> None:
    answer = fixing("ok bug", "ok ok", summary=HOSTILE)
    answer["analysis"]["root_cause"] = HOSTILE
    kit.coder.answers = [answer]
    kit.build("ok bug")
    assert kit.run() is Outcome.SUCCESS
    html = (kit.controller.recorder.path / "report.html").read_text(encoding="utf-8")
    assert "<script" not in html
    assert "<img" not in html
    assert "&lt;script&gt;alert(&#39;fw&#39;)&lt;/script&gt;" in html


def test_fwloop_report_writes_the_same_page_from_the_records(
    kit: ControllerKit, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kit.coder.answers = [fixing("ok bug bug", "ok ok bug"), fixing("ok ok bug", "ok ok ok")]
    kit.build("ok bug bug")
    assert kit.run() is Outcome.SUCCESS
    run_dir = kit.controller.recorder.path
    by_the_loop = (run_dir / "report.html").read_text(encoding="utf-8")
    (run_dir / "report.html").unlink()
    assert main(["report", "last", "--rootdir", str(kit.root)]) == 0
    assert (run_dir / "report.html").read_text(encoding="utf-8") == by_the_loop
    elsewhere = tmp_path / "ci" / "run.html"
    elsewhere.parent.mkdir()
    assert main(["report", str(run_dir), "-o", str(elsewhere)]) == 0
    moved = elsewhere.read_text(encoding="utf-8")
    assert f'href="{run_dir.as_uri()}/rounds/02/pytest.log"' in moved
    assert capsys.readouterr().out.endswith(f"{elsewhere}\n")


def test_a_report_that_cannot_be_written_costs_a_note_not_the_run(kit: ControllerKit) -> None:
    kit.coder.answers = [fixing("ok bug", "ok ok")]
    kit.build("ok bug")
    (kit.controller.recorder.path / "report.html").mkdir()  # in the way of the file
    assert kit.run() is Outcome.SUCCESS
    notes = " ".join(note for it in _timeline(kit) for note in it["notes"])
    assert "report.html not written: IsADirectoryError" in notes
    assert "report.html not written: IsADirectoryError" in kit.terminal.getvalue()


def _timeline(kit: ControllerKit) -> list[dict[str, Any]]:
    path = kit.controller.recorder.path / "task-timeline.json"
    return json.loads(path.read_text(encoding="utf-8"))["iterations"]  # type: ignore[no-any-return]


def test_the_report_shows_the_metrics_and_each_iterations_analysis(
    kit: ControllerKit, capsys: pytest.CaptureFixture[str]
) -> None:
    (kit.root / METRICS).parent.mkdir(parents=True, exist_ok=True)
    (kit.root / METRICS).write_text("boot_ms 400 lower\nrate 9 higher\n")
    patch = firmware_patch("ok bug", "ok ok") + unified_diff(
        METRICS, "boot_ms 400 lower\nrate 9 higher\n", "boot_ms 410 lower\nrate 9 higher\n"
    )
    kit.coder.answers = [coder_answer(patch)]
    kit.build("ok bug")
    assert kit.run() is Outcome.SUCCESS
    run_dir = kit.controller.recorder.path
    html = (run_dir / "report.html").read_text(encoding="utf-8")
    table = html.split('id="metrics"', 1)[1].split("</table>", 1)[0]
    rows = re.findall(r"<tr><td>(\w+)</td><td>(\w+)</td>((?:<td>[\d.]+</td>)+)", table)
    assert rows == [
        ("boot_ms", "lower", "<td>400</td><td>410</td><td>410</td>"),
        ("rate", "higher", "<td>9</td><td>9</td><td>9</td>"),
    ]
    assert re.findall(r"<td>([+-][\d.]+%)</td>", table) == ["+2.5%", "+0.0%"]
    assert table.count('<td class="status">ok</td>') == 2
    trends = re.findall(r'<td class="trend">([^<]*)</td>', html)
    assert trends == ["insufficient data", "improving", "improving"]
    assert html.count('<p class="recommendation">') == 3
    assert 'id="next"' not in html  # a green run: nothing left to advise
    # `fwloop report` builds the same page from the records alone.
    (run_dir / "report.html").unlink()
    assert main(["report", "last", "--rootdir", str(kit.root)]) == 0
    assert (run_dir / "report.html").read_text(encoding="utf-8") == html
    capsys.readouterr()
