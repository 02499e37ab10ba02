"""Board farms (DESIGN.md §14) on a real labgrid coordinator, exporters and places on 127.0.0.1.

Each loop runs in the labgrid venv `./dev.sh test` makes (labgrid's pytest plugin and its serial
fork, kept out of the project's venv): `pytest --lg-env remote.yaml --fwloop
--fwloop-labgrid-reserve=board=uartcon`. The suite reaches its board through labgrid's
`RemotePlace` and `SerialDriver`, and logs each session's board and time, so the tests can check
that no board ever served two loops at once. Nothing of labgrid is mocked.
"""

from __future__ import annotations

import json
import os
import re
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from envs_support.examples import copy_example, recorded_answers
from farmkit import Farm, clean_environ, labgrid_bin
from loopkit import AGENT, APPROVE, CALC, calc_fix_patches, coder_answer

pytestmark = pytest.mark.slow

LABGRID_BIN = labgrid_bin()
needs_labgrid = pytest.mark.skipif(
    LABGRID_BIN is None, reason="labgrid is not installed (./dev.sh test makes .tools/labgrid-venv)"
)

#: Each session logs which board served it and when, to the file named by $FARM_LOG.
CONFTEST = """\
import json, os, time

import pytest


@pytest.fixture(scope="session")
def console(target):
    # The banner may come before pyserial's open flushes its input: ask, do not wait for it.
    started = time.time()
    driver = target.get_driver("ConsoleProtocol")
    driver.sendline("whoami")
    _, _, match, _ = driver.expect(r"(bench\\d+)\\r?\\n> ", timeout=10)
    yield driver
    with open(os.environ["FARM_LOG"], "a") as log:
        log.write(json.dumps({
            "loop": os.path.basename(os.getcwd()),
            "board": match.group(1).decode(),
            "place": os.environ.get("LG_PLACE"),
            "start": started,
            "end": time.time(),
        }) + "\\n")


def ask(console, value):
    console.sendline(f"echo answer={value}")
    _, _, match, _ = console.expect(r"answer=(\\S*)\\r?\\n> ", timeout=10)
    return match.group(1).decode()
"""

#: The calc functions' results, each sent through the board's console and read back.
TESTS = """\
from conftest import ask
from fw import calc


def test_board_answers(console):
    console.sendline("ping")
    console.expect("pong", timeout=10)


def test_add(console):
    assert ask(console, calc.add(2, 3)) == "5"


def test_scale(console):
    assert ask(console, calc.scale(4, 2)) == "8"


def test_clamp(console):
    assert ask(console, calc.clamp(12, 0, 10)) == "10"
"""


@pytest.fixture
def farm(tmp_path: Path) -> Iterator[Farm]:
    assert LABGRID_BIN is not None
    with Farm(LABGRID_BIN, tmp_path / "farm", boards=2, tag="uartcon") as running:
        yield running
    assert running.running() == []


def _project(root: Path, farm: Farm) -> Path:
    """A copy of the suite and its scripted coder (three fixes, approved)."""
    files = {
        "fw/__init__.py": "",
        "fw/calc.py": CALC,
        "tests/conftest.py": CONFTEST,
        "tests/test_board.py": TESTS,
        "pytest.ini": "[pytest]\ntestpaths = tests\npythonpath = . tests\n"
        "fwloop_protect = remote.yaml\n",
    }
    for relpath, text in files.items():
        (root / relpath).parent.mkdir(parents=True, exist_ok=True)
        (root / relpath).write_text(text)
    farm.remote_yaml(root / "remote.yaml")
    agent = root.parent / f"{root.name}-agent.py"
    agent.write_text(f"#!{sys.executable}\n{AGENT}")
    agent.chmod(agent.stat().st_mode | stat.S_IXUSR)
    answers = {"coder": [coder_answer(p) for p in calc_fix_patches()], "reviewer": [APPROVE]}
    agent.with_name(f"{agent.stem}.answers.json").write_text(json.dumps(answers))
    return agent


