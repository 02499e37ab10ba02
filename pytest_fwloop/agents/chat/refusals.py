"""How an OpenAI-compatible server says it will not take a part of the request, read from the
status and the error text together (DESIGN.md §5).

Servers differ in the status: vLLM and OpenAI refuse with 400 or 422, llama-cpp-python reports
its own request validation as HTTP 500 with a pydantic error body. So a 5xx whose body is a
refusal of the request is the server's answer to what was sent, not a network fault: retrying
it cannot help, and the loop says what was refused instead.
"""

from __future__ import annotations

import re

#: response_format modes, best first; a server that refuses one gets the next.
RESPONSE_FORMATS = ("json_schema", "json_object", "none")
#: The `fwloop_response_format` values: `auto` negotiates, the others fix the mode.
RESPONSE_FORMAT_CHOICES = ("auto", *RESPONSE_FORMATS)

# What a server's validator says of a request it will not take: pydantic ("1 validation error",
# "Input should be", "Field required", "Extra inputs"), vLLM and OpenAI ("not supported",
# "Unsupported value", "invalid", "must be").
_REFUSAL = re.compile(
    r"validation errors?\b|input should be|field required|extra inputs|unsupported|"
    r"not supported|invalid|must be|unrecognized|unknown (?:field|parameter)",
    re.IGNORECASE,
)


_STREAM = re.compile(r"\bstream(?:_options)?\b", re.IGNORECASE)


def refuses_request(status: int, text: str) -> bool:
    """A 400 or 422, or a 5xx whose text is the server refusing the request as sent."""
    if status in (400, 422):
        return True
    return status >= 500 and _REFUSAL.search(text) is not None


def format_refused(status: int, text: str, mode: str) -> bool:
    """The server refused the response format `mode`: a 400, 422 or 5xx naming the field or
    the type sent."""
    if not refuses_request(status, text) or mode == "none":
        return False
    lowered = text.lower()
    return any(word in lowered for word in ("response_format", "json_schema", mode))


def stream_refused(status: int, text: str) -> bool:
    """The server refused `stream` or `stream_options`."""
    return refuses_request(status, text) and _STREAM.search(text) is not None


def tool_choice_refused(status: int, text: str) -> bool:
    """The server refused `tool_choice: required`, or failed on it: llama-cpp-python's
    function-calling chat format asserts `auto` and answers an HTTP 500 with an empty message.
    Any 5xx to it counts, so at worst a failure that was not about it costs one more request
    with `auto`."""
    return status >= 500 or (refuses_request(status, text) and "tool_choice" in text.lower())
