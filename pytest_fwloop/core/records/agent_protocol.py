"""The `command:` wire protocol of DESIGN.md §5: the request every provider is sent, the answers it
may give, and the strict-JSON gate those answers pass (seeds 000/003/004).

Pure: no subprocess or network here, so the gate can be property-tested on its own.
"""

from __future__ import annotations

import json
import math
import re
from importlib import resources
from pathlib import PurePath
from typing import TYPE_CHECKING, Any, ClassVar, Literal, TypeAlias, cast

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

if TYPE_CHECKING:
    from collections.abc import Iterable

Role = Literal["coder", "reviewer", "tester"]

#: Longest error line handed back to a model or a user; jsonschema quotes whole documents.
MAX_ERROR_CHARS = 240
#: Deepest nesting of objects and arrays an answer may have; the contract needs 3.
MAX_JSON_DEPTH = 32


class Failure(BaseModel):
    """A test that did not pass, as the coder sees it."""

    nodeid: str
    signature: str
    excerpt: str


class Regression(BaseModel):
    """A test that passed in an earlier iteration and fails now; `broken_in` is the iteration
    whose patch broke it (DESIGN.md §13)."""

    nodeid: str
    signature: str
    excerpt: str
    broken_in: int


class SimilarFix(BaseModel):
    """An earlier fix, from the knowledge base, of failures like the current ones (DESIGN.md
    §12): what worked before, for the coder to weigh, never to apply blindly."""

    run_id: str
    iteration: int
    signatures: list[str]
    summary: str
    patch: str


class EvidenceExcerpt(BaseModel):
    """The failure log of an earlier run (`--fwloop-evidence`, seed 001 §5.3): its head and
    tail, scrubbed and bounded, for the coder's first analysis."""

    path: str
    size_bytes: int
    excerpt: str


class HistoryEntry(BaseModel):
    """What an earlier iteration achieved, so the coder does not repeat a failed idea."""

    iteration: int
    pass_count: int
    total_count: int
    patch_summary: str = ""
    outcome: str = ""


class MustFix(BaseModel):
    """One thing the next patch has to address: a reviewer demand or a build diagnostic."""

    issue: str = Field(min_length=1)
    file: str | None = None
    line: int | None = None


class RiskyChange(BaseModel):
    """A part of the patch under review that matches a high-risk pattern (`fwloop_risky_patterns`,
    seed 001 §5.1.5): the reviewer is told which hunk matched what."""

    file: str
    #: The hunk's `@@ -a,b +c,d @@` header; "" when the file's path matched.
    hunk: str
    #: The added (`+`) or removed (`-`) line that matched, bounded; "" for a path match.
    line: str
    pattern: str
    #: What the pattern matched: the symbol in the line, or the path.
    matched: str
    #: A boot-critical change waits for the operator unless a failing test names it.
    boot_critical: bool
    #: The failing tests that name it (node ids), at most three.
    named_by: list[str] = Field(default_factory=list)


class SourceChunk(BaseModel):
    """Code of the tree sent to a model that cannot read it (DESIGN.md §16): a whole function
    or a whole small file, its first line's number, and why it was chosen."""

    path: str
    start_line: int = Field(ge=1)
    end_line: int = Field(ge=1)
    symbol: str = ""
    reason: str = ""
    #: Empty for an agent that reads the tree itself: then the entry is a location to look at.
    text: str = ""


class MapEntry(BaseModel):
    """A file of the tree outside `sources`: its path and its symbols' signatures, each as
    `LINE: SIGNATURE`, best-ranked first."""

    path: str
    symbols: list[str] = Field(default_factory=list)


class PatchFunction(BaseModel):
    """A function (or type, or small file) a patch under review changes, whole, before and
    after the patch: the reviewer judges the change in its context."""

    path: str
    symbol: str
    before_line: int = Field(ge=0)
    before: str
    after_line: int = Field(ge=0)
    after: str


