"""Scripted model servers on 127.0.0.1 for the real agent CLIs: the Anthropic Messages API that
Claude Code speaks and the OpenAI Responses API that Codex speaks, both streamed (SSE); and
`LocalServer`, an on-prem chat-completions server that behaves as llama-cpp-python, llama.cpp's
llama-server and vLLM were measured to (its refusals, its window, its streaming).

They stand in for the model's judgement only: `script(body)` decides each turn (a tool call, a
text, or an HTTP error) from the request the CLI sent; the wire format is the real one.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class ToolCall:
    """The model calls `name` with `input` (Claude Code's StructuredOutput, Read, Edit, …)."""

    name: str
    input: dict[str, Any]


@dataclass(frozen=True)
class Text:
    text: str


@dataclass(frozen=True)
class HttpError:
    status: int
    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)


Turn = ToolCall | Text | HttpError
Script = Callable[[dict[str, Any]], Turn]


class LoopbackHandler(BaseHTTPRequestHandler):
    """A handler of the scripted servers: HTTP/1.1, no access log, `send` for any body."""

    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:
        pass

    def send(
        self, status: int, payload: bytes, kind: str, headers: dict[str, str] | None = None
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(payload)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(payload)


class Loopback:
    """A threading HTTP server on a free port of 127.0.0.1, serving from a thread of its own."""

    def __init__(self, handler: type[BaseHTTPRequestHandler]) -> None:
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()


@dataclass
class ModelServer:
    """One server; `requests` keeps every JSON body it was sent, in order."""

    script: Script
    requests: list[dict[str, Any]] = field(default_factory=list)
    url: str = ""

    def __enter__(self) -> ModelServer:
        server = self

        class Handler(LoopbackHandler):
            def do_HEAD(self) -> None:  # Claude Code 2.1.197 probes the base URL
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def do_GET(self) -> None:
                self.send(404, b'{"error": "no such route"}', "application/json")

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                server.requests.append(body)
                turn = server.script(body)
                if isinstance(turn, HttpError):
                    payload = json.dumps(turn.body).encode()
                    self.send(turn.status, payload, "application/json", turn.headers)
                    return
                events = (
                    anthropic_events(turn) if "/messages" in self.path else responses_events(turn)
                )
                payload = b"".join(
                    f"event: {name}\ndata: {json.dumps(data)}\n\n".encode() for name, data in events
                )
                self.send(200, payload, "text/event-stream")

        self._loopback = Loopback(Handler)
        self.url = self._loopback.url
        return self

    def __exit__(self, *exc: object) -> None:
        self._loopback.close()


USAGE = {"input_tokens": 1200, "output_tokens": 80}


def anthropic_events(turn: ToolCall | Text) -> Iterator[tuple[str, dict[str, Any]]]:
    """One assistant message as the Messages API streams it."""
    yield (
        "message_start",
        {
            "type": "message_start",
            "message": {
                "id": "msg_fwloop",
                "type": "message",
                "role": "assistant",
                "model": "claude-scripted",
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": {"input_tokens": USAGE["input_tokens"], "output_tokens": 1},
            },
        },
    )
    if isinstance(turn, ToolCall):
        block = {
            "type": "tool_use",
            "id": f"toolu_{abs(hash(json.dumps(turn.input))) % 10**8}",
            "name": turn.name,
            "input": {},
        }
        delta = {"type": "input_json_delta", "partial_json": json.dumps(turn.input)}
        stop = "tool_use"
    else:
        block = {"type": "text", "text": ""}
        delta = {"type": "text_delta", "text": turn.text}
        stop = "end_turn"
    yield "content_block_start", {"type": "content_block_start", "index": 0, "content_block": block}
    yield "content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}
    yield "content_block_stop", {"type": "content_block_stop", "index": 0}
    yield (
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": stop, "stop_sequence": None},
            "usage": {"output_tokens": USAGE["output_tokens"]},
        },
    )
    yield "message_stop", {"type": "message_stop"}


