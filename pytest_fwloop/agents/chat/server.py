"""What the `openai:` provider knows of the server behind it, found out once a run (DESIGN.md
§16): its kind and version, its context window, and what it took of what the loop sends
(response format, tools, streaming), with the bytes a token its own counts showed.

The window is asked for before the first call where the server publishes it: llama.cpp's
`llama-server` (`/props`), vLLM (`max_model_len` in `/v1/models`), Ollama (`/api/ps`, then
`/api/show`), LM Studio (`/api/v0/models`); llama-cpp-python publishes none and says its window
when it refuses a prompt. The answers are read as hostile JSON: a field of the wrong type is no
answer, never an exception.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pytest_fwloop.core.request.token_window import TokenRatio

#: A GET (body None) or POST of `url`: the status and body, or None when nothing answered.
Fetch = Callable[[str, "bytes | None"], "tuple[int, bytes] | None"]
#: Where a window the user set comes from; no published one replaces it.
USER_WINDOW = "fwloop_model_context"
#: Ollama serves its OpenAI route with this window unless told otherwise (0.6 and later on a
#: machine with less than 24 GiB of VRAM; older versions 2,048, which the truncation check
#: catches).
OLLAMA_DEFAULT_CONTEXT = 4096


@dataclass
class ModelServer:
    """One server as one provider met it; `record()` is its entry in `summary.json`."""

    base_url: str
    model: str
    kind: str = "unknown"
    version: str = ""
    #: Tokens of context, and where that number came from.
    window: int | None = None
    window_source: str = ""
    response_format: str = "json_schema"
    #: "not offered", "offered" (not yet used), "taken", "refused" or "ignored".
    tools: str = "not offered"
    #: Whether answers are streamed; turned off for a server that refuses `stream`.
    streaming: bool = True
    #: Whether the server counted prompt tokens in any answer (llama-cpp-python does not when
    #: it streams).
    usage_reported: bool = False
    ratio: TokenRatio = field(default_factory=TokenRatio)
    discovered: bool = False

    def record(self) -> dict[str, object]:
        return {
            "url": self.base_url,
            "model": self.model,
            "kind": self.kind,
            "version": self.version,
            "window_tokens": self.window,
            "window_source": self.window_source,
            "response_format": self.response_format,
            "tools": self.tools,
            "streaming": self.streaming,
            "usage_reported": self.usage_reported,
            "bytes_per_token": round(self.ratio.bytes_per_token, 2),
            "bytes_per_token_measured": self.ratio.measured,
        }

    def line(self) -> str:
        """The server in one line, for the report."""
        window = (
            f"window {self.window} tokens ({self.window_source})"
            if self.window
            else "window unknown"
        )
        kind = f"{self.kind} {self.version}".strip()
        ratio = "measured" if self.ratio.measured else "assumed"
        return (
            f"{self.model} on {kind} at {self.base_url}: {window}, response_format "
            f"{self.response_format}, tools {self.tools}, "
            f"{'streamed' if self.streaming else 'not streamed'}, "
            f"{self.ratio.bytes_per_token:.2f} bytes a token ({ratio})"
        )

    def discover(self, fetch: Fetch) -> None:
        """Ask the server what it is and how large its window is; once."""
        if self.discovered:
            return
        self.discovered = True
        root = self.base_url.removesuffix("/v1")
        for probe in (_vllm_or_listed, _llama_server, _ollama, _lm_studio, _openapi):
            found = probe(self, root, fetch)
            if found:
                break

    def set_window(self, tokens: int, source: str) -> None:
        """A window the server published; the user's `fwloop_model_context` stands over it."""
        if tokens > 0 and self.window_source != USER_WINDOW:
            self.window, self.window_source = tokens, source

    def refused_over(self, tokens: int) -> None:
        """The window a server's refusal named: the truth, whatever was published or set."""
        self.window, self.window_source = tokens, "the server's refusal"


