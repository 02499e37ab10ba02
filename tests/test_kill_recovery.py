"""SIGKILL at any moment loses nothing and leaves nothing running (issue 7, items 5 to 9).

Real `pytest --fwloop` controllers, each started with a unique tag in its environment that every
process it starts inherits, are killed with SIGKILL; then /proc is searched for the tag and the
next start must restore the tree byte for byte.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from loopkit import APPROVE, CALC, FIXES, LoopProject, tree_state

pytestmark = pytest.mark.slow

# A coder editing the tree itself, as a CLI coder does: it writes the next fix, says so on a
# marker file, then takes `pause` seconds to answer.
EDITING_CODER = """\
import json, pathlib, sys, time
here = pathlib.Path(__file__).parent
request = json.load(sys.stdin)
if request["role"] != "coder":
    print(json.dumps({approve}))
    sys.exit(0)
calls = here / "calls"
count = len(calls.read_text()) if calls.exists() else 0
calls.write_text("x" * (count + 1))
script = json.loads((here / "script.json").read_text())
step = script["steps"][min(count, len(script["steps"]) - 1)]
workspace = pathlib.Path(request["workspace"])
(workspace / "fw" / "calc.py").write_text(step)
(here / f"edited-{{count + 1}}").write_text(str(__import__("os").getpid()))
time.sleep(script["pause"])
print(json.dumps({{"analysis": {{"root_cause": "r", "hypotheses": ["h"], "confidence": 0.8}},
                  "patch": "", "summary": "edited the tree"}}))
"""

BUILD = """\
import pathlib, subprocess, sys, time
# A compiler server left in the background, as some toolchains do.
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
time.sleep(0.3)
out = pathlib.Path("build")
out.mkdir(exist_ok=True)
(out / "firmware.txt").write_text(pathlib.Path("fw/calc.py").read_text())
"""

SLOW_TEST = """\
import subprocess, sys, time
from fw import calc


def test_slow_once_patched():
    if calc.add(2, 3) == 5:
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        time.sleep(1.5)
"""


def tagged(tag: str) -> list[int]:
    """Processes whose environment carries `tag`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes()
            state = (entry / "stat").read_text().rpartition(")")[2].split()[0]
        except OSError:
            continue
        if f"FWLOOP_KILL_TAG={tag}".encode() in environ.split(b"\0") and state != "Z":
            found.append(int(entry.name))
    return found