class AgentRequest(BaseModel):
    """The JSON object a provider receives on stdin; later fields slot in as extras."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    role: Role
    iteration: int = Field(ge=1)
    goal: str
    workspace: str
    failures: list[Failure] = Field(default_factory=list)
    history: list[HistoryEntry] = Field(default_factory=list)
    must_fix: list[MustFix] = Field(default_factory=list)
    patch: str = ""
    # `schema` would shadow BaseModel.schema(); the wire name is kept through the alias.
    schema_: dict[str, object] = Field(default_factory=dict, alias="schema")
    build_diagnostics: str = ""
    validation_errors: list[str] = Field(default_factory=list)
    constraints: list[str] = Field(default_factory=list)
    regressions: list[Regression] = Field(default_factory=list)
    similar_fixes: list[SimilarFix] = Field(default_factory=list)
    declined_before: list[DeclinedBefore] = Field(default_factory=list)
    operator_messages: list[str] = Field(default_factory=list)
    risky: list[RiskyChange] = Field(default_factory=list)
    evidence: EvidenceExcerpt | None = None
    sources: list[SourceChunk] = Field(default_factory=list)
    test_sources: list[SourceChunk] = Field(default_factory=list)
    repo_map: list[MapEntry] = Field(default_factory=list)
    #: Files of the tree in neither `sources` nor `repo_map`, left out for the budget.
    repo_map_more: int = 0
    patch_functions: list[PatchFunction] = Field(default_factory=list)

    @field_validator("workspace")
    @classmethod
    def _absolute(cls, workspace: str) -> str:
        if not PurePath(workspace).is_absolute():
            raise ValueError(f"workspace must be an absolute path, got {workspace!r}")
        return workspace

    def to_wire(self) -> dict[str, object]:
        """The request as sent on stdin, with the schema under its wire name `schema`."""
        return self.model_dump(mode="json", by_alias=True)


class DeclinedBefore(BaseModel):
    """A failure like one of this request's (same signature) that an earlier run's coder
    declined or could not analyse (seed 001 §5.16), and how that run ended."""

    nodeid: str
    signature: str
    status: Literal["declined", "inconclusive"]
    reason: str
    run_id: str
    outcome: str


class Analysis(BaseModel):
    root_cause: str
    hypotheses: list[str]
    confidence: float = Field(ge=0, le=1)


class DeclinedTest(BaseModel):
    """A failing test the coder says no change to the code can mend, and why."""

    nodeid: str
    reason: str


class FileEdit(BaseModel):
    """One search/replace edit (DESIGN.md §16): `search` must match exactly one place of the
    file `path` (relative to the workspace); an empty `search` creates a file not there yet."""

    path: str = Field(min_length=1)
    search: str
    replace: str


class CoderAnswer(BaseModel):
    """`patch` is a unified diff relative to the workspace, or "" when the coder edited it or
    sent `edits` instead (never both). An empty patch with `declined` declines those tests;
    `next_action` "abort" asks the run to stop (DESIGN.md §15)."""

    analysis: Analysis
    patch: str
    summary: str
    edits: list[FileEdit] = Field(default_factory=list)
    declined: list[DeclinedTest] = Field(default_factory=list)
    next_action: Literal["continue", "abort"] = "continue"


class ReviewerAnswer(BaseModel):
    decision: Literal["approve", "changes_requested"]
    must_fix: list[MustFix]
    risk: float = Field(ge=0, le=1)
    summary: str


class TestCommand(BaseModel):
    """An extra command the tester wants run; only ever through the allowlist runner."""

    __test__: ClassVar[bool] = False  # a domain name, not a pytest test class

    argv: list[str] = Field(min_length=1)
    reason: str


class TesterAnswer(BaseModel):
    __test__: ClassVar[bool] = False

    select: list[str]
    commands: list[TestCommand]
    notes: str


Answer: TypeAlias = CoderAnswer | ReviewerAnswer | TesterAnswer

_ANSWER_MODELS: dict[str, type[CoderAnswer] | type[ReviewerAnswer] | type[TesterAnswer]] = {
    "coder": CoderAnswer,
    "reviewer": ReviewerAnswer,
    "tester": TesterAnswer,
}


class AnswerParseError(ValueError):
    """A document the answer model rejects; `errors` are one-line `$.path: message` strings."""

    def __init__(self, errors: list[str]) -> None:
        super().__init__("; ".join(errors))
        self.errors = errors


def load_schema(role: Role) -> dict[str, object]:
    """The JSON Schema shipped for `role`'s answer; a fresh copy the caller may change."""
    text = (resources.files("pytest_fwloop") / "schemas" / f"{role}.json").read_text("utf-8")
    schema: dict[str, object] = json.loads(text)
    return schema


def validate_answer(role: Role, document: object, schema: dict[str, object]) -> list[str]:
    """Every way `document` fails `schema`, one short line each; [] means it passes.

    A broken schema (say, from a conftest hook) raises jsonschema's SchemaError: that is a
    configuration bug, not a bad answer.
    """
    import jsonschema  # on first use: a run whose agents are never asked never pays for it

    validator_class = jsonschema.validators.validator_for(
        schema, default=jsonschema.Draft202012Validator
    )
    validator_class.check_schema(schema)
    # The stubs want a JSON value; any object is fine at runtime, and that is what is checked.
    found = validator_class(schema).iter_errors(cast("Any", document))
    errors = sorted(found, key=lambda error: error.json_path)
    return [_error_line(error.absolute_path, error.message) for error in errors]


def parse_answer(role: Role, document: object) -> Answer:
    """The answer model for an already validated document; AnswerParseError if it still fails."""
    try:
        return _ANSWER_MODELS[role].model_validate(document)
    except ValidationError as exc:
        raise AnswerParseError(
            [_error_line(error["loc"], error["msg"]) for error in exc.errors()]
        ) from None


