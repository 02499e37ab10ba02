"""Building blocks for acceptance tests: a small project, real agent executables, a runner.

The agents are real executables speaking the `command:` protocol; only their judgement is
scripted (a list of answers, one per call, the last repeated). Each logs the requests it receives
so a test can assert what the coder was and was not told. An answer may carry `__edit__`, a map
of workspace paths to new text the agent writes before answering, as a CLI coder editing the
tree does. `LoopProject.claude` puts a fake `claude` CLI on PATH that answers the same way and
reports tokens and cost, as the real one does.
"""

from __future__ import annotations

import difflib
import json
import os
import stat
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from pytest_fwloop.core.records import round_records
from pytest_fwloop.core.records import run_records as records
from pytest_fwloop.core.suite.results import IterationResults

CALC = '''\
"""A tiny stand-in for firmware logic: three functions, three seeded bugs."""


def add(a, b):
    return a - b


def scale(value, factor):
    return value * factor + 1


def clamp(value, low, high):
    return max(low, value)
'''

CALC_TESTS = """\
from fw import calc


def test_add_small():
    assert calc.add(2, 3) == 5


def test_add_negative():
    assert calc.add(-2, -3) == -5


def test_scale_double():
    assert calc.scale(4, 2) == 8


def test_scale_zero():
    assert calc.scale(7, 0) == 0


def test_clamp_high():
    assert calc.clamp(12, 0, 10) == 10


def test_clamp_inside():
    assert calc.clamp(5, 0, 10) == 5
"""

FIXES = (
    ("return a - b", "return a + b"),
    ("return value * factor + 1", "return value * factor"),
    ("return max(low, value)", "return max(low, min(value, high))"),
)

AGENT = """\
import json, pathlib, sys
here = pathlib.Path(__file__).parent
name = pathlib.Path(__file__).stem
request = json.load(sys.stdin)
log = here / f"{name}.requests.jsonl"
with log.open("a") as stream:
    stream.write(json.dumps(request) + "\\n")
role = request["role"]
calls = sum(json.loads(line)["role"] == role for line in log.read_text().splitlines())
answers = json.loads((here / f"{name}.answers.json").read_text())[role]
answer = answers[min(calls, len(answers)) - 1]
if isinstance(answer, dict) and "__exit__" in answer:
    sys.stderr.write(answer.get("stderr", "agent failed") + "\\n")
    sys.exit(answer["__exit__"])
if isinstance(answer, dict) and "__sleep__" in answer:
    import time
    answer = dict(answer)
    time.sleep(answer.pop("__sleep__"))
if isinstance(answer, dict) and "__edit__" in answer:
    answer = dict(answer)
    for relpath, text in answer.pop("__edit__").items():
        (pathlib.Path(request["workspace"]) / relpath).write_text(text)
print(answer if isinstance(answer, str) else json.dumps(answer))
"""

FAKE_CLAUDE = """\
import json, pathlib, sys
here = pathlib.Path(__file__).parent
prompt = sys.stdin.read()
request = json.loads(prompt.split("The request:\\n", 1)[1])
log = here / "claude.requests.jsonl"
with log.open("a") as stream:
    stream.write(json.dumps(request) + "\\n")
role = request["role"]
calls = sum(json.loads(line)["role"] == role for line in log.read_text().splitlines())
script = json.loads((here / "claude.answers.json").read_text())
answer = script[role][min(calls, len(script[role])) - 1]
print(json.dumps({
    "type": "result", "subtype": "success", "is_error": False, "result": "",
    "structured_output": answer, "total_cost_usd": script["cost_usd"],
    "usage": {"input_tokens": script["input_tokens"], "output_tokens": script["output_tokens"]},
}))
"""


def unified_diff(path: str, before: str, after: str) -> str:
    """A git-style diff of one file, as a coder would send it."""
    lines = difflib.unified_diff(
        before.splitlines(keepends=True),
        after.splitlines(keepends=True),
        fromfile=f"a/{path}",
        tofile=f"b/{path}",
    )
    return f"diff --git a/{path} b/{path}\n" + "".join(lines)


def coder_answer(patch: str, summary: str = "fix") -> dict[str, Any]:
    return {
        "analysis": {"root_cause": summary, "hypotheses": [summary], "confidence": 0.8},
        "patch": patch,
        "summary": summary,
    }


APPROVE: dict[str, Any] = {"decision": "approve", "must_fix": [], "risk": 0.1, "summary": "ok"}


def calc_fix_patches() -> list[str]:
    """Three patches, each fixing one bug of CALC, applicable in order."""
    patches = []
    text = CALC
    for old, new in FIXES:
        fixed = text.replace(old, new)
        patches.append(unified_diff("fw/calc.py", text, fixed))
        text = fixed
    return patches


@dataclass
class Agent:
    path: Path

    @property
    def spec(self) -> str:
        return f"command:{self.path}"

    def requests(self, role: str = "coder") -> list[dict[str, Any]]:
        log = self.path.with_name(self.path.stem + ".requests.jsonl")
        if not log.exists():
            return []
        requests = [json.loads(line) for line in log.read_text().splitlines()]
        return [r for r in requests if r["role"] == role]


