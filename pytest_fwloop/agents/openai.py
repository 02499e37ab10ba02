"""`openai:MODEL@URL`: any OpenAI-compatible chat-completions endpoint (OpenAI, vLLM, Ollama,
llama.cpp server, LM Studio), one POST to `URL/chat/completions` per call.

The key comes from an environment variable, never from the spec: `api_key_env` (resolved from
the options), else the variable named by `$FWLOOP_API_KEY_ENV`, else `$OPENAI_API_KEY`; with no
key no Authorization header is sent, which is what local servers expect.

The standard library's HTTP client carries it (proxies from the environment, as `*_proxy` and
`no_proxy` say): an HTTP library would be one more dependency in every environment the plugin
is installed in, and httpx's brought anyio's pytest plugin into every pytest run there.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import TYPE_CHECKING
from urllib.parse import parse_qsl, urlsplit

from pydantic import ValidationError

from pytest_fwloop.agents.base import RawAnswer
from pytest_fwloop.agents.chat_wire import ChatCompletion, ChatMessage, ErrorBody
from pytest_fwloop.agents.errors import (
    ProviderError,
    ProviderErrorKind,
    SpecError,
    kind_of_status,
)
from pytest_fwloop.agents.model_io import bare_schema, instructions, request_json
from pytest_fwloop.agents.retry import parse_retry_after
from pytest_fwloop.agents.tool_conversation import TOOLS_NOTE, Conversation, tools_refused
from pytest_fwloop.core.records.redaction import Redactor
from pytest_fwloop.core.request.read_tools import tool_specs

if TYPE_CHECKING:
    from pytest_fwloop.core.records.agent_protocol import AgentRequest
    from pytest_fwloop.core.request.read_tools import TreeReader

DEFAULT_KEY_ENV = "OPENAI_API_KEY"
#: Names the variable that holds the key, for teams whose key is not in $OPENAI_API_KEY.
KEY_ENV_SELECTOR = "FWLOOP_API_KEY_ENV"
#: A chat completion is one JSON object; more than this is not an answer.
MAX_BODY_BYTES = 4 * 1024 * 1024
#: How long the check before the baseline waits for the server to answer at all.
PREFLIGHT_SECONDS = 10.0
#: response_format modes, best first; a server that rejects one gets the next (DESIGN.md §5).
RESPONSE_FORMATS = ("json_schema", "json_object", "none")
#: No tokenizer packs more than this many bytes of a request into one token: a server that
#: counts fewer prompt tokens than the request's bytes divided by it has cut the prompt short.
MAX_BYTES_PER_TOKEN = 10
#: Below this size a short prompt count proves nothing.
TRUNCATION_MIN_BYTES = 16 * 1024
#: How to give each server room, said whenever a server cuts a request or an answer short.
CONTEXT_REMEDY = (
    "give the server a larger context: Ollama `OLLAMA_CONTEXT_LENGTH=32768 ollama serve` (its "
    "OpenAI route ignores a per-request size; or `PARAMETER num_ctx 32768` in a Modelfile), "
    "llama.cpp `llama-server -c 32768`, vLLM `--max-model-len 32768`; or send less with "
    "fwloop_source_bytes and fwloop_context_bytes"
)
#: Some gateways turn away the standard library's default user agent.
USER_AGENT = "pytest-fwloop"

_URL_AFTER_AT = re.compile(r"@(?=https?://)", re.IGNORECASE)


def parse_openai_argument(argument: str) -> tuple[str, str]:
    """`MODEL@URL` as (model, base URL without a trailing slash); SpecError names the bad part.

    The first `@` followed by `http(s)://` splits, so a model name may itself contain `@`.
    Credentials are refused before this, by the registry, without echoing them.
    """
    split = _URL_AFTER_AT.search(argument)
    if split is None:
        if "@" in argument:
            url = argument.rpartition("@")[2]
            raise SpecError(
                f"'{url}' is not an http:// or https:// URL; write openai:MODEL@URL, "
                "e.g. openai:qwen2.5-coder@http://127.0.0.1:8000/v1"
            )
        raise SpecError(
            f"'openai:{argument}' has no @URL; write openai:MODEL@URL, "
            "e.g. openai:qwen2.5-coder@http://127.0.0.1:8000/v1"
        )
    model, url = argument[: split.start()].strip(), argument[split.end() :].strip()
    if not model:
        raise SpecError(f"the model before @{url} is empty; write openai:MODEL@URL")
    if any(char.isspace() for char in model):
        raise SpecError(f"the model '{model}' contains whitespace; write openai:MODEL@URL")
    parts = urlsplit(url)
    if not parts.hostname:
        raise SpecError(f"the URL '{url}' has no host; write e.g. http://127.0.0.1:8000/v1")
    if parts.fragment or parse_qsl(parts.query):
        raise SpecError(
            f"the URL '{url}' has a query or fragment; give the API's base URL, e.g. "
            "http://127.0.0.1:8000/v1"
        )
    return model, url.rstrip("/")


@dataclass(frozen=True)
class _Reply:
    status: int
    headers: http.client.HTTPMessage
    body: bytes

    def error_text(self) -> str:
        try:
            text = ErrorBody.model_validate_json(self.body).text()
        except ValidationError:
            text = ""
        return " ".join((text or self.body.decode("utf-8", errors="replace")).split())[:300]


@dataclass
class OpenAIProvider:
    """POSTs the request to `base_url/chat/completions` as a system message (the instructions and
    the schema) and a user message (the request JSON)."""

    model: str
    base_url: str
    api_key_env: str | None = None
    #: The tree the read-only tools read (DESIGN.md §16); None: no tools are offered.
    reader: TreeReader | None = None
    #: Index into RESPONSE_FORMATS; kept per instance, so a server is probed once, not per call.
    format_index: int = field(default=0, init=False)
    #: Set when the server refused `tools`: asked without them from then on.
    tools_refused: bool = field(default=False, init=False)

    @property
    def spec(self) -> str:
        return f"openai:{self.model}@{self.base_url}"

    @property
    def url(self) -> str:
        return f"{self.base_url}/chat/completions"

    def key_env(self) -> str:
        return self.api_key_env or os.environ.get(KEY_ENV_SELECTOR) or DEFAULT_KEY_ENV

    def body(
        self,
        request: AgentRequest,
        messages: list[dict[str, object]] | None = None,
        tool_choice: str | None = None,
    ) -> dict[str, object]:
        """The POST body: the conversation so far (the system and user messages when None), the
        response format, and the tools with `tool_choice` when they are offered."""
        body: dict[str, object] = {
            "model": self.model,
            "messages": messages if messages is not None else self.opening(request),
        }
        mode = RESPONSE_FORMATS[self.format_index]
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
        if tool_choice is not None:
            body["tools"] = tool_specs()
            body["tool_choice"] = tool_choice
        return body

    def opening(self, request: AgentRequest) -> list[dict[str, object]]:
        system = instructions(request)
        if self._offers_tools(request):
            system += TOOLS_NOTE
        return [
            {"role": "system", "content": system},
            {"role": "user", "content": request_json(request)},
        ]

    def _offers_tools(self, request: AgentRequest) -> bool:
        return self.reader is not None and request.role == "coder" and not self.tools_refused

    def preflight(self) -> None:
        """Before the baseline: the server answers at all (any HTTP status will do; the key and
        the model are judged by the first call). A GET, so nothing is billed."""
        try:
            with _open(urllib.request.Request(f"{self.base_url}/models"), PREFLIGHT_SECONDS):
                pass
        except (OSError, http.client.HTTPException) as exc:
            cause = _cause(exc)
            raise ProviderError(
                ProviderErrorKind.PROVIDER_NETWORK_ERROR,
                self.spec,
                f"{self.base_url} cannot be reached ({type(cause).__name__}: {cause}); start the "
                "server or fix the URL",
            ) from None

    def call(self, request: AgentRequest, timeout: float) -> RawAnswer:
        key_env = self.key_env()
        key = os.environ.get(key_env, "")
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        deadline = time.monotonic() + timeout
        notes: list[str] = []
        talk = Conversation(self.opening(request), Redactor(os.environ))
        while True:
            offered = self._offers_tools(request)
            choice = ("none" if talk.told_to_answer else "auto") if offered else None
            body = self.body(request, talk.messages, choice)
            data = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()
            sent = len(data)
            reply = self._post(data, headers, timeout, deadline)
            if self._format_refused(reply):
                notes.append(
                    f"{self.url} refused response_format {RESPONSE_FORMATS[self.format_index]} "
                    f"(HTTP {reply.status}: {reply.error_text()}); "
                    f"sending {RESPONSE_FORMATS[self.format_index + 1]} from now on"
                )
                self.format_index += 1
                continue
            if offered and tools_refused(reply.status, reply.body):
                notes.append(
                    f"{self.url} refused tools (HTTP {reply.status}: {reply.error_text()}); "
                    "asking without them from now on"
                )
                self.tools_refused = True
                talk.messages = self.opening(request)
                continue
            # A server may echo what it was sent; the key must not reach the run directory.
            stderr = _scrub("\n".join([*notes, *talk.summary()]), key)
            if reply.status >= 300:
                raise self._http_error(reply, key, key_env, stderr)
            message, usage = self._message(reply, stderr, sent, talk)
            if not message.tool_calls:
                return self._final(message, stderr, talk.add_usage(usage), talk)
            talk.add_usage(usage)
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
                )
            assert self.reader is not None
            talk.answer_calls(message, self.reader)

    def _message(
        self, reply: _Reply, stderr: str, sent: int, talk: Conversation
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
            ) from None
        usage = completion.usage_report()
        cut = _cut_short(completion, sent)
        if cut:
            raise ProviderError(
                ProviderErrorKind.PROVIDER_BAD_OUTPUT,
                self.spec,
                f"{self.url} {cut}; {CONTEXT_REMEDY}",
                stderr=stderr,
                usage=talk.add_usage(usage),
            )
        return completion.choices[0].message, usage

    def _final(
        self, message: ChatMessage, stderr: str, usage: dict[str, float], talk: Conversation
    ) -> RawAnswer:
        if message.content is None:
            raise ProviderError(
                ProviderErrorKind.PROVIDER_BAD_OUTPUT,
                self.spec,
                "the completion has no choices[0].message.content"
                + (f"; the model refused: {message.refusal}" if message.refusal else ""),
                stderr=stderr,
                usage=usage,
            )
        return RawAnswer(
            text=message.content, stderr=stderr, usage=usage, tool_calls=tuple(talk.calls)
        )

    def _format_refused(self, reply: _Reply) -> bool:
        if reply.status != 400 or self.format_index + 1 >= len(RESPONSE_FORMATS):
            return False
        text = reply.body.decode("utf-8", errors="replace").lower()
        return "response_format" in text or "json_schema" in text

    def _post(
        self, data: bytes, headers: dict[str, str], timeout: float, deadline: float
    ) -> _Reply:
        """One POST of the encoded body, read to the end within the deadline; transport
        failures as ProviderError."""
        request = urllib.request.Request(
            self.url,
            data=data,
            headers={"Content-Type": "application/json", "Accept": "application/json", **headers},
            method="POST",
        )
        try:
            # The timeout bounds the connection and each stall; the deadline bounds a server
            # that trickles.
            with _open(request, max(deadline - time.monotonic(), 0.001)) as response:
                content = bytearray()
                while chunk := response.read1(65536):
                    content += chunk
                    if len(content) > MAX_BODY_BYTES:
                        raise ProviderError(
                            ProviderErrorKind.PROVIDER_BAD_OUTPUT,
                            self.spec,
                            f"{self.url} sent more than {MAX_BODY_BYTES} bytes; "
                            "a chat completion is one JSON object",
                        )
                    if time.monotonic() > deadline:
                        raise TimeoutError("deadline passed while reading the body")
                if response.length:  # the connection closed before Content-Length was read
                    raise http.client.IncompleteRead(bytes(content), response.length)
                return _Reply(response.status, response.headers, bytes(content))
        except (OSError, http.client.HTTPException) as exc:
            cause = _cause(exc)
            if isinstance(cause, TimeoutError):
                raise ProviderError(
                    ProviderErrorKind.PROVIDER_TIMEOUT,
                    self.spec,
                    f"{self.url} gave no answer within {timeout:g} s; "
                    "raise the agent timeout or use a faster model or server",
                ) from None
            # Refused, reset, DNS, a body cut off mid-way: the server or the path to it.
            raise ProviderError(
                ProviderErrorKind.PROVIDER_NETWORK_ERROR,
                self.spec,
                f"cannot reach {self.url}: {str(cause) or type(cause).__name__}; "
                "check the URL and that the server is running",
            ) from None

    def _http_error(self, reply: _Reply, key: str, key_env: str, stderr: str) -> ProviderError:
        detail = f"HTTP {reply.status} from {self.url}: {_scrub(reply.error_text(), key)}"
        header = reply.headers.get("Retry-After")
        retry_after = parse_retry_after(header) if header is not None else None
        kind = kind_of_status(reply.status, detail)
        if kind is ProviderErrorKind.PROVIDER_AUTH_ERROR:
            remedy = f"check the key in ${key_env}" if key else f"put the API key in ${key_env}"
            message = f"{detail}; {remedy}"
        elif kind is ProviderErrorKind.PROVIDER_BAD_OUTPUT:
            message = f"{detail}; check the model name and that the URL is the API base (…/v1)"
        else:
            message = detail
        return ProviderError(kind, self.spec, message, retry_after=retry_after, stderr=stderr)


def _cut_short(completion: ChatCompletion, sent: int) -> str:
    """Why the server's answer cannot be trusted whole, or "": a prompt it truncated silently
    (Ollama's small default context), or an answer stopped at the token limit."""
    usage = completion.usage
    read = usage.prompt_tokens if usage is not None else None
    if read is not None and sent >= TRUNCATION_MIN_BYTES and read * MAX_BYTES_PER_TOKEN < sent:
        return (
            f"read {read} prompt tokens of a {sent}-byte request (at least "
            f"{sent // MAX_BYTES_PER_TOKEN} tokens): it cut the prompt short without a word, "
            "so the model never saw all of the failures and the code"
        )
    if completion.choices[0].finish_reason == "length":
        written = usage.completion_tokens if usage is not None else None
        after = f" after {written} tokens" if written is not None else ""
        return f"stopped the answer at its token limit{after} (finish_reason length)"
    return ""


class _EveryStatus(urllib.request.HTTPErrorProcessor):
    """Hands back every response as it came: an error status is a reply to read, not an
    exception, and no redirect is followed (a chat completion is never one)."""

    def http_response(
        self, request: urllib.request.Request, response: http.client.HTTPResponse
    ) -> http.client.HTTPResponse:
        return response

    https_response = http_response


def _open(request: urllib.request.Request, timeout: float) -> http.client.HTTPResponse:
    """The response to `request`, whatever its status; the proxies are read from the
    environment now, as each call's."""
    request.add_header("User-Agent", USER_AGENT)
    response: http.client.HTTPResponse = urllib.request.build_opener(_EveryStatus()).open(
        request, timeout=timeout
    )
    return response


def _cause(exc: OSError | http.client.HTTPException) -> BaseException:
    """What failed: urllib wraps what fails before the request is sent (connecting, the
    proxy, TLS) in a URLError."""
    if isinstance(exc, urllib.error.URLError) and isinstance(exc.reason, BaseException):
        return exc.reason
    return exc


def _scrub(text: str, key: str) -> str:
    return text.replace(key, "***") if key else text
