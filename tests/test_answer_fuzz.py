"""A corpus of hostile answers through the real gate into a real run directory: nothing crashes.

Each case is a valid coder, reviewer or tester answer mutated the ways models and transports
break them (truncation, keys given twice at any depth, lone surrogates escaped or raw, NaN,
numbers out of range, deep nesting, a BOM, NUL, fences, two objects, wrong types, extras). It is
asked through RoleAgent with a provider that answers that text, every call is written the way
the controller writes it, and what comes out is a validated answer or AnswerInvalid, never
anything else. Seeded, so a failure names a case that can be replayed.
"""

from __future__ import annotations

import copy
import io
import json
import random
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentkit import CODER, TESTER
from pytest_fwloop.agents.base import RawAnswer
from pytest_fwloop.agents.errors import AnswerInvalid
from pytest_fwloop.agents.retry import RetryPolicy
from pytest_fwloop.agents.role import CallRecord, RoleAgent
from pytest_fwloop.core.records.agent_protocol import AgentRequest, Role, load_schema
from pytest_fwloop.core.records.redaction import Redactor
from pytest_fwloop.loop.rundir import RunRecorder, utc_now
from pytest_fwloop.loop.terminal import Terminal

SEED = 20240611
CASES_PER_ROLE = 200

VALID: dict[Role, dict[str, Any]] = {
    "coder": CODER,
    "reviewer": {
        "decision": "changes_requested",
        "must_fix": [{"issue": "the loop never times out", "file": "src/uart.c", "line": 42}],
        "risk": 0.3,
        "summary": "close, but the wait can hang",
    },
    "tester": TESTER,
}


@dataclass(frozen=True)
class Verbatim:
    """JSON text put into a document as it is (NaN, 1e999, a number with 5000 digits)."""

    text: str


class Pairs(list[tuple[str, Any]]):
    """An object written pair by pair, so a key can be given twice."""


def render(value: Any, ascii_only: bool) -> str:
    """JSON text of a document that may hold Verbatim tokens and Pairs; iterative, since a
    mutation may nest it thousands of levels deep."""
    out: list[str] = []
    stack: list[Any] = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, Verbatim):
            out.append(item.text)
        elif isinstance(item, (dict, Pairs)):
            pairs = list(item.items()) if isinstance(item, dict) else list(item)
            parts: list[Any] = [Verbatim("{")]
            for index, (key, child) in enumerate(pairs):
                separator = ", " if index else ""
                parts += [
                    Verbatim(separator + json.dumps(key, ensure_ascii=ascii_only) + ": "),
                    child,
                ]
            stack.extend(reversed([*parts, Verbatim("}")]))
        elif isinstance(item, list):
            parts = [Verbatim("[")]
            for index, child in enumerate(item):
                parts += [Verbatim(", ")] if index else []
                parts.append(child)
            stack.extend(reversed([*parts, Verbatim("]")]))
        else:
            out.append(json.dumps(item, ensure_ascii=ascii_only))
    return "".join(out)


def containers(document: Any) -> list[Any]:
    """Every object and array in the document, the root first (not a Pairs: it is done with)."""
    found, stack = [], [document]
    while stack:
        item = stack.pop()
        if isinstance(item, (dict, list)) and not isinstance(item, Pairs):
            found.append(item)
            stack.extend(item.values() if isinstance(item, dict) else item)
    return found


def slots(document: Any) -> list[tuple[Any, Any]]:
    """Every (container, key or index) holding a value."""
    return [
        (parent, key)
        for parent in containers(document)
        for key in (parent if isinstance(parent, dict) else range(len(parent)))
    ]


# -- mutations ------------------------------------------------------------------------------------
# Document mutations change the document (and may return a new root); text mutations change its
# JSON text. A case applies one or two of the former, then maybe one of the latter. A STRICT
# mutation leaves the answer invalid whatever else the case does, so it must never pass.

DocumentMutation = Callable[[random.Random, Any], Any]
TextMutation = Callable[[random.Random, str], str]


