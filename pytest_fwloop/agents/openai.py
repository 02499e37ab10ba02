"""`openai:MODEL@URL`: any OpenAI-compatible chat-completions endpoint (OpenAI, vLLM, Ollama,
llama.cpp server, LM Studio), one POST to `URL/chat/completions` per turn, fitted to the
server's window and streamed (`agents/chat/`).

The key comes from an environment variable, never from the spec: `api_key_env` (resolved from
the options), else the variable named by `$FWLOOP_API_KEY_ENV`, else `$OPENAI_API_KEY`; with no
key no Authorization header is sent, which is what local servers expect.
"""

from __future__ import annotations

import http.client
import json
import os
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pydantic import ValidationError

from pytest_fwloop.agents.base import RawAnswer
from pytest_fwloop.agents.chat.fitting import CONTEXT_REMEDY, fit_to_window, tool_room
from pytest_fwloop.agents.chat.http_errors import http_error, scrub
from pytest_fwloop.agents.chat.refusals import (
    RESPONSE_FORMATS,
    format_refused,
    stream_refused,
    tool_choice_refused,
)
from pytest_fwloop.agents.chat.server import USER_WINDOW, ModelServer
from pytest_fwloop.agents.chat.transport import (
    EMPTY_STREAM,
    MAX_BODY_BYTES,
    Reply,
    cause,
    cut_short,
    open_url,
    post,
    prompt_bytes,
)
from pytest_fwloop.agents.chat_wire import ChatCompletion, ChatMessage
from pytest_fwloop.agents.errors import (
    Conversed,
    ProviderError,
    ProviderErrorKind,
)
from pytest_fwloop.agents.model_io import bare_schema, instructions, request_json
from pytest_fwloop.agents.tool_conversation import TOOLS_NOTE, Conversation, tools_refused
from pytest_fwloop.core.records.redaction import Redactor
from pytest_fwloop.core.request.read_tools import tool_specs
from pytest_fwloop.core.request.token_window import ContextRefusal, answer_room, context_refusal

if TYPE_CHECKING:
    from collections.abc import Callable

    from pytest_fwloop.core.records.agent_protocol import AgentRequest
    from pytest_fwloop.core.request.read_tools import TreeReader

DEFAULT_KEY_ENV = "OPENAI_API_KEY"
#: Names the variable that holds the key, for teams whose key is not in $OPENAI_API_KEY.
KEY_ENV_SELECTOR = "FWLOOP_API_KEY_ENV"
#: How long the check before the baseline waits for the server to answer at all.
PREFLIGHT_SECONDS = 10.0
#: How long each question to the server about itself (its kind, its window) may take.
PROBE_SECONDS = 5.0
#: Said once when a server answered `tool_choice: required` without calling a tool.
TOOLS_IGNORED = (
    "ignores tools (no tool call to tool_choice required): asking with the sources only from "
    "now on; to give the model the read-only tools start llama.cpp `llama-server --jinja`, "
    "llama-cpp-python `--chat_format chatml-function-calling`, vLLM "
    "`--enable-auto-tool-choice --tool-call-parser NAME`, or use an Ollama model that does tools"
)


@dataclass
class _Ask:
    """One call's request as it goes to the server: fitted to the window, its conversation."""

    request: AgentRequest
    talk: Conversation
    #: Whether the request was cut to the window (then it is recorded as sent).
    cut: bool = False
    #: Whether the server has refused this call's request as too long once already.
    refused_once: bool = False
    #: The next request goes without streaming: the stream closed before its first event, and
    #: llama-cpp-python reports a refusal of a streamed request (a prompt over its window, a
    #: `tool_choice` its chat format fails on) only that way.
    unstreamed: bool = False