def _json(fetch: Fetch, url: str, body: bytes | None = None) -> dict[str, Any] | None:
    """The JSON object at `url` when it answered 200 with one."""
    answer = fetch(url, body)
    if answer is None or answer[0] != 200:
        return None
    try:
        document = json.loads(answer[1])
    except (ValueError, UnicodeDecodeError):
        return None
    return document if isinstance(document, dict) else None


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _entry(document: dict[str, Any] | None, model: str) -> dict[str, Any] | None:
    """The model's entry of a model list (`data`, or Ollama's `models`), or the only one."""
    if document is None:
        return None
    items = document.get("data", document.get("models"))
    if not isinstance(items, list):
        return None
    entries = [item for item in items if isinstance(item, dict)]
    named = [e for e in entries if model in (e.get("id"), e.get("name"), e.get("model"))]
    if named:
        return named[0]
    return entries[0] if len(entries) == 1 else None


def _vllm_or_listed(server: ModelServer, root: str, fetch: Fetch) -> bool:
    """vLLM lists `max_model_len` beside each model, and tells its version at /version."""
    entry = _entry(_json(fetch, f"{server.base_url}/models"), server.model)
    tokens = _int(entry.get("max_model_len")) if entry else None
    if tokens is None:
        return False
    server.kind = "vLLM" if entry and entry.get("owned_by") == "vllm" else "OpenAI-compatible"
    version = _json(fetch, f"{root}/version")
    if version and isinstance(version.get("version"), str):
        server.version = version["version"][:40]
    server.set_window(tokens, "max_model_len of /v1/models")
    return True


def _llama_server(server: ModelServer, root: str, fetch: Fetch) -> bool:
    """llama.cpp's llama-server: /props has the slots' context and the build."""
    props = _json(fetch, f"{root}/props")
    if props is None:
        return False
    settings = props.get("default_generation_settings")
    tokens = _int(settings.get("n_ctx")) if isinstance(settings, dict) else None
    tokens = tokens or _int(props.get("n_ctx"))
    if tokens is None:
        return False
    server.kind = "llama.cpp"
    build = props.get("build_info")
    server.version = build[:40] if isinstance(build, str) else ""
    server.set_window(tokens, "n_ctx of /props")
    return True


def _ollama(server: ModelServer, root: str, fetch: Fetch) -> bool:
    """Ollama: the loaded model's context from /api/ps; else its default, capped by the
    model's own maximum from /api/show."""
    version = _json(fetch, f"{root}/api/version")
    if version is None or not isinstance(version.get("version"), str):
        return False
    server.kind, server.version = "Ollama", version["version"][:40]
    loaded = _entry(_json(fetch, f"{root}/api/ps"), server.model)
    tokens = _int(loaded.get("context_length")) if loaded else None
    if tokens is not None:
        server.set_window(tokens, "context_length of /api/ps")
        return True
    shown = _json(fetch, f"{root}/api/show", json.dumps({"model": server.model}).encode())
    info = shown.get("model_info") if shown else None
    maximum = None
    if isinstance(info, dict):
        maximum = next(
            (_int(v) for k, v in info.items() if k.endswith(".context_length") and _int(v)), None
        )
    tokens = min(maximum or OLLAMA_DEFAULT_CONTEXT, OLLAMA_DEFAULT_CONTEXT)
    server.set_window(tokens, "Ollama's default context (OLLAMA_CONTEXT_LENGTH unset)")
    return True


def _lm_studio(server: ModelServer, root: str, fetch: Fetch) -> bool:
    entry = _entry(_json(fetch, f"{root}/api/v0/models"), server.model)
    if entry is None:
        return False
    tokens = _int(entry.get("loaded_context_length")) or _int(entry.get("max_context_length"))
    if tokens is None:
        return False
    server.kind = "LM Studio"
    server.set_window(tokens, "context length of /api/v0/models")
    return True


def _openapi(server: ModelServer, root: str, fetch: Fetch) -> bool:
    """llama-cpp-python publishes no window, but names itself in its OpenAPI document."""
    document = _json(fetch, f"{root}/openapi.json")
    info = document.get("info") if document else None
    if not isinstance(info, dict) or not isinstance(info.get("title"), str):
        return False
    title = info["title"]
    server.kind = "llama-cpp-python" if "llama.cpp Python" in title else title[:40]
    version = info.get("version")
    server.version = version[:40] if isinstance(version, str) else ""
    return True
