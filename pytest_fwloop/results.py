"""What one iteration's child pytest run produced, and how DESIGN.md §4 counts it.

The child writes `IterationResults` as `results.json`; the controller loads it with the same model,
so a truncated or foreign file is rejected at the boundary instead of miscounted.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

from pydantic import BaseModel, Field

TestOutcome = Literal["passed", "failed", "error", "skipped", "xfailed", "xpassed"]
Phase = Literal["collect", "setup", "call", "teardown"]


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
    sections: str = Field(default="", description="captured output, bounded")
    env_failure: str | None = Field(
        default=None, description="the transport error, when the environment failed the test"
    )


class IterationResults(BaseModel):
    """Everything the controller needs from one child run."""

    exitstatus: int = Field(description="the child pytest's exit status")
    tests: list[TestRecord] = Field(default_factory=list, description="one record per test")

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
        return [t for t in self.tests if t.env_failure is not None]

    def merged(self, rerun: IterationResults) -> IterationResults:
        """This run with the records of a partial rerun (env retry) taking precedence."""
        replaced = {t.nodeid: t for t in rerun.tests}
        tests = [replaced.pop(t.nodeid, t) for t in self.tests]
        tests.extend(replaced.values())
        return IterationResults(exitstatus=rerun.exitstatus, tests=tests)


def not_passing(record: TestRecord) -> bool:
    """A test that counts against the pass rate: the set the coder is asked to fix."""
    if record.outcome in ("failed", "error"):
        return True
    return record.outcome == "xpassed" and record.strict_xpass


def nodeids(records: Iterable[TestRecord]) -> list[str]:
    return [r.nodeid for r in records]


def environment_lost(env_failed: Iterable[TestRecord], before: IterationResults | None) -> bool:
    """The environment came up for every one of these tests in the run `before` and not now:
    what changed in between (a patch) broke it, so no reset will bring it back."""
    if before is None:
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
