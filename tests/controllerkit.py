"""The controller in-process, with fakes where a loop run would start processes.

As pytest-xdist tests its DSession with fake nodes: the controller, its step modules, the
workspace (a real shadow git store), the recorder and the agents' gates are the real ones; the
child pytest is `FakeChild` (the suite's verdict is read from the tree), the providers are
`FakeProvider` (scripted answers, through the public `pytest_fwloop_make_provider` hook) and the
state clock is `FakeTime`, which the fakes advance instead of sleeping.
"""

from __future__ import annotations

import io
import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from loopkit import APPROVE, check_records, coder_answer, unified_diff
from pytest_fwloop.agents.base import RawAnswer
from pytest_fwloop.agents.errors import ProviderError
from pytest_fwloop.child.files import Attempt
from pytest_fwloop.config.option_table import (
    CHILD_REPORT_FLAG,
    CHILD_SELECT_FLAG,
    CHILD_SPECTRUM_FLAG,
)
from pytest_fwloop.config.settings import LoopSettings, load_settings
from pytest_fwloop.core.machine.outcomes import Outcome
from pytest_fwloop.core.machine.state_clock import StateClock
from pytest_fwloop.core.records.agent_protocol import AgentRequest
from pytest_fwloop.core.records.redaction import Redactor
from pytest_fwloop.core.records.run_state import Invocation
from pytest_fwloop.core.suite.results import IterationResults, Metric, TestRecord
from pytest_fwloop.loop import run_context
from pytest_fwloop.loop.child_runner import ChildRunner
from pytest_fwloop.loop.controller import Controller
from pytest_fwloop.loop.finish import finalize
from pytest_fwloop.loop.operator.continuation import Continued, Order, StateKeeper
from pytest_fwloop.loop.rundir import RunRecorder
from pytest_fwloop.loop.terminal import Terminal
from pytest_fwloop.procs.supervision import ProcessResult
from pytest_fwloop.workspace import Workspace

#: The firmware under test: one word per test; `ok` passes, `down` fails on the environment.
FIRMWARE = "fw/state.txt"
#: What the firmware measures, if the file exists: `NAME VALUE lower|higher` a line, recorded by
#: test_0 (as `fwloop_metric` would) whenever it runs.
METRICS = "fw/metrics.txt"


def firmware_patch(before: str, after: str) -> str:
    return unified_diff(FIRMWARE, before + "\n", after + "\n")


def fixing(before: str, after: str, summary: str = "fix") -> dict[str, Any]:
    return coder_answer(firmware_patch(before, after), summary)


class FakeTime:
    """A monotonic clock that moves only when told to."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


#: A scripted answer: a JSON document, a ProviderError to raise, or a function of the call.
Answer = dict[str, Any] | ProviderError | Callable[[AgentRequest, float], RawAnswer]


@dataclass
class FakeProvider:
    """One role's scripted answers in order (the last repeats); records what it was asked."""

    spec: str
    answers: list[Answer]
    requests: list[AgentRequest] = field(default_factory=list)
    timeouts: list[float] = field(default_factory=list)

    def call(self, request: AgentRequest, timeout: float) -> RawAnswer:
        self.requests.append(request)
        self.timeouts.append(timeout)
        answer = self.answers[min(len(self.requests), len(self.answers)) - 1]
        if isinstance(answer, ProviderError):
            raise answer
        if callable(answer):
            return answer(request, timeout)
        return RawAnswer(text=json.dumps(answer))


