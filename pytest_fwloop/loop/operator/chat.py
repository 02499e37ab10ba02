"""`fwloop chat` (DESIGN.md §11, seed 004's chat mode): roles answer the operator about a run.

Each role asked (`--role coder,reviewer`) answers in free text through its own provider, as the
run's configuration names it, all of them at once; their answers are printed one after the other
in the order asked and kept in the thread in that order. Each request is the one every agent gets
for the run as it stands (latest failures within `fwloop_context_bytes`, history, regressions,
redacted alike), plus `chat`: the thread so far and the question. Chat takes no run lock and
writes nothing but its thread: the tree is not touched (`--start` hands a task to the loop
instead, as a follow-up: cli/operator.py).
"""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor

import pytest

from pytest_fwloop.agents.errors import ProviderError
from pytest_fwloop.config.settings import LoopSettings
from pytest_fwloop.core.records.redaction import Redactor
from pytest_fwloop.core.records.run_state import StateError, load_state
from pytest_fwloop.loop.agent_calls import role_agent
from pytest_fwloop.loop.operator.continuation import Order, restore
from pytest_fwloop.loop.operator.threads import Thread, ThreadError, chat_title
from pytest_fwloop.loop.request.desk import chat_requests
from pytest_fwloop.loop.state import LoopState
from pytest_fwloop.loop.terminal import PREFIX, Terminal


def answer_chat(
    config: pytest.Config,
    settings: LoopSettings,
    order: Order,
    terminal: Terminal,
    redact: Redactor,
) -> int:
    """Ask `order.roles` the question in `order.text`; print and keep their answers. Exit
    status 1 when a role gave none (the others' answers are kept all the same)."""
    run_dir = settings.runs_root / order.run_id
    missing = [role for role in order.roles if not settings.providers.get(role)]
    if missing or not order.roles:
        terminal.line(
            f"fwloop: run {order.run_id} has no {missing[0] if missing else 'role asked'}; "
            "ask the coder or reviewer"
        )
        return int(pytest.ExitCode.USAGE_ERROR)
    try:
        loop = LoopState(run_id=order.run_id)
        restore(loop, load_state(run_dir), run_dir, order)
        thread = Thread(run_dir, order.thread)
        earlier = thread.messages()
    except (StateError, ThreadError) as exc:
        terminal.line(str(exc))
        return int(pytest.ExitCode.USAGE_ERROR)
    chat = {
        "thread": order.thread,
        "messages": [{"author": m.author, "text": m.text} for m in earlier],
        "question": redact(order.text),
    }
    requests = chat_requests(loop, settings, list(order.roles), chat)
    agents = [
        role_agent(
            config,
            settings,
            role,
            lambda call: thread.record_call(call.request, call.raw, redact),
            lambda: settings.options.agent_timeout,
        )
        for role in order.roles
    ]
    who, title = ",".join(order.roles), chat_title(order.roles, order.run_id)
    thread.append("operator", "chat", order.text, redact, who, title)
    with ThreadPoolExecutor(len(agents), thread_name_prefix="fwloop-chat") as pool:
        asked = [pool.submit(a.comment, r) for a, r in zip(agents, requests, strict=True)]
    return _print_answers(order, asked, thread, terminal, redact, (who, title))


def _print_answers(
    order: Order,
    asked: list[Future[str]],
    thread: Thread,
    terminal: Terminal,
    redact: Redactor,
    header: tuple[str, str],
) -> int:
    """Each role's answer printed and kept in the thread; 1 when a role gave none."""
    status = 0
    for role, future in zip(order.roles, asked, strict=True):
        try:
            answer = future.result()
        except ProviderError as exc:
            terminal.line(
                f"fwloop: the {role}'s provider gave no answer ({exc.kind.value}: "
                f"{exc.message}); the question is kept in thread {order.thread}"
            )
            status = 1
            continue
        kept = thread.append(role, "chat", answer, redact, *header)
        if len(order.roles) > 1:
            terminal.line(f"{PREFIX} the {role} answers:")
        terminal.line(kept.text)
    return status
