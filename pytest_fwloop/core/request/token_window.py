"""The arithmetic of a model's context window (DESIGN.md §16): how many bytes of prompt fit into
a window of tokens, learned from what the server itself counted.

Pure: the `openai:` provider feeds it the window the server published (or the user set), the
bytes it sent and the prompt tokens the server reported, and asks how many bytes the next
request may take. A tokenizer is never run here: the ratio is the server's own.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: Where the ratio starts before a server has counted anything: fewer bytes a token than any
#: common tokenizer packs into JSON and code (3.9 measured with SmolLM2's), so a first request
#: fitted with it is not refused for a few tokens.
START_BYTES_PER_TOKEN = 3.0
#: The ratio is never taken above this: a server that counted a cut prompt (Ollama's silent
#: truncation) must not teach the loop to send more.
MAX_LEARNED_BYTES_PER_TOKEN = 6.0
#: Below this many prompt tokens a count says more about the chat template than the text.
MIN_TOKENS_TO_LEARN = 64
#: What a window keeps free for the answer: a quarter of it, within these bounds (a coder's
#: answer with a patch of a few functions is 300-1,500 tokens).
MIN_ANSWER_TOKENS = 512
MAX_ANSWER_TOKENS = 4096
#: What a chat template adds around each message and a tools list, in tokens, beyond the bytes.
TEMPLATE_TOKENS = 64

# llama-cpp-python, vLLM and OpenAI: "This model's maximum context length is 2048 tokens.
# However, you requested 4480 tokens (4480 in the messages, None in the completion)."
_MAXIMUM = re.compile(r"maximum context length is (\d+)", re.IGNORECASE)
_REQUESTED = re.compile(r"you requested (\d+) tokens(?: \((\d+) in the messages)?", re.IGNORECASE)
# llama.cpp's llama-server: `"n_prompt_tokens": 4480, "n_ctx": 2048` beside its message.
_N_CTX = re.compile(r'"n_ctx"\s*:\s*(\d+)')
_N_PROMPT = re.compile(r'"n_prompt_tokens"\s*:\s*(\d+)')


@dataclass(frozen=True)
class ContextRefusal:
    """A server's refusal of a prompt too long for its window, with its numbers."""

    window: int
    #: The prompt's tokens as the server counted them, when it said.
    prompt_tokens: int | None


def context_refusal(text: str) -> ContextRefusal | None:
    """The window (and prompt size) a refusal names, or None when `text` is no such refusal."""
    maximum = _MAXIMUM.search(text)
    if maximum is not None:
        requested = _REQUESTED.search(text)
        prompt = None
        if requested is not None:
            prompt = int(requested.group(2) or requested.group(1))
        return ContextRefusal(int(maximum.group(1)), prompt)
    n_ctx = _N_CTX.search(text)
    if n_ctx is not None:
        n_prompt = _N_PROMPT.search(text)
        return ContextRefusal(int(n_ctx.group(1)), int(n_prompt.group(1)) if n_prompt else None)
    return None


def answer_room(window: int) -> int:
    """The tokens a window of `window` keeps free for the answer."""
    return max(MIN_ANSWER_TOKENS, min(MAX_ANSWER_TOKENS, window // 4))


@dataclass
class TokenRatio:
    """Bytes a token, as the server's counts showed them over a run: the smallest seen, so the
    densest prompt so far sets what fits (a request of code packs fewer bytes a token than one
    of prose)."""

    bytes_per_token: float = START_BYTES_PER_TOKEN
    #: Whether a server count has set it (the report says "measured" or "assumed").
    measured: bool = False

    def learn(self, sent_bytes: int, prompt_tokens: int) -> None:
        """One prompt of `sent_bytes` that the server counted as `prompt_tokens`."""
        if prompt_tokens < MIN_TOKENS_TO_LEARN or sent_bytes <= 0:
            return
        seen = min(sent_bytes / prompt_tokens, MAX_LEARNED_BYTES_PER_TOKEN)
        self.bytes_per_token = seen if not self.measured else min(self.bytes_per_token, seen)
        self.measured = True

    def tokens(self, sent_bytes: int) -> int:
        """The tokens a prompt of `sent_bytes` is expected to take, template included."""
        return int(sent_bytes / self.bytes_per_token) + TEMPLATE_TOKENS

    def prompt_bytes(self, window: int) -> int:
        """The most bytes of prompt a window of `window` tokens takes with room for the answer;
        0 when not even the template fits."""
        tokens = window - answer_room(window) - TEMPLATE_TOKENS
        return max(int(tokens * self.bytes_per_token), 0)