def _loop(root: Path, farm: Farm, log: Path, *extra: str) -> subprocess.Popen[str]:
    """`pytest --fwloop` on the farm, in the labgrid venv, as a CI job would start it."""
    assert LABGRID_BIN is not None
    agent = root.parent / f"{root.name}-agent.py"
    argv = [
        str(LABGRID_BIN / "python"),
        "-m",
        "pytest",
        "--lg-env",
        "remote.yaml",
        "--fwloop",
        "--max-iter=8",
        f"--fwloop-coder=command:{agent}",
        "--fwloop-labgrid-reserve=board=uartcon",
        f"--fwloop-labgrid-coordinator={farm.address}",
        *extra,
    ]
    env = clean_environ({"CI": "true", "FARM_LOG": str(log)})
    env = {k: v for k, v in env.items() if not k.startswith("FWLOOP_")}
    return subprocess.Popen(
        argv,
        cwd=root,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )


def _summary(root: Path) -> dict[str, Any]:
    [run] = sorted((root / ".fwloop" / "runs").iterdir())
    return json.loads((run / "summary.json").read_text())  # type: ignore[no-any-return]


def _sessions(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def _no_board_shared(sessions: list[dict[str, Any]]) -> None:
    """No two loops' sessions on one board overlap in time."""
    for a in sessions:
        for b in sessions:
            if a is b or a["loop"] == b["loop"] or a["board"] != b["board"]:
                continue
            assert a["end"] <= b["start"] or b["end"] <= a["start"], (a, b)


@needs_labgrid
def test_three_loops_share_two_places_one_at_a_time(farm: Farm, tmp_path: Path) -> None:
    """Three CI jobs at once on a farm of two boards: the coordinator queues the third, every
    loop converges on a board it alone held, and no lock or reservation is left."""
    log = tmp_path / "sessions.jsonl"
    roots = [tmp_path / f"loop{i}" for i in (1, 2, 3)]
    for root in roots:
        _project(root, farm)
    started = time.monotonic()
    loops = [_loop(root, farm, log) for root in roots]
    outputs = [loop.communicate(timeout=600)[0] for loop in loops]
    elapsed = time.monotonic() - started
    for root, loop, output in zip(roots, loops, outputs, strict=True):
        assert loop.returncode == 0, output
        summary = _summary(root)
        assert summary["outcome"] == "success", output
        labgrid = summary["labgrid"]
        assert labgrid["tags"] == ["board=uartcon"]
        assert labgrid["coordinator"] == farm.address
        assert labgrid["identity"].endswith(f"/fwloop-{summary['run_id']}")
        assert labgrid["place"] in (farm.place(1), farm.place(2))
        assert [h["from_iteration"] for h in labgrid["held"]] == [1]
        assert "locked labgrid place" in output
    sessions = _sessions(log)
    assert {s["loop"] for s in sessions} == {"loop1", "loop2", "loop3"}
    assert {s["board"] for s in sessions} <= {"bench1", "bench2"}
    _no_board_shared(sessions)
    # The third loop's first session started only once another loop was done with its board.
    first = {
        loop: min(s["start"] for s in sessions if s["loop"] == loop)
        for loop in ("loop1", "loop2", "loop3")
    }
    last = {
        loop: max(s["end"] for s in sessions if s["loop"] == loop)
        for loop in ("loop1", "loop2", "loop3")
    }
    waiter = max(first, key=lambda loop: first[loop])
    assert first[waiter] >= min(last[loop] for loop in last if loop != waiter)
    assert farm.idle(), (farm.who(), farm.reservations())
    print(f"three loops on two places: {elapsed:.1f}s")


def _wait_for(condition: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {timeout:g}s for {what}")
        time.sleep(0.2)


@needs_labgrid
def test_a_sigkilled_loop_leaves_no_lock_and_the_queue_goes_on(farm: Farm, tmp_path: Path) -> None:
    """One of three loops is SIGKILLed while it holds a board: its watchdog gives the board
    back, the loop that waited gets it, and the killed tree's next start converges."""
    log = tmp_path / "sessions.jsonl"
    roots = [tmp_path / f"loop{i}" for i in (1, 2, 3)]
    for root in roots:
        _project(root, farm)
    victim = _loop(roots[0], farm, log)
    _wait_for(lambda: any(s["loop"] == "loop1" for s in _sessions(log)), 60, "loop1's baseline")
    others = [_loop(root, farm, log) for root in roots[1:]]
    _wait_for(lambda: len(farm.who()) == 2, 60, "the second loop's lock")
    [victim_run] = (roots[0] / ".fwloop" / "runs").iterdir()
    victim_user = f"fwloop-{victim_run.name}"
    assert victim_user in [lock.user for lock in farm.who()]
    os.kill(victim.pid, signal.SIGKILL)
    killed = time.monotonic()
    victim.communicate(timeout=60)
    _wait_for(
        lambda: victim_user not in [lock.user for lock in farm.who()], 30, "the watchdog's release"
    )
    print(f"the killed loop's place was free {time.monotonic() - killed:.1f}s after SIGKILL")
    outputs = [loop.communicate(timeout=600)[0] for loop in others]
    for loop, output in zip(others, outputs, strict=True):
        assert loop.returncode == 0, output
    _no_board_shared(_sessions(log))
    assert farm.idle(), (farm.who(), farm.reservations())
    # The killed loop's tree: its next start recovers it, and the loop converges (its scripted
    # coder starts its answers over, as a new run's would). The kill may come before the loop's
    # first coder call, which leaves no requests to forget.
    (tmp_path / "loop1-agent.requests.jsonl").unlink(missing_ok=True)
    again = _loop(roots[0], farm, log)
    output = again.communicate(timeout=600)[0]
    assert again.returncode == 0, output
    assert "recovered the tree of interrupted run" in output
    assert farm.idle(), (farm.who(), farm.reservations())


@needs_labgrid
def test_a_board_that_stays_sick_is_swapped_and_never_reaches_the_coder(
    farm: Farm, tmp_path: Path
) -> None:
    """The exporter of the loop's board dies after the baseline: labgrid's ServerError is the
    environment's (retried, never sent to the coder); when recovery is spent on that board the
    loop takes the other one with the same tags, says so in the trace, and converges."""
    log = tmp_path / "sessions.jsonl"
    root = tmp_path / "loop1"
    agent = _project(root, farm)
    loop = _loop(root, farm, log)
    _wait_for(lambda: len(_sessions(log)) >= 1, 60, "the baseline's session")
    sick = _sessions(log)[0]["board"]
    farm.kill_exporter(int(sick.removeprefix("bench")))
    output = loop.communicate(timeout=600)[0]
    assert loop.returncode == 0, output
    summary = _summary(root)
    assert summary["outcome"] == "success"
    held = [h["place"] for h in summary["labgrid"]["held"]]
    assert len(held) == 2, held
    assert held[0] == f"board-{sick.removeprefix('bench')}", held
    assert "stayed sick; swapped" in output
    [run] = (root / ".fwloop" / "runs").iterdir()
    page = (run / "report.html").read_text()
    assert f"labgrid place {held[1]} (board=uartcon) at\n{farm.address}" in page
    assert f"{held[0]} from iteration 1, {held[1]} from iteration 2" in page
    requests = [
        json.loads(line)
        for line in agent.with_name(f"{agent.stem}.requests.jsonl").read_text().splitlines()
    ]
    sent = json.dumps([r["failures"] for r in requests if r["role"] == "coder"])
    assert "ServerError" not in sent
    assert "orphaned" not in sent
    farm.start_exporter(int(sick.removeprefix("bench")))
    assert farm.idle(), (farm.who(), farm.reservations())


@needs_labgrid
def test_a_farm_without_such_a_place_ends_env_unavailable_in_one_line(
    farm: Farm, tmp_path: Path
) -> None:
    root = tmp_path / "loop1"
    _project(root, farm)
    (root / "pytest.ini").write_text(
        (root / "pytest.ini").read_text() + "fwloop_labgrid_wait = 2\n"
    )
    loop = _loop(root, farm, tmp_path / "sessions.jsonl", "--fwloop-labgrid-reserve=board=nosuch")
    output = loop.communicate(timeout=120)[0]
    assert loop.returncode == 1, output
    summary = _summary(root)
    assert summary["outcome"] == "env_unavailable"
    assert summary["coder_calls"] == 0
    assert summary["reason"] == (
        f"no place with board=nosuch became free at the coordinator {farm.address} within 2s "
        "(fwloop_labgrid_wait)"
    )
    assert summary["reason"] in output
    assert farm.idle(), (farm.who(), farm.reservations())


@needs_labgrid
def test_a_lock_lost_to_a_coordinator_restart_is_taken_back_once(
    farm: Farm, tmp_path: Path
) -> None:
    """The coordinator restarts while the coder thinks (every lock and reservation gone): the
    next child finds its token naming nothing; the loop takes its place back, and goes on."""
    log = tmp_path / "sessions.jsonl"
    root = tmp_path / "loop1"
    agent = _project(root, farm)
    answers = json.loads(agent.with_name(f"{agent.stem}.answers.json").read_text())
    answers["coder"][0] = {"__sleep__": 20, **answers["coder"][0]}
    agent.with_name(f"{agent.stem}.answers.json").write_text(json.dumps(answers))
    loop = _loop(root, farm, log)
    _wait_for(lambda: len(_sessions(log)) >= 1, 60, "the baseline's session")
    farm.restart_coordinator()
    output = loop.communicate(timeout=600)[0]
    assert loop.returncode == 0, output
    summary = _summary(root)
    assert summary["outcome"] == "success"
    place = summary["labgrid"]["place"]
    assert [h["place"] for h in summary["labgrid"]["held"]] == [place]
    assert f"lock on {place} lost (held by nobody)" in output
    assert "labgrid stopped the child pytest before any test: Error: reservation token" in output
    assert summary["coder_calls"] == 3
    assert farm.idle(), (farm.who(), farm.reservations())


PROBE = """\
import importlib.metadata as metadata, json, sys
from pytest_fwloop.envs.serialport import SerialConsole
import serial

console = SerialConsole(sys.argv[1], timeout=10).open(ready="> ")
console.sendline("echo through-labgrids-serial")
console.expect("through-labgrids-serial")
console.close()
requires = metadata.requires("pytest-fwloop") or []
print(json.dumps({
    "serial": serial.__version__,
    "owners": sorted(d.metadata["Name"] for d in metadata.distributions()
                     if any(str(f).startswith("serial/") for f in d.files or [])),
    "unconditional": [r for r in requires if "extra ==" not in r],
}))
"""


@needs_labgrid
def test_next_to_labgrid_its_serial_fork_stays_and_the_serial_console_works(
    farm: Farm,
) -> None:
    """The plugin requires no pyserial (it is the [serial] extra), so installing it next to
    labgrid, in either order, leaves labgrid's pyserial-labgrid in place (labgrid #1245), and
    the plugin's serial console runs on that fork."""
    assert LABGRID_BIN is not None
    probe = subprocess.run(
        [str(LABGRID_BIN / "python"), "-c", PROBE, f"socket://127.0.0.1:{farm.console_ports[1]}"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert probe.returncode == 0, probe.stderr
    found = json.loads(probe.stdout)
    assert found["serial"] == "3.5.0.2"
    assert found["owners"] == ["pyserial-labgrid"]
    assert not [r for r in found["unconditional"] if r.lower().startswith("pyserial")]


@needs_labgrid
def test_fwloop_resume_asks_for_the_same_place_first(farm: Farm, tmp_path: Path) -> None:
    """A run that stopped at its iteration limit is resumed: it reserves `name=<its place>`
    before any other with the tags, and records the place in state.json and summary.json."""
    assert LABGRID_BIN is not None
    log = tmp_path / "sessions.jsonl"
    root = tmp_path / "loop1"
    _project(root, farm)
    first = _loop(root, farm, log, "--max-iter=2")
    output = first.communicate(timeout=300)[0]
    assert first.returncode == 1, output
    before = _summary(root)
    assert before["outcome"] == "max_iterations_reached"
    place = before["labgrid"]["place"]
    [run] = sorted((root / ".fwloop" / "runs").iterdir())
    assert json.loads((run / "state.json").read_text())["labgrid"]["place"] == place
    env = clean_environ({"CI": "true", "FARM_LOG": str(log)})
    resumed = subprocess.run(
        [
            str(LABGRID_BIN / "python"),
            "-m",
            "pytest_fwloop.cli",
            "resume",
            "last",
            "--max-iter",
            "4",
        ],
        cwd=root,
        env={k: v for k, v in env.items() if not k.startswith("FWLOOP_")},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    after = _summary(root)
    assert after["outcome"] == "success"
    assert after["labgrid"]["place"] == place
    assert after["labgrid"]["held"] == [{"place": place, "from_iteration": 1}]
    assert f"locked labgrid place {place} (name={place})" in resumed.stdout
    assert farm.idle(), (farm.who(), farm.reservations())


#: Run in the labgrid venv: the exporter's file as labgrid's exporter reads it (a Jinja2
#: template, then YAML), and the CI files as YAML.
EXAMPLE_CONFIGS = """\
import contextlib, io, json, sys
import yaml
from labgrid.remote.config import ResourceConfig

root = sys.argv[1]
with contextlib.redirect_stdout(io.StringIO()):  # it prints what it rendered and loaded
    exporter = ResourceConfig(root + "/exporter.yaml").data
with open(root + "/ci/github-actions.yml") as github, open(root + "/ci/gitlab-ci.yml") as gitlab:
    ci = {"github": yaml.safe_load(github), "gitlab": yaml.safe_load(gitlab)}
print(json.dumps({"exporter": exporter, **ci}, default=str))
"""


def _example_configs(root: Path) -> dict[str, Any]:
    assert LABGRID_BIN is not None
    read = subprocess.run(
        [str(LABGRID_BIN / "python"), "-c", EXAMPLE_CONFIGS, str(root)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert read.returncode == 0, read.stderr
    return json.loads(read.stdout)  # type: ignore[no-any-return]


def _run_example(root: Path, farm: Farm, *args: str) -> subprocess.CompletedProcess[str]:
    """examples/labgrid-farm's loop as its README runs it, with the farm's coordinator as its
    CI jobs set it, in the labgrid venv."""
    assert LABGRID_BIN is not None
    env = clean_environ({"CI": "true", "LG_COORDINATOR": farm.address})
    return subprocess.run(
        [str(LABGRID_BIN / "python"), "-m", "pytest", "--lg-env", "remote.yaml", "--fwloop", *args],
        cwd=root,
        env={k: v for k, v in env.items() if not k.startswith("FWLOOP_")},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=600,
        start_new_session=True,
        check=False,
    )


@needs_labgrid
def test_the_labgrid_farm_example_converges_as_shipped(tmp_path: Path) -> None:
    """examples/labgrid-farm, copied as a user would and run as its README says (`pytest
    --lg-env remote.yaml --fwloop`, the coordinator in $LG_COORDINATOR as its CI jobs set it)
    on a farm of one place tagged board=uartcon whose console is the example's own board.py:
    the loop locks the place its pytest.ini's tags name, the README's seeded bugs fail at the
    baseline, the recorded answers fix them, and the place is given back. Its exporter file
    reads as labgrid's exporter reads it, and its CI files as YAML, with the matrix and the
    loop's command."""
    assert LABGRID_BIN is not None
    root = copy_example("labgrid-farm", tmp_path / "labgrid-farm")
    configs = _example_configs(root)
    ports = [group["NetworkSerialPort"] for group in configs["exporter"].values()]
    assert ports == [{"host": "127.0.0.1", "port": 7001, "protocol": "raw", "speed": 115200}]
    github = configs["github"]
    [job] = github["jobs"].values()
    assert job["strategy"] == {"fail-fast": False, "matrix": {"board": ["stm32f4", "nrf52"]}}
    assert job["env"]["LG_COORDINATOR"].startswith("${{ vars.")
    assert "concurrency" not in github
    assert "concurrency" not in job
    runs = [step.get("run", "") for step in job["steps"]]
    assert "pip install 'pytest-fwloop[labgrid]'" in runs
    assert (
        "pytest --lg-env remote.yaml --fwloop --max-iter=10 "
        "--fwloop-labgrid-reserve=board=${{ matrix.board }}"
    ) in runs
    [upload] = [s for s in job["steps"] if s.get("uses", "").startswith("actions/upload-artifact")]
    assert upload["if"] == "always()"
    assert upload["with"]["path"] == ".fwloop/runs/"
    gitlab = configs["gitlab"]["fwloop-farm"]
    assert gitlab["parallel"]["matrix"] == [{"BOARD": ["stm32f4", "nrf52"]}]
    assert (
        "pytest --lg-env remote.yaml --fwloop --max-iter=10 --fwloop-labgrid-reserve=board=$BOARD"
    ) in gitlab["script"]
    assert gitlab["artifacts"]["when"] == "always"
    assert gitlab["artifacts"]["paths"] == [".fwloop/runs/"]

    board = [sys.executable, str(root / "board.py"), "--port", "0"]
    with Farm(
        LABGRID_BIN, tmp_path / "farm", boards=1, tag="uartcon", console=lambda k: board
    ) as farm:
        loop = _run_example(root, farm)
        output = loop.stdout
        assert loop.returncode == 0, output
        summary = _summary(root)
        assert summary["outcome"] == "success", output
        assert summary["coder_calls"] == len(recorded_answers(root)) == 3
        assert summary["pass_counts"] == [7, 9, 10, 11, 11]
        readme = (root / "README.md").read_text()
        seeded = {
            test
            for row in re.findall(r"^\| \d \|.*\|([^|]*)\|$", readme, re.MULTILINE)
            for test in re.findall(r"`(test_\w+)`", row)
        }
        baseline = {
            nodeid.rpartition("::")[2]
            for nodeid, outcomes in summary["tests"].items()
            if outcomes["1"] == "failed"
        }
        assert baseline == seeded
        labgrid = summary["labgrid"]
        assert labgrid["place"] == farm.place(1) == "board-1"
        assert labgrid["tags"] == ["board=uartcon"]
        assert labgrid["coordinator"] == farm.address
        assert "locked labgrid place board-1 (board=uartcon)" in output
        assert farm.idle(), (farm.who(), farm.reservations())
    assert farm.running() == []


@needs_labgrid
def test_the_labgrid_farm_example_converges_through_an_endpoint_model(tmp_path: Path) -> None:
    """examples/labgrid-farm with its coder an `openai:` endpoint whose model knows only its
    messages (tests/standin_model.py): localization finds every seeded bug's code for it in
    the first request, through a board on the farm (DESIGN.md §16)."""
    from standin_model import StandinModel, bugs_of_answers

    assert LABGRID_BIN is not None
    root = copy_example("labgrid-farm", tmp_path / "labgrid-farm")
    bugs = bugs_of_answers(root / "fwloop-answers")
    board = [sys.executable, str(root / "board.py"), "--port", "0"]
    with (
        StandinModel(bugs) as model,
        Farm(
            LABGRID_BIN, tmp_path / "farm", boards=1, tag="uartcon", console=lambda k: board
        ) as farm,
    ):
        loop = _run_example(root, farm, f"--fwloop-coder={model.spec}")
        assert loop.returncode == 0, loop.stdout
        summary = _summary(root)
        assert summary["outcome"] == "success"
        assert summary["coder_calls"] == 1
        assert sorted(model.seen[0].visible) == sorted(bug.name for bug in bugs)
        assert farm.idle(), (farm.who(), farm.reservations())
    assert farm.running() == []