_FENCED = re.compile(r"```(?:json)?[ \t]*\n(?P<body>.*?)\n?[ \t]*```", re.DOTALL | re.IGNORECASE)


def extract_json(text: str) -> dict[str, object]:
    """The one JSON object of an answer: bare, or as a single ```json fenced block.

    Anything else (prose, two objects, NaN, an array) raises ValueError with a one-line reason.
    """
    body = text.strip()
    if not body:
        raise ValueError("the answer is empty; expected one JSON object on stdout")
    fenced = _FENCED.fullmatch(body)
    if fenced is not None:
        body = fenced.group("body").strip()
    try:
        document = json.loads(
            body,
            parse_constant=_reject_constant,
            parse_float=_finite_float,
            object_pairs_hook=_unique_keys,
        )
    except json.JSONDecodeError as exc:
        raise ValueError(
            f"the answer is not one JSON object: {exc.msg} at line {exc.lineno} column {exc.colno}"
        ) from None
    except _Rejected as exc:
        raise ValueError(str(exc)) from None
    except (ValueError, RecursionError) as exc:
        raise ValueError(f"the answer is not one JSON object: {_one_line(str(exc))}") from None
    if not isinstance(document, dict):
        raise ValueError(f"the answer is a JSON {type(document).__name__}, not one JSON object")
    refusal = _refusal(document)
    if refusal is not None:
        raise ValueError(refusal)
    return document


class _Rejected(ValueError):
    """Valid JSON syntax that the gate still refuses; its message is the whole reason."""


def _reject_constant(name: str) -> object:
    # Python's json accepts NaN and Infinity; JSON does not, and NaN slips past min/max checks.
    raise ValueError(f"{name} is not valid JSON")


def _finite_float(text: str) -> float:
    # 1e999 is valid JSON, but Python reads it as inf, which slips past min/max checks as NaN does.
    value = float(text)
    if math.isinf(value):
        raise _Rejected(
            f"the answer holds the number {_one_line(text, 40)}, which overflows a float"
        )
    return value


def _unique_keys(pairs: list[tuple[str, object]]) -> dict[str, object]:
    # Python keeps the last of two equal keys, other readers the first: a reviewer could say
    # changes_requested to one reader and approve to another. Neither reading is taken.
    seen: set[str] = set()
    for key, _ in pairs:
        if key in seen:
            raise _Rejected(
                f"the key {_one_line(repr(key), 60)} appears twice in one object; "
                "give every key once"
            )
        seen.add(key)
    return dict(pairs)


_SURROGATE = re.compile("[\ud800-\udfff]")


def _refusal(document: object) -> str | None:
    """Why a parsed document is still refused, or None: a string or key holding a surrogate
    code point, or nesting deeper than MAX_JSON_DEPTH.

    The decoder joins a valid escaped pair into one character, so any surrogate left is lone:
    not Unicode, and unwritable as UTF-8. The depth bound keeps a document that only just
    parsed from exhausting the stack of whatever handles it next. Walked without recursion.
    """
    stack: list[tuple[list[str | int], object]] = [([], document)]
    while stack:
        path, value = stack.pop()
        children: list[tuple[list[str | int], object]] = []
        if isinstance(value, str):
            found = _SURROGATE.search(value)
            if found is not None:
                return _lone_surrogate(found.group(), f"at {_json_path(path)}")
        elif isinstance(value, (dict, list)) and len(path) >= MAX_JSON_DEPTH:
            return f"the answer nests objects and arrays deeper than {MAX_JSON_DEPTH} levels"
        elif isinstance(value, dict):
            for key, child in value.items():
                found = _SURROGATE.search(key)
                if found is not None:
                    return _lone_surrogate(found.group(), f"in a key at {_json_path(path)}")
                children.append(([*path, key], child))
        elif isinstance(value, list):
            children = [([*path, index], child) for index, child in enumerate(value)]
        stack.extend(reversed(children))  # popped in document order
    return None


def _lone_surrogate(char: str, where: str) -> str:
    return _one_line(
        f"the answer holds a lone surrogate U+{ord(char):04X} {where}; JSON text must be "
        "valid Unicode (\\uD800-\\uDBFF only as the first half of a pair with \\uDC00-\\uDFFF)"
    )


def _error_line(path: Iterable[str | int], message: str) -> str:
    return _one_line(f"{_json_path(path)}: {message}")


def _json_path(path: Iterable[str | int]) -> str:
    """`$.must_fix[0].issue`, the form jsonschema uses, for pydantic locations too."""
    return "$" + "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in path)


def _one_line(text: str, limit: int = MAX_ERROR_CHARS) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"
