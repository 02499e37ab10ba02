"""Notifications (seed 001 §5.19.1 `ci_notification_channels`; `fwloop_notify`): one JSON document
per channel at a plateau and at the end of every run, to a real executable and to a real webhook
on 127.0.0.1; a delivery that fails is recorded and changes nothing else.
"""

from __future__ import annotations

import json
import socket
import stat
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from controllerkit import ControllerKit, fixing
from loopkit import CALC, FIXES, LoopProject, calc_fix_patches, coder_answer, unified_diff
from pytest_fwloop.core.machine.outcomes import Outcome
from pytest_fwloop.core.records.run_records import Notification

PLATEAU_AT_2 = (
    "min_iterations_for_plateau = 2\nplateau_improvement_threshold = 1.0\n"
    "slow_improvement_threshold = 1.0\n"
)
SECRET = "s3cr3t-hook-token-0042"
RECEIVER = """\
import pathlib, sys
document = sys.stdin.read()
with open(pathlib.Path(__file__).with_suffix(".jsonl"), "a") as stream:
    stream.write(document.strip() + "\\n")
"""
FAILING = "import sys\nsys.stdin.read()\nsys.exit('smtp: connection refused by mail.example.com')\n"
HANGING = "import sys, time\nsys.stdin.read()\ntime.sleep(60)\n"


def executable(folder: Path, name: str, body: str) -> Path:
    path = folder / name
    path.write_text(f"#!{sys.executable}\n{body}")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def received(script: Path) -> list[dict[str, Any]]:
    log = script.with_suffix(".jsonl")
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


@dataclass
class Webhook:
    """An HTTP server on 127.0.0.1 keeping each POST (path, content type, body)."""

    port: int
    status: int = 204
    posts: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)

    def url(self, path: str = "/hook") -> str:
        return f"http://127.0.0.1:{self.port}{path}"


@pytest.fixture
def webhook() -> Iterator[Webhook]:
    hook = Webhook(0)

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            hook.posts.append((self.path, self.headers["Content-Type"], json.loads(body)))
            self.send_response(hook.status)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    hook.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield hook
    server.shutdown()
    server.server_close()


