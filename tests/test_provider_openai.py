"""`openai:MODEL@URL` against a real HTTP server on 127.0.0.1 that injects failures.

The server speaks enough of the chat-completions API to answer, and on request fails the way
real servers and networks do: error statuses with OpenAI-style bodies, Retry-After, a reset
connection, a stall, a body cut off mid-way, a body of broken JSON.
"""

from __future__ import annotations

import dataclasses
import json
import socket
import struct
import threading
from datetime import datetime, timedelta, timezone
from email.utils import format_datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

import pytest

from pytest_fwloop.agents.chat.spec import parse_openai_argument
from pytest_fwloop.agents.errors import ProviderError, ProviderErrorKind, SpecError
from pytest_fwloop.agents.openai import OpenAIProvider
from pytest_fwloop.agents.registry import ProviderOptions, parse_role_specs
from pytest_fwloop.agents.retry import RetryPolicy
from pytest_fwloop.agents.role import CallRecord, RoleAgent
from pytest_fwloop.core.records.agent_protocol import (
    AgentRequest,
    ReviewerAnswer,
    Role,
    load_schema,
)

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from pytest_fwloop.agents.base import Provider

REVIEWER_ANSWER: dict[str, object] = {
    "decision": "approve",
    "must_fix": [],
    "risk": 0.1,
    "summary": "bounded wait, fine",
}
SECRET = "sk-test-0123456789abcdefSECRET"


def completion(content: str | None = json.dumps(REVIEWER_ANSWER), **message: object) -> bytes:
    """A chat.completion body as OpenAI sends it."""
    return json.dumps(
        {
            "id": "chatcmpl-abc123",
            "object": "chat.completion",
            "created": 1735689600,
            "model": "qwen2.5-coder",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content, **message},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 812, "completion_tokens": 64, "total_tokens": 876},
        }
    ).encode()


def error_body(message: str, kind: str = "invalid_request_error") -> bytes:
    return json.dumps({"error": {"message": message, "type": kind, "code": None}}).encode()


@dataclasses.dataclass(frozen=True)
class Reply:
    """What the server does with one request: answer, or `reset`, `stall`, `cut` the exchange,
    or `trickle` the body a byte at a time."""

    status: int = 200
    body: bytes = dataclasses.field(default_factory=completion)
    headers: tuple[tuple[str, str], ...] = ()
    action: str = "answer"


@dataclasses.dataclass(frozen=True)
class Seen:
    path: str
    headers: dict[str, str]
    body: dict[str, object]


class ChatServer:
    """An OpenAI-compatible endpoint on an ephemeral 127.0.0.1 port; the last reply repeats."""

    def __init__(self) -> None:
        self.replies: list[Reply] = [Reply()]
        self.seen: list[Seen] = []
        self.release = threading.Event()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(length))
                server.seen.append(Seen(self.path, dict(self.headers.items()), body))
                reply = server.replies.pop(0) if len(server.replies) > 1 else server.replies[0]
                self.close_connection = True
                if reply.action == "reset":
                    # SO_LINGER 0: close() sends RST instead of FIN.
                    self.connection.setsockopt(
                        socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)
                    )
                    self.connection.close()
                    return
                if reply.action == "stall":
                    server.release.wait(30)
                    return
                self.send_response(reply.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(reply.body)))
                for name, value in reply.headers:
                    self.send_header(name, value)
                self.end_headers()
                if reply.action == "trickle":
                    for byte in reply.body:
                        self.wfile.write(bytes([byte]))
                        self.wfile.flush()
                        if server.release.wait(0.05):
                            return
                    return
                self.wfile.write(
                    reply.body[: len(reply.body) // 2] if reply.action == "cut" else reply.body
                )

            def log_message(self, format: str, *args: object) -> None:
                """Quiet: the test asserts on `seen`, not on an access log."""

        class Server(ThreadingHTTPServer):
            daemon_threads = True

            def handle_error(self, request: object, client_address: object) -> None:
                """A reset or cut connection is the point of the test, not a server bug."""

        self.httpd = Server(("127.0.0.1", 0), Handler)
        # A short poll keeps shutdown() quick; the default half second adds up over the tests.
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True
        )
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def close(self) -> None:
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join()


