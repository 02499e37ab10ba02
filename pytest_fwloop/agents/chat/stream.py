"""A streamed chat completion (`"stream": true`, server-sent events) put back together.

A streamed call is one a server can drop: when the loop gives up on it (its timeout, a Ctrl-C)
it closes the connection, and servers that notice (llama-cpp-python, llama.cpp, vLLM) stop
generating instead of computing an answer no one reads. The events are `data: {chunk}` lines
ending with `data: [DONE]`; each chunk carries a `delta` of the message, the tool calls in
pieces by `index`, and the last ones `finish_reason`, `usage` and llama.cpp's `timings`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any


class StreamError(ValueError):
    """The stream is not one of chat-completion chunks; the message says where."""


@dataclass
class StreamAssembler:
    """Feed it the body's lines as they come; `completion()` is the whole answer as a
    non-streamed response would have been, or `error` the error event a server sent."""

    content: list[str] = field(default_factory=list)
    tool_calls: dict[int, dict[str, Any]] = field(default_factory=dict)
    finish_reason: str | None = None
    usage: dict[str, Any] | None = None
    timings: dict[str, Any] | None = None
    #: An `{"error": …}` event (vLLM and llama.cpp report failures mid-stream this way).
    error: dict[str, Any] | None = None
    done: bool = False
    chunks: int = 0
    _pending: bytearray = field(default_factory=bytearray)

    def feed(self, data: bytes) -> None:
        """Bytes of the body as they arrived; whole lines are read, the rest waits."""
        self._pending += data
        while (end := self._pending.find(b"\n")) >= 0:
            line = bytes(self._pending[:end]).strip()
            del self._pending[: end + 1]
            self._line(line.decode("utf-8", errors="replace"))

    def _line(self, line: str) -> None:
        if not line.startswith("data:"):
            return  # `event:`, `id:`, comments such as sse-starlette's `: ping`, blank lines
        payload = line[len("data:") :].strip()
        if payload == "[DONE]":
            self.done = True
            return
        try:
            chunk = json.loads(payload)
        except json.JSONDecodeError:
            raise StreamError(f"an event that is not JSON: {payload[:120]!r}") from None
        if not isinstance(chunk, dict):
            raise StreamError(f"an event that is not a JSON object: {payload[:120]!r}")
        self.chunks += 1
        if "error" in chunk:
            self.error = chunk
            return
        self.usage = chunk.get("usage") or self.usage
        self.timings = chunk.get("timings") or self.timings
        for choice in chunk.get("choices") or []:
            if isinstance(choice, dict) and choice.get("index", 0) == 0:
                self._choice(choice)

    def _choice(self, choice: dict[str, Any]) -> None:
        self.finish_reason = choice.get("finish_reason") or self.finish_reason
        delta = choice.get("delta") or {}
        if isinstance(delta.get("content"), str):
            self.content.append(delta["content"])
        for piece in delta.get("tool_calls") or []:
            if not isinstance(piece, dict):
                continue
            call = self.tool_calls.setdefault(
                int(piece.get("index", len(self.tool_calls))),
                {"id": "", "type": "function", "function": {"name": "", "arguments": ""}},
            )
            call["id"] = piece.get("id") or call["id"]
            function = piece.get("function") or {}
            call["function"]["name"] += function.get("name") or ""
            call["function"]["arguments"] += function.get("arguments") or ""

    def size(self) -> int:
        """The bytes of the answer so far, for the same cap as a whole body."""
        calls = sum(len(c["function"]["arguments"]) for c in self.tool_calls.values())
        return sum(len(piece) for piece in self.content) + calls + len(self._pending)

    def completion(self) -> bytes:
        """The answer as one chat-completion body, for the same reading as a non-streamed one."""
        message: dict[str, Any] = {
            "role": "assistant",
            "content": "".join(self.content) if self.content or not self.tool_calls else None,
        }
        if self.tool_calls:
            message["tool_calls"] = [self.tool_calls[i] for i in sorted(self.tool_calls)]
        body: dict[str, Any] = {
            "choices": [{"index": 0, "message": message, "finish_reason": self.finish_reason}]
            if self.chunks
            else [],
        }
        if self.usage is not None:
            body["usage"] = self.usage
        if self.timings is not None:
            body["timings"] = self.timings
        return json.dumps(body).encode()
