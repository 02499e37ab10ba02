"""The window arithmetic and a request fitted to it (core/token_window, core/request_fit)."""

from __future__ import annotations

import json

import pytest

from pytest_fwloop.core.records.agent_protocol import AgentRequest, load_schema
from pytest_fwloop.core.request.request_fit import fit_request
from pytest_fwloop.core.request.token_window import (
    START_BYTES_PER_TOKEN,
    ContextRefusal,
    TokenRatio,
    answer_room,
    context_refusal,
)


@pytest.mark.parametrize(
    ("text", "refusal"),
    [
        (  # llama-cpp-python 0.3.36, measured
            "This model's maximum context length is 2048 tokens. However, you requested 3036 "
            "tokens (3031 in the messages, 5 in the completion). Please reduce the length",
            ContextRefusal(2048, 3031),
        ),
        (  # vLLM and OpenAI
            "This model's maximum context length is 8192 tokens. However, you requested 9000 "
            "tokens. Please reduce",
            ContextRefusal(8192, 9000),
        ),
        (  # llama.cpp's llama-server
            '{"code":400,"message":"the request exceeds the available context size",'
            '"type":"exceed_context_size_error","n_prompt_tokens":4480,"n_ctx":4096}',
            ContextRefusal(4096, 4480),
        ),
        ("Invalid 'messages[1].content': string too long", None),
    ],
)
def test_a_refusal_gives_its_numbers(text: str, refusal: ContextRefusal | None) -> None:
    assert context_refusal(text) == refusal


def test_the_ratio_starts_safe_and_learns_the_densest_prompt() -> None:
    ratio = TokenRatio()
    assert (ratio.bytes_per_token, ratio.measured) == (START_BYTES_PER_TOKEN, False)
    ratio.learn(40_000, 10_000)
    assert (ratio.bytes_per_token, ratio.measured) == (4.0, True)
    ratio.learn(35_000, 10_000)  # denser: fewer bytes a token
    ratio.learn(50_000, 10_000)  # sparser: does not raise it again
    assert ratio.bytes_per_token == 3.5
    ratio.learn(900, 30)  # too few tokens to say anything
    assert ratio.bytes_per_token == 3.5


def test_a_cut_prompt_cannot_teach_a_large_ratio() -> None:
    """Ollama counts only what it kept of a prompt it truncated: 100 KB read as 4,096 tokens."""
    ratio = TokenRatio()
    ratio.learn(100_000, 4096)
    assert ratio.bytes_per_token <= 6


def test_the_prompt_cap_leaves_room_for_the_answer() -> None:
    ratio = TokenRatio()
    for window in (2048, 8192, 32768, 131072):
        room = answer_room(window)
        assert 512 <= room <= 4096
        assert ratio.tokens(ratio.prompt_bytes(window)) + room <= window


def make(sources: int, repo_map: int, failures: int = 1) -> AgentRequest:
    return AgentRequest.model_validate(
        {
            "role": "coder",
            "iteration": 1,
            "goal": "g",
            "workspace": "/w",
            "schema": load_schema("coder"),
            "failures": [
                {"nodeid": f"t::{i}", "signature": "s", "excerpt": "E " * 200}
                for i in range(failures)
            ],
            "sources": [
                {"path": f"s{i}.c", "start_line": 1, "end_line": 9, "text": "x" * 1000}
                for i in range(sources)
            ],
            "repo_map": [{"path": f"m{i}.c", "symbols": ["f(void)"]} for i in range(repo_map)],
            "history": [
                {
                    "iteration": i,
                    "pass_count": 1,
                    "total_count": 2,
                    "patch_summary": "p" * 300,
                    "outcome": "o",
                }
                for i in range(1, 6)
            ],
        }
    )


def size(request: AgentRequest) -> int:
    return len(json.dumps(request.to_wire()))


def test_a_request_is_cut_least_needed_first_and_never_its_failures() -> None:
    request = make(sources=20, repo_map=200)
    whole = size(request)
    map_bytes = whole - size(request.model_copy(update={"repo_map": []}))
    cap = whole - map_bytes - 2500  # all of the map, and some of the code
    fitted = fit_request(request, cap, size)
    assert fitted is not None
    assert cap - 1100 < size(fitted.request) <= cap  # no more was cut than needed
    assert fitted.request.repo_map == []
    assert fitted.request.repo_map_more == 200
    # The lowest-ranked sources went, the best stayed.
    assert 0 < len(fitted.request.sources) < 20
    assert fitted.request.sources == request.sources[: len(fitted.request.sources)]
    assert fitted.request.failures == request.failures
    assert fitted.request.history == request.history
    assert "200 of 200 repo_map" in fitted.note(cap)


def test_history_keeps_its_newest_entries() -> None:
    request = make(sources=0, repo_map=0)
    fitted = fit_request(request, size(request) - 400, size)
    assert fitted is not None
    kept = [entry.iteration for entry in fitted.request.history]
    assert kept == list(range(6 - len(kept), 6))
    assert 0 < len(kept) < 5


def test_what_is_never_cut_overflowing_is_none() -> None:
    request = make(sources=5, repo_map=5, failures=10)
    assert fit_request(request, 3000, size) is None


def test_a_request_that_fits_is_left_whole() -> None:
    request = make(sources=3, repo_map=3)
    fitted = fit_request(request, size(request), size)
    assert fitted is not None
    assert fitted.request is request
    assert fitted.note(size(request)) == ""