class FakeChild:
    """Stands in for `ChildRunner`: each run's results are the words of FIRMWARE (only the
    selected tests' when a selection is given), except that a `flake` fails unless it is a
    flaky rerun and a `hang` (a board that hung) fails as a `defect` on a flaky rerun (a fresh
    board); test_0 records the METRICS. Its flaky reruns are the real ones
    (`ChildRunner.rerun_failures`), starting their runs through this fake."""

    rerun_failures = ChildRunner.rerun_failures
    attempt_args = ChildRunner.attempt_args
    spectrum_args = ChildRunner.spectrum_args

    def head_attempt(self, folder: Path) -> Attempt | None:
        return None  # nothing is started ahead: every run starts when TEST_RUN asks

    def take_notes(self) -> list[str]:
        return []  # nothing to say about how a fake run started

    def selection_args(self, selection: Path) -> list[str]:
        return [f"{CHILD_SELECT_FLAG}={selection}"]  # a fake run reads the list, nothing else

    def __init__(self, root: Path, settings: LoopSettings, recorder: RunRecorder) -> None:
        self.root = root
        self.settings = settings
        self.recorder = recorder
        self.runs = 0
        self.timed_out: list[bool] = []
        #: Tests each run executed, in order.
        self.executed: list[int] = []
        #: The scratch trees of candidates that runs were started in (`run_tree`), in order.
        self.trees: list[Path] = []

    def run(
        self,
        iteration: int,
        args: list[str],
        log: Path,
        review: Path | None,
        plan: Path | None,
        timeout: float,
        results: Path | None = None,
    ) -> ProcessResult:
        return self._run_in(self.root, args, log, timeout)

    def run_tree(self, tree: Path, args: list[str], log: Path, timeout: float) -> ProcessResult:
        """A run in a candidate's scratch tree: its words are that tree's FIRMWARE."""
        self.trees.append(tree)
        return self._run_in(tree, args, log, timeout)

    def _run_in(self, root: Path, args: list[str], log: Path, timeout: float) -> ProcessResult:
        self.runs += 1
        timed_out = self.timed_out.pop(0) if self.timed_out else False
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text(f"fake child run {self.runs}\n", encoding="utf-8")
        if timed_out:
            return ProcessResult(returncode=None, timed_out=True, aborted=False, duration=timeout)
        words = (root / FIRMWARE).read_text(encoding="utf-8").split()
        rerun = log.name.startswith("flaky")
        words = [
            {"flake": "ok", "hang": "defect"}.get(word, word) if rerun else word for word in words
        ]
        select = next(
            (a.split("=", 1)[1] for a in args if a.startswith(f"{CHILD_SELECT_FLAG}=")), ""
        )
        wanted = set(Path(select).read_text(encoding="utf-8").split()) if select else None
        self.executed.append(len(words) if wanted is None else len(wanted))
        tests = [
            TestRecord(
                nodeid=f"tests/test_fw.py::test_{index}",
                outcome="passed" if word == "ok" else "failed",
                phase="call",
                longrepr="" if word == "ok" else f"assert {word!r} == 'ok'",
                crash="" if word == "ok" else f"tests/test_fw.py:{index}: AssertionError",
                env_failure="ConnectionRefusedError: the board is down" if word == "down" else None,
                metrics=self._metrics() if index == 0 else {},
            )
            for index, word in enumerate(words)
            if wanted is None or f"tests/test_fw.py::test_{index}" in wanted
        ]
        written = IterationResults(
            exitstatus=0 if all(t.outcome == "passed" for t in tests) else 1, tests=tests
        )
        report = next(a.split("=", 1)[1] for a in args if a.startswith(f"{CHILD_REPORT_FLAG}="))
        Path(report).write_text(written.model_dump_json(), encoding="utf-8")
        spectrum = [a.split("=", 1)[1] for a in args if a.startswith(f"{CHILD_SPECTRUM_FLAG}=")]
        for path in spectrum:  # as the child's recorder would: these tests, no line of a tree
            payload = {"root": str(self.root), "tests": [t.nodeid for t in tests], "sets": []}
            Path(path).write_text(json.dumps({**payload, "files": {}}), encoding="utf-8")
        return ProcessResult(
            returncode=written.exitstatus, timed_out=False, aborted=False, duration=0.1
        )

    def _metrics(self) -> dict[str, Metric]:
        path = self.root / METRICS
        lines = path.read_text(encoding="utf-8").splitlines() if path.is_file() else []
        return {
            name: Metric(value=float(value), better=better)
            for name, value, better in (line.split() for line in lines if line.strip())
        }

    def precheck(self, folder: Path, select: list[str], run: object) -> str:
        return "tester pre-check skipped by the fake child"

    def scrub(self, folder: Path) -> None:
        pass


class _Providers:
    """The pytest_fwloop_make_provider hook: `fake:<role>` specs get the kit's providers."""

    def __init__(self, providers: dict[str, FakeProvider]) -> None:
        self.providers = providers

    @pytest.hookimpl
    def pytest_fwloop_make_provider(self, role: str, spec: str) -> FakeProvider | None:
        return self.providers.get(spec)


