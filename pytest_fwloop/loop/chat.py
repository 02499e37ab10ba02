"""`fwloop chat` (DESIGN.md §11, seed 004's chat mode): one role answers the operator about a run.

The role's own provider, as the run's configuration names it, answers in free text. Its request
is the one every agent gets for the run as it stands (latest failures within
`fwloop_context_bytes`, history, regressions, redacted alike), plus `chat`: the thread so far and
the question. Chat takes no run lock and writes nothing but its thread: the tree is not touched.
"""

from __future__ import annotations

import pytest

from pytest_fwloop.agents.errors import ProviderError
from pytest_fwloop.config.settings import LoopSettings
from pytest_fwloop.core.redaction import Redactor
from pytest_fwloop.core.run_state import StateError, load_state
from pytest_fwloop.loop.agent_calls import role_agent
from pytest_fwloop.loop.agent_request import agent_request
from pytest_fwloop.loop.continuation import Order, restore
from pytest_fwloop.loop.operator_threads import Thread, ThreadError
from pytest_fwloop.loop.state import LoopState
from pytest_fwloop.loop.terminal import Terminal


def answer_chat(
    config: pytest.Config,
    settings: LoopSettings,
    order: Order,
    terminal: Terminal,
    redact: Redactor,
) -> int:
    """Ask `order.role` the question in `order.text`; print and keep the answer."""
    run_dir = settings.runs_root / order.run_id
    role = order.role
    if role == "" or not settings.providers.get(role):
        terminal.line(f"fwloop: run {order.run_id} has no {role}; ask the coder or reviewer")
        return int(pytest.ExitCode.USAGE_ERROR)
    try:
        loop = LoopState(run_id=order.run_id)
        restore(loop, load_state(run_dir), run_dir, order)
        thread = Thread(run_dir, order.thread)
        earlier = thread.messages()
    except (StateError, ThreadError) as exc:
        terminal.line(str(exc))
        return int(pytest.ExitCode.USAGE_ERROR)
    agent = role_agent(
        config,
        settings,
        role,
        lambda call: thread.record_call(call.request, call.raw, redact),
        lambda: settings.agent_timeout,
    )
    request = agent_request(
        loop,
        settings,
        role,
        chat={
            "thread": order.thread,
            "messages": [{"author": m.author, "text": m.text} for m in earlier],
            "question": redact(order.text),
        },
    )
    title = f"chat with the {role} about run {order.run_id}"
    thread.append("operator", "chat", order.text, redact, role, title)
    try:
        answer = agent.comment(request)
    except ProviderError as exc:
        terminal.line(
            f"fwloop: the {role}'s provider gave no answer ({exc.kind.value}: "
            f"{exc.message}); the question is kept in thread {order.thread}"
        )
        return 1
    kept = thread.append(role, "chat", answer, redact, role, title)
    terminal.line(kept.text)
    return 0
