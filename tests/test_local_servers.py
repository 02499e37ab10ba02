"""`openai:` against on-prem model servers as they really behave (DESIGN.md §16, issue 42).

`model_servers.LocalServer` reproduces what llama-cpp-python 0.3.36, llama.cpp's llama-server
and vLLM were measured to do: json_schema and `content: null` refused with HTTP 500, a prompt
over the window refused with a 400 that gives the numbers, tools accepted and ignored, the
window published (or not), a streamed answer that stops when the client goes away. Only the
model's judgement is scripted.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pytest

from model_servers import LocalServer
from pytest_fwloop.agents.errors import ProviderError, ProviderErrorKind
from pytest_fwloop.agents.openai import OpenAIProvider
from pytest_fwloop.agents.retry import RetryPolicy
from pytest_fwloop.agents.role import CallRecord, RoleAgent
from pytest_fwloop.core.records.agent_protocol import AgentRequest, Role, load_schema

if TYPE_CHECKING:
    from pathlib import Path

ANSWERS: dict[str, dict[str, Any]] = {
    "coder": {
        "analysis": {"root_cause": "r", "hypotheses": [], "confidence": 0.9},
        "patch": "",
        "summary": "s",
    },
    "reviewer": {"decision": "approve", "must_fix": [], "risk": 0.1, "summary": "fine"},
}


def judgement(body: dict[str, Any]) -> dict[str, Any]:
    """A model that reads the file the failure names once when it has tools, then answers."""
    user = next(m for m in body["messages"] if m["role"] == "user")
    role = json.loads(user["content"])["role"]
    calls_due = body.get("tools") and body.get("tool_choice") != "none"
    if calls_due and not any(m["role"] == "tool" for m in body["messages"]):
        call = {"name": "read_file", "arguments": json.dumps({"path": "src/uart.c"})}
        return {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "call_1", "type": "function", "function": call}],
        }
    return {"role": "assistant", "content": json.dumps(ANSWERS[role])}


def request(tmp_path: Path, role: Role = "reviewer", **fields: object) -> AgentRequest:
    return AgentRequest.model_validate(
        {
            "role": role,
            "iteration": 2,
            "goal": "make every selected test pass",
            "workspace": str(tmp_path),
            "schema": load_schema(role),
            **fields,
        }
    )


def big_coder_request(tmp_path: Path, source_bytes: int) -> AgentRequest:
    """A coder request with one failure and `source_bytes` of ranked code and a repo map."""
    chunk = "uint8_t crc8(const uint8_t *p, size_t n) { return 0; }\n" * 20
    sources = [
        {"path": f"src/m{i}.c", "start_line": 1, "end_line": 20, "text": chunk}
        for i in range(max(source_bytes // len(chunk), 1))
    ]
    return request(
        tmp_path,
        "coder",
        failures=[{"nodeid": "tests/test_crc.py::test_crc", "signature": "s", "excerpt": "E x"}],
        sources=sources,
        repo_map=[{"path": f"src/f{i}.c", "symbols": ["f(void)"]} for i in range(50)],
    )


def agent(chat: OpenAIProvider, role: Role, records: list[CallRecord]) -> RoleAgent:
    return RoleAgent(
        role,
        [chat],
        load_schema(role),
        records.append,
        timeout=30,
        retry_policy=RetryPolicy(max_retries=2, base_delay=0.001),
        sleep=lambda _: None,
    )


def test_json_schema_refused_with_a_500_falls_back_and_is_no_network_fault(
    tmp_path: Path,
) -> None:
    with LocalServer(judgement) as server:
        chat = OpenAIProvider("local", server.url)
        records: list[CallRecord] = []
        agent(chat, "reviewer", records).ask(request(tmp_path))
        agent(chat, "reviewer", records).ask(request(tmp_path))
    formats = [(b.get("response_format") or {}).get("type") for b in server.requests]
    assert formats == ["json_schema", "json_object", "json_object"]
    first, second = records
    assert (first.error_kind, first.retry_count) == (None, 0)
    assert "refused response_format json_schema (HTTP 500: 1 validation error" in first.stderr
    assert first.stderr.rstrip().endswith("sending json_object from now on")
    assert second.stderr == ""
    assert chat.server.record()["response_format"] == "json_object"


@pytest.mark.parametrize("mode", ["json_object", "none"])
def test_a_fixed_response_format_is_sent_from_the_first_call(tmp_path: Path, mode: str) -> None:
    with LocalServer(judgement) as server:
        OpenAIProvider("local", server.url, response_format=mode).call(request(tmp_path), 30)
    (body,) = server.requests
    assert (body.get("response_format") or {}).get("type") == (None if mode == "none" else mode)


def test_a_fixed_json_schema_refused_is_said_as_a_refusal_not_a_network_error(
    tmp_path: Path,
) -> None:
    with LocalServer(judgement) as server:
        chat = OpenAIProvider("local", server.url, response_format="json_schema")
        records: list[CallRecord] = []
        with pytest.raises(ProviderError) as caught:
            agent(chat, "reviewer", records).ask(request(tmp_path))
    assert caught.value.kind is ProviderErrorKind.PROVIDER_BAD_OUTPUT
    assert "the server refused the request as sent" in caught.value.message
    assert "not a network fault" in caught.value.message
    assert len(server.requests) == 1  # a refusal is not retried


def test_a_window_the_server_names_in_its_refusal_is_fitted_once(tmp_path: Path) -> None:
    """llama-cpp-python publishes no window: the first request is refused with the numbers,
    the second is cut to them (repo map and sources first) and reaches the model."""
    with LocalServer(judgement, n_ctx=4096) as server:
        chat = OpenAIProvider("local", server.url, response_format="json_object")
        records: list[CallRecord] = []
        agent(chat, "coder", records).ask(big_coder_request(tmp_path, 30_000))
    # Streamed, the refusal is a stream closed at once; asked without streaming, the numbers.
    hidden, refused, *rest = server.requests
    assert (hidden["stream"], "stream" in refused) == (True, False)
    assert len(rest) >= 1
    last = rest[-1]
    assert last["stream"] is True  # the refitted request is streamed again
    assert last["max_tokens"] + _tokens(last) <= 4096  # fits, with room for the answer
    assert _tokens(refused) > 4096
    (record,) = records
    assert record.error_kind is None
    assert "closed the stream before its first event" in record.stderr
    assert "refitted the request to the window of 4096 tokens the server named" in record.stderr
    assert "left out" in record.stderr
    # The record holds the request as the model was sent it, not as the loop built it.
    assert len(record.request["sources"]) < 30_000 // 1100  # type: ignore[arg-type]
    sent = json.loads(next(m for m in last["messages"] if m["role"] == "user")["content"])
    assert len(sent["sources"]) == len(record.request["sources"])  # type: ignore[arg-type]
    assert chat.server.record()["window_tokens"] == 4096
    assert chat.server.record()["bytes_per_token_measured"] is True


def _tokens(body: dict[str, Any]) -> int:
    from model_servers import prompt_tokens

    return prompt_tokens(body)


def test_a_request_whose_failures_alone_overflow_stops_with_the_flags_to_change(
    tmp_path: Path,
) -> None:
    failures = [
        {"nodeid": f"tests/test_x.py::test_{i}", "signature": f"s{i}", "excerpt": "E " * 900}
        for i in range(8)
    ]
    with LocalServer(judgement, n_ctx=2048) as server:
        chat = OpenAIProvider("local", server.url)
        with pytest.raises(ProviderError) as caught:
            agent(chat, "coder", []).ask(request(tmp_path, "coder", failures=failures))
    message = caught.value.message
    assert caught.value.kind is ProviderErrorKind.PROVIDER_BAD_OUTPUT
    assert "cannot fit the model's window of 2048 tokens (the server's refusal)" in message
    for remedy in ("--n_ctx", "-c 32768", "--max-model-len", "OLLAMA_CONTEXT_LENGTH"):
        assert remedy in message
    assert "fwloop_source_bytes" in message
    assert "fwloop_context_bytes" in message
    assert "\n" not in message
    # json_schema refused, then the prompt (streamed: a closed stream; not: the numbers). The
    # refusal taught the window, and nothing more was sent.
    assert [((b.get("response_format") or {})["type"], "stream" in b) for b in server.requests] == [
        ("json_schema", True),
        ("json_object", True),
        ("json_object", False),
    ]


@pytest.mark.parametrize(("kind", "source"), [("llama.cpp", "/props"), ("vllm", "max_model_len")])
def test_a_published_window_is_read_before_the_first_call(
    tmp_path: Path, kind: str, source: str
) -> None:
    with LocalServer(judgement, kind=kind, n_ctx=4096) as server:
        chat = OpenAIProvider("local", server.url)
        chat.preflight()
        chat.call(big_coder_request(tmp_path, 30_000), 30)
    (body,) = server.requests  # fitted before it was sent: no refusal
    assert _tokens(body) + body["max_tokens"] <= 4096
    record = chat.server.record()
    assert record["window_tokens"] == 4096
    assert source in str(record["window_source"])
    assert record["kind"] == {"llama.cpp": "llama.cpp", "vllm": "vLLM"}[kind]
    assert record["version"] == {"llama.cpp": "b5000-test", "vllm": "0.9.0"}[kind]
    assert record["usage_reported"] is True  # both count tokens in a streamed answer


def test_the_users_window_overrides_the_servers(tmp_path: Path) -> None:
    with LocalServer(judgement, kind="vllm", n_ctx=32768) as server:
        chat = OpenAIProvider("local", server.url, model_context=3000)
        chat.call(big_coder_request(tmp_path, 30_000), 30)
    (body,) = server.requests
    assert _tokens(body) + body["max_tokens"] <= 3000
    assert chat.server.record()["window_source"] == "fwloop_model_context"


def test_a_tool_turn_reaches_a_server_that_refuses_null_content(tmp_path: Path) -> None:
    """llama-cpp-python refuses `content: null` beside `tool_calls` with HTTP 500; the turn
    goes back with `""`, the usage of both turns is summed, and the calls are recorded."""
    from pytest_fwloop.workspace.confined_read import ToolReader

    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "uart.c").write_text("int uart_init(void) { return 0; }\n")
    with LocalServer(judgement, functions=True, n_ctx=32768) as server:
        chat = OpenAIProvider(
            "local", server.url, reader=ToolReader(tmp_path), response_format="json_object"
        )
        records: list[CallRecord] = []
        agent(chat, "coder", records).ask(request(tmp_path, "coder"))
    # `required` fails on its function-calling format (streamed: a stream closed at once;
    # not: an empty HTTP 500): the tools go with `auto`, streamed again, from then on.
    hidden, probe, first, second = server.requests
    assert [(b["tool_choice"], "stream" in b) for b in (hidden, probe, first)] == [
        ("required", True),
        ("required", False),
        ("auto", True),
    ]
    assistant = next(m for m in second["messages"] if m["role"] == "assistant")
    assert assistant["content"] == ""
    (record,) = records
    assert record.error_kind is None
    assert record.tools_offered
    assert [c["name"] for c in record.tool_calls] == ["read_file"]
    assert chat.server.tools == "taken"


def test_a_server_that_ignores_tools_is_found_out_once(tmp_path: Path) -> None:
    from pytest_fwloop.workspace.confined_read import ToolReader

    with LocalServer(judgement, functions=False, n_ctx=32768) as server:
        chat = OpenAIProvider(
            "local", server.url, reader=ToolReader(tmp_path), response_format="json_object"
        )
        records: list[CallRecord] = []
        agent(chat, "coder", records).ask(request(tmp_path, "coder"))
        agent(chat, "coder", records).ask(request(tmp_path, "coder"))
    first, second = server.requests
    assert (first["tool_choice"], "tools" in second) == ("required", False)
    # Without the tools the system message is still the same bytes: the server's cache holds.
    assert first["messages"][0]["content"] == second["messages"][0]["content"]
    assert chat.server.record()["tools"] == "ignored"
    said = [r.stderr for r in records if "ignores tools" in r.stderr]
    assert len(said) == 1
    assert "--jinja" in said[0]
    assert "--enable-auto-tool-choice" in said[0]
    assert records[0].error_kind is None  # its plain answer was taken
    assert records[0].tools_offered
    assert not records[1].tools_offered


def test_an_abandoned_streamed_call_stops_the_server_and_frees_it(tmp_path: Path) -> None:
    """The call times out mid-answer: the closed connection stops the generation (the server
    sends far fewer chunks than it would have), and the next request is served after it."""
    with LocalServer(judgement, kind="llama.cpp", chunks=400, delay=0.02) as server:
        chat = OpenAIProvider("local", server.url)
        with pytest.raises(ProviderError) as caught:
            chat.call(request(tmp_path), 0.5)
        server.delay, server.chunks = 0.0, 4
        answer = chat.call(request(tmp_path), 30)
    assert caught.value.kind is ProviderErrorKind.PROVIDER_TIMEOUT
    assert json.loads(answer.text) == ANSWERS["reviewer"]
    assert all(body["stream"] is True for body in server.requests)
    stop, start = server.log[1], server.log[2]
    assert server.log[0] == "start 1"
    assert stop.startswith("stopped 1 after ")
    assert int(stop.split()[-2]) < 100  # of 400: it stopped when the client went away
    assert start == "start 2"


def test_without_streaming_an_abandoned_call_runs_to_its_end(tmp_path: Path) -> None:
    """The contrast, and the reason to stream: the server computes an answer no one reads."""
    with LocalServer(judgement, kind="llama.cpp", chunks=20, delay=0.05) as server:
        chat = OpenAIProvider("local", server.url)
        chat.server.streaming = False
        with pytest.raises(ProviderError):
            chat.call(request(tmp_path), 0.3)
        server.delay = 0.0
        chat.call(request(tmp_path), 30)
    assert server.log[:3] == ["start 1", "done 1", "start 2"]


def test_the_system_message_is_the_same_bytes_in_every_call_of_a_run(tmp_path: Path) -> None:
    """The stable part first: the instructions and the schema are byte-identical across calls,
    and the request opens with what does not change between iterations."""
    with LocalServer(judgement, kind="vllm", n_ctx=32768) as server:
        chat = OpenAIProvider("local", server.url)
        chat.call(request(tmp_path, "coder"), 30)
        later = request(tmp_path, "coder").model_copy(
            update={"iteration": 5, "validation_errors": ["patch: is not a string"]}
        )
        chat.call(later, 30)
    first, second = (body["messages"] for body in server.requests)
    assert first[0]["content"] == second[0]["content"]
    one, two = first[1]["content"], second[1]["content"]
    common = next(i for i, (a, b) in enumerate(zip(one, two, strict=False)) if a != b)
    assert json.loads(one)["goal"] in one[:common]
    assert one[:common].endswith('"iteration": ')  # all that is the same comes before it


def reader_of_big_files(body: dict[str, Any]) -> dict[str, Any]:
    """A model that reads one more large file each turn until it is told to answer."""
    read = sum(1 for m in body["messages"] if m["role"] == "tool")
    if body.get("tools") and body.get("tool_choice") != "none":
        call = {"name": "read_file", "arguments": json.dumps({"path": f"big{read}.c"})}
        return {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": f"call_{read}", "type": "function", "function": call}],
        }
    return {"role": "assistant", "content": json.dumps(ANSWERS["coder"])}


def test_tool_results_past_the_window_are_replaced_by_the_order_to_answer(
    tmp_path: Path,
) -> None:
    """The window is learned only from a refusal (llama-cpp-python), after files of ~3.5k
    tokens each: the last result is replaced by the order to answer, and the model answers."""
    from pytest_fwloop.agents.tool_conversation import TOO_LONG
    from pytest_fwloop.workspace.confined_read import ToolReader

    for i in range(4):
        line = "static const int table_{n:03d}[] = {{" + "0x00, " * 10 + "}};\n"
        (tmp_path / f"big{i}.c").write_text("".join(line.format(n=n) for n in range(200)))
    with LocalServer(reader_of_big_files, functions=True, n_ctx=10000) as server:
        chat = OpenAIProvider(
            "local", server.url, reader=ToolReader(tmp_path), response_format="json_object"
        )
        records: list[CallRecord] = []
        agent(chat, "coder", records).ask(request(tmp_path, "coder"))
    (record,) = records
    assert record.error_kind is None
    assert "those past it were replaced by the order to answer now" in record.stderr
    last = server.requests[-1]
    assert last["tool_choice"] == "none"
    tools = [m["content"] for m in last["messages"] if m["role"] == "tool"]
    assert tools[-1] == TOO_LONG
    assert tools[0] != TOO_LONG  # what fitted is kept
