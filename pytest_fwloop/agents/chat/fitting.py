"""A request fitted to the server's window at its ratio of bytes a token (DESIGN.md §16): the
provider's side of `core/request/request_fit`, with the one line a request that cannot fit
ends with."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from pytest_fwloop.agents.errors import ProviderError, ProviderErrorKind
from pytest_fwloop.core.request.read_tools import MAX_TOTAL_BYTES
from pytest_fwloop.core.request.request_fit import fit_request
from pytest_fwloop.core.request.token_window import answer_room

if TYPE_CHECKING:
    from pytest_fwloop.agents.chat.server import ModelServer
    from pytest_fwloop.core.records.agent_protocol import AgentRequest

#: How to give each server room, said whenever a request does not fit or is cut short.
CONTEXT_REMEDY = (
    "give the server a larger context: llama.cpp `llama-server -c 32768`, llama-cpp-python "
    "`--n_ctx 32768`, vLLM `--max-model-len 32768`, Ollama `OLLAMA_CONTEXT_LENGTH=32768 ollama "
    "serve` (its OpenAI route ignores a per-request size; or `PARAMETER num_ctx 32768` in a "
    "Modelfile); or send less with fwloop_source_bytes (code) and fwloop_context_bytes "
    "(failures)"
)
#: What the window may give the tool results of one call, of what it has left after the opening.
TOOL_SHARE = 0.8
#: The parts of a request that `fit_request` may leave out, for the size of what is never cut.
_CODE_FIELDS = (
    "repo_map",
    "similar_fixes",
    "test_sources",
    "patch_functions",
    "sources",
    "history",
)


def fit_to_window(
    server: ModelServer,
    request: AgentRequest,
    measure: Callable[[AgentRequest], int],
    spec: str,
    notes: list[str],
) -> AgentRequest:
    """`request` cut to the server's window (as it is, when the window is unknown), what was
    left out noted; ProviderError when what is never cut does not fit."""
    window = server.window
    if window is None:
        return request
    cap = server.ratio.prompt_bytes(window)
    fitted = fit_request(request, cap, measure)
    if fitted is None:
        need = measure(request.model_copy(update={k: [] for k in _CODE_FIELDS}))
        raise ProviderError(
            ProviderErrorKind.PROVIDER_BAD_OUTPUT,
            spec,
            f"the {request.role} request cannot fit the model's window of {window} tokens "
            f"({server.window_source}): without any code it still takes {need} bytes, "
            f"about {server.ratio.tokens(need)} tokens at "
            f"{server.ratio.bytes_per_token:.2f} bytes a token, and "
            f"{answer_room(window)} tokens are kept for the answer; {CONTEXT_REMEDY}",
            stderr="\n".join(notes),
        )
    note = fitted.note(cap)
    if note:
        notes.append(note)
    return fitted.request


def tool_room(server: ModelServer, opening: int) -> int:
    """The bytes the tool results of one call may take: what the window leaves after the
    opening messages' `opening` bytes, in part (the calls' own turns take some too)."""
    if server.window is None:
        return MAX_TOTAL_BYTES
    left = server.ratio.prompt_bytes(server.window) - opening
    return max(min(MAX_TOTAL_BYTES, int(left * TOOL_SHARE)), 0)