@dataclass
class OpenAIProvider:
    """POSTs the request to `base_url/chat/completions` as a system message (the instructions and
    the schema) and a user message (the request JSON), fitted to the server's context window and
    streamed where the server streams."""

    model: str
    base_url: str
    api_key_env: str | None = None
    #: The tree the read-only tools read (DESIGN.md §16); None: no tools are offered.
    reader: TreeReader | None = None
    #: `fwloop_response_format`: "auto" negotiates, any other value of RESPONSE_FORMATS is sent
    #: whatever the server says.
    response_format: str = "auto"
    #: `fwloop_model_context`: the window in tokens, over what the server publishes.
    model_context: int | None = None
    #: What the run learned of the server; kept per instance, so it is asked once, not per call.
    server: ModelServer = field(init=False)
    #: Set when the server refused `tool_choice: required`: its tools are used unproven.
    _probe_refused: bool = field(default=False, init=False)

    def __post_init__(self) -> None:
        self.server = ModelServer(self.base_url, self.model)
        if self.response_format != "auto":
            self.server.response_format = self.response_format
        if self.model_context is not None:
            self.server.set_window(self.model_context, USER_WINDOW)

    @property
    def spec(self) -> str:
        return f"openai:{self.model}@{self.base_url}"

    @property
    def url(self) -> str:
        return f"{self.base_url}/chat/completions"

    def key_env(self) -> str:
        return self.api_key_env or os.environ.get(KEY_ENV_SELECTOR) or DEFAULT_KEY_ENV

    def _headers(self) -> dict[str, str]:
        key = os.environ.get(self.key_env(), "")
        return {"Authorization": f"Bearer {key}"} if key else {}

    def body(
        self,
        request: AgentRequest,
        messages: list[dict[str, object]] | None = None,
        tool_choice: str | None = None,
        stream: bool | None = None,
    ) -> dict[str, object]:
        """The POST body: the conversation so far (the system and user messages when None), the
        response format, the tools with `tool_choice` when they are offered, the answer's room
        when the window is known, and the streaming switch."""
        body: dict[str, object] = {
            "model": self.model,
            "messages": messages if messages is not None else self.opening(request),
        }
        mode = self.server.response_format
        if mode == "json_schema":
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {
                    "name": f"{request.role}_answer",
                    "schema": bare_schema(request.schema_),
                    "strict": False,
                },
            }
        elif mode == "json_object":
            body["response_format"] = {"type": "json_object"}
        candidate = (request.model_extra or {}).get("candidate")
        if isinstance(candidate, dict):  # K candidates (DESIGN.md §19): one sample each
            body["seed"] = candidate.get("number")
        if tool_choice is not None:
            body["tools"] = tool_specs()
            body["tool_choice"] = tool_choice
        if self.server.window is not None:
            body["max_tokens"] = answer_room(self.server.window)
        if self.server.streaming if stream is None else stream:
            body["stream"] = True
            body["stream_options"] = {"include_usage": True}
        return body

    def opening(self, request: AgentRequest) -> list[dict[str, object]]:
        """The system message (the same for every call of a role in a run: a server's prompt
        cache keeps it) and the user message (the request)."""
        return [
            {"role": "system", "content": self._system(request)},
            {"role": "user", "content": request_json(request)},
        ]

    def _system(self, request: AgentRequest) -> str:
        """The same for every call of a role in a run: the tools' note goes to every coder
        call of a provider that has them, offered this time or not."""
        note = self.reader is not None and request.role == "coder"
        return instructions(request) + (TOOLS_NOTE if note else "")

    def _offers_tools(self, request: AgentRequest) -> bool:
        return (
            self.reader is not None
            and request.role == "coder"
            and self.server.tools not in ("refused", "ignored")
        )

    def preflight(self) -> None:
        """Before the baseline: the server answers at all (any HTTP status will do; the key and
        the model are judged by the first call), then what it is and how large its window is.
        GETs, so nothing is billed."""
        try:
            with open_url(
                urllib.request.Request(f"{self.base_url}/models", headers=self._headers()),
                PREFLIGHT_SECONDS,
            ):
                pass
        except (OSError, http.client.HTTPException) as exc:
            why = cause(exc)
            raise ProviderError(
                ProviderErrorKind.PROVIDER_NETWORK_ERROR,
                self.spec,
                f"{self.base_url} cannot be reached ({type(why).__name__}: {why}); start the "
                "server or fix the URL",
            ) from None
        self.server.discover(self._fetch)

    def _fetch(self, url: str, data: bytes | None) -> tuple[int, bytes] | None:
        """One probe of the server (`ModelServer.discover`): its status and body, or None."""
        request = urllib.request.Request(url, data=data, headers=self._headers())
        if data is not None:
            request.add_header("Content-Type", "application/json")
        try:
            with open_url(request, PROBE_SECONDS) as response:
                return response.status, response.read(MAX_BODY_BYTES)
        except (OSError, http.client.HTTPException):
            return None

    def call(self, request: AgentRequest, timeout: float) -> RawAnswer:
        key_env = self.key_env()
        key = os.environ.get(key_env, "")
        headers = self._headers()
        deadline = time.monotonic() + timeout
        self.server.discover(self._fetch)
        notes: list[str] = []
        ask = self._ask(request, notes)
        while True:
            talk = ask.talk
            offered, choice, data, prompt = self._encode(request, ask)
            try:
                reply = post(self.url, self.spec, data, headers, timeout, deadline)
            except ProviderError as exc:  # a timeout or a cut connection, maybe turns in
                exc.stderr = scrub("\n".join([*notes, *talk.summary()]), key)
                exc.usage, exc.conversation = (
                    dict(talk.usage),
                    Conversed(tuple(talk.calls), offered, None),
                )
                raise
            if reply.status == EMPTY_STREAM:
                notes.append(
                    f"{self.url} closed the stream before its first event; asking once more "
                    "without streaming for the server's own answer"
                )
                ask.unstreamed = True
                continue
            ask.unstreamed = False  # one request unstreamed, for the server's own answer
            text = reply.error_text() if reply.status >= 300 else ""
            if reply.status >= 300 and self._negotiate(reply, text, choice, notes):
                if choice is not None and not self._offers_tools(request):
                    ask = self._ask(request, notes)  # asked again without the tools' note
                continue
            conversed = Conversed(
                tuple(talk.calls), offered, ask.request.to_wire() if ask.cut else None
            )
            refusal = context_refusal(text) if reply.status >= 400 else None
            if refusal is not None:
                ask = self._refit(request, ask, refusal, prompt, notes, scrub(text, key))
                continue
            # A server may echo what it was sent; the key must not reach the run directory.
            stderr = scrub("\n".join([*notes, *talk.summary()]), key)
            if reply.status >= 300:
                raise http_error(
                    reply, self.spec, self.url, (key, key_env), stderr, talk.usage, conversed
                )
            message, usage = self._message(reply, stderr, len(data), talk, conversed)
            if "input_tokens" in usage:
                self.server.usage_reported = True
                self.server.ratio.learn(prompt, int(usage["input_tokens"]))
            talk.add_usage(usage)
            if choice == "required" and not message.tool_calls:
                self.server.tools = "ignored"
                notes.append(f"{self.url} {TOOLS_IGNORED}")
                stderr = scrub("\n".join([*notes, *talk.summary()]), key)
            if not message.tool_calls:
                return self._final(message, stderr, talk, conversed)
            self._take_tool_turn(message, offered, talk, stderr, conversed)

    def _take_tool_turn(
        self,
        message: ChatMessage,
        offered: bool,
        talk: Conversation,
        stderr: str,
        conversed: Conversed,
    ) -> None:
        """Answer the model's tool calls into the conversation, when tools are still open."""
        if not offered or talk.told_to_answer:
            raise ProviderError(
                ProviderErrorKind.PROVIDER_BAD_OUTPUT,
                self.spec,
                "the model called tools "
                + ("after it was told to answer" if offered else "although none were offered")
                + f" ({len(talk.calls)} call(s) made); a chat completion must end in the "
                "JSON answer",
                stderr=stderr,
                usage=talk.usage,
                conversation=conversed,
            )
        self.server.tools = "taken"
        assert self.reader is not None
        talk.answer_calls(message, self.reader)

    def _encode(self, request: AgentRequest, ask: _Ask) -> tuple[bool, str | None, bytes, int]:
        """The next turn's body: whether tools are offered, the tool choice, the bytes sent
        and the prompt's size in bytes."""
        offered = self._offers_tools(request)
        if offered and self.server.tools == "not offered":
            self.server.tools = "offered"
        choice = self._tool_choice(ask.talk) if offered else None
        streamed = self.server.streaming and not ask.unstreamed
        body = self.body(ask.request, ask.talk.messages, choice, streamed)
        data = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()
        return offered, choice, data, prompt_bytes(body)

    def _tool_choice(self, talk: Conversation) -> str:
        """`required` on the first turn until the server has shown it calls tools (a server
        whose chat template knows no tools answers in text: it ignores them); then `auto`, and
        `none` once the model was told to answer."""
        if talk.told_to_answer:
            return "none"
        if self.server.tools == "offered" and not talk.calls and not self._probe_refused:
            return "required"
        return "auto"

    def _negotiate(self, reply: Reply, text: str, choice: str | None, notes: list[str]) -> bool:
        """Whether the refusal was of a part the server may go without (the response format,
        streaming, `tool_choice: required`, the tools), now left out: then ask again."""
        status, refused = reply.status, f"(HTTP {reply.status}: {text})"
        mode = self.server.response_format
        if self.response_format == "auto" and format_refused(status, text, mode):
            following = RESPONSE_FORMATS[RESPONSE_FORMATS.index(mode) + 1]
            notes.append(
                f"{self.url} refused response_format {mode} {refused}; sending {following} "
                "from now on"
            )
            self.server.response_format = following
            return True
        if self.server.streaming and stream_refused(status, text):
            notes.append(f"{self.url} refused streaming {refused}; asking without it from now on")
            self.server.streaming = False
            return True
        if choice == "required" and tool_choice_refused(status, text):
            notes.append(
                f"{self.url} refused tool_choice required {refused}; offering the tools with "
                "auto from now on"
            )
            self._probe_refused = True
            return True
        if choice is not None and tools_refused(status, reply.body):
            notes.append(f"{self.url} refused tools {refused}; asking without them from now on")
            self.server.tools = "refused"
            return True
        return False

    def _ask(self, request: AgentRequest, notes: list[str]) -> _Ask:
        """The request fitted to the window as far as it is known, in a new conversation whose
        tool results may fill what the window has left."""
        fitted = self._fit(request, notes)
        talk = Conversation(self.opening(fitted), Redactor(os.environ))
        talk.max_bytes = self._tool_room(request, fitted)
        return _Ask(fitted, talk, cut=fitted is not request)

    def _measure(self, request: AgentRequest) -> Callable[[AgentRequest], int]:
        """The prompt bytes of a version of `request`: the system message, which is the same for
        all, the user message, and the tools' definitions when they are offered."""
        fixed = len(self._system(request).encode())
        if self._offers_tools(request):
            fixed += len(json.dumps(tool_specs(), separators=(",", ":")).encode())
        return lambda version: fixed + len(request_json(version).encode())

    def _fit(self, request: AgentRequest, notes: list[str]) -> AgentRequest:
        """`request` cut to the window (as it is, when the window is unknown)."""
        return fit_to_window(self.server, request, self._measure(request), self.spec, notes)

    def _tool_room(self, request: AgentRequest, fitted: AgentRequest) -> int:
        return tool_room(self.server, self._measure(request)(fitted))

    def _refit(
        self,
        request: AgentRequest,
        ask: _Ask,
        refusal: ContextRefusal,
        prompt: int,
        notes: list[str],
        text: str,
    ) -> _Ask:
        """The request fitted again to the window the server's refusal named, once a call; when
        tool results filled the window, the last ones replaced by the order to answer, once; a
        refusal after either ends the call."""
        if refusal.prompt_tokens is not None:
            self.server.ratio.learn(prompt, refusal.prompt_tokens)
        self.server.refused_over(refusal.window)
        if ask.talk.calls and ask.talk.drop_results(self._tool_room(request, ask.request)):
            notes.append(
                f"the tool results took the prompt past the window of {refusal.window} tokens "
                "the server named; those past it were replaced by the order to answer now"
            )
            return ask
        if ask.refused_once or ask.talk.calls:
            raise ProviderError(
                ProviderErrorKind.PROVIDER_BAD_OUTPUT,
                self.spec,
                f"{self.url} refused the request as longer than its window ({text}); "
                f"{CONTEXT_REMEDY}",
                stderr="\n".join(notes),
                usage=ask.talk.usage,
            )
        notes.append(
            f"refitted the request to the window of {refusal.window} tokens the server named "
            f"({text[:200]}), at {self.server.ratio.bytes_per_token:.2f} bytes a token"
        )
        refitted = self._ask(request, notes)
        refitted.refused_once = True
        return refitted

    def _message(
        self, reply: Reply, stderr: str, sent: int, talk: Conversation, conversed: Conversed
    ) -> tuple[ChatMessage, dict[str, float]]:
        """The completion's message, or ProviderError when it is none or was cut short."""
        try:
            completion = ChatCompletion.model_validate_json(reply.body)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(part) for part in first["loc"]) or "body"
            raise ProviderError(
                ProviderErrorKind.PROVIDER_BAD_OUTPUT,
                self.spec,
                f"{self.url} answered HTTP {reply.status} without a chat completion "
                f"({where}: {first['msg']}); check that it is an OpenAI-compatible API",
                stderr=stderr,
                usage=talk.usage,
                conversation=conversed,
            ) from None
        usage = completion.usage_report()
        cut = cut_short(completion, sent)
        if cut:
            raise ProviderError(
                ProviderErrorKind.PROVIDER_BAD_OUTPUT,
                self.spec,
                f"{self.url} {cut}; {CONTEXT_REMEDY}",
                stderr=stderr,
                usage=talk.add_usage(usage),
                conversation=conversed,
            )
        return completion.choices[0].message, usage

    def _final(
        self, message: ChatMessage, stderr: str, talk: Conversation, conversed: Conversed
    ) -> RawAnswer:
        if message.content is None:
            raise ProviderError(
                ProviderErrorKind.PROVIDER_BAD_OUTPUT,
                self.spec,
                "the completion has no choices[0].message.content"
                + (f"; the model refused: {message.refusal}" if message.refusal else ""),
                stderr=stderr,
                usage=talk.usage,
                conversation=conversed,
            )
        return RawAnswer(
            text=message.content, stderr=stderr, usage=talk.usage, conversation=conversed
        )