def duplicate_key(rng: random.Random, document: Any) -> Any:
    target = rng.choice([item for item in containers(document) if isinstance(item, dict) and item])
    key = rng.choice(list(target))
    pairs = Pairs(target.items())
    pairs.insert(rng.randrange(len(pairs) + 1), (key, rng.choice([target[key], "approve", 1])))
    if target is document:
        return pairs
    parent, slot = next((p, k) for p, k in slots(document) if p[k] is target)
    parent[slot] = pairs
    return document


def inject_surrogate(rng: random.Random, document: Any) -> Any:
    strings = [(p, k) for p, k in slots(document) if isinstance(p[k], str)]
    keys = [(p, k) for p in containers(document) if isinstance(p, dict) for k in p]
    # Padded, so that it never pairs up with a surrogate another mutation put next to it.
    surrogate = f"x{chr(rng.randrange(0xD800, 0xE000))}x"
    if not strings or rng.random() < 0.2:
        parent, key = rng.choice(keys)
        parent[key[:1] + surrogate + key[1:]] = parent.pop(key)
    else:
        parent, key = rng.choice(strings)
        at = rng.randrange(len(parent[key]) + 1)
        parent[key] = parent[key][:at] + surrogate + parent[key][at:]
    return document


def undecodable_bytes(rng: random.Random, document: Any) -> Any:
    # As a transport decoding with surrogateescape hands over bytes that were not UTF-8.
    parent, key = rng.choice([(p, k) for p, k in slots(document) if isinstance(p[k], str)])
    parent[key] += bytes([rng.randrange(0x80, 0x100)]).decode("utf-8", "surrogateescape")
    return document


def bad_constant(rng: random.Random, document: Any) -> Any:
    parent, key = rng.choice(slots(document))
    parent[key] = Verbatim(rng.choice(["NaN", "Infinity", "-Infinity", "1e999", "-1e400"]))
    return document


def huge_number(rng: random.Random, document: Any) -> Any:
    parent, key = rng.choice(slots(document))
    digits = "9" * rng.choice([20, 400, 4300, 5000])
    parent[key] = Verbatim(rng.choice([digits, "-" + digits, "1e308", "-0.0", "1e-400"]))
    return document


def deep_nesting(rng: random.Random, document: Any) -> Any:
    value: Any = rng.choice([1, "x", None, []])
    for _ in range(rng.choice([10, 100, 500, 900, 990, 1200, 5000])):
        value = [value] if rng.random() < 0.5 else {"n": value}
    # Half the time as an extra field, which the schema lets through to the records.
    parent, key = (document, "extra") if rng.random() < 0.5 else rng.choice(slots(document))
    parent[key] = value
    return document


ODD_VALUES: tuple[Any, ...] = (
    None,
    True,
    0,
    -1,
    2.5,
    1e300,
    "",
    "x" * 10_000,
    "\u0000 nul",
    "\u200b",
    "\U0001f600",
    [],
    {},
    [None],
    {"a": 1},
    [1, [2, [3]]],
)


def wrong_type(rng: random.Random, document: Any) -> Any:
    parent, key = rng.choice(slots(document))
    parent[key] = rng.choice(ODD_VALUES)
    return document


def extra_fields(rng: random.Random, document: Any) -> Any:
    target = rng.choice(containers(document))
    if isinstance(target, dict):
        target[rng.choice(["reasoning", "notes", "x", "\u00e9t\u00e9", "\x00"])] = rng.choice(
            ODD_VALUES
        )
    else:
        target.append(rng.choice(ODD_VALUES))
    return document


def missing_field(rng: random.Random, document: Any) -> Any:
    del document[rng.choice(list(document))]
    return document


def truncate(rng: random.Random, text: str) -> str:
    return text[: rng.randrange(len(text) - 1)]  # the closing brace always goes


def two_objects(rng: random.Random, text: str) -> str:
    return text + rng.choice(["", " ", "\n"]) + text


def bom(rng: random.Random, text: str) -> str:
    return "\ufeff" + text


