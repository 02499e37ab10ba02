"""Hostile agent text: duplicate keys, lone surrogates, crashing providers, and the writers of it.

The gate judges JSON exactly as strictly as a standard reader would: a key given twice, or a
string that is not valid Unicode, is bad output for that call, never a crash and never read
last-key-wins. Whatever text still reaches the run directory or the terminal cannot crash them.
The unit tests use an in-process provider; two real runs (slow) show it end to end.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import jsonschema
import pytest

from controllerkit import ControllerKit, fixing
from loopkit import CALC, FIXES, LoopProject, coder_answer, tree_state, unified_diff
from pytest_fwloop.agents.base import RawAnswer
from pytest_fwloop.agents.errors import AnswerInvalid
from pytest_fwloop.agents.retry import RetryPolicy
from pytest_fwloop.agents.role import CallRecord, RoleAgent
from pytest_fwloop.core.machine.outcomes import Outcome, exit_status
from pytest_fwloop.core.records.agent_protocol import (
    MAX_JSON_DEPTH,
    AgentRequest,
    ReviewerAnswer,
    extract_json,
    load_schema,
)
from pytest_fwloop.core.records.redaction import Redactor
from pytest_fwloop.loop.finish import final_state_of
from pytest_fwloop.loop.rundir import RunRecorder
from pytest_fwloop.loop.terminal import Terminal

APPROVE = '{"decision": "approve", "must_fix": [], "risk": 0.1, "summary": "ok"}'
# What a model might send to slip an approval past a reader that keeps the last key.
DOUBLE_DECISION = (
    '{"decision": "changes_requested", "must_fix": [{"issue": "unsafe"}], "risk": 0.2, '
    '"summary": "no", "decision": "approve"}'
)
ESCAPED_SURROGATE = '{"decision": "approve", "must_fix": [], "risk": 0.1, "summary": "ok \\ud800"}'


def request(role: str = "reviewer") -> AgentRequest:
    return AgentRequest.model_validate(
        {"role": role, "iteration": 2, "goal": "make every selected test pass", "workspace": "/fw"}
    )


class Replies:
    """A Provider answering from a list: text, or an exception to raise (a provider bug)."""

    spec = "replies"

    def __init__(self, *replies: str | Exception, usage: dict[str, float] | None = None) -> None:
        self.replies = list(replies)
        self.usage = usage or {}

    def call(self, request: AgentRequest, timeout: float) -> RawAnswer:
        reply = self.replies.pop(0)
        if isinstance(reply, Exception):
            raise reply
        return RawAnswer(text=reply, usage=self.usage)


def reviewer(
    provider: Replies, records: list[CallRecord], schema: dict[str, object] | None = None
) -> RoleAgent:
    return RoleAgent(
        "reviewer",
        [provider],
        load_schema("reviewer") if schema is None else schema,
        records.append,
        retry_policy=RetryPolicy(max_retries=0),
    )


# -- the gate -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ('{"a": 1, "a": 1}', "a"),
        (DOUBLE_DECISION, "decision"),
        ('{"must_fix": [{"issue": "x", "file": "a.c", "issue": "y"}]}', "issue"),
        ('{"analysis": {"root_cause": "a", "root_cause": "b"}, "patch": ""}', "root_cause"),
        ('{"x": [[{"deep": {"k": 1, "k": 2}}]]}', "k"),
        ('```json\n{"decision": "approve", "decision": "approve"}\n```', "decision"),
    ],
    ids=["same-value", "decision", "in-a-list", "nested-object", "deep", "fenced"],
)
def test_a_key_given_twice_at_any_depth_is_rejected(text: str, key: str) -> None:
    with pytest.raises(ValueError, match=r"^[^\n]*$") as caught:
        extract_json(text)
    assert f"the key '{key}' appears twice in one object" in str(caught.value)


@pytest.mark.parametrize(
    ("text", "where"),
    [
        (ESCAPED_SURROGATE, "U+D800 at $.summary"),
        ('{"summary": "\\udfff tail"}', "U+DFFF at $.summary"),
        ('{"must_fix": [{"issue": "a\\udc80"}]}', "U+DC80 at $.must_fix[0].issue"),
        ('{"x": ["ok", "\\ud83d"]}', "U+D83D at $.x[1]"),  # half of an emoji's pair
        ('{"k\\ud800": 1}', "U+D800 in a key at $"),
        ('{"summary": "raw \ud800"}', "U+D800 at $.summary"),  # as a decoder may hand it over
        (b'{"summary": "\xff"}'.decode("utf-8", "surrogateescape"), "U+DCFF at $.summary"),
    ],
    ids=["escaped", "low", "in-a-list", "half-pair", "key", "raw", "surrogateescape"],
)
def test_a_lone_surrogate_anywhere_is_rejected_in_one_printable_line(text: str, where: str) -> None:
    with pytest.raises(ValueError, match=r"^[^\n]*$") as caught:
        extract_json(text)
    reason = str(caught.value)
    assert f"lone surrogate {where}" in reason
    reason.encode("utf-8")  # the reason itself can be printed and written anywhere


def test_a_surrogate_under_a_key_with_a_newline_is_still_reported_in_one_line() -> None:
    with pytest.raises(ValueError, match=r"^[^\n]*$"):
        extract_json('{"a\\nb": "\\ud800"}')


@pytest.mark.parametrize(
    ("depth", "refused"), [(MAX_JSON_DEPTH, False), (MAX_JSON_DEPTH + 1, True), (950, True)]
)
def test_nesting_is_bounded_well_inside_the_stack(depth: int, refused: bool) -> None:
    # A document that only just parsed would exhaust the stack of the next thing to handle it
    # (the recorder's json.dumps, two frames deeper), so the gate refuses it, whatever depth
    # the caller runs at.
    text = '{"x": ' + "[" * (depth - 1) + "]" * (depth - 1) + "}"
    if refused:
        with pytest.raises(ValueError, match=r"deeper than|not one JSON object"):
            extract_json(text)
    else:
        assert extract_json(text)["x"]


def test_a_surrogate_pair_is_one_valid_character() -> None:
    assert extract_json('{"summary": "\\ud83d\\ude00"}') == {"summary": "\U0001f600"}


@pytest.mark.parametrize("text", ['{"risk": 1e999}', '{"x": [-1e400]}'], ids=["inf", "-inf"])
def test_a_number_too_large_for_a_float_is_rejected(text: str) -> None:
    # Python would read it as inf, which slips past range checks exactly as NaN does.
    with pytest.raises(ValueError, match="overflows a float"):
        extract_json(text)


@pytest.mark.parametrize(
    "risk", ["1.0000001", "-0.0000001", "1e999", "NaN", "Infinity", '"0.5"'], ids=str
)
def test_a_risk_that_is_not_a_finite_number_in_0_1_is_a_json_gate_error(risk: str) -> None:
    """Issue 39: exact decimals change nothing here: out of range or non-finite is bad output."""
    text = f'{{"decision": "approve", "must_fix": [], "risk": {risk}, "summary": "ok"}}'
    records: list[CallRecord] = []
    with pytest.raises(AnswerInvalid):
        reviewer(Replies(text, text), records).ask(request())
    assert [r.error_kind for r in records] == ["provider_bad_output"] * 2


#: Three patterns, each matching a line of `fixing("bug", "ok")`: 0.1 + 0.2 x 3.
THREE_PATTERNS = "fwloop_risky_patterns =\n    a line ok\n    b line bug\n    c line ^(ok|bug)$"


@pytest.mark.parametrize(
    ("risk", "ini", "trace"),
    [
        ("0.7000001", "", "reviewer risk 0.7000001 > fwloop_max_risk 0.70"),
        ("0.70", "", "policy passed; reviewer approved (risk 0.70 <= 0.70)"),
        (
            "0.1",
            THREE_PATTERNS,
            "policy passed; reviewer approved (risk 0.10 + 0.2 x 3 risky pattern(s) (a, b, c) "
            "= 0.70 <= 0.70)",
        ),
    ],
    ids=["0.7000001-refused", "0.70-approved", "0.1+0.2x3-approved"],
)
def test_a_risk_is_judged_exactly_as_the_json_wrote_it(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, risk: str, ini: str, trace: str
) -> None:
    """Issue 39: 0.7000001 passed `fwloop_max_risk = 0.70` compared at two places; the trace
    now prints the exact numbers compared."""
    kit = ControllerKit(pytester, monkeypatch)
    text = f'{{"decision": "approve", "must_fix": [], "risk": {risk}, "summary": "ok"}}'
    kit.coder.answers = [fixing("bug", "ok")]
    kit.reviewer.answers = [lambda request, timeout: RawAnswer(text=text)]
    kit.build("bug", "fwloop_max_risk = 0.70", *([ini] if ini else []))
    refused = "fwloop_max_risk" in trace
    assert kit.run() is (Outcome.POLICY_VIOLATION if refused else Outcome.SUCCESS)
    reasons = [
        e["reason"] for e in kit.events() if e["event"] in ("patch_approved", "patch_rejected")
    ]
    assert any(trace in reason for reason in reasons), reasons
    assert kit.firmware() == ("bug" if refused else "ok")
    if refused:
        told = [item.issue for item in kit.coder.requests[1].must_fix]
        assert any("risk 0.7000001, above fwloop_max_risk=0.70" in issue for issue in told), told


def test_a_double_decision_is_bad_output_and_never_an_approval() -> None:
    records: list[CallRecord] = []
    with pytest.raises(AnswerInvalid) as caught:
        reviewer(Replies(DOUBLE_DECISION, DOUBLE_DECISION), records).ask(request())
    assert "the key 'decision' appears twice" in caught.value.message
    assert [(r.error_kind, r.document) for r in records] == [("provider_bad_output", None)] * 2


def test_a_lone_surrogate_is_re_asked_with_the_reason_then_accepted_when_fixed() -> None:
    records: list[CallRecord] = []
    answer = reviewer(Replies(ESCAPED_SURROGATE, APPROVE), records).ask(request())
    assert isinstance(answer, ReviewerAnswer)
    assert records[0].error_kind == "provider_bad_output"
    assert "lone surrogate U+D800" in records[0].errors[0]


# -- calls that crash ------------------------------------------------------------------------------


def test_a_provider_that_crashes_is_recorded_then_the_crash_propagates() -> None:
    records: list[CallRecord] = []
    agent = reviewer(Replies(RuntimeError("a bug in a provider")), records)
    with pytest.raises(RuntimeError, match="a bug in a provider"):
        agent.ask(request())
    [record] = records
    assert record.error_kind == "internal_error"
    assert record.errors == ["RuntimeError: a bug in a provider"]
    assert (record.raw, record.document, record.usage) == ("", None, {})


def test_a_gate_that_crashes_after_the_answer_still_records_the_answer_and_its_usage() -> None:
    records: list[CallRecord] = []
    billed = {"input_tokens": 900.0, "output_tokens": 40.0}
    # A conftest hook's mistake: a configuration bug, not bad output.
    broken: dict[str, object] = {"type": "bogus"}
    agent = reviewer(Replies(APPROVE, usage=billed), records, schema=broken)
    with pytest.raises(jsonschema.SchemaError):
        agent.ask(request())
    [record] = records
    assert (record.raw, record.usage, record.error_kind) == (APPROVE, billed, "internal_error")
    assert record.errors[0].startswith("SchemaError: ")


# -- the writers -----------------------------------------------------------------------------------


@pytest.fixture
def recorder(tmp_path: Path) -> RunRecorder:
    return RunRecorder(tmp_path / "runs", "run-1", Redactor({}))


def test_the_recorder_writes_lone_surrogates_as_marked_escapes(recorder: RunRecorder) -> None:
    raw = 'answer "\ud800" and undecodable \udcff, caf\u00e9'
    path = recorder.write_text("rounds/02/coder-1.answer.txt", raw)
    assert path.read_text(encoding="utf-8") == 'answer "\\ud800" and undecodable \\udcff, caf\u00e9'


def test_json_records_with_lone_surrogates_are_valid_and_lossless(recorder: RunRecorder) -> None:
    document = {"summary": "\ud800", "k\udcff": ["\udfff", "caf\u00e9"]}
    path = recorder.write_json("rounds/02/coder-1.answer.json", document)
    assert json.loads(path.read_text(encoding="utf-8")) == document
    recorder.append_event({"reason": "coder said \ud800", "evidence": ["\udcff"]})
    recorder.append_event({"reason": "next"})
    lines = (recorder.path / "task-events.jsonl").read_text(encoding="utf-8").splitlines()
    assert [json.loads(line)["reason"] for line in lines] == ["coder said \ud800", "next"]


def test_a_diff_of_a_file_that_is_not_utf8_is_written_byte_for_byte(recorder: RunRecorder) -> None:
    # The shadow repository decodes git's diff with surrogateescape; final.patch must still
    # apply to the Latin-1 source it came from.
    diff = b"@@ -1 +1 @@\n-/* caf\xe9 */\n+/* caf\xe9, fixed */\n"
    path = recorder.write_patch("final.patch", diff.decode("utf-8", "surrogateescape"))
    assert path.read_bytes() == diff
    # A surrogate no decoder made (agent text) has no byte to go back to: it is escaped.
    assert recorder.write_patch("best.patch", "x \ud800").read_bytes() == b"x \\ud800"


@pytest.mark.parametrize("encoding", ["ascii", "utf-8", "latin-1"])
def test_the_terminal_prints_any_text_on_any_encoding(encoding: str) -> None:
    buffer = io.BytesIO()
    stream = io.TextIOWrapper(buffer, encoding=encoding)
    terminal = Terminal(stream)
    terminal.line("coder: fix \ud800 caf\u00e9 \u2026")
    terminal.summary(
        outcome="failure",
        final_state="FAILURE",
        reason="reviewer said \udcff",
        rows=[[2, "patch", "1/6", "16.7%", 1, "continue \ud800"]],
        closing=["done \ud800"],
    )
    text = buffer.getvalue().decode(encoding)
    assert "coder: fix \\ud800 caf" in text
    assert "reviewer said \\udcff" in text
    assert "continue \\ud800" in text


# -- real runs ------------------------------------------------------------------------------------


def fix_everything(summary: str) -> dict[str, object]:
    fixed = CALC
    for old, new in FIXES:
        fixed = fixed.replace(old, new)
    return coder_answer(unified_diff("fw/calc.py", CALC, fixed), summary)


@pytest.mark.slow
def test_a_lone_surrogate_in_a_coder_answer_is_re_asked_in_a_real_run(
    project: LoopProject,
) -> None:
    project.calc_suite()
    # json.dumps escapes the surrogate: the agent prints `"fix \\ud800"`, as a model would.
    hostile = json.dumps(fix_everything("fix \ud800"))
    coder = project.agent("coder", [hostile, fix_everything("fix")])
    result = project.run(f"--fwloop-coder={coder.spec}")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str() + result.stderr.str()
    assert project.summary()["outcome"] == "success"
    rounds = project.run_dirs()[0] / "rounds" / "02"
    meta = json.loads((rounds / "coder-1.meta.json").read_text(encoding="utf-8"))
    assert meta["error_kind"] == "provider_bad_output"
    assert "lone surrogate U+D800 at $.analysis.root_cause" in meta["errors"][0]
    assert (rounds / "coder-1.answer.txt").read_text(encoding="utf-8").strip() == hostile
    assert coder.requests()[1]["validation_errors"] == meta["errors"]


@pytest.mark.slow
def test_a_reviewer_with_a_double_decision_then_a_surrogate_never_gets_a_patch_applied(
    project: LoopProject,
) -> None:
    project.calc_suite()
    before = tree_state(project.root)
    coder = project.agent("coder", [fix_everything("fix")])
    reviewer = project.agent("reviewer", [], [DOUBLE_DECISION, ESCAPED_SURROGATE])
    result = project.run(f"--fwloop-coder={coder.spec}", f"--fwloop-reviewer={reviewer.spec}")
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str() + result.stderr.str()
    summary = project.summary()
    assert summary["outcome"] == "review_schema_invalid"
    assert tree_state(project.root) == before
    rounds = project.run_dirs()[0] / "rounds" / "02"
    assert not (rounds / "patch.diff").exists()
    errors = [
        json.loads((rounds / f"reviewer-{n}.meta.json").read_text(encoding="utf-8"))["errors"][0]
        for n in (1, 2)
    ]
    assert "the key 'decision' appears twice in one object" in errors[0]
    assert "lone surrogate U+D800 at $.summary" in errors[1]


# -- the outcome ----------------------------------------------------------------------------------


def test_an_internal_error_exits_3_and_ends_in_failure() -> None:
    assert int(exit_status(Outcome.INTERNAL_ERROR)) == int(pytest.ExitCode.INTERNAL_ERROR) == 3
    assert exit_status(Outcome.INTERNAL_ERROR, advisory=True) == 3
    assert final_state_of(Outcome.INTERNAL_ERROR).value == "FAILURE"