@pytest.fixture(autouse=True)
def hermetic_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """No proxy may carry 127.0.0.1 traffic elsewhere, and no real key may leak in."""
    for name in (
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "ALL_PROXY",
        "http_proxy",
        "https_proxy",
        "all_proxy",
        "OPENAI_API_KEY",
        "FWLOOP_API_KEY_ENV",
    ):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def server() -> Iterator[ChatServer]:
    chat = ChatServer()
    yield chat
    chat.close()


def make_request(tmp_path: Path, role: Role = "reviewer") -> AgentRequest:
    return AgentRequest.model_validate(
        {
            "role": role,
            "iteration": 3,
            "goal": "make every selected test pass",
            "workspace": str(tmp_path),
            "schema": load_schema(role),
            "patch": "--- a/src/uart.c\n+++ b/src/uart.c\n@@ -1 +1 @@\n-x\n+y\n",
        }
    )


def reviewer(
    providers: list[Provider], records: list[CallRecord], sleeps: list[float], timeout: float = 10
) -> RoleAgent:
    return RoleAgent(
        "reviewer",
        providers,
        load_schema("reviewer"),
        records.append,
        timeout=timeout,
        retry_policy=RetryPolicy(max_retries=2, base_delay=0.001),
        sleep=sleeps.append,
    )


def provider(server: ChatServer, api_key_env: str | None = None) -> OpenAIProvider:
    return OpenAIProvider("qwen2.5-coder", server.url, api_key_env=api_key_env)


@dataclasses.dataclass
class Asked:
    """One reviewer ask through the provider: its answer or error, its records, its pauses."""

    answer: ReviewerAnswer | None = None
    error: ProviderError | None = None
    records: list[CallRecord] = dataclasses.field(default_factory=list)
    sleeps: list[float] = dataclasses.field(default_factory=list)


def ask(server: ChatServer, tmp_path: Path, timeout: float = 10) -> Asked:
    asked = Asked()
    agent = reviewer([provider(server)], asked.records, asked.sleeps, timeout)
    try:
        answer = agent.ask(make_request(tmp_path))
    except ProviderError as exc:
        asked.error = exc
    else:
        assert isinstance(answer, ReviewerAnswer)
        asked.answer = answer
    return asked


def test_success_posts_system_and_user_messages_with_the_schema(
    server: ChatServer, tmp_path: Path
) -> None:
    asked = ask(server, tmp_path)
    assert asked.error is None
    assert asked.answer == ReviewerAnswer.model_validate(REVIEWER_ANSWER)
    (seen,) = server.seen
    assert seen.path == "/v1/chat/completions"
    assert "authorization" not in {name.lower() for name in seen.headers}  # no key, no header
    assert seen.body["model"] == "qwen2.5-coder"
    messages = seen.body["messages"]
    assert isinstance(messages, list)
    assert [m["role"] for m in messages] == ["system", "user"]
    assert "You are the reviewer" in messages[0]["content"]
    user = json.loads(messages[1]["content"])
    assert user["patch"].startswith("--- a/src/uart.c")
    assert "schema" not in user  # it travels in response_format and the system message
    schema = load_schema("reviewer")
    del schema["$schema"], schema["$id"]
    assert seen.body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "reviewer_answer", "schema": schema, "strict": False},
    }
    (record,) = asked.records
    assert (record.provider, record.error_kind, record.stderr) == (
        f"openai:qwen2.5-coder@{server.url}",
        None,
        "",
    )
    assert record.usage == {"input_tokens": 812, "output_tokens": 64}
    assert asked.sleeps == []


