"""The wire protocol and the strict-JSON gate of DESIGN.md §5, on plain values."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, get_args

import jsonschema
import pydantic
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentkit import CODER, REVIEWER, SHAPES, TESTER, WIRE_FIELDS
from pytest_fwloop.core.records.agent_protocol import (
    MAX_ERROR_CHARS,
    AgentRequest,
    AnswerParseError,
    CoderAnswer,
    Failure,
    HistoryEntry,
    MustFix,
    ReviewerAnswer,
    Role,
    TestCommand,
    TesterAnswer,
    extract_json,
    load_schema,
    parse_answer,
    validate_answer,
)

if TYPE_CHECKING:
    from pytest_fwloop.core.records.agent_protocol import Answer

ROLES: tuple[Role, ...] = get_args(Role)

MODELS: dict[Role, type[Answer]] = {
    "coder": CoderAnswer,
    "reviewer": ReviewerAnswer,
    "tester": TesterAnswer,
}


def changed(document: dict[str, object], **changes: object) -> dict[str, object]:
    """A copy with top-level keys replaced, or removed when the value is `...`."""
    copy = json.loads(json.dumps(document))
    for key, value in changes.items():
        if value is ...:
            del copy[key]
        else:
            copy[key] = value
    assert isinstance(copy, dict)
    return copy


@pytest.mark.parametrize("role", ROLES)
def test_shipped_schemas_are_draft_2020_12_and_say_why_extras_pass(role: Role) -> None:
    schema = load_schema(role)
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert "additionalProperties" not in schema
    assert "other keys are allowed" in str(schema["description"])


def test_load_schema_returns_a_copy_the_caller_may_change() -> None:
    load_schema("reviewer")["required"] = []
    assert load_schema("reviewer")["required"] == ["decision", "must_fix", "risk", "summary"]


@pytest.mark.parametrize("role", ROLES)
def test_design_shapes_pass_the_gate_and_parse(role: Role) -> None:
    document = SHAPES[role]
    assert validate_answer(role, document, load_schema(role)) == []
    assert isinstance(parse_answer(role, document), MODELS[role])


@pytest.mark.parametrize("role", ROLES)
def test_model_extras_do_not_fail_the_gate(role: Role) -> None:
    document = changed(SHAPES[role], reasoning="step by step…", tokens=1234)
    assert validate_answer(role, document, load_schema(role)) == []


def test_parsed_reviewer_keeps_the_must_fix_details() -> None:
    review = parse_answer("reviewer", REVIEWER)
    assert isinstance(review, ReviewerAnswer)
    assert review.must_fix[0] == MustFix(
        issue="the loop never times out", file="src/uart.c", line=42
    )
    assert review.must_fix[1].file is None


def test_file_and_line_may_be_null() -> None:
    document = changed(REVIEWER, must_fix=[{"issue": "x", "file": None, "line": None}])
    assert validate_answer("reviewer", document, load_schema("reviewer")) == []


@pytest.mark.parametrize(
    ("role", "document", "expected"),
    [
        pytest.param(
            "reviewer",
            changed(REVIEWER, summary=...),
            "$: 'summary' is a required property",
            id="missing-key",
        ),
        pytest.param(
            "reviewer",
            changed(REVIEWER, risk=1.5),
            "$.risk: 1.5 is greater than the maximum of 1",
            id="risk-above-1",
        ),
        pytest.param(
            "reviewer",
            changed(REVIEWER, risk=-0.1),
            "$.risk: -0.1 is less than the minimum of 0",
            id="risk-below-0",
        ),
        pytest.param(
            "reviewer",
            changed(REVIEWER, risk="low"),
            "$.risk: 'low' is not of type 'number'",
            id="risk-not-a-number",
        ),
        pytest.param(
            "reviewer",
            changed(REVIEWER, decision="lgtm"),
            "$.decision: 'lgtm' is not one of ['approve', 'changes_requested']",
            id="decision-enum",
        ),
        pytest.param(
            "reviewer",
            changed(REVIEWER, must_fix=[]),
            "$.must_fix: [] should be non-empty",
            id="changes-requested-without-must-fix",
        ),
        pytest.param(
            "reviewer",
            changed(REVIEWER, must_fix=[{"file": "a.c"}]),
            "$.must_fix[0]: 'issue' is a required property",
            id="must-fix-without-issue",
        ),
        pytest.param(
            "reviewer",
            changed(REVIEWER, must_fix=[{"issue": "x", "line": "42"}]),
            "$.must_fix[0].line: '42' is not of type 'integer', 'null'",
            id="line-as-string",
        ),
        pytest.param(
            "coder",
            changed(CODER, analysis={"root_cause": "x", "hypotheses": [], "confidence": 2}),
            "$.analysis.confidence: 2 is greater than the maximum of 1",
            id="confidence-above-1",
        ),
        pytest.param(
            "coder",
            changed(CODER, analysis={"root_cause": "x", "confidence": 0.5}),
            "$.analysis: 'hypotheses' is a required property",
            id="nested-missing-key",
        ),
        pytest.param(
            "coder",
            changed(CODER, patch=None),
            "$.patch: None is not of type 'string'",
            id="patch-null",
        ),
        pytest.param(
            "tester",
            changed(TESTER, commands=[{"argv": [], "reason": "nothing"}]),
            "$.commands[0].argv: [] should be non-empty",
            id="empty-argv",
        ),
        pytest.param(
            "tester",
            changed(TESTER, commands=[{"argv": "pytest -k uart", "reason": "a shell line"}]),
            "$.commands[0].argv: 'pytest -k uart' is not of type 'array'",
            id="argv-as-string",
        ),
        pytest.param("tester", [TESTER], "$: [{", id="not-an-object"),
    ],
)
def test_gate_rejects_with_a_json_path(role: Role, document: object, expected: str) -> None:
    errors = validate_answer(role, document, load_schema(role))
    assert any(error.startswith(expected) for error in errors), errors


def test_approve_needs_no_must_fix() -> None:
    document = changed(REVIEWER, decision="approve", must_fix=[])
    assert validate_answer("reviewer", document, load_schema("reviewer")) == []


def test_every_error_is_listed_in_path_order() -> None:
    document = {"decision": "maybe", "risk": 7}
    assert validate_answer("reviewer", document, load_schema("reviewer")) == [
        "$: 'must_fix' is a required property",
        "$: 'summary' is a required property",
        "$.decision: 'maybe' is not one of ['approve', 'changes_requested']",
        "$.risk: 7 is greater than the maximum of 1",
    ]


def test_errors_quoting_huge_documents_stay_one_short_line() -> None:
    document = changed(REVIEWER, summary={"log": "line\n" * 10_000})
    (error,) = validate_answer("reviewer", document, load_schema("reviewer"))
    assert error.startswith("$.summary: {'log': ")
    assert "\n" not in error
    assert len(error) <= MAX_ERROR_CHARS


def test_a_broken_replacement_schema_is_a_configuration_error() -> None:
    with pytest.raises(jsonschema.SchemaError):
        validate_answer("reviewer", REVIEWER, {"type": "no-such-type"})


def test_parse_reports_model_errors_as_json_path_lines() -> None:
    # A replacement schema may be looser than the models; the models still hold the line.
    with pytest.raises(AnswerParseError) as caught:
        parse_answer("reviewer", {"decision": "approve", "must_fix": [{}], "risk": 2})
    assert caught.value.errors == [
        "$.must_fix[0].issue: Field required",
        "$.risk: Input should be less than or equal to 1",
        "$.summary: Field required",
    ]
    assert str(caught.value) == "; ".join(caught.value.errors)


JSON_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20)
)
JSON_VALUES = st.recursive(
    JSON_SCALARS,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4)
    ),
    max_leaves=30,
)
CONTRACT_KEYS = st.sampled_from(
    [
        "analysis",
        "root_cause",
        "hypotheses",
        "confidence",
        "patch",
        "summary",
        "decision",
        "must_fix",
        "issue",
        "file",
        "line",
        "risk",
        "select",
        "commands",
        "argv",
        "reason",
        "notes",
    ]
)
# Documents made of the contract's own keys and values near its limits, so that some of them
# pass the schema; arbitrary JSON almost never does.
NEAR_ANSWERS = st.recursive(
    JSON_SCALARS | st.sampled_from(["approve", "changes_requested", 0, 1, 0.5, 1.5, -1, "", "x"]),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(CONTRACT_KEYS, children, max_size=6)
    ),
    max_leaves=25,
)


@settings(deadline=None)
@given(role=st.sampled_from(ROLES), document=JSON_VALUES)
def test_gate_never_raises_on_any_json(role: Role, document: object) -> None:
    errors = validate_answer(role, document, load_schema(role))
    assert all(isinstance(error, str) and "\n" not in error for error in errors)
    assert all(error.startswith("$") for error in errors)


@settings(deadline=None)
@given(role=st.sampled_from(ROLES), document=NEAR_ANSWERS | st.sampled_from(list(SHAPES.values())))
def test_what_the_schema_passes_the_model_parses(role: Role, document: object) -> None:
    if validate_answer(role, document, load_schema(role)) == []:
        assert isinstance(parse_answer(role, document), MODELS[role])


@pytest.mark.parametrize(
    "text",
    [
        '{"a": 1}',
        '  \n {"a": 1}\n\n',
        '```json\n{"a": 1}\n```',
        '\n```JSON\n{"a": 1}\n```\n',
        '```\n{"a": 1}\n```',
    ],
    ids=["bare", "whitespace", "fenced", "fenced-upper-padded", "fence-without-language"],
)
def test_extract_json_accepts_one_object(text: str) -> None:
    assert extract_json(text) == {"a": 1}


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "the answer is empty"),
        ("   \n", "the answer is empty"),
        ("sure! here it is", "the answer is not one JSON object: Expecting value"),
        ('{"a": 1} {"b": 2}', "the answer is not one JSON object: Extra data"),
        ('{"a": 1}\n{"b": 2}\n', "the answer is not one JSON object: Extra data"),
        ('Here you go:\n```json\n{"a": 1}\n```', "the answer is not one JSON object"),
        ('```json\n{"a": 1}\n```\n```json\n{"b": 2}\n```', "the answer is not one JSON object"),
        ('{"a": 1', "the answer is not one JSON object"),
        ('{"risk": NaN}', "NaN is not valid JSON"),
        ("[1, 2]", "the answer is a JSON list, not one JSON object"),
        ('"text"', "the answer is a JSON str, not one JSON object"),
    ],
    ids=[
        "empty",
        "blank",
        "prose",
        "two-objects",
        "two-lines",
        "prose-around-fence",
        "two-fences",
        "truncated",
        "nan",
        "array",
        "string",
    ],
)
def test_extract_json_rejects_everything_else_in_one_line(text: str, reason: str) -> None:
    with pytest.raises(ValueError, match=r"^[^\n]*$") as caught:
        extract_json(text)
    assert reason in str(caught.value)


def test_extract_json_survives_absurd_nesting() -> None:
    with pytest.raises(ValueError, match="not one JSON object"):
        extract_json("[" * 100_000 + "]" * 100_000)


def make_request(**fields: object) -> AgentRequest:
    return AgentRequest.model_validate(
        {
            "role": "reviewer",
            "iteration": 3,
            "goal": "make every selected test pass",
            "workspace": "/work/firmware",
            **fields,
        }
    )


def test_to_wire_carries_every_protocol_field_and_the_schema_under_its_name() -> None:
    request = make_request(
        failures=[Failure(nodeid="t.py::test_echo", signature="call t.py: assert", excerpt="E")],
        history=[HistoryEntry(iteration=1, pass_count=3, total_count=5)],
        must_fix=[MustFix(issue="bounded wait", file="src/uart.c", line=7)],
        patch="--- a/x\n+++ b/x\n",
        schema=load_schema("reviewer"),
    )
    wire = request.to_wire()
    for key in WIRE_FIELDS:
        assert key in wire
    assert "schema_" not in wire
    assert wire["schema"] == load_schema("reviewer")
    assert wire["failures"] == [
        {"nodeid": "t.py::test_echo", "signature": "call t.py: assert", "excerpt": "E"}
    ]
    assert wire["must_fix"] == [{"issue": "bounded wait", "file": "src/uart.c", "line": 7}]
    assert json.loads(json.dumps(wire)) == wire
    assert AgentRequest.model_validate(wire) == request


def test_later_request_fields_slot_in_as_extras() -> None:
    wire = make_request(budget_tokens=4000).to_wire()
    assert wire["budget_tokens"] == 4000
    assert wire["validation_errors"] == []
    assert wire["constraints"] == []
    assert wire["build_diagnostics"] == ""


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({"workspace": "firmware"}, "workspace must be an absolute path"),
        ({"iteration": 0}, "greater than or equal to 1"),
        ({"role": "operator"}, "Input should be 'coder', 'reviewer' or 'tester'"),
    ],
)
def test_request_rejects_impossible_values(fields: dict[str, object], problem: str) -> None:
    with pytest.raises(pydantic.ValidationError, match=problem):
        make_request(**fields)


def test_domain_classes_named_test_are_not_collected() -> None:
    # Imported into this test module on purpose: pytest would warn (an error here) otherwise.
    assert TestCommand.__test__ is False
    assert TesterAnswer.__test__ is False