CODEX_USAGE = {
    "input_tokens": 1500,
    "input_tokens_details": {"cached_tokens": 300},
    "output_tokens": 90,
    "output_tokens_details": {"reasoning_tokens": 20},
    "total_tokens": 1590,
}


def responses_events(turn: ToolCall | Text) -> Iterator[tuple[str, dict[str, Any]]]:
    """One model response as the Responses API streams it: a message, or a function call."""
    response = {"id": "resp_fwloop", "object": "response", "status": "in_progress", "output": []}
    yield "response.created", {"type": "response.created", "response": response}
    if isinstance(turn, Text):
        item: dict[str, Any] = {
            "type": "message",
            "id": "msg_fwloop",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": turn.text, "annotations": []}],
        }
        yield (
            "response.output_item.added",
            {
                "type": "response.output_item.added",
                "output_index": 0,
                "item": {**item, "content": [], "status": "in_progress"},
            },
        )
        yield (
            "response.output_text.delta",
            {
                "type": "response.output_text.delta",
                "item_id": "msg_fwloop",
                "output_index": 0,
                "content_index": 0,
                "delta": turn.text,
            },
        )
    elif turn.name == "apply_patch":  # Codex's freeform tool: the patch is the whole input
        item = {
            "type": "custom_tool_call",
            "id": "ctc_fwloop",
            "call_id": f"call_{abs(hash(turn.input['patch'])) % 10**8}",
            "name": "apply_patch",
            "input": turn.input["patch"],
            "status": "completed",
        }
    else:
        item = {
            "type": "function_call",
            "id": "fc_fwloop",
            "call_id": f"call_{abs(hash(json.dumps(turn.input))) % 10**8}",
            "name": turn.name,
            "arguments": json.dumps(turn.input),
            "status": "completed",
        }
    yield (
        "response.output_item.done",
        {
            "type": "response.output_item.done",
            "output_index": 0,
            "item": item,
        },
    )
    yield (
        "response.completed",
        {
            "type": "response.completed",
            "response": {**response, "status": "completed", "output": [item], "usage": CODEX_USAGE},
        },
    )


def agent_request(body: dict[str, Any]) -> dict[str, Any]:
    """The loop's request (role, iteration, failures, …) inside the prompt a CLI sent."""
    texts: list[str] = []
    for message in body.get("messages", []) or body.get("input", []):
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, str):
            texts.append(content)
        elif isinstance(content, list):
            texts += [c.get("text", "") for c in content if isinstance(c, dict)]
    for text in texts:
        start = text.find("The request:\n")
        if start >= 0:
            document, _ = json.JSONDecoder().raw_decode(text[start + len("The request:\n") :])
            return document  # type: ignore[no-any-return]
    raise AssertionError("no loop request in the prompt")


def tool_results(body: dict[str, Any]) -> int:
    """How many tool results the conversation holds: the turn the CLI is at."""
    count = 0
    for message in body.get("messages", []):
        content = message.get("content")
        if isinstance(content, list):
            count += sum(
                1 for c in content if isinstance(c, dict) and c.get("type") == "tool_result"
            )
    return count


def tool_outputs(body: dict[str, Any]) -> int:
    """How many tool results a Responses API conversation holds (Codex's `input`)."""
    kinds = ("function_call_output", "custom_tool_call_output")
    return sum(1 for i in body.get("input", []) if isinstance(i, dict) and i.get("type") in kinds)


#: What llama-cpp-python 0.3.36 answers a `json_schema` response format: its own request
#: validation, reported as HTTP 500 (measured; see docs/providers.md).
PYDANTIC_FORMAT_REFUSAL = (
    "1 validation error:\n  {'type': 'literal_error', 'loc': ('body', 'response_format', 'type'), "
    "'msg': \"Input should be 'text' or 'json_object'\", 'input': 'json_schema', 'ctx': "
    "{'expected': \"'text' or 'json_object'\"}}\n\n  File \"llama_cpp/server/app.py\", line 376"
)
PYDANTIC_NULL_CONTENT = (
    "7 validation errors:\n  {'type': 'string_type', 'loc': ('body', 'messages', 2, "
    "'ChatCompletionRequestAssistantMessage', 'content'), 'msg': 'Input should be a valid "
    "string', 'input': None}"
)