@pytest.fixture
def closed_port() -> int:
    """A port on 127.0.0.1 nothing listens on (connections are refused)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


# -- at a plateau (in-process) -------------------------------------------------------------------


@pytest.fixture
def kit(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> ControllerKit:
    return ControllerKit(pytester, monkeypatch)


def plateau_run(kit: ControllerKit, channel: str, *ini: str) -> Outcome:
    (kit.root / "criteria.toml").write_text(PLATEAU_AT_2)
    kit.coder.answers = [fixing("bug bug bug", "ok bug bug")]
    kit.build("bug bug bug", "fwloop_criteria = criteria.toml", f"fwloop_notify = {channel}", *ini)
    return kit.run()


def test_a_plateau_is_announced_before_the_mode_acts_on_it(
    kit: ControllerKit, tmp_path: Path
) -> None:
    script = executable(tmp_path, "receiver.py", RECEIVER)
    assert plateau_run(kit, f"command:{script}") is Outcome.PLATEAUED
    [document] = received(script)
    Notification.model_validate(document)
    assert document["schema"] == "fwloop-notification/1"
    assert (document["event"], document["plateau_action"]) == ("plateau", "failure")
    assert (document["outcome"], document["exit_status"], document["apply"]) == (None, None, None)
    assert document["run_id"] == "run-1"
    assert document["iteration"] == 2
    assert (document["pass_counts"], document["total_counts"]) == ([0, 1], [3, 3])
    assert (document["pass_count"], document["total_count"]) == (1, 3)
    assert document["unresolved"] == ["tests/test_fw.py::test_1", "tests/test_fw.py::test_2"]
    assert document["unresolved_count"] == 2
    assert document["reason"].startswith("PLATEAUED: ")
    assert document["reason"].endswith("ci mode: plateau at pass rate 33.3% ends as a failure")
    run_dir = kit.controller.recorder.path
    assert document["report"] == str(run_dir / "report.html")
    assert kit.summary()["notifications"] == [
        {"event": "plateau", "channel": f"command:{script}", "delivered": True, "detail": ""}
    ]
    [line] = [e for e in kit.events() if e["kind"] == "notification"]
    assert (line["from"], line["to"]) == ("CONVERGENCE_CHECK", "CONVERGENCE_CHECK")
    assert line["reason"] == f"plateau notification sent to command:{script}"


def test_a_channel_that_fails_at_a_plateau_is_a_note_not_another_outcome(
    kit: ControllerKit, tmp_path: Path
) -> None:
    script = executable(tmp_path, "mailer.py", FAILING)
    assert plateau_run(kit, f"command:{script}") is Outcome.PLATEAUED
    summary = kit.summary()
    assert summary["exit_status"] == 1
    [record] = summary["notifications"]
    assert record["delivered"] is False
    assert record["detail"] == "exit 1: smtp: connection refused by mail.example.com"
    note = (
        f"the plateau notification to command:{script} failed (exit 1: smtp: connection refused "
        "by mail.example.com); the run's outcome stands"
    )
    timeline = json.loads((kit.controller.recorder.path / "task-timeline.json").read_text())
    assert note in timeline["iterations"][1]["notes"]
    assert f"fwloop: {note}" in kit.terminal.getvalue()


# -- bad channels ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("channel", "says"),
    [
        ("slack", "*fwloop: ini fwloop_notify: 'slack': not a notification channel; use comm*"),
        ("command:ci/nope.sh", "*'command:ci/nope.sh': */ci/nope.sh does not exist; create it*"),
        ("http:///hook", "*'http:///hook': not a notification channel*"),
        ("http://127.0.0.1:99999/x", "*'http://127.0.0.1:99999/x': Port out of range*fix the URL*"),
    ],
)
def test_a_bad_channel_is_a_usage_error_before_anything_runs(
    project: LoopProject, channel: str, says: str
) -> None:
    project.calc_suite(f"fwloop_notify = {channel}\n")
    coder = project.agent("coder", [coder_answer("")])
    result = project.run(f"--fwloop-coder={coder.spec}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([says])
    assert project.run_dirs() == []


def test_a_command_that_cannot_run_is_named_with_its_fix(project: LoopProject) -> None:
    project.calc_suite()
    project.write("ci/notify.sh", "#!/bin/sh\n")  # not executable
    coder = project.agent("coder", [coder_answer("")])
    result = project.run(f"--fwloop-coder={coder.spec}", "--fwloop-notify=command:ci/notify.sh")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*--fwloop-notify: 'command:ci/notify.sh': */ci/notify.sh is not executable; chmod +x*"]
    )


# -- real runs -------------------------------------------------------------------------------------


def fix_everything() -> dict[str, Any]:
    fixed = CALC
    for old, new in FIXES:
        fixed = fixed.replace(old, new)
    return coder_answer(unified_diff("fw/calc.py", CALC, fixed), "fix all three")


@pytest.mark.slow
def test_the_end_of_a_run_is_posted_to_a_webhook_redacted_and_its_token_kept_out(
    project: LoopProject, webhook: Webhook, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DEPLOY_TOKEN", "hunter2-deploy-key-0042")
    project.calc_suite(f"fwloop_notify = {webhook.url(f'/hooks/{SECRET}')}\n")
    coder = project.agent("coder", [fix_everything()])
    result = project.run(
        f"--fwloop-coder={coder.spec}", "--fwloop-goal=ship it with hunter2-deploy-key-0042"
    )
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    [(path, content_type, document)] = webhook.posts
    assert path == f"/hooks/{SECRET}"
    assert content_type == "application/json"
    Notification.model_validate(document)
    [run_dir] = project.run_dirs()
    assert document["event"] == "finished"
    assert document["run_id"] == run_dir.name
    assert (document["outcome"], document["final_state"], document["exit_status"]) == (
        "success",
        "SUCCESS",
        0,
    )
    assert document["report"] == str(run_dir / "report.html")
    assert Path(document["report"]).is_file()
    assert document["summary"] == str(run_dir / "summary.json")
    assert (document["best"], document["apply"]) == (None, None)
    assert document["goal"] == "ship it with [redacted:DEPLOY_TOKEN]"
    assert document["pass_counts"] == project.summary()["pass_counts"]
    hidden = f"http://127.0.0.1:{webhook.port}/…"
    assert project.summary()["notifications"] == [
        {"event": "finished", "channel": hidden, "delivered": True, "detail": ""}
    ]
    [line] = [e for e in project.events() if e["kind"] == "notification"]
    assert (line["from"], line["to"]) == ("SUCCESS", "SUCCESS")
    for record in run_dir.rglob("*"):
        if record.is_file():
            assert SECRET not in record.read_text(errors="replace"), record
    assert SECRET not in result.stdout.str()
    assert project.replay().returncode == 0


@pytest.mark.slow
def test_a_plateau_and_the_end_each_reach_a_command_with_the_apply_command(
    project: LoopProject,
) -> None:
    project.calc_suite("fwloop_criteria = criteria.toml\n")
    project.write("criteria.toml", PLATEAU_AT_2)
    script = executable(project.agents_dir, "receiver.py", RECEIVER)
    coder = project.agent("coder", [coder_answer(p) for p in calc_fix_patches()])
    result = project.run(f"--fwloop-coder={coder.spec}", f"--fwloop-notify=command:{script}")
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    plateau, finished = received(script)
    assert (plateau["event"], plateau["plateau_action"]) == ("plateau", "failure")
    assert finished["event"] == "finished"
    assert (finished["outcome"], finished["exit_status"]) == ("plateaued", 1)
    summary = project.summary()
    assert finished["reason"] == summary["reason"]
    assert finished["best"] == summary["best"]
    assert finished["apply"] == summary["best"]["apply"] == f"fwloop apply {summary['run_id']}"
    assert [(n["event"], n["delivered"]) for n in summary["notifications"]] == [
        ("plateau", True),
        ("finished", True),
    ]
    assert project.replay().returncode == 0


@pytest.mark.slow
def test_failed_deliveries_are_recorded_and_the_run_ends_as_it_would(
    project: LoopProject, webhook: Webhook, closed_port: int
) -> None:
    webhook.status = 500
    failing = executable(project.agents_dir, "mailer.py", FAILING)
    hanging = executable(project.agents_dir, "hangs.py", HANGING)
    channels = [
        webhook.url(),
        f"http://127.0.0.1:{closed_port}/hook",
        f"command:{failing}",
        f"command:{hanging}",
    ]
    project.calc_suite(
        "fwloop_notify =\n"
        + "".join(f"    {c}\n" for c in channels)
        + "fwloop_notify_timeout = 1\n"
    )
    coder = project.agent("coder", [fix_everything()])
    result = project.run(f"--fwloop-coder={coder.spec}")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    summary = project.summary()
    assert summary["outcome"] == "success"
    assert [len(webhook.posts)] == [1]  # the 500 was an answer: the document arrived
    details = [(n["delivered"], n["detail"]) for n in summary["notifications"]]
    assert details[0] == (False, "HTTP 500")
    assert details[1][0] is False
    assert details[1][1].startswith("ConnectionRefusedError: ")
    assert details[2] == (False, "exit 1: smtp: connection refused by mail.example.com")
    assert details[3] == (False, "not done within fwloop_notify_timeout=1 s; stopped")
    lines = [e["reason"] for e in project.events() if e["kind"] == "notification"]
    assert len(lines) == 4
    assert all(line.endswith("; the run's outcome stands") for line in lines)
    result.stdout.fnmatch_lines(
        [f"fwloop: the finished notification to http://127.0.0.1:{webhook.port}/… failed (HTTP*"]
    )
    assert project.replay().returncode == 0


@pytest.mark.slow
def test_an_internal_error_is_announced_too(project: LoopProject, webhook: Webhook) -> None:
    project.calc_suite(f"fwloop_notify = {webhook.url()}\n")
    project.write(
        "conftest.py",
        "def pytest_fwloop_schema(config, role, schema):\n"
        "    return {'type': 'objcet'} if role == 'tester' else None\n",
    )
    tester = {"select": [], "commands": [], "notes": ""}
    agent = project.agent("agent", [fix_everything()], tester=[tester])
    result = project.run(f"--fwloop-coder={agent.spec}", f"--fwloop-tester={agent.spec}")
    assert result.ret == pytest.ExitCode.INTERNAL_ERROR, result.stdout.str()
    [(_, _, document)] = webhook.posts
    assert (document["outcome"], document["exit_status"]) == ("internal_error", 3)
    assert project.summary()["notifications"][0]["delivered"] is True
