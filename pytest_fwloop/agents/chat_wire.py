"""The chat-completions wire format as the `openai:` provider reads it: completions, tool
calls and error bodies (OpenAI, vLLM, Ollama and llama.cpp's server differ in the details)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class ToolFunction(BaseModel):
    model_config = ConfigDict(extra="ignore")

    name: str
    arguments: str


class ToolCall(BaseModel):
    model_config = ConfigDict(extra="ignore")

    id: str
    type: str = "function"
    function: ToolFunction


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="ignore")

    content: str | None = None
    refusal: str | None = None
    tool_calls: list[ToolCall] | None = None


class ChatChoice(BaseModel):
    model_config = ConfigDict(extra="ignore")

    message: ChatMessage
    finish_reason: str | None = None


class PromptTokensDetails(BaseModel):
    model_config = ConfigDict(extra="ignore")

    cached_tokens: int | None = None


class ChatUsage(BaseModel):
    model_config = ConfigDict(extra="ignore")

    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    prompt_tokens_details: PromptTokensDetails | None = None


class Timings(BaseModel):
    """llama.cpp's `timings`: `cache_n` prompt tokens came from its prompt cache."""

    model_config = ConfigDict(extra="ignore")

    cache_n: int | None = None
    prompt_n: int | None = None


class ChatCompletion(BaseModel):
    """The part of a chat-completions response the loop reads."""

    model_config = ConfigDict(extra="ignore")

    choices: list[ChatChoice] = Field(min_length=1)
    usage: ChatUsage | None = None
    timings: Timings | None = None

    def usage_report(self) -> dict[str, float]:
        """The counts in RawAnswer.usage's terms; the cached ones from OpenAI's
        `prompt_tokens_details` or llama.cpp's `timings`."""
        usage = self.usage
        if usage is None:
            return {}
        report: dict[str, float] = {}
        if usage.prompt_tokens is not None:
            report["input_tokens"] = usage.prompt_tokens
        if usage.prompt_tokens_details and usage.prompt_tokens_details.cached_tokens is not None:
            report["cached_input_tokens"] = usage.prompt_tokens_details.cached_tokens
        elif self.timings is not None and self.timings.cache_n is not None:
            report["cached_input_tokens"] = self.timings.cache_n
        if usage.completion_tokens is not None:
            report["output_tokens"] = usage.completion_tokens
        return report


class ErrorDetail(BaseModel):
    model_config = ConfigDict(extra="ignore")

    message: str = ""


class ErrorBody(BaseModel):
    """An error response: OpenAI and llama.cpp nest `error.message`, Ollama sends
    `error` as a string, older vLLM a top-level `message`."""

    model_config = ConfigDict(extra="ignore")

    error: ErrorDetail | str | None = None
    message: str = ""

    def text(self) -> str:
        if isinstance(self.error, ErrorDetail):
            return self.error.message or self.message
        return self.error or self.message