class LoopProject:
    """A project directory (the rootdir the loop edits) and agents living outside it."""

    def __init__(self, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
        self.pytester = pytester
        self.root = pytester.path / "proj"
        self.agents_dir = pytester.path / "agents"
        self.root.mkdir()
        self.agents_dir.mkdir()
        monkeypatch.chdir(self.root)
        monkeypatch.setenv("CI", "true")
        for name in [n for n in os.environ if n.startswith("FWLOOP_")]:
            monkeypatch.delenv(name)

    def write(self, relpath: str, text: str) -> Path:
        target = self.root / relpath
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
        return target

    def calc_suite(self, ini_extra: str = "") -> None:
        self.write("fw/__init__.py", "")
        self.write("fw/calc.py", CALC)
        self.write("tests/test_calc.py", CALC_TESTS)
        self.write("pytest.ini", f"[pytest]\ntestpaths = tests\npythonpath = .\n{ini_extra}")

    def agent(
        self,
        name: str,
        coder: list[Any],
        reviewer: list[Any] | None = None,
        tester: list[Any] | None = None,
    ) -> Agent:
        """An executable answering each role from its own list (the last answer repeats)."""
        path = self.agents_dir / f"{name}.py"
        path.write_text(f"#!{sys.executable}\n{AGENT}")
        path.chmod(path.stat().st_mode | stat.S_IXUSR)
        answers = {"coder": coder, "reviewer": reviewer or [APPROVE]}
        if tester is not None:
            answers["tester"] = tester
        path.with_name(f"{name}.answers.json").write_text(json.dumps(answers))
        return Agent(path)

    def claude(
        self,
        monkeypatch: pytest.MonkeyPatch,
        coder: list[Any],
        reviewer: list[Any] | None = None,
        *,
        cost_usd: float,
        input_tokens: int = 1000,
        output_tokens: int = 100,
    ) -> Agent:
        """A `claude` first on PATH (spec `claude`) whose every call reports this usage."""
        bin_dir = self.agents_dir / "bin"
        bin_dir.mkdir(exist_ok=True)
        path = bin_dir / "claude"
        path.write_text(f"#!{sys.executable}\n{FAKE_CLAUDE}")
        path.chmod(path.stat().st_mode | stat.S_IXUSR)
        script = {
            "coder": coder,
            "reviewer": reviewer or [APPROVE],
            "cost_usd": cost_usd,
            "input_tokens": input_tokens,
            "output_tokens": output_tokens,
        }
        path.with_name("claude.answers.json").write_text(json.dumps(script))
        monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
        return Agent(path)

    def run(self, *args: str, timeout: float = 300) -> pytest.RunResult:
        return self.pytester.runpytest_subprocess("--fwloop", *args, timeout=timeout)

    def summary(self) -> dict[str, Any]:
        [run_dir] = self.run_dirs()
        return json.loads((run_dir / "summary.json").read_text())  # type: ignore[no-any-return]

    def run_dirs(self) -> list[Path]:
        runs = self.root / ".fwloop" / "runs"
        return sorted(runs.iterdir()) if runs.exists() else []

    def fwloop(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        """The `fwloop` command run in the project, as an operator types it (no terminal)."""
        return subprocess.run(
            [sys.executable, "-m", "pytest_fwloop.cli", *args],
            cwd=self.root,
            capture_output=True,
            text=True,
            check=False,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )

    def replay(self) -> subprocess.CompletedProcess[str]:
        """`fwloop replay last` in the project, as a user would run it after the loop."""
        return self.fwloop("replay", "last")

    def events(self) -> list[dict[str, Any]]:
        [run_dir] = self.run_dirs()
        lines = (run_dir / "task-events.jsonl").read_text().splitlines()
        return [json.loads(line) for line in lines]


def check_records(run_dir: Path) -> int:
    """Validate every JSON record of a run directory against its model; how many were read."""
    summary = (run_dir / "summary.json").read_bytes()
    try:
        records.Summary.model_validate_json(summary)
    except ValueError:
        records.CrashSummary.model_validate_json(summary)
    records.Timeline.model_validate_json((run_dir / "task-timeline.json").read_bytes())
    lines = (run_dir / "task-events.jsonl").read_text().splitlines()
    for line in lines:
        event = records.Event.model_validate_json(line)
        assert json.loads(line) == event.to_json()  # written exactly as the model dumps it
    checked = 2 + len(lines)
    models: dict[str, type[BaseModel]] = {
        "*.meta.json": round_records.CallMeta,
        "convergence.json": round_records.ConvergenceRecord,
        "commands.json": round_records.CommandsRecord,
        "panel-*.json": round_records.PanelRecord,
        "results.json": IterationResults,
    }
    for pattern, model in models.items():
        for path in run_dir.glob(f"rounds/*/{pattern}"):
            model.model_validate_json(path.read_bytes())
            checked += 1
    return checked


def tree_state(root: Path) -> dict[str, tuple[bytes, int]]:
    """Every file under root (but .fwloop and .git) with its bytes and mode."""
    state = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if rel.parts[0] in (".fwloop", ".git", ".pytest_cache", "__pycache__") or (
            "__pycache__" in rel.parts
        ):
            continue
        if path.is_file():
            state[rel.as_posix()] = (path.read_bytes(), path.stat().st_mode)
    return state
