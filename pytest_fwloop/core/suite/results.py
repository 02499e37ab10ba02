"""What one iteration's child pytest run produced, and how DESIGN.md §4 counts it.

The child writes `IterationResults` as `results.json`; the controller loads it with the same model,
so a truncated or foreign file is rejected at the boundary instead of miscounted.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from pytest_fwloop.core.records.nodeids import COMMAND_NODEID_PREFIX as COMMAND_NODEID_PREFIX
from pytest_fwloop.core.suite.env_classify import is_farm_failure

TestOutcome = Literal["passed", "failed", "error", "skipped", "xfailed", "xpassed"]
Phase = Literal["collect", "setup", "call", "teardown"]
Better = Literal["lower", "higher"]


class Metric(BaseModel):
    """A number a test recorded beside its outcome (`fwloop_metric`, docs/metrics.md)."""

    value: float = Field(description="the number, in the unit the test chose")
    better: Better = Field(description="which way is an improvement: `lower` or `higher`")


class TestRecord(BaseModel):
    """One test's final outcome; `env_failure` names the transport error when it was the env's."""

    __test__ = False  # not a pytest test class, despite the name

    nodeid: str = Field(description="pytest's node id")
    outcome: TestOutcome = Field(description="the test's final outcome")
    phase: Phase = Field(description="the phase that decided the outcome")
    duration: float = Field(default=0.0, description="seconds, all phases")
    strict_xpass: bool = Field(default=False, description="an xpass under `strict=True`")
    longrepr: str = Field(default="", description="the failure text, bounded")
    crash: str = Field(default="", description="the crash line (`file:line: message`)")
    sections: str = Field(
        default="",
        description="captured output, then the device logs of a failure (`fwloop device log`), "
        "bounded",
    )
    env_failure: str | None = Field(
        default=None, description="the transport error, when the environment failed the test"
    )
    reruns: int = Field(
        default=0,
        description="times it was run again before this outcome (pytest-rerunfailures, or the "
        "loop's own flaky reruns)",
    )
    flaky: bool = Field(
        default=False,
        description="failed, then passed on a rerun with no code change: its outcome is what "
        "fwloop_flaky_policy counts it as, and the coder is never sent it",
    )
    patch_aware: bool = Field(
        default=False,
        description="uses fwloop_review or fwloop_test_plan: its outcome depends on the patch "
        "under test, so focus reruns always include it",
    )
    known_failure: bool = Field(
        default=False,
        description="named in --fwloop-known-failures: when it does not pass it counts in "
        "neither count and is never sent to the coder",
    )
    carried: bool = Field(
        default=False,
        description="not run in this iteration (focus reruns): its outcome is the one its last "
        "full-suite run gave",
    )
    metrics: dict[str, Metric] = Field(
        default_factory=dict,
        description="the numbers it recorded (`fwloop_metric`, `fwloop_metric_*` properties)",
    )


class IterationResults(BaseModel):
    """Everything the controller needs from one child run."""

    exitstatus: int = Field(description="the child pytest's exit status")
    tests: list[TestRecord] = Field(default_factory=list, description="one record per test")
    metrics: dict[str, Metric] = Field(
        default_factory=dict,
        description="numbers of the whole run: `coverage`, pytest-cov's total, when a run of "
        "the whole suite reported one",
    )

    @classmethod
    def read(cls, path: Path) -> IterationResults:
        """A results file, validated; OSError or ValueError (pydantic's) when it cannot be."""
        return cls.model_validate_json(path.read_text(encoding="utf-8"))

    def counts(self) -> dict[str, int]:
        totals = dict.fromkeys(("passed", "failed", "error", "skipped", "xfailed", "xpassed"), 0)
        for record in self.tests:
            totals[record.outcome] += 1
        return totals

    @property
    def pass_count(self) -> int:
        """passed + xfailed (DESIGN.md §4)."""
        return sum(1 for t in self.tests if t.outcome in ("passed", "xfailed"))

    @property
    def total_count(self) -> int:
        """pass_count + failed + error + strict xpasses; skips and lenient xpasses count nowhere."""
        return self.pass_count + sum(1 for t in self.tests if not_passing(t))

    def not_passing(self) -> list[TestRecord]:
        return [t for t in self.tests if not_passing(t)]

    def environment_failures(self) -> list[TestRecord]:
        """Tests the environment failed; a known failure's is known, not to be recovered."""
        return [t for t in self.tests if t.env_failure is not None and not t.known_failure]

    def merged(self, rerun: IterationResults) -> IterationResults:
        """This run with the records of a partial rerun (env retry) taking precedence; the
        run's own numbers stay this run's, since a partial run measures part of the suite."""
        replaced = {t.nodeid: t for t in rerun.tests}
        tests = [replaced.pop(t.nodeid, t) for t in self.tests]
        tests.extend(replaced.values())
        return IterationResults(exitstatus=rerun.exitstatus, tests=tests, metrics=self.metrics)


def not_passing(record: TestRecord) -> bool:
    """A test that counts against the pass rate: the set the coder is asked to fix."""
    if record.known_failure:
        return False
    if record.outcome in ("failed", "error"):
        return True
    return record.outcome == "xpassed" and record.strict_xpass


def only_commands_failing(results: IterationResults) -> list[str]:
    """The tester's commands that fail, when they alone keep `results` from green (every test
    of the suite passes: seed 004's `test_failed`); else []."""
    failing = nodeids(results.not_passing())
    if all(nodeid.startswith(COMMAND_NODEID_PREFIX) for nodeid in failing):
        return failing
    return []


def nodeids(records: Iterable[TestRecord]) -> list[str]:
    return [r.nodeid for r in records]


def environment_lost(env_failed: Iterable[TestRecord], before: IterationResults | None) -> bool:
    """The environment came up for every one of these tests in the run `before` and not now:
    what changed in between (a patch) broke it, so no reset will bring it back. The farm's own
    failures (a coordinator or exporter gone) no patch can cause."""
    if before is None or all(is_farm_failure(t.env_failure or "") for t in env_failed):
        return False
    previous = {t.nodeid: t for t in before.tests}
    return all(t.nodeid in previous and previous[t.nodeid].env_failure is None for t in env_failed)


def collection_errors(results: IterationResults) -> list[TestRecord]:
    """The files (or conftests) pytest could not collect: a broken suite, not a failing test."""
    return [t for t in results.tests if t.phase == "collect"]


def error_line(text: str) -> str:
    """The error a pytest failure text ends with: its last `E   ` line, else its last line."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    errors = [line[1:].strip() for line in lines if line.startswith("E ")]
    return (errors or lines or ["no error text"])[-1][:300]


def executed_in(folder: Path) -> int:
    """Test executions recorded in an iteration's folder: every child run's raw results (the
    focus, the gate, flaky and environment reruns, the tester's pre-check, the spectrum run) and
    the reruns a plugin made inside them (pytest-rerunfailures: a record's `reruns`), carried
    records left out; `results.json`, the iteration's merged view, is not a run."""
    executed = 0
    for path in folder.glob("*results*.json"):
        if path.name == "results.json":
            continue
        try:
            results = IterationResults.read(path)
        except (OSError, ValueError):
            continue
        executed += sum(1 + t.reruns for t in results.tests if not t.carried)
    return executed


def read_progress(path: Path) -> list[ProgressLine]:
    """The stream's complete lines; a line cut off by the child's death is left out, and so
    are the zero bytes a stream the child never closed ends in (`child.progress_stream`)."""
    try:
        data = path.read_bytes()
    except OSError:
        return []
    text = data.split(b"\0", 1)[0].decode("utf-8", errors="replace")
    lines = []
    for raw in text.splitlines():
        try:
            lines.append(ProgressLine.model_validate_json(raw))
        except ValueError:
            continue
    return lines


class ProgressLine(BaseModel):
    """One line of the child's progress stream, in the file as soon as it happens: the test ids
    it collected, a test it started, or a test's final record."""

    collected: list[str] | None = Field(default=None, description="node ids, once collected")
    started: str | None = Field(default=None, description="the node id of a test starting")
    finished: TestRecord | None = Field(default=None, description="a test's final record")


def results_from_progress(lines: Iterable[ProgressLine], died: str) -> IterationResults | None:
    """What a child that died mid-run (pytest-timeout's thread method, a crash) leaves behind:
    the tests it finished, the ones it was running failed with `died`, and the ones it collected
    but never ran as errors, so the totals stay the suite's. None if it finished no test and
    collected none."""
    collected: list[str] = []
    started: list[str] = []
    finished: dict[str, TestRecord] = {}
    for line in lines:
        collected += line.collected or []
        if line.started is not None:
            started.append(line.started)
        if line.finished is not None:
            finished[line.finished.nodeid] = line.finished
    if not collected and not finished and not started:
        return None
    running = [n for n in dict.fromkeys(started) if n not in finished]
    crash = f"the child pytest died while this test ran: {died}"
    tests = list(finished.values())
    tests += [
        TestRecord(nodeid=n, outcome="failed", phase="call", longrepr=crash, crash=crash)
        for n in running
    ]
    never = f"not run: the child pytest died before it ({died})"
    tests += [
        TestRecord(nodeid=n, outcome="error", phase="setup", longrepr=never, crash=never)
        for n in dict.fromkeys(collected)
        if n not in finished and n not in running
    ]
    return IterationResults(exitstatus=1, tests=tests)