def prompt_tokens(body: dict[str, Any]) -> int:
    """The stand-in's tokenizer: four bytes a token of the messages and tools, and a few tokens
    of chat template around each message, as real servers count."""
    size = sum(
        len(str(m.get("content") or "").encode()) + len(json.dumps(m.get("tool_calls") or ""))
        for m in body.get("messages", [])
    )
    if body.get("tools"):
        size += len(json.dumps(body["tools"]))
    return size // 4 + 4 * len(body.get("messages", []))


@dataclass
class LocalServer:
    """An on-prem model server on 127.0.0.1 as real ones behave (DESIGN.md §16).

    `kind` is "llama-cpp-python" (no window published, json_schema and `content: null` refused
    with HTTP 500, no usage when streaming, a streamed prompt over the window answered by a
    stream that closes at once, one request computed at a time), "llama.cpp" (`/props` has
    `n_ctx`) or "vllm" (`max_model_len` in `/v1/models`). A prompt over `n_ctx` is refused with
    a 400 that gives the numbers. `functions` False is a chat template that knows no tools:
    `tools` are accepted and ignored; True is llama-cpp-python's chatml-function-calling (which
    fails on `tool_choice: required` with an empty HTTP 500) or a server that does tools.
    `model(body)` is the model's judgement: the assistant message for a request. Streamed
    answers come `chunks` pieces `delay` seconds apart, and the server stops generating when
    the client goes away.
    """

    model: Callable[[dict[str, Any]], dict[str, Any]]
    kind: str = "llama-cpp-python"
    n_ctx: int = 2048
    functions: bool = False
    chunks: int = 4
    delay: float = 0.0
    requests: list[dict[str, Any]] = field(default_factory=list)
    #: One line per event: `start N`, `done N` (every chunk sent) or `stopped N after K chunks`.
    log: list[str] = field(default_factory=list)
    url: str = ""

    def __post_init__(self) -> None:
        self._slot = threading.Lock()  # llama-cpp-python computes one request at a time

    def refusal(self, body: dict[str, Any]) -> tuple[int, str] | None:
        """The status and message a real server of `kind` refuses `body` with, if it does."""
        fmt = body.get("response_format") or {}
        if self.kind == "llama-cpp-python" and fmt.get("type") not in (None, "text", "json_object"):
            return 500, PYDANTIC_FORMAT_REFUSAL
        if self.kind == "llama-cpp-python" and any(
            m.get("role") == "assistant" and m.get("content") is None
            for m in body.get("messages", [])
        ):
            return 500, PYDANTIC_NULL_CONTENT
        asked = prompt_tokens(body) + int(body.get("max_tokens") or 0)
        if asked > self.n_ctx:
            if self.kind == "llama.cpp":
                return 400, json.dumps(
                    {"n_prompt_tokens": prompt_tokens(body), "n_ctx": self.n_ctx}
                )
            return 400, (
                f"This model's maximum context length is {self.n_ctx} tokens. However, you "
                f"requested {asked} tokens ({prompt_tokens(body)} in the messages, "
                f"{body.get('max_tokens')} in the completion). Please reduce the length of "
                "the messages or completion."
            )
        return None

    def __enter__(self) -> LocalServer:
        server = self

        class Handler(LoopbackHandler):
            def do_GET(self) -> None:
                path = self.path
                if path == "/v1/models":
                    entry: dict[str, Any] = {"id": "local", "object": "model", "owned_by": "me"}
                    if server.kind == "vllm":
                        entry.update(owned_by="vllm", max_model_len=server.n_ctx)
                    self._json(200, {"object": "list", "data": [entry]})
                elif path == "/props" and server.kind == "llama.cpp":
                    settings = {"n_ctx": server.n_ctx}
                    props = {"default_generation_settings": settings, "build_info": "b5000-test"}
                    self._json(200, props)
                elif path == "/version" and server.kind == "vllm":
                    self._json(200, {"version": "0.9.0"})
                elif path == "/openapi.json" and server.kind == "llama-cpp-python":
                    self._json(
                        200, {"info": {"title": "🦙 llama.cpp Python API", "version": "0.3.36"}}
                    )
                else:
                    self._json(404, {"detail": "Not Found"})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                server.requests.append(body)
                number = len(server.requests)
                refused = server.refusal(body)
                required = body.get("tool_choice") == "required" and body.get("tools")
                if required and server.functions and server.kind == "llama-cpp-python":
                    # chatml-function-calling asserts `auto`: an HTTP 500 with no message
                    refused = refused or (500, "")
                if refused is not None:
                    status, text = refused
                    # Found once generating (not by pydantic): a streamed one closes at once.
                    generating = status != 500 or text == ""
                    if generating and server.kind == "llama-cpp-python" and body.get("stream"):
                        self._empty_stream()
                        return
                    self._json(status, {"error": {"message": text, "code": None}})
                    return
                offered = bool(body.get("tools")) and server.functions
                if not offered:
                    body = {**body, "tools": None, "tool_choice": None}
                message = server.model(body)
                usage = {"prompt_tokens": prompt_tokens(body), "completion_tokens": 50}
                with server._slot:
                    server.log.append(f"start {number}")
                    if body.get("stream"):
                        self._stream(number, message, usage)
                    else:
                        time.sleep(server.delay * server.chunks)  # computed to the end
                        server.log.append(f"done {number}")
                        self._json(200, _completion(message, usage))

            def _empty_stream(self) -> None:
                """llama-cpp-python's failure once a streamed response has begun (a prompt
                over its window, a tool_choice its chat format asserts against): the stream
                closes before its first event, the error only in its log."""
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Connection", "close")
                self.end_headers()
                self.close_connection = True

            def _stream(self, number: int, message: dict[str, Any], usage: dict[str, Any]) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Connection", "close")
                self.end_headers()
                self.close_connection = True
                text = str(message.get("content") or "")
                step = max(len(text) // server.chunks, 1)
                pieces = [text[i : i + step] for i in range(0, len(text), step)] or [""]
                deltas: list[dict[str, Any]] = [{"role": "assistant"}]
                deltas += [{"content": piece} for piece in pieces]
                if message.get("tool_calls"):
                    calls = [{"index": i, **c} for i, c in enumerate(message["tool_calls"])]
                    deltas.append({"tool_calls": calls})
                finish = "tool_calls" if message.get("tool_calls") else "stop"
                try:
                    for sent, delta in enumerate(deltas):
                        time.sleep(server.delay)
                        last = sent == len(deltas) - 1
                        chunk: dict[str, Any] = {
                            "choices": [
                                {
                                    "index": 0,
                                    "delta": delta,
                                    "finish_reason": finish if last else None,
                                }
                            ]
                        }
                        if last and server.kind != "llama-cpp-python":
                            chunk["usage"] = usage
                        self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                        self.wfile.flush()
                    self.wfile.write(b"data: [DONE]\n\n")
                    self.wfile.flush()
                except OSError:  # the client went away: stop generating, free the slot
                    server.log.append(f"stopped {number} after {sent} chunks")
                    return
                server.log.append(f"done {number}")

            def _json(self, status: int, document: dict[str, Any]) -> None:
                self.send(status, json.dumps(document).encode(), "application/json")

        self._loopback = Loopback(Handler)
        self.url = f"{self._loopback.url}/v1"
        return self

    def __exit__(self, *exc: object) -> None:
        self._loopback.close()

    @property
    def spec(self) -> str:
        return f"openai:local@{self.url}"


def _completion(message: dict[str, Any], usage: dict[str, Any]) -> dict[str, Any]:
    finish = "tool_calls" if message.get("tool_calls") else "stop"
    return {
        "object": "chat.completion",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": usage,
    }
