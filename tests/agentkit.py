"""Building blocks for the agent tests: the protocol's request fields and answer shapes,
requests, fake CLI agents on PATH, and a `command:` provider to fail over to.

A fake CLI is a real executable run by this interpreter. Its body parses the options the real
CLI takes and then calls `next_step(prompt)`, which records the call (argv, prompt, working
directory) and returns what the test scripted for it; the last step repeats.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from pytest_fwloop.agents.registry import parse_role_specs
from pytest_fwloop.agents.retry import RetryPolicy
from pytest_fwloop.agents.role import RoleAgent
from pytest_fwloop.core.records.agent_protocol import AgentRequest, Role, load_schema

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from pathlib import Path

    import pytest

    from pytest_fwloop.agents.base import Provider
    from pytest_fwloop.agents.role import CallRecord

# The fields DESIGN.md §5 promises every request carries.
WIRE_FIELDS = (
    "role",
    "iteration",
    "goal",
    "workspace",
    "failures",
    "history",
    "must_fix",
    "patch",
    "schema",
)

# The answer shapes exactly as DESIGN.md §5 spells them.
CODER: dict[str, object] = {
    "analysis": {
        "root_cause": "uart_getc returns before the FIFO is drained",
        "hypotheses": ["FIFO flag read too early", "baud divisor off by one"],
        "confidence": 0.7,
    },
    "patch": "--- a/src/uart.c\n+++ b/src/uart.c\n@@ -1 +1 @@\n-x\n+y\n",
    "summary": "wait for RXNE before reading",
}
REVIEWER: dict[str, object] = {
    "decision": "changes_requested",
    "must_fix": [
        {"issue": "the loop never times out", "file": "src/uart.c", "line": 42},
        {"issue": "add a comment"},
    ],
    "risk": 0.3,
    "summary": "close, but the wait can hang",
}
TESTER: dict[str, object] = {
    "select": ["tests/test_uart.py::test_echo"],
    "commands": [{"argv": ["pytest", "-k", "uart"], "reason": "the UART tests"}],
    "notes": "only UART code changed",
}
SHAPES: dict[Role, dict[str, object]] = {"coder": CODER, "reviewer": REVIEWER, "tester": TESTER}

_PRELUDE = '''
import json, os, pathlib, sys


def next_step(prompt):
    """Record this call and return its step from steps.json; the last step repeats."""
    number = len(list(STATE.glob("call-*.json"))) + 1
    (STATE / f"call-{number}.json").write_text(json.dumps(
        {"argv": sys.argv[1:], "prompt": prompt, "cwd": os.getcwd()}))
    steps = json.loads((STATE / "steps.json").read_text())
    return steps[min(number, len(steps)) - 1]
'''


@dataclass(frozen=True)
class Call:
    """What one run of a fake CLI was given."""

    argv: list[str]
    prompt: str
    cwd: str

    def option(self, name: str) -> str:
        return self.argv[self.argv.index(name) + 1]


class FakeCli:
    """The only program on PATH, named `name` and running `body`; a subclass names both.

    `steps` says what each call does; `calls` is what each was given.
    """

    name: ClassVar[str]
    body: ClassVar[str]

    def __init__(self, root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.bin = root / "bin"
        self.state = root / f"{self.name}-state"
        self.bin.mkdir()
        self.state.mkdir()
        program = self.bin / self.name
        program.write_text(
            f"#!{sys.executable}\n{_PRELUDE}\nSTATE = pathlib.Path({str(self.state)!r})\n"
            f"{self.body}",
            encoding="utf-8",
        )
        program.chmod(0o755)
        monkeypatch.setenv("PATH", str(self.bin))

    def steps(self, *steps: Mapping[str, object]) -> None:
        (self.state / "steps.json").write_text(json.dumps(steps))

    def calls(self) -> list[Call]:
        count = len(list(self.state.glob("call-*.json")))
        return [
            Call(**json.loads((self.state / f"call-{n}.json").read_text()))
            for n in range(1, count + 1)
        ]


def make_request(workspace: Path, role: Role = "coder", **fields: object) -> AgentRequest:
    return AgentRequest.model_validate(
        {
            "role": role,
            "iteration": 2,
            "goal": "make every selected test pass",
            "workspace": str(workspace),
            "schema": load_schema(role),
            **fields,
        }
    )


def role_agent(
    role: Role,
    providers: str | Sequence[Provider],
    rootdir: Path,
    records: list[CallRecord],
    sleeps: list[float] | None = None,
    *,
    max_retries: int,
) -> RoleAgent:
    """A RoleAgent over a spec or over providers, its calls appended to `records` and its retry
    pauses to `sleeps` instead of waited for."""
    chain = parse_role_specs(providers, role, rootdir) if isinstance(providers, str) else providers
    return RoleAgent(
        role,
        list(chain),
        load_schema(role),
        records.append,
        timeout=30,
        retry_policy=RetryPolicy(max_retries=max_retries, base_delay=0.001),
        sleep=(sleeps if sleeps is not None else []).append,
    )


def command_coder(directory: Path, answer: Mapping[str, object]) -> str:
    """The spec of a `command:` provider that answers `answer`: a failover target."""
    program = directory / "coder.py"
    program.write_text(
        f"#!{sys.executable}\nimport json, sys\njson.load(sys.stdin)\n"
        f"print(json.dumps({dict(answer)!r}))\n"
    )
    program.chmod(0o755)
    return f"command:{program}"