def wait_gone(tag: str, seconds: float = 8.0) -> list[int]:
    deadline = time.monotonic() + seconds
    while (left := tagged(tag)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left


class Rig:
    """A project with a build, a slow test once patched, and a coder that edits the tree."""

    def __init__(self, project: LoopProject, pause: float = 0.3) -> None:
        self.project = project
        project.calc_suite()
        project.write(".gitignore", "build/\n")
        project.write("build.py", BUILD)
        project.write("tests/test_slow.py", SLOW_TEST)
        steps, text = [], CALC
        for old, new in FIXES:
            text = text.replace(old, new)
            steps.append(text)
        agent = project.agents_dir / "coder.py"
        agent.write_text(f"#!{sys.executable}\n" + EDITING_CODER.format(approve=APPROVE))
        agent.chmod(0o755)
        (project.agents_dir / "script.json").write_text(
            json.dumps({"steps": steps, "pause": pause})
        )
        self.coder = f"command:{agent}"
        self.before = self.state()
        self.tag = uuid.uuid4().hex

    def state(self) -> dict[str, Any]:
        return {
            k: v for k, v in tree_state(self.project.root).items() if not k.startswith("build/")
        }

    def args(self, *extra: str) -> list[str]:
        return [
            sys.executable,
            "-m",
            "pytest",
            "--fwloop",
            f"--fwloop-coder={self.coder}",
            f"--fwloop-build={sys.executable} build.py",
            "--max-iter=4",
            *extra,
        ]

    def env(self) -> dict[str, str]:
        return {**os.environ, "FWLOOP_KILL_TAG": self.tag, "CI": "true"}

    def start(self, until: str) -> subprocess.Popen[str]:
        """A controller in the background, returned once it printed `until`."""
        process = subprocess.Popen(
            self.args(),
            cwd=self.project.root,
            env=self.env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        assert process.stdout is not None
        seen = []
        for line in process.stdout:
            seen.append(line)
            if until in line:
                return process
        raise AssertionError(f"the run ended before {until!r}:\n{''.join(seen)}")

    def rerun(self) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            self.args("--max-iter=1"),
            cwd=self.project.root,
            env=self.env(),
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )


def kill(process: subprocess.Popen[str]) -> None:
    process.send_signal(signal.SIGKILL)  # the controller alone, as the OOM killer would
    process.communicate()


KILL_POINTS = [
    ("[1] INIT -> BUILD_SETUP", 0.0),
    ("[1] BUILD_SETUP -> BUILD_RUN", 0.1),
    ("[1] BUILD_RUN -> TEST_SETUP", 0.0),
    ("[1] TEST_SETUP -> TEST_RUN", 0.2),
    ("[1] RESULT_COLLECTION -> RESULT_ANALYSIS", 0.0),
    ("[2] CONVERGENCE_CHECK -> CODE_ANALYSIS", 0.0),
    ("[2] CONVERGENCE_CHECK -> CODE_ANALYSIS", 0.15),
    ("[2] CODE_ANALYSIS -> PATCH_GENERATION", 0.0),
    ("[2] PATCH_GENERATION -> PATCH_APPLY", 0.0),
    ("[2] PATCH_APPLY -> BUILD_SETUP", 0.0),
    ("[2] BUILD_SETUP -> BUILD_RUN", 0.1),
    ("[2] BUILD_SETUP -> BUILD_RUN", 0.25),
    ("[2] BUILD_RUN -> TEST_SETUP", 0.0),
    ("[2] TEST_SETUP -> TEST_RUN", 0.3),
    ("[2] TEST_SETUP -> TEST_RUN", 1.0),
    ("[2] RESULT_COLLECTION -> RESULT_ANALYSIS", 0.0),
    ("[3] CONVERGENCE_CHECK -> CODE_ANALYSIS", 0.1),
    ("[3] CODE_ANALYSIS -> PATCH_GENERATION", 0.0),
    ("[3] PATCH_APPLY -> BUILD_SETUP", 0.05),
    ("[3] TEST_SETUP -> TEST_RUN", 0.5),
    ("[3] RESULT_COLLECTION -> RESULT_ANALYSIS", 0.0),
]


@pytest.mark.parametrize(("until", "delay"), KILL_POINTS)
def test_a_kill_at_any_point_loses_nothing_and_leaves_nothing_running(
    project: LoopProject, until: str, delay: float
) -> None:
    rig = Rig(project)
    process = rig.start(until)
    time.sleep(delay)
    kill(process)
    assert wait_gone(rig.tag) == [], "processes outlived the controller"
    result = rig.rerun()
    assert result.returncode in (0, 1), result.stdout + result.stderr
    assert "Traceback" not in result.stdout + result.stderr
    assert rig.state() == rig.before
    assert wait_gone(rig.tag) == []


def test_a_coder_killed_while_it_edits_the_tree_is_undone_on_the_next_start(
    project: LoopProject,
) -> None:
    rig = Rig(project, pause=60)
    process = rig.start("[2] CONVERGENCE_CHECK -> CODE_ANALYSIS")
    edited = project.agents_dir / "edited-1"
    deadline = time.monotonic() + 30
    while not edited.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    agent_pid = int(edited.read_text())
    assert "return a + b" in (project.root / "fw/calc.py").read_text()
    kill(process)
    assert wait_gone(rig.tag) == []
    assert agent_pid not in tagged(rig.tag)  # gone, or a zombie nobody has reaped yet
    result = rig.rerun()
    assert "recovered the tree of interrupted run" in result.stdout, result.stdout
    assert rig.state() == rig.before


def test_stale_git_locks_of_a_killed_run_are_cleared_and_the_tree_restored(
    project: LoopProject,
) -> None:
    rig = Rig(project)
    process = rig.start("[2] TEST_SETUP -> TEST_RUN")
    assert rig.state() != rig.before
    kill(process)
    shadow = project.root / ".fwloop" / "shadow.git"
    for name in ("fwloop-index.lock", "HEAD.lock", "refs/heads/snapshots.lock"):
        (shadow / name).write_text("")
    result = rig.rerun()
    output = result.stdout + result.stderr
    assert result.returncode in (0, 1), output
    assert "delete" not in output
    assert "recovered the tree of interrupted run" in output
    assert rig.state() == rig.before
    assert list(shadow.rglob("*.lock")) == []


def test_of_simultaneous_starts_one_runs_and_each_other_says_why_in_one_line(
    project: LoopProject,
) -> None:
    rig = Rig(project, pause=3)  # the winner's run outlasts every loser's start
    starts = [
        subprocess.Popen(
            rig.args("--max-iter=2"),
            cwd=project.root,
            env=rig.env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for _ in range(10)
    ]
    outputs = [(p.communicate(timeout=180)[0], p.returncode) for p in starts]
    refused = [out for out, code in outputs if code == pytest.ExitCode.USAGE_ERROR]
    ran = [out for out, code in outputs if code != pytest.ExitCode.USAGE_ERROR]
    assert len(ran) == 1, [out[-300:] for out, _ in outputs]
    for out in refused:
        [line] = out.strip().splitlines()
        assert "another pytest --fwloop (pid " in line
        assert "fwloop cancel" in line
        assert "git" not in line
        assert "delete" not in line
    assert rig.state() == rig.before


@pytest.mark.parametrize(
    "until",
    [
        "[2] TEST_SETUP -> TEST_RUN",  # a patch applied and under test: applied again
        "[3] CODE_ANALYSIS -> PATCH_GENERATION",  # an answer before its review: reviewed again
    ],
)
def test_a_killed_run_resumes_from_its_state_with_its_kept_fixes(
    project: LoopProject, until: str
) -> None:
    rig = Rig(project)
    process = rig.start(until)
    kill(process)
    assert wait_gone(rig.tag) == []
    [run_dir] = project.run_dirs()
    killed = json.loads((run_dir / "state.json").read_text())
    assert killed["outcome"] is None
    assert killed["pending"] is not None
    coder_calls = len((project.agents_dir / "calls").read_text())

    resumed = subprocess.run(
        # A killed run keeps its limit (--max-iter=4) unless told: room for the rest.
        [sys.executable, "-m", "pytest_fwloop.cli", "resume", "last", "--max-iter", "4"],
        cwd=project.root,
        env=rig.env(),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    output = resumed.stdout + resumed.stderr
    assert resumed.returncode == 0, output
    assert "recovered the tree of interrupted run" in output
    assert project.run_dirs() == [run_dir]
    fixed = CALC
    for old, new in FIXES:
        fixed = fixed.replace(old, new)
    assert (project.root / "fw" / "calc.py").read_text() == fixed
    summary = project.summary()
    assert summary["outcome"] == "success"
    assert summary["pass_counts"][0] == 2  # the killed controller's baseline: clamp, slow
    # The answer in flight was not asked for again: the coder answered once per fix, in all.
    assert len((project.agents_dir / "calls").read_text()) == coder_calls + len(FIXES) - (
        killed["iterations"][-1]["number"] - 1
    )
    kinds = [e["kind"] for e in project.events()]
    assert kinds.count("interrupted") == 1
    replayed = project.replay()
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
