"""The agents of a run and the record of every call they make (DESIGN.md §5, §8).

Each call is written to `rounds/NN/` (request, raw answer, parsed JSON, `CallMeta`); a retried or
failed-over call is also an `agent_call` event of the decision trace; its usage is added to the
run's ledger, and a call that takes the run over its budget raises `BudgetExhausted`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pytest

from pytest_fwloop.agents.role import CallRecord, RoleAgent
from pytest_fwloop.config.settings import LoopSettings
from pytest_fwloop.core.machine.agent_budget import Budget, BudgetExhausted, UsageLedger
from pytest_fwloop.core.machine.fsm import State
from pytest_fwloop.core.records.agent_protocol import Role, load_schema
from pytest_fwloop.core.records.redaction import Redactor
from pytest_fwloop.core.records.round_records import CallMeta, call_files
from pytest_fwloop.core.records.run_records import Event
from pytest_fwloop.loop.rundir import RunRecorder, utc_now
from pytest_fwloop.loop.terminal import PREFIX, Terminal

if TYPE_CHECKING:
    from pytest_fwloop.agents.base import Provider
    from pytest_fwloop.loop.state import Iteration


def role_agent(
    config: pytest.Config,
    settings: LoopSettings,
    role: Role,
    on_call: Callable[[CallRecord], object],
    time_left: Callable[[], float],
    providers: Sequence[Provider] | None = None,
) -> RoleAgent:
    """The role's failover list of providers, as parsed and checked before the run (so a
    conftest's provider hook is not asked again), with its schema (shipped, or a conftest's);
    `providers` instead of the list: one review panel member."""
    shipped = load_schema(role)
    schema = config.hook.pytest_fwloop_schema(config=config, role=role, schema=shipped)
    return RoleAgent(
        role,
        list(settings.providers[role] if providers is None else providers),
        schema if schema is not None else shipped,
        on_call,
        timeout=settings.options.agent_timeout,
        time_left=time_left,
    )


@dataclass(frozen=True)
class CallRow:
    """One call as report.md lists it."""

    stem: str  # `rounds/02/coder-1`
    provider: str
    seconds: float
    usage: dict[str, float]


class CallLog:
    """Records each call; `where` gives the iteration and the state a call is made in."""

    def __init__(
        self,
        recorder: RunRecorder,
        terminal: Terminal,
        redact: Redactor,
        budget: Budget,
        where: Callable[[], tuple[Iteration, State]],
    ) -> None:
        self.recorder = recorder
        self.terminal = terminal
        self.redact = redact
        self.budget = budget
        self.where = where
        self.usage = UsageLedger()
        self.coder_calls = 0
        self.rows: list[CallRow] = []
        self._counts: dict[tuple[int, str], int] = {}
        # A review panel's members call at once, each from its own thread.
        self._lock = threading.Lock()

    def record(self, call: CallRecord) -> str:
        """Write the call down; its files' stem (`reviewer-2`)."""
        with self._lock:
            return self._record(call)

    def _record(self, call: CallRecord) -> str:
        iteration, state = self.where()
        key = (iteration.number, call.role)
        folder = self.recorder.round_path(iteration.number)
        # A continued run (`fwloop confirm`) numbers on after the calls an earlier process made.
        done = self._counts.get(key)
        self._counts[key] = 1 + (
            len(call_files(folder, call.role, "meta.json")) if done is None else done
        )
        stem = f"{call.role}-{self._counts[key]}"
        rel = self.recorder.relative(folder)
        self.recorder.write_json(f"{rel}/{stem}.request.json", call.request)
        self.recorder.write_text(f"{rel}/{stem}.answer.txt", call.raw)
        if call.document is not None:
            self.recorder.write_json(f"{rel}/{stem}.answer.json", call.document)
        if call.tool_calls or call.tools_offered:
            self.recorder.write_json(f"{rel}/{stem}.tools.json", list(call.tool_calls))
        meta = CallMeta(
            provider=call.provider,
            attempt=call.attempt,
            duration_s=round(call.duration_s, 3),
            errors=call.errors,
            error_kind=call.error_kind,
            retry_count=call.retry_count,
            retry_reason=call.retry_reason,
            usage=call.usage,
            stderr_tail=call.stderr[-2000:],
        )
        self.rows.append(CallRow(f"{rel}/{stem}", call.provider, call.duration_s, call.usage))
        meta_path = self.recorder.write_json(f"{rel}/{stem}.meta.json", meta.model_dump())
        if call.role == "coder":
            self.coder_calls += 1
            iteration.coder_calls += 1
        if call.retry_reason is not None:
            self._record_retry(call, self.recorder.relative(meta_path), iteration.number, state)
        self.usage.add(call.role, call.usage)
        overrun = self.budget.overrun(self.usage.total)
        if overrun is not None:
            raise BudgetExhausted(overrun)
        return stem

    def _record_retry(self, call: CallRecord, evidence: str, iteration: int, state: State) -> None:
        """A retried or failed-over call is an event of the trace: not a transition (the state
        stays), so it is a line of kind `agent_call` with from == to."""
        reason = f"{call.role} call {call.attempt} to {call.provider}: {call.retry_reason}"
        event = Event(
            time=utc_now(),
            kind="agent_call",
            from_state=state.value,
            to_state=state.value,
            event="agent_retry",
            reason=reason,
            iteration=iteration,
            evidence=[evidence],
            retry_count=call.retry_count,
            retry_reason=call.retry_reason,
            role=call.role,
            provider=call.provider,
        )
        self.recorder.append_event(event.to_json())
        self.terminal.line(f"{PREFIX} [{iteration}] {state.value}: {self.redact(reason)}")
