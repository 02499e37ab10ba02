"""What the model providers (claude, codex, openai) share: the one way a request is put to a
model, so the three ask the same question and differ only in transport, and the token counts a
CLI agent reports."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict

from pytest_fwloop.core.records.agent_protocol import extract_json

if TYPE_CHECKING:
    from pytest_fwloop.core.records.agent_protocol import AgentRequest


class TokenUsage(BaseModel):
    """The token counts a CLI agent prints, in either vendor's terms: Anthropic's `input_tokens`
    leaves out the prompt cache (`cache_creation_input_tokens`, `cache_read_input_tokens`),
    OpenAI's includes its `cached_input_tokens`. A CLI uses one; the other's fields stay 0."""

    model_config = ConfigDict(extra="ignore")

    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int = 0
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0
    cache_write_input_tokens: int = 0  # Codex 0.169's name for prompt-cache writes

    def report(self) -> dict[str, float]:
        """The counts in RawAnswer.usage's terms, where `input_tokens` is every prompt token."""
        return {
            "input_tokens": self.input_tokens
            + self.cache_creation_input_tokens
            + self.cache_write_input_tokens
            + self.cache_read_input_tokens,
            "cached_input_tokens": self.cached_input_tokens + self.cache_read_input_tokens,
            "output_tokens": self.output_tokens,
        }


def bare_schema(schema: dict[str, object]) -> dict[str, object]:
    """The answer schema as a model API takes it: without `$schema` and `$id`, which only name
    the draft and the document, and which some validators behind those APIs cannot resolve."""
    return {key: value for key, value in schema.items() if key not in ("$schema", "$id")}


def has_json_object(text: str) -> bool:
    """Whether `text` holds an answer-shaped JSON object, valid or not: tells "answered badly"
    (re-ask) from "never answered" (a CLI agent stuck on refused tools)."""
    try:
        extract_json(text)
    except ValueError:
        return False
    return True


_ROLE_TASKS = {
    "coder": (
        "You are the coder of a firmware repair loop. The tests in `failures` do not pass. "
        "Find the root cause and fix the firmware source; never change tests, test "
        "configuration or CI files. `sources` holds the tree's code the failures point at, "
        "each chunk with its path and first line number (write diffs against exactly that "
        "text), `test_sources` the failing tests' code (read-only), `repo_map` the other "
        "files' signatures. Address every `must_fix` item and every line of "
        "`build_diagnostics`, obey `constraints`, and do not repeat a change that `history` "
        "shows did not help. Put the fix in `patch` as a unified diff in `git apply` format, "
        "paths relative to the workspace, or instead in `edits`: search/replace edits whose "
        "`search` is copied exactly from the file and matches one place in it. A failure no "
        "change to the code can mend (the "
        "environment lacks a tool or an optional dependency, say) goes in `declined` with why, "
        "and `patch` stays empty unless other failures are fixed (`declined_before` tells what "
        "earlier runs' coders said of failures like these). Give your honest "
        "`confidence`: a low one gets you more evidence before anything is applied. Set "
        '`next_action` to "abort" only when the loop should stop, with why in `root_cause`.'
    ),
    "reviewer": (
        "You are the reviewer of a firmware repair loop. Review the unified diff in `patch` "
        "against the `goal` and the `failures`. Approve only a change that plausibly fixes "
        "them without breaking other behaviour; otherwise request changes and name each "
        "problem in `must_fix`. `risk` is your estimate from 0 (safe) to 1 (likely to break "
        "the firmware). `risky` lists the hunks that match the project's high-risk patterns "
        "(interrupts off, flash writes, the watchdog, boot code): weigh them; the loop adds "
        "to your `risk` for each pattern matched."
    ),
    "tester": (
        "You are the tester of a firmware repair loop. Given the `patch` and the `failures`, "
        "choose pytest node ids to run in `select` and extra checks in `commands`, each an argv "
        "list (never a shell string) with its reason; commands outside the project's allowlist "
        "are skipped."
    ),
}
_MAY_EDIT = (
    " You may instead edit the files in the workspace (your current directory) yourself; "
    "then leave `patch` empty and describe the change in `summary`."
)
_ANSWER_FORMAT = (
    "Answer with exactly one JSON object that satisfies the JSON Schema below: no prose before "
    "or after it. If `validation_errors` is not empty, your previous answer was rejected for "
    "those reasons; correct them."
)


def instructions(request: AgentRequest, *, may_edit: bool = False) -> str:
    """The standing orders of a model: its role, the answer format, and the schema to satisfy.

    `may_edit` says the coder may change the workspace itself (a CLI agent allowed to write).
    """
    task = _ROLE_TASKS[request.role] + (_MAY_EDIT if may_edit and request.role == "coder" else "")
    schema = json.dumps(request.schema_, indent=2, ensure_ascii=False)
    return f"{task}\n\n{_ANSWER_FORMAT}\n\nJSON Schema of the answer:\n{schema}\n"


#: The request's fields that stay the same through a run, put first: a server's prompt cache
#: (llama.cpp, vLLM, OpenAI) then keeps the longest prefix from call to call; what each
#: iteration changes comes after them, the re-ask's errors last.
_STABLE_FIRST = ("role", "goal", "workspace", "constraints")
_CHANGING_LAST = ("history", "iteration", "validation_errors")


def request_json(request: AgentRequest) -> str:
    """The request as a model reads it: the wire JSON, less the schema it was given above,
    the fields that do not change first."""
    wire = request.to_wire()
    del wire["schema"]
    first = {name: wire.pop(name) for name in _STABLE_FIRST if name in wire}
    last = {name: wire.pop(name) for name in _CHANGING_LAST if name in wire}
    return json.dumps({**first, **wire, **last}, indent=2, ensure_ascii=False)


def render_prompt(request: AgentRequest, *, may_edit: bool = False) -> str:
    """One prompt for a CLI agent: the instructions, then the request. A CLI agent reads the
    tree itself, so `sources` and `test_sources` reach it as locations (path, lines, why)
    without their text: the ranking is the hint, the files are its own to read."""
    located = request.model_copy(
        update={
            "sources": [c.model_copy(update={"text": ""}) for c in request.sources],
            "test_sources": [c.model_copy(update={"text": ""}) for c in request.test_sources],
        }
    )
    return f"{instructions(located, may_edit=may_edit)}\nThe request:\n{request_json(located)}\n"
