"""One chat-completions POST over the standard library's HTTP client, its answer read whole or
as a stream (`"stream": true`), and what the bytes of a body say about the prompt.

The standard library's HTTP client carries it (proxies from the environment, as `*_proxy` and
`no_proxy` say): an HTTP library would be one more dependency in every environment the plugin
is installed in, and httpx's brought anyio's pytest plugin into every pytest run there.
"""

from __future__ import annotations

import http.client
import json
import time
import urllib.error
import urllib.request
from dataclasses import dataclass

from pydantic import ValidationError

from pytest_fwloop.agents.chat.stream import StreamAssembler, StreamError
from pytest_fwloop.agents.chat_wire import ChatCompletion, ErrorBody
from pytest_fwloop.agents.errors import ProviderError, ProviderErrorKind

#: A chat completion is one JSON object; more than this is not an answer.
MAX_BODY_BYTES = 4 * 1024 * 1024
#: No tokenizer packs more than this many bytes of a request into one token: a server that
#: counts fewer prompt tokens than the request's bytes divided by it has cut the prompt short.
MAX_BYTES_PER_TOKEN = 10
#: Below this size a short prompt count proves nothing.
TRUNCATION_MIN_BYTES = 16 * 1024
#: The status `_post` gives a stream that closed before its first event.
EMPTY_STREAM = 0
#: Some gateways turn away the standard library's default user agent.
USER_AGENT = "pytest-fwloop"


@dataclass(frozen=True)
class Reply:
    """One HTTP answer: its status, headers and body (a stream's put together)."""

    status: int
    headers: http.client.HTTPMessage
    body: bytes

    def error_text(self) -> str:
        try:
            text = ErrorBody.model_validate_json(self.body).text()
        except ValidationError:
            text = ""
        return " ".join((text or self.body.decode("utf-8", errors="replace")).split())[:300]


def post(
    url: str, spec: str, data: bytes, headers: dict[str, str], timeout: float, deadline: float
) -> Reply:
    """One POST of the encoded body, read to the end within the deadline (a streamed answer
    put together); transport failures as ProviderError. Leaving early closes the
    connection, which is what tells a streaming server to stop."""
    request = urllib.request.Request(
        url,
        data=data,
        headers={
            "Content-Type": "application/json",
            "Accept": "text/event-stream, application/json",
            **headers,
        },
        method="POST",
    )
    try:
        # The timeout bounds the connection and each stall; the deadline bounds a server
        # that trickles.
        with open_url(request, max(deadline - time.monotonic(), 0.001)) as response:
            return _read(response, url, spec, deadline)
    except StreamError as exc:
        raise ProviderError(
            ProviderErrorKind.PROVIDER_BAD_OUTPUT,
            spec,
            f"{url} streamed {exc}; check that it is an OpenAI-compatible API",
        ) from None
    except (OSError, http.client.HTTPException) as exc:
        why = cause(exc)
        if isinstance(why, TimeoutError):
            raise ProviderError(
                ProviderErrorKind.PROVIDER_TIMEOUT,
                spec,
                f"{url} gave no answer within {timeout:g} s; "
                "raise the agent timeout or use a faster model or server",
            ) from None
        # Refused, reset, DNS, a body cut off mid-way: the server or the path to it.
        raise ProviderError(
            ProviderErrorKind.PROVIDER_NETWORK_ERROR,
            spec,
            f"cannot reach {url}: {str(why) or type(why).__name__}; "
            "check the URL and that the server is running",
        ) from None


def _read(response: http.client.HTTPResponse, url: str, spec: str, deadline: float) -> Reply:
    """The response's body, bounded in size and by the deadline: a stream put together."""
    streamed = response.headers.get_content_type() == "text/event-stream"
    stream = StreamAssembler()
    content = bytearray()
    while chunk := response.read1(65536):
        if streamed:
            stream.feed(chunk)
            if stream.done:
                break
        else:
            content += chunk
        if len(content) > MAX_BODY_BYTES or stream.size() > MAX_BODY_BYTES:
            raise ProviderError(
                ProviderErrorKind.PROVIDER_BAD_OUTPUT,
                spec,
                f"{url} sent more than {MAX_BODY_BYTES} bytes; "
                "a chat completion is one JSON object",
            )
        if time.monotonic() > deadline:
            raise TimeoutError("deadline passed while reading the body")
    if streamed:
        return _streamed(response, stream)
    if response.length:  # the connection closed before Content-Length was read
        raise http.client.IncompleteRead(bytes(content), response.length)
    return Reply(response.status, response.headers, bytes(content))


def _streamed(response: http.client.HTTPResponse, stream: StreamAssembler) -> Reply:
    """The streamed answer as one reply: an error event as the error status it stands for;
    a stream that ended before `[DONE]` or a finish reason as a cut connection."""
    if stream.error is not None:
        error = stream.error.get("error")
        code = error.get("code") if isinstance(error, dict) else None
        status = code if isinstance(code, int) and 400 <= code < 600 else 500
        return Reply(status, response.headers, json.dumps(stream.error).encode())
    if not stream.chunks and not stream.done:
        return Reply(EMPTY_STREAM, response.headers, b"")
    if not stream.done and stream.finish_reason is None:
        raise http.client.IncompleteRead(b"", None)
    return Reply(response.status, response.headers, stream.completion())


def prompt_bytes(body: dict[str, object]) -> int:
    """The bytes of a body that a server reads into the prompt: the messages' text and tool
    calls, and the tools' definitions; what the tokens-a-byte ratio is measured against."""
    total = 0
    messages = body.get("messages")
    for message in messages if isinstance(messages, list) else []:
        if isinstance(message, dict):
            content = message.get("content")
            total += len(content.encode()) if isinstance(content, str) else 0
            if message.get("tool_calls"):
                total += len(json.dumps(message["tool_calls"], separators=(",", ":")).encode())
    if body.get("tools"):
        total += len(json.dumps(body["tools"], separators=(",", ":")).encode())
    return total


def cut_short(completion: ChatCompletion, sent: int) -> str:
    """Why the server's answer cannot be trusted whole, or "": a prompt it truncated silently
    (Ollama's small default context), or an answer stopped at the token limit."""
    usage = completion.usage
    # A count of 0 is none: llama-cpp-python's function-calling format reports 0 for a turn
    # whose prompt came from its cache (measured), and no server truncates a prompt to nothing.
    read = usage.prompt_tokens if usage is not None else None
    if read and sent >= TRUNCATION_MIN_BYTES and read * MAX_BYTES_PER_TOKEN < sent:
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


def open_url(request: urllib.request.Request, timeout: float) -> http.client.HTTPResponse:
    """The response to `request`, whatever its status; the proxies are read from the
    environment now, as each call's."""
    request.add_header("User-Agent", USER_AGENT)
    response: http.client.HTTPResponse = urllib.request.build_opener(_EveryStatus()).open(
        request, timeout=timeout
    )
    return response


def cause(exc: OSError | http.client.HTTPException) -> BaseException:
    """What failed: urllib wraps what fails before the request is sent (connecting, the
    proxy, TLS) in a URLError."""
    if isinstance(exc, urllib.error.URLError) and isinstance(exc.reason, BaseException):
        return exc.reason
    return exc
