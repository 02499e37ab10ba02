"""One `openai:` call as a conversation (DESIGN.md §16): the model may call the read-only tools
before it answers; each call is answered, recorded and bounded, and past the limits the model
is told to answer."""

from __future__ import annotations

from dataclasses import dataclass, field

from pytest_fwloop.agents.chat_wire import ChatMessage
from pytest_fwloop.core.records.redaction import Redactor
from pytest_fwloop.core.request.read_tools import MAX_CALLS, MAX_TOTAL_BYTES, TreeReader, run_tool

#: Said whether or not this call offers the tools, so that the system message stays the same
#: bytes when a server turns out to refuse or ignore them (its prompt cache keeps it).
TOOLS_NOTE = (
    "\n\nWhen this request offers the read-only tools read_file, search and list_dir, you may "
    "call them to look at the workspace before you answer (paths relative to the workspace "
    f"root; at most {MAX_CALLS} calls); then answer with the JSON object."
)


#: What a tool result becomes when the results took the prompt past the model's window.
TOO_LONG = (
    "error: this result does not fit the model's context window; answer now with the JSON "
    "object from what you have"
)


def tools_refused(status: int, body: bytes) -> bool:
    """A server that does not do function calling says so in a 400 (vLLM without
    --enable-auto-tool-choice, llama.cpp without --jinja) or a 422."""
    return status in (400, 422) and "tool" in body.decode("utf-8", errors="replace").lower()


@dataclass
class Conversation:
    """One call's messages with the model, and the tool calls it made, bounded."""

    messages: list[dict[str, object]]
    redact: Redactor
    calls: list[dict[str, object]] = field(default_factory=list)
    usage: dict[str, float] = field(default_factory=dict)
    spent: int = 0
    told_to_answer: bool = False
    #: The bytes all tool results may take: MAX_TOTAL_BYTES, or less where the model's window
    #: has less room left after the opening messages.
    max_bytes: int = MAX_TOTAL_BYTES

    def add_usage(self, usage: dict[str, float]) -> dict[str, float]:
        for name, value in usage.items():
            self.usage[name] = self.usage.get(name, 0) + value
        return self.usage

    def answer_calls(self, message: ChatMessage, reader: TreeReader) -> None:
        """Each tool call answered in turn; past the limits, with the order to answer now."""
        assert message.tool_calls is not None
        # `content` is a string even when the model wrote none: llama-cpp-python refuses the
        # usual `null` beside `tool_calls` with HTTP 500 ("Input should be a valid string").
        self.messages.append(
            {
                "role": "assistant",
                "content": message.content or "",
                "tool_calls": [call.model_dump() for call in message.tool_calls],
            }
        )
        for call in message.tool_calls:
            room = self.max_bytes - self.spent
            if len(self.calls) >= MAX_CALLS or room <= 0:
                self.told_to_answer = True
                text, refused = (
                    f"error: the tool limit is reached ({MAX_CALLS} calls, {self.max_bytes} "
                    "bytes); answer now with the JSON object",
                    True,
                )
            else:
                result = run_tool(reader, call.function.name, call.function.arguments, room)
                text, refused = self.redact(result.text), result.refused
            self.spent += len(text.encode())
            self.calls.append(
                {
                    "id": call.id[:100],
                    "name": call.function.name[:100],
                    "arguments": call.function.arguments[:500],
                    "refused": refused,
                    "result_bytes": len(text.encode()),
                    "result": text,
                }
            )
            self.messages.append({"role": "tool", "tool_call_id": call.id, "content": text})

    def drop_results(self, keep: int) -> bool:
        """Tool results past the first `keep` bytes replaced by the order to answer now, once:
        what to do when they took the prompt past the model's window. False when done before,
        or when nothing was past them."""
        if self.told_to_answer:
            return False
        kept, dropped = 0, False
        for message in self.messages:
            if message["role"] != "tool":
                continue
            size = len(str(message["content"]).encode())
            if kept + size > keep:
                message["content"] = TOO_LONG
                dropped = True
            else:
                kept += size
        self.told_to_answer = dropped
        return dropped

    def summary(self) -> list[str]:
        if not self.calls:
            return []
        refused = sum(1 for call in self.calls if call["refused"])
        return [f"{len(self.calls)} tool call(s), {refused} refused, {self.spent} bytes returned"]