def raw_nul(rng: random.Random, text: str) -> str:
    at = rng.randrange(len(text) + 1)  # inside a string or between tokens: JSON allows neither
    return text[:at] + "\x00" + text[at:]


def prose_around(rng: random.Random, text: str) -> str:
    fence = f"```json\n{text}\n```"
    return rng.choice([f"Here it is:\n{fence}", f"{fence}\nHope this helps!", fence * 2])


def not_an_object(rng: random.Random, text: str) -> str:
    return rng.choice(["", " ", "null", "[]", '"ok"', "42", f"[{text}]", f'"{text}"'])


def fenced(rng: random.Random, text: str) -> str:
    language = rng.choice(["json", "JSON", ""])
    return f"{rng.choice(['', '  ', chr(10)])}```{language}\n{text}\n```\n"


DOCUMENT_MUTATIONS: dict[str, DocumentMutation] = {
    "duplicate_key": duplicate_key,
    "surrogate": inject_surrogate,
    "undecodable_bytes": undecodable_bytes,
    "bad_constant": bad_constant,
    "huge_number": huge_number,
    "deep_nesting": deep_nesting,
    "wrong_type": wrong_type,
    "extra_fields": extra_fields,
    "missing_field": missing_field,
}
TEXT_MUTATIONS: dict[str, TextMutation] = {
    "truncate": truncate,
    "two_objects": two_objects,
    "bom": bom,
    "raw_nul": raw_nul,
    "prose_around": prose_around,
    "not_an_object": not_an_object,
    "fenced": fenced,
}
STRICT = frozenset(
    {"duplicate_key", "surrogate", "undecodable_bytes", "bad_constant"}
    | set(TEXT_MUTATIONS) - {"fenced"}
)


@dataclass(frozen=True)
class Case:
    number: int
    role: Role
    mutations: tuple[str, ...]
    text: str

    @property
    def strict(self) -> bool:
        return not STRICT.isdisjoint(self.mutations)


def corpus(seed: int = SEED, per_role: int = CASES_PER_ROLE) -> list[Case]:
    """Each case: one or two document mutations (the strict ones last, so nothing undoes them;
    a duplicated key very last, as its object is then done with), rendered with escapes or
    raw, then maybe one text mutation."""
    rng = random.Random(seed)
    cases: list[Case] = []
    for role in VALID:
        for _ in range(per_role):
            names = rng.sample(sorted(DOCUMENT_MUTATIONS), k=rng.choice([0, 1, 1, 2]))
            names.sort(key=lambda name: (name in STRICT, name == "duplicate_key"))
            if not names or rng.random() < 0.4:
                names.append(rng.choice(sorted(TEXT_MUTATIONS)))
            document = copy.deepcopy(VALID[role])
            for name in names:
                if name in DOCUMENT_MUTATIONS:
                    document = DOCUMENT_MUTATIONS[name](rng, document)
            text = render(document, ascii_only=rng.random() < 0.5)
            if names[-1] in TEXT_MUTATIONS:
                text = TEXT_MUTATIONS[names[-1]](rng, text)
            cases.append(Case(len(cases), role, tuple(names), text))
    return cases


class Answers:
    """The provider: the model's judgement is this one text, whatever it is asked."""

    def __init__(self, text: str) -> None:
        self.spec = "fuzz"
        self.text = text

    def call(self, request: AgentRequest, timeout: float) -> RawAnswer:
        return RawAnswer(text=self.text, stderr="stderr \udcff", usage={"output_tokens": 1})