class ControllerKit:
    """A project with FIRMWARE, a controller over it, and the records it leaves."""

    def __init__(self, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
        self.pytester = pytester
        self.root = pytester.path
        monkeypatch.setenv("CI", "true")
        self.coder = FakeProvider("fake:coder", [])
        self.reviewer = FakeProvider("fake:reviewer", [APPROVE])
        self.time = FakeTime()
        self.terminal = io.StringIO()

    def build(
        self, firmware: str, *ini: str, plugins: tuple[object, ...] = (), run_id: str = "run-1"
    ) -> Controller:
        (self.root / FIRMWARE).parent.mkdir(parents=True, exist_ok=True)
        (self.root / FIRMWARE).write_text(firmware + "\n", encoding="utf-8")
        lines = ["fwloop_coder = fake:coder", "fwloop_reviewer = fake:reviewer", *ini]
        self.pytester.makeini("[pytest]\n" + "\n".join(lines) + "\n")
        providers = {p.spec: p for p in (self.coder, self.reviewer)}
        self.pytester.plugins.extend([_Providers(providers), *plugins])
        return self._controller(run_id, None)

    def continue_run(self, order: Order, *args: str) -> Controller:
        """A second controller over the same project, continuing the run as `fwloop` asks
        (`loop/operator/continuation.Continued`, as `pytest --fwloop-operator ARGS` does it)."""
        self.controller.workspace.close(keep_tree=True)  # the first one's lock, as its exit
        return self._controller(order.run_id, order, *args)

    def _controller(self, run_id: str, order: Order | None, *args: str) -> Controller:
        config = self.pytester.parseconfigure("--fwloop", *args)
        settings = load_settings(config)
        redact = Redactor({})
        workspace = Workspace(settings.rootdir, settings.snapshot_exclude)
        workspace.lock()
        continued = Continued.of(order, settings.runs_root / run_id) if order else None
        workspace.open(run_id)
        if continued is not None:
            found = continued.resumption
            workspace.adopt(found.tree, found.paths, continued.state.left_tree, found.watched)
        recorder = RunRecorder(settings.runs_root, run_id, redact, reopen=order is not None)
        if continued is not None:
            continued.record(recorder, redact)
        controller = Controller(
            config,
            settings,
            recorder,
            workspace,
            Terminal(self.terminal),
            threading.Event(),
            redact,
            StateClock(self.time),
            loop=continued.loop if continued is not None else None,
            past=continued.past if continued is not None else None,
        )
        self.keeper = StateKeeper(
            recorder,
            Invocation(args=["--fwloop"], dir=str(self.root)),
            settings.rootdir,
            settings.options.max_iter,
            workspace.baseline,
            controller.calls.usage,
            continued.state.revision if continued is not None else 0,
        )
        controller.on_move = self.keeper.save
        self.child = FakeChild(self.root, settings, recorder)
        controller.child = controller.suite.child = self.child  # type: ignore[assignment]
        self.controller = controller
        return controller

    def state(self) -> dict[str, Any]:
        path = self.controller.recorder.path / "state.json"
        return json.loads(path.read_text(encoding="utf-8"))  # type: ignore[no-any-return]

    def run(self) -> Outcome:
        """Run the loop and end it as `pytest --fwloop` does; every record must validate."""
        c = self.controller
        outcome = c.run()
        finalize(
            c.loop,
            c.calls,
            settings=c.settings,
            recorder=c.recorder,
            workspace=c.workspace,
            terminal=Terminal(self.terminal),
            redact=c.redact,
            duration=0.0,
            context=run_context.gather(c.config, c.settings.rootdir, None),
        )
        check_records(c.recorder.path)
        return outcome

    def events(self) -> list[dict[str, Any]]:
        path = self.controller.recorder.path / "task-events.jsonl"
        return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]

    def moves(self) -> list[tuple[str, str, str]]:
        """(from, event, to) of each transition, in order."""
        return [
            (e["from"], e["event"], e["to"]) for e in self.events() if e["kind"] == "transition"
        ]

    def summary(self) -> dict[str, Any]:
        path = self.controller.recorder.path / "summary.json"
        return json.loads(path.read_text(encoding="utf-8"))  # type: ignore[no-any-return]

    def firmware(self) -> str:
        return (self.root / FIRMWARE).read_text(encoding="utf-8").strip()