def test_the_key_comes_from_the_environment_and_never_reaches_a_record(
    server: ChatServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FWLOOP_API_KEY_ENV", "TEAM_LLM_KEY")
    monkeypatch.setenv("TEAM_LLM_KEY", SECRET)
    # A careless server echoes the credentials it was sent.
    server.replies = [
        Reply(500, error_body(f"upstream failed for Bearer {SECRET}", "server_error")),
        Reply(401, error_body(f"Incorrect API key provided: {SECRET}")),
    ]
    asked = ask(server, tmp_path)
    assert asked.answer is None
    assert isinstance(asked.error, ProviderError)
    assert asked.error.kind is ProviderErrorKind.PROVIDER_AUTH_ERROR
    assert [seen.headers["Authorization"] for seen in server.seen] == [f"Bearer {SECRET}"] * 2
    assert asked.error.message == (
        f"HTTP 401 from {server.url}/chat/completions: Incorrect API key provided: ***; "
        "check the key in $TEAM_LLM_KEY"
    )
    assert [r.error_kind for r in asked.records] == [
        "provider_network_error",
        "provider_auth_error",
    ]
    for record in asked.records:
        assert SECRET not in json.dumps(dataclasses.asdict(record), default=str)
    assert SECRET not in str(asked.error)


def test_the_configured_key_variable_wins_over_the_defaults(
    server: ChatServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-default-key-not-this-one")
    monkeypatch.setenv("FWLOOP_API_KEY_ENV", "OTHER_KEY")
    monkeypatch.setenv("LAB_KEY", SECRET)
    provider(server, api_key_env="LAB_KEY").call(make_request(tmp_path), timeout=10)
    monkeypatch.delenv("FWLOOP_API_KEY_ENV")
    provider(server).call(make_request(tmp_path), timeout=10)
    assert [seen.headers["Authorization"] for seen in server.seen] == [
        f"Bearer {SECRET}",
        "Bearer sk-default-key-not-this-one",
    ]


def test_a_server_error_is_retried_then_answers(server: ChatServer, tmp_path: Path) -> None:
    server.replies = [Reply(500, error_body("The server had an error", "server_error")), Reply()]
    asked = ask(server, tmp_path)
    assert asked.error is None
    assert asked.answer is not None
    assert [(r.retry_count, r.error_kind) for r in asked.records] == [
        (0, "provider_network_error"),
        (1, None),
    ]
    assert asked.records[0].errors == [
        f"HTTP 500 from {server.url}/chat/completions: The server had an error"
    ]
    assert str(asked.records[1].retry_reason).startswith("provider_network_error: HTTP 500")
    assert len(asked.sleeps) == 1


def test_retry_after_seconds_is_honoured(server: ChatServer, tmp_path: Path) -> None:
    server.replies = [
        Reply(429, error_body("Rate limit reached", "requests"), (("Retry-After", "7"),)),
        Reply(),
    ]
    asked = ask(server, tmp_path)
    assert asked.error is None
    assert [r.error_kind for r in asked.records] == ["provider_rate_limited", None]
    (pause,) = asked.sleeps
    assert pause >= 7
    assert "Retry-After 7 s" in str(asked.records[1].retry_reason)


def test_retry_after_as_an_http_date_is_honoured(server: ChatServer, tmp_path: Path) -> None:
    when = datetime.now(timezone.utc) + timedelta(seconds=30)
    server.replies = [
        Reply(
            429,
            error_body("slow down", "requests"),
            (("Retry-After", format_datetime(when, usegmt=True)),),
        ),
        Reply(),
    ]
    asked = ask(server, tmp_path)
    assert asked.error is None
    (pause,) = asked.sleeps
    assert 28 <= pause <= 30  # whole seconds in the header, and time passes


@pytest.mark.parametrize("status", [401, 403])
def test_auth_errors_fail_over_at_once(server: ChatServer, tmp_path: Path, status: int) -> None:
    server.replies = [Reply(status, error_body("invalid api key"))]
    asked = ask(server, tmp_path)
    assert isinstance(asked.error, ProviderError)
    assert asked.error.kind is ProviderErrorKind.PROVIDER_AUTH_ERROR
    assert asked.error.message.endswith("invalid api key; put the API key in $OPENAI_API_KEY")
    assert (len(server.seen), asked.sleeps) == (1, [])


def test_a_reset_connection_is_a_network_error(server: ChatServer, tmp_path: Path) -> None:
    server.replies = [Reply(action="reset")]
    with pytest.raises(ProviderError) as caught:
        provider(server).call(make_request(tmp_path), timeout=10)
    assert caught.value.kind is ProviderErrorKind.PROVIDER_NETWORK_ERROR
    assert caught.value.message.startswith(f"cannot reach {server.url}/chat/completions: ")
    assert caught.value.message.endswith("check the URL and that the server is running")


def test_a_refused_connection_is_a_network_error(tmp_path: Path) -> None:
    with socket.socket() as probe:  # a port nobody listens on once this closes
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(ProviderError) as caught:
        OpenAIProvider("m", f"http://127.0.0.1:{port}/v1").call(make_request(tmp_path), 10)
    assert caught.value.kind is ProviderErrorKind.PROVIDER_NETWORK_ERROR
    assert "refused" in caught.value.message.lower()


def test_a_stall_past_the_timeout_is_provider_timeout(server: ChatServer, tmp_path: Path) -> None:
    server.replies = [Reply(action="stall")]
    with pytest.raises(ProviderError) as caught:
        provider(server).call(make_request(tmp_path), timeout=0.3)
    assert caught.value.kind is ProviderErrorKind.PROVIDER_TIMEOUT
    assert caught.value.message == (
        f"{server.url}/chat/completions gave no answer within 0.3 s; "
        "raise the agent timeout or use a faster model or server"
    )


def test_a_body_trickling_past_the_timeout_is_provider_timeout(
    server: ChatServer, tmp_path: Path
) -> None:
    """Every byte comes well within the timeout; the whole body does not."""
    server.replies = [Reply(action="trickle")]
    with pytest.raises(ProviderError) as caught:
        provider(server).call(make_request(tmp_path), timeout=0.3)
    assert caught.value.kind is ProviderErrorKind.PROVIDER_TIMEOUT


def test_a_redirect_is_not_followed(server: ChatServer, tmp_path: Path) -> None:
    server.replies = [Reply(307, b"", (("Location", "/v2/chat/completions"),)), Reply()]
    with pytest.raises(ProviderError) as caught:
        provider(server).call(make_request(tmp_path), timeout=10)
    assert caught.value.message.startswith(f"HTTP 307 from {server.url}/chat/completions")
    assert [seen.path for seen in server.seen] == ["/v1/chat/completions"]


def test_the_proxy_the_environment_names_carries_the_call(
    server: ChatServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As `http_proxy` says: the request reaches the proxy (here the server itself) with the
    API's whole URL, and the API's host is resolved there, not here."""
    monkeypatch.setenv("http_proxy", f"http://127.0.0.1:{server.httpd.server_address[1]}")
    for name in ("no_proxy", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
    chat = OpenAIProvider("qwen2.5-coder", "http://llm.lab.invalid/v1")
    assert chat.call(make_request(tmp_path), timeout=10).text == json.dumps(REVIEWER_ANSWER)
    assert [seen.path for seen in server.seen] == ["http://llm.lab.invalid/v1/chat/completions"]


def test_a_body_cut_off_mid_way_is_a_network_error(server: ChatServer, tmp_path: Path) -> None:
    # The HTTP framing says the body is incomplete: the connection failed, a retry may not.
    server.replies = [Reply(action="cut")]
    with pytest.raises(ProviderError) as caught:
        provider(server).call(make_request(tmp_path), timeout=10)
    assert caught.value.kind is ProviderErrorKind.PROVIDER_NETWORK_ERROR


def test_truncated_json_is_bad_output(server: ChatServer, tmp_path: Path) -> None:
    # Complete as HTTP, broken as JSON: the server's fault, and not worth retrying.
    server.replies = [Reply(body=completion()[:90])]
    with pytest.raises(ProviderError) as caught:
        provider(server).call(make_request(tmp_path), timeout=10)
    assert caught.value.kind is ProviderErrorKind.PROVIDER_BAD_OUTPUT
    assert caught.value.message.startswith(
        f"{server.url}/chat/completions answered HTTP 200 without a chat completion (body: "
    )


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            completion(None, refusal="I can't help with that."),
            "the completion has no choices[0].message.content; "
            "the model refused: I can't help with that.",
        ),
        (b'{"choices": []}', "without a chat completion (choices: List should have at least 1"),
        (b'{"object": "list", "data": []}', "without a chat completion (choices: Field required"),
    ],
)
def test_a_completion_without_content_is_bad_output(
    server: ChatServer, tmp_path: Path, body: bytes, message: str
) -> None:
    server.replies = [Reply(body=body)]
    with pytest.raises(ProviderError) as caught:
        provider(server).call(make_request(tmp_path), timeout=10)
    assert caught.value.kind is ProviderErrorKind.PROVIDER_BAD_OUTPUT
    assert message in caught.value.message


def test_an_unknown_model_is_bad_output_with_a_hint(server: ChatServer, tmp_path: Path) -> None:
    server.replies = [Reply(404, json.dumps({"error": "model 'qwen2.5-coder' not found"}).encode())]
    with pytest.raises(ProviderError) as caught:
        provider(server).call(make_request(tmp_path), timeout=10)
    assert caught.value.kind is ProviderErrorKind.PROVIDER_BAD_OUTPUT
    assert caught.value.message == (
        f"HTTP 404 from {server.url}/chat/completions: model 'qwen2.5-coder' not found; "
        "check the model name and that the URL is the API base (…/v1)"
    )


def test_response_format_falls_back_and_remembers(server: ChatServer, tmp_path: Path) -> None:
    server.replies = [
        Reply(400, error_body("response_format type json_schema is not supported")),
        Reply(400, error_body("Unsupported value: 'response_format.type'")),
        Reply(),
    ]
    chat = provider(server)
    records: list[CallRecord] = []
    reviewer([chat], records, []).ask(make_request(tmp_path))
    reviewer([chat], records, []).ask(make_request(tmp_path))
    formats = [seen.body.get("response_format") for seen in server.seen]
    assert [f["type"] if isinstance(f, dict) else f for f in formats] == [
        "json_schema",
        "json_object",
        None,
        None,  # the next call starts where the last one ended
    ]
    first, second = records
    assert first.error_kind is None
    assert first.stderr.splitlines() == [
        f"{server.url}/chat/completions refused response_format json_schema (HTTP 400: "
        "response_format type json_schema is not supported); sending json_object from now on",
        f"{server.url}/chat/completions refused response_format json_object (HTTP 400: "
        "Unsupported value: 'response_format.type'); sending none from now on",
    ]
    assert second.stderr == ""


def test_a_400_about_something_else_is_not_a_format_problem(
    server: ChatServer, tmp_path: Path
) -> None:
    server.replies = [Reply(400, error_body("Invalid 'messages[1].content': string too long"))]
    with pytest.raises(ProviderError) as caught:
        provider(server).call(make_request(tmp_path), timeout=10)
    assert caught.value.kind is ProviderErrorKind.PROVIDER_BAD_OUTPUT
    assert len(server.seen) == 1


@pytest.mark.parametrize(
    ("argument", "model", "url"),
    [
        ("qwen2.5-coder@http://127.0.0.1:8000/v1", "qwen2.5-coder", "http://127.0.0.1:8000/v1"),
        ("gpt-4o@https://api.openai.com/v1/", "gpt-4o", "https://api.openai.com/v1"),
        ("claude-3@20240229@HTTPS://llm.lab:443/v1", "claude-3@20240229", "HTTPS://llm.lab:443/v1"),
    ],
)
def test_openai_specs_split_at_the_url(argument: str, model: str, url: str) -> None:
    assert parse_openai_argument(argument) == (model, url)


@pytest.mark.parametrize(
    ("spec", "problem"),
    [
        ("openai:qwen", "'openai:qwen' has no @URL; write openai:MODEL@URL"),
        ("openai:qwen@ftp://host/v1", "'ftp://host/v1' is not an http:// or https:// URL"),
        ("openai:@http://127.0.0.1:8000/v1", "the model before @http://127.0.0.1:8000/v1 is empty"),
        ("openai:qwen coder@http://h/v1", "the model 'qwen coder' contains whitespace"),
        ("openai:qwen@http:///v1", "the URL 'http:///v1' has no host"),
        ("openai:", "'openai:' needs an argument; write it as openai:MODEL@URL"),
    ],
)
def test_bad_openai_specs_name_the_bad_part(tmp_path: Path, spec: str, problem: str) -> None:
    with pytest.raises(SpecError) as caught:
        parse_role_specs(f"rules,{spec}", "coder", tmp_path)
    assert str(caught.value).startswith(f"fwloop: --fwloop-coder=rules,{spec}: {problem}")
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(
    "spec",
    [
        f"openai:gpt-4o@https://api.openai.com/v1?api_key={SECRET[3:]}",
        f"openai:gpt-4o@https://user:{SECRET}@llm.lab/v1",
        f"openai:{SECRET}@https://api.openai.com/v1",
    ],
)
def test_a_key_in_the_spec_is_refused_without_being_shown(tmp_path: Path, spec: str) -> None:
    with pytest.raises(SpecError) as caught:
        parse_role_specs(spec, "coder", tmp_path)
    assert str(caught.value) == (
        "fwloop: --fwloop-coder: the spec seems to contain a credential (not shown); put the "
        "API key in $OPENAI_API_KEY or the variable named by fwloop_api_key_env, never on the "
        "command line"
    )
    assert SECRET[3:] not in str(caught.value)


def test_the_registry_passes_the_key_variable(tmp_path: Path) -> None:
    (chat,) = parse_role_specs(
        "openai:qwen@http://127.0.0.1:8000/v1", "coder", tmp_path, ProviderOptions("LAB_KEY")
    )
    assert isinstance(chat, OpenAIProvider)
    assert (chat.spec, chat.key_env()) == ("openai:qwen@http://127.0.0.1:8000/v1", "LAB_KEY")


def truncating(prompt_tokens: int, finish_reason: str = "stop") -> bytes:
    """A completion from a server that read only `prompt_tokens` of the prompt (Ollama with its
    default context) or stopped the answer at its limit."""
    body = json.loads(completion())
    body["usage"]["prompt_tokens"] = prompt_tokens
    body["choices"][0]["finish_reason"] = finish_reason
    return json.dumps(body).encode()


def test_a_prompt_cut_short_silently_is_said_with_the_fix(
    server: ChatServer, tmp_path: Path
) -> None:
    """Ollama keeps the last 4,096 tokens of a longer prompt and answers anyway: the answer of a
    model that never saw the failures is not taken, and the error names the server flags."""
    server.replies = [Reply(body=truncating(4096))]
    request = make_request(tmp_path).model_copy(update={"build_diagnostics": "x" * 60_000})
    agent = reviewer([provider(server)], [], [], 10)
    with pytest.raises(ProviderError) as caught:
        agent.ask(request)
    assert caught.value.kind is ProviderErrorKind.PROVIDER_BAD_OUTPUT
    message = caught.value.message
    assert "read 4096 prompt tokens" in message
    assert "cut the prompt short" in message
    assert "OLLAMA_CONTEXT_LENGTH" in message
    assert "-c 32768" in message
    assert "--max-model-len" in message


def test_a_small_request_with_few_tokens_is_no_truncation(
    server: ChatServer, tmp_path: Path
) -> None:
    server.replies = [Reply(body=truncating(300))]
    assert ask(server, tmp_path).error is None


def test_an_answer_stopped_at_the_token_limit_is_said(server: ChatServer, tmp_path: Path) -> None:
    server.replies = [Reply(body=truncating(812, "length"))]
    asked = ask(server, tmp_path)
    assert asked.error is not None
    assert asked.error.kind is ProviderErrorKind.PROVIDER_BAD_OUTPUT
    assert "finish_reason length" in asked.error.message
    assert "OLLAMA_CONTEXT_LENGTH" in asked.error.message


def tool_call_reply(*calls: tuple[str, dict[str, Any]]) -> Reply:
    """An assistant turn that calls tools, as OpenAI sends it (`arguments` a JSON string)."""
    body = json.loads(completion(None))
    body["choices"][0]["message"]["tool_calls"] = [
        {
            "id": f"call_{i}",
            "type": "function",
            "function": {"name": name, "arguments": json.dumps(arguments)},
        }
        for i, (name, arguments) in enumerate(calls)
    ]
    body["choices"][0]["finish_reason"] = "tool_calls"
    return Reply(body=json.dumps(body).encode())


CODER_ANSWER = {
    "analysis": {"root_cause": "r", "hypotheses": [], "confidence": 0.9},
    "patch": "",
    "summary": "s",
}


def coder_with_tools(server: ChatServer, tmp_path: Path) -> tuple[OpenAIProvider, AgentRequest]:
    from pytest_fwloop.workspace.confined_read import ToolReader

    root = tmp_path / "fw"
    (root / "src").mkdir(parents=True)
    (root / "src" / "crc8.c").write_text("#define CRC8_INIT 0xFFu\n")
    (tmp_path / "victim.txt").write_text("outside")
    chat = OpenAIProvider("qwen2.5-coder", server.url, reader=ToolReader(root))
    return chat, make_request(tmp_path, "coder").model_copy(update={"patch": ""})


def test_a_coder_may_read_the_tree_through_tools_before_it_answers(
    server: ChatServer, tmp_path: Path
) -> None:
    chat, request = coder_with_tools(server, tmp_path)
    server.replies = [
        tool_call_reply(
            ("read_file", {"path": "src/crc8.c"}), ("read_file", {"path": "../victim.txt"})
        ),
        Reply(body=completion(json.dumps(CODER_ANSWER))),
    ]
    answer = chat.call(request, 10)
    assert json.loads(answer.text) == CODER_ANSWER
    first, second = server.seen
    # The first turn proves the server does tools: it must call one.
    assert (first.body["tool_choice"], second.body["tool_choice"]) == ("required", "auto")
    assert chat.server.tools == "taken"
    tools = first.body["tools"]
    assert isinstance(tools, list)
    assert [t["function"]["name"] for t in tools] == ["read_file", "search", "list_dir"]
    messages = second.body["messages"]
    assert isinstance(messages, list)
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "tool", "tool"]
    assert messages[2]["tool_calls"][0]["function"]["name"] == "read_file"
    assert "1: #define CRC8_INIT 0xFFu" in messages[3]["content"]
    assert messages[4]["content"].startswith("error: ")
    assert "outside" not in messages[4]["content"]
    assert [call["refused"] for call in answer.conversation.tool_calls] == [False, True]
    assert "2 tool call(s), 1 refused" in answer.stderr
    assert answer.usage["input_tokens"] == 2 * 812  # both turns counted


def test_a_server_without_function_calling_is_asked_again_without_tools_once(
    server: ChatServer, tmp_path: Path
) -> None:
    chat, request = coder_with_tools(server, tmp_path)
    refusal = error_body('"auto" tool choice requires --enable-auto-tool-choice to be set')
    server.replies = [Reply(400, refusal), Reply(body=completion(json.dumps(CODER_ANSWER)))]
    answer = chat.call(request, 10)
    assert json.loads(answer.text) == CODER_ANSWER
    assert "tools" in server.seen[0].body
    assert "tools" not in server.seen[1].body
    assert "refused tools" in answer.stderr
    chat.call(request, 10)  # remembered: no tools offered again
    assert "tools" not in server.seen[2].body


def test_a_model_that_keeps_calling_tools_is_stopped_with_a_reason(
    server: ChatServer, tmp_path: Path
) -> None:
    chat, request = coder_with_tools(server, tmp_path)
    server.replies = [tool_call_reply(*[("list_dir", {"path": "."})] * 10)]  # repeats forever
    with pytest.raises(ProviderError) as caught:
        chat.call(request, 30)
    assert caught.value.kind is ProviderErrorKind.PROVIDER_BAD_OUTPUT
    assert "after it was told to answer" in caught.value.message
    assert server.seen[-1].body["tool_choice"] == "none"
    assert len(server.seen) == 4  # 30 calls asked: 24 answered, then told to answer


def test_tools_are_not_offered_to_a_reviewer_or_when_turned_off(
    server: ChatServer, tmp_path: Path
) -> None:
    chat, request = coder_with_tools(server, tmp_path)
    server.replies = [Reply(body=completion(json.dumps(CODER_ANSWER)))]
    OpenAIProvider("m", server.url).call(request, 10)
    assert "tools" not in server.seen[-1].body
    server.replies = [Reply()]
    chat.call(make_request(tmp_path), 10)
    assert "tools" not in server.seen[-1].body