def record_into(
    recorder: RunRecorder, folder: int, terminal: Terminal, written: list[Path]
) -> Callable[[CallRecord], None]:
    """Writes each call as Controller._record_call does, and prints its retry line."""

    def record(call: CallRecord) -> None:
        stem = f"{recorder.relative(recorder.round_path(folder))}/{call.role}-{call.attempt}"
        written.append(recorder.write_json(f"{stem}.request.json", call.request))
        written.append(recorder.write_text(f"{stem}.answer.txt", call.raw))
        if call.document is not None:
            written.append(recorder.write_json(f"{stem}.answer.json", call.document))
        meta = recorder.write_json(
            f"{stem}.meta.json",
            {"errors": call.errors, "error_kind": call.error_kind, "stderr_tail": call.stderr},
        )
        written.append(meta)
        if call.retry_reason is not None:
            recorder.append_event(
                {
                    "time": utc_now(),
                    "kind": "agent_call",
                    "reason": call.retry_reason,
                    "evidence": [recorder.relative(meta)],
                }
            )
            terminal.line(f"fwloop: [{folder}] {call.retry_reason}")

    return record


def ask(case: Case, recorder: RunRecorder, terminal: Terminal, written: list[Path]) -> str:
    """What came out of the gate: `valid` or `invalid`; anything else raised fails the test."""
    agent = RoleAgent(
        case.role,
        [Answers(case.text)],
        load_schema(case.role),
        record_into(recorder, case.number, terminal, written),
        retry_policy=RetryPolicy(max_retries=0),
    )
    request = AgentRequest(role=case.role, iteration=2, goal="green", workspace="/fw")
    try:
        answer = agent.ask(request)
    except AnswerInvalid as exc:
        terminal.line(f"fwloop: {exc}")
        return "invalid"
    terminal.line(f"fwloop: {answer.model_dump_json()}")
    return "valid"


def assert_readable(paths: list[Path]) -> None:
    for path in paths:
        text = path.read_text(encoding="utf-8")  # strict: every record is valid UTF-8
        if path.suffix == ".json":
            json.loads(text)
        elif path.suffix == ".jsonl":
            for line in text.splitlines():
                json.loads(line)


def test_the_corpus_is_large_and_covers_every_mutation() -> None:
    cases = corpus()
    assert len(cases) >= 500
    used = Counter(name for case in cases for name in case.mutations)
    assert set(used) == set(DOCUMENT_MUTATIONS) | set(TEXT_MUTATIONS)
    assert min(used.values()) >= 20
    assert sum(case.strict for case in cases) >= 250


def test_no_fuzzed_answer_crashes_the_gate_or_the_records(tmp_path: Path) -> None:
    recorder = RunRecorder(tmp_path / "runs", "fuzz", Redactor({"API_KEY": "sk-fuzz-secret"}))
    terminal = Terminal(io.TextIOWrapper(io.BytesIO(), encoding="ascii"))
    written: list[Path] = []
    verdicts: Counter[str] = Counter()
    strict_but_accepted = []
    for case in corpus():
        verdict = ask(case, recorder, terminal, written)
        verdicts[verdict] += 1
        if verdict == "valid" and case.strict:
            strict_but_accepted.append(case)
    assert strict_but_accepted == []
    # Both sides of the gate are exercised: one call per valid answer, two per invalid one.
    assert verdicts["valid"] >= 30
    assert verdicts["invalid"] >= 300
    calls = verdicts["valid"] + 2 * verdicts["invalid"]
    assert len(written) >= 3 * calls
    assert_readable([*written, recorder.path / "task-events.jsonl"])


@settings(deadline=None, max_examples=150)
@given(
    role=st.sampled_from(list(VALID)),
    text=st.text(st.characters(exclude_categories=()), max_size=300)
    | st.builds(
        str.__add__,
        st.sampled_from([json.dumps(answer)[:-1] for answer in VALID.values()]),
        st.text(st.characters(exclude_categories=()), max_size=40),
    ),
)
def test_any_text_at_all_is_an_answer_or_answer_invalid(
    tmp_path_factory: pytest.TempPathFactory, role: Role, text: str
) -> None:
    recorder = RunRecorder(tmp_path_factory.mktemp("runs"), "any", Redactor({}))
    terminal = Terminal(io.TextIOWrapper(io.BytesIO(), encoding="utf-8"))
    written: list[Path] = []
    ask(Case(1, role, (), text), recorder, terminal, written)
    assert_readable(written)
