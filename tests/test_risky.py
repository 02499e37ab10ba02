"""High-risk code (seed 001 §5.1.5, §5.7): the patterns, what they find in a diff as git reads
it, the risk they add, the boot-critical changes an operator must confirm (in process,
tests/controllerkit.py), and real `pytest --fwloop` / `fwloop confirm` runs (slow)."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from controllerkit import ControllerKit, fixing
from loopkit import CALC, FIXES, LoopProject, coder_answer, tree_state, unified_diff
from pytest_fwloop.config.options import spec_of
from pytest_fwloop.config.settings import load_settings
from pytest_fwloop.core.change.unified_diff import Hunk, parse_patch
from pytest_fwloop.core.gate.gate_rules import review_refusal
from pytest_fwloop.core.gate.risky import (
    FIRMWARE_PATTERNS,
    RISK_PER_PATTERN,
    find_risky,
    parse_patterns,
    raised_risk,
    unnamed_boot,
    with_evidence,
)
from pytest_fwloop.core.machine.outcomes import Outcome
from pytest_fwloop.core.records.agent_protocol import ReviewerAnswer, RiskyChange
from pytest_fwloop.core.suite.results import TestRecord

FIRMWARE = parse_patterns(["firmware"])

UART_BEFORE = """\
void uart_send(char c) {
    __disable_irq();
    ring_put(&tx, c);
    __enable_irq();
}
"""
#: Keeps the context line that disables interrupts; adds a flash write, removes a watchdog kick.
UART_AFTER = """\
void uart_send(char c) {
    __disable_irq();
    ring_put(&tx, c);
    flash_write_word(LOG_ADDR, c);
    __enable_irq();
}
"""


def change(**fields: object) -> RiskyChange:
    base: dict[str, object] = {
        "file": "src/startup.c",
        "hunk": "@@ -1 +1 @@",
        "line": "-    Reset_Handler();",
        "pattern": "reset-handler",
        "matched": "Reset_Handler",
        "boot_critical": True,
    }
    return RiskyChange.model_validate({**base, **fields})


# -- reading the diff ----------------------------------------------------------------------------


def test_each_hunk_keeps_its_header_and_changed_lines() -> None:
    [parsed] = parse_patch(unified_diff("src/uart.c", UART_BEFORE, UART_AFTER))
    assert parsed.hunks == (Hunk("@@ -1,5 +1,6 @@", ("+    flash_write_word(LOG_ADDR, c);",)),)


def test_only_added_and_removed_lines_are_judged_not_context() -> None:
    found = find_risky(unified_diff("src/uart.c", UART_BEFORE, UART_AFTER), FIRMWARE)
    # `__disable_irq` is only context here: the patch does not change it.
    assert [(c.pattern, c.file, c.hunk, c.line, c.matched) for c in found] == [
        (
            "flash-write",
            "src/uart.c",
            "@@ -1,5 +1,6 @@",
            "+    flash_write_word(LOG_ADDR, c);",
            "flash_write",
        )
    ]
    removed = find_risky(
        unified_diff("src/uart.c", UART_BEFORE, "void uart_send(char c) {}\n"), FIRMWARE
    )
    assert {c.pattern for c in removed} == {"irq-disable"}
    assert all(c.line.startswith("-") for c in removed)


LINES = st.lists(st.sampled_from(["__disable_irq();", "x++;", "WDT->CTRL = 0;", "y = 2;"]))


@given(before=LINES, after=LINES)
def test_line_patterns_judge_exactly_the_lines_the_patch_adds_or_removes(
    before: list[str], after: list[str]
) -> None:
    old, new = "".join(f"{line}\n" for line in before), "".join(f"{line}\n" for line in after)
    if old == new:
        return
    diff = unified_diff("src/a.c", old, new)
    changed = [
        line
        for line in diff.splitlines()
        if line[:1] in "+-" and not line.startswith(("+++ ", "--- "))
    ]
    found = find_risky(diff, FIRMWARE)
    assert {c.line for c in found} <= set(changed)
    for pattern in [p for p in FIRMWARE if not p.on_path]:
        hit = any(pattern.regex.search(line[1:]) for line in changed)
        assert hit == any(c.pattern == pattern.name for c in found), pattern.name


@pytest.mark.parametrize(
    ("path", "pattern"),
    [
        ("firmware/stm32f4.ld", "linker-script"),
        ("firmware/startup_stm32f4xx.s", "startup-code"),
        ("bootloader/main.c", "boot-code"),
        ("src/boot.c", "boot-code"),
    ],
)
def test_boot_critical_paths(path: str, pattern: str) -> None:
    [found] = find_risky(unified_diff(path, "a\n", "b\n"), FIRMWARE)
    assert (found.pattern, found.file, found.hunk, found.boot_critical) == (pattern, path, "", True)


@pytest.mark.parametrize("path", ["src/reboot_count.c", "docs/my-boot.md", "src/uart.c"])
def test_paths_that_only_look_like_boot_code(path: str) -> None:
    assert find_risky(unified_diff(path, "a\n", "b\n"), FIRMWARE) == []


def test_a_patch_that_does_not_parse_matches_nothing() -> None:
    assert find_risky("not a diff", FIRMWARE) == []


# -- the patterns ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "says"),
    [
        ("irq line", "write NAME KIND REGEX"),
        ("irq lines foo", "KIND one of line, path, boot-line, boot-path"),
        ("irq line (unclosed", "does not compile"),
        ("irq line x*", "matches an empty text, so it would match every line; write one that "),
        ("ir!q line foo", "write NAME KIND REGEX"),
        ("watchdog line foo", "the name 'watchdog' is already taken by an earlier line"),
    ],
)
def test_a_bad_pattern_line_is_named(line: str, says: str) -> None:
    with pytest.raises(ValueError, match=says) as caught:
        parse_patterns(["firmware", line])
    assert repr(line) in str(caught.value)


def test_a_name_given_twice_by_the_users_own_lines_is_refused() -> None:
    with pytest.raises(ValueError, match="'irq' is already taken") as caught:
        parse_patterns(["irq line foo", "irq path bar"])
    assert str(caught.value).startswith("'irq path bar': ")


def test_a_bad_pattern_line_stops_the_run_before_anything_runs(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("FWLOOP_RISKY_PATTERNS", raising=False)
    pytester.makeini(
        "[pytest]\nfwloop_coder = rules\nfwloop_risky_patterns =\n    firmware\n    irq lines x\n"
    )
    with pytest.raises(pytest.UsageError) as raised:
        load_settings(pytester.parseconfig("--fwloop"))
    assert str(raised.value) == (
        "fwloop: ini fwloop_risky_patterns: line 'irq lines x': write NAME KIND REGEX, KIND one "
        "of line, path, boot-line, boot-path"
    )


def test_firmware_stands_for_the_built_in_patterns_and_more_may_follow() -> None:
    patterns = parse_patterns(["firmware", "hal line \\bHAL_RCC_\\w+"])
    assert [p.name for p in patterns][-1] == "hal"
    assert len(patterns) == len(FIRMWARE_PATTERNS) + 1
    assert parse_patterns([]) == ()


def test_the_option_says_what_a_pattern_adds() -> None:
    assert f"adds {RISK_PER_PATTERN:g} to the reviewer's risk" in spec_of("risky_patterns").help


def test_the_docs_list_every_built_in_pattern() -> None:
    security = (Path(__file__).parents[1] / "docs" / "security.md").read_text()
    for line in FIRMWARE_PATTERNS:
        assert line in security, line


# -- evidence and risk ----------------------------------------------------------------------------


def failing(nodeid: str, longrepr: str = "", crash: str = "") -> TestRecord:
    return TestRecord(nodeid=nodeid, outcome="failed", phase="call", longrepr=longrepr, crash=crash)


def test_a_failing_test_names_a_change_by_symbol_file_or_path_as_a_whole_word() -> None:
    tests = [
        failing("tests/test_boot.py::test_banner", "AssertionError: Reset_Handler never ran"),
        failing("tests/test_x.py::test_y", "MyReset_Handler is fine"),
        failing("tests/test_z.py::test_w", crash="src/startup.c:12: HardFault"),
    ]
    [named] = with_evidence([change()], tests)
    assert named.named_by == ["tests/test_boot.py::test_banner", "tests/test_z.py::test_w"]
    [unnamed] = with_evidence([change()], tests[1:2])
    assert unnamed.named_by == []
    assert unnamed_boot([unnamed]) == [unnamed]
    assert unnamed_boot([named]) == []


def test_each_distinct_pattern_adds_to_the_reviewers_risk_up_to_one() -> None:
    assert raised_risk(0.3, []) == (Decimal("0.3"), "0.30")
    two = [change(pattern="watchdog"), change(pattern="flash-write"), change(pattern="watchdog")]
    risk, shown = raised_risk(0.1, two)
    assert risk == Decimal("0.5")
    assert shown == "0.10 + 0.2 x 2 risky pattern(s) (flash-write, watchdog) = 0.50"
    assert raised_risk(0.9, two)[0] == 1.0


def test_risky_code_can_take_an_approved_patch_over_the_bound() -> None:
    review = ReviewerAnswer(decision="approve", must_fix=[], risk=0.3, summary="ok")
    three = [change(pattern=name) for name in ("watchdog", "flash-write", "irq-disable")]
    assert review_refusal(review, 0, 3, 0.7, 2, three[:2]) is None  # 0.7 <= 0.7
    refusal = review_refusal(review, 0, 3, 0.7, 2, three)
    assert refusal is not None
    assert refusal.recorded_as == "risk"
    assert refusal.error is not None
    assert "(flash-write, irq-disable, watchdog) = 0.90 > fwloop_max_risk 0.70" in (
        refusal.error.reason
    )
    assert "raised it to 0.90" in refusal.must_fix[0].issue


# -- the controller: the reviewer is told, the risk is raised, boot code waits ------------------


@pytest.fixture
def kit(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> ControllerKit:
    return ControllerKit(pytester, monkeypatch)


def test_the_reviewer_is_told_which_hunk_matched_what_and_the_trace_sums_the_risk(
    kit: ControllerKit,
) -> None:
    kit.coder.answers = [fixing("bug", "ok")]
    kit.build("bug", "fwloop_risky_patterns = okay line \\bok\\b")
    assert kit.run() is Outcome.SUCCESS
    [risky] = kit.reviewer.requests[0].risky
    assert (risky.file, risky.hunk, risky.line, risky.pattern) == (
        "fw/state.txt",
        "@@ -1 +1 @@",
        "+ok",
        "okay",
    )
    approved = next(e for e in kit.events() if e["event"] == "patch_approved")
    assert "risk 0.10 + 0.2 x 1 risky pattern(s) (okay) = 0.30 <= 0.70" in approved["reason"]


@pytest.mark.parametrize(("patterns", "outcome"), [("okay line ok", Outcome.FAILURE), ("", None)])
def test_the_raised_risk_is_what_the_bound_judges(
    kit: ControllerKit, patterns: str, outcome: Outcome | None
) -> None:
    kit.coder.answers = [fixing("bug", "ok")]
    kit.build("bug", f"fwloop_risky_patterns = {patterns}", "fwloop_max_risk = 0.25")
    ended = kit.run()
    if outcome is None:  # no pattern: the reviewer's 0.1 passes the bound
        assert ended is Outcome.SUCCESS
        return
    assert ended is Outcome.POLICY_VIOLATION
    assert ("PATCH_GENERATION", "patch_rejected", "ERROR_RECOVERY") in kit.moves()
    assert any("raised it to 0.30" in m.issue for m in kit.coder.requests[1].must_fix)
    assert (kit.controller.recorder.round_path(2) / "rejected-1-risk.diff").is_file()
    assert kit.firmware() == "bug"


BOOT_PATH = "fwloop_risky_patterns = boot-code boot-path ^fw/"


def test_boot_critical_code_no_failing_test_names_waits_for_the_operator(
    kit: ControllerKit,
) -> None:
    kit.coder.answers = [fixing("bug", "ok")]
    kit.build("bug", BOOT_PATH)  # proposal mode off: the boot code alone stops the run
    assert kit.run() is Outcome.AWAITING_OPERATOR_CONFIRM
    assert kit.firmware() == "bug"
    assert kit.moves()[-1] == ("PATCH_GENERATION", "await_operator", "ABORTED")
    reason = kit.summary()["reason"]
    assert reason.startswith(
        "boot-critical code that no failing test names (fw/state.txt: boot-code): the patch of "
        "iteration 2 waits for the operator (the patch policy passes it and it applies)"
    )
    proposal = (kit.controller.recorder.path / "proposal.md").read_text()
    assert "## Boot-critical code no failing test names" in proposal
    assert "- `fw/state.txt`: boot-code" in proposal
    assert not [r for r in kit.reviewer.requests if r.schema_]  # the strict gate never ran


def test_an_operators_confirm_lets_boot_critical_code_through(kit: ControllerKit) -> None:
    from pytest_fwloop.loop.operator.continuation import Action, Order

    kit.coder.answers = [fixing("bug", "ok")]
    kit.build("bug", BOOT_PATH)
    assert kit.run() is Outcome.AWAITING_OPERATOR_CONFIRM
    revision = kit.state()["revision"]
    kit.continue_run(Order(action=Action.CONFIRM, run_id="run-1", revision=revision))
    assert kit.run() is Outcome.SUCCESS
    assert kit.firmware() == "ok"
    [strict] = [r for r in kit.reviewer.requests if r.schema_]
    assert [(r.pattern, r.boot_critical, r.named_by) for r in strict.risky] == [
        ("boot-code", True, [])
    ]


def test_boot_critical_code_a_failing_test_names_goes_on_without_the_operator(
    kit: ControllerKit,
) -> None:
    # The fake suite's failure says `assert 'bug' == 'ok'`: it names the removed line's `bug`.
    kit.coder.answers = [fixing("bug", "ok")]
    kit.build("bug", "fwloop_risky_patterns = reset boot-line \\bbug\\b")
    assert kit.run() is Outcome.SUCCESS
    [risky] = kit.reviewer.requests[0].risky
    assert (risky.matched, risky.named_by) == ("bug", ["tests/test_fw.py::test_0"])


def test_a_boot_patch_the_policy_refuses_goes_back_to_the_coder_not_the_operator(
    kit: ControllerKit,
) -> None:
    kit.coder.answers = [fixing("bug", "ok")]
    kit.build("bug", BOOT_PATH, "fwloop_protect = fw/**")
    assert kit.run() is Outcome.POLICY_VIOLATION
    assert not (kit.controller.recorder.path / "proposal.md").exists()


# -- real runs -------------------------------------------------------------------------------------

STARTUP = "Reset_Handler:\n    bl SystemInit\n    bl main\n"


def boot_project(project: LoopProject) -> tuple[str, str]:
    """The calc suite beside a startup file; a patch fixing `add` that also edits the startup
    file (boot-critical, and no calc test names it), and the other two fixes in one."""
    project.calc_suite()
    project.write("fw/startup_cm3.s", STARTUP)
    fixed = CALC.replace(*FIXES[0])
    boot = unified_diff("fw/calc.py", CALC, fixed) + unified_diff(
        "fw/startup_cm3.s", STARTUP, STARTUP.replace("bl main", "bl main_loop")
    )
    rest = fixed.replace(*FIXES[1]).replace(*FIXES[2])
    return boot, unified_diff("fw/calc.py", fixed, rest)


@pytest.mark.slow
def test_a_boot_patch_waits_for_fwloop_confirm_then_goes_through_the_strict_gate(
    project: LoopProject,
) -> None:
    boot, rest = boot_project(project)
    coder = project.agent("coder", [coder_answer(boot), coder_answer(rest)])
    before = tree_state(project.root)
    first = project.run(f"--fwloop-coder={coder.spec}")
    assert first.ret == pytest.ExitCode.TESTS_FAILED, first.stdout.str()
    first.stdout.fnmatch_lines(
        ["*PATCH_GENERATION -> ABORTED: boot-critical code that no failing test names*"]
    )
    assert tree_state(project.root) == before
    [run_dir] = project.run_dirs()
    assert "fw/startup_cm3.s" in (run_dir / "proposal.md").read_text()

    confirmed = project.fwloop("confirm", "last")
    assert confirmed.returncode == 0, confirmed.stdout + confirmed.stderr
    assert project.summary()["outcome"] == "success"
    assert "bl main_loop" in (project.root / "fw" / "startup_cm3.s").read_text()
    strict = [r for r in coder.requests("reviewer") if r["schema"]]
    named = {(r["file"], r["pattern"], r["boot_critical"]) for r in strict[0]["risky"]}
    assert ("fw/startup_cm3.s", "startup-code", True) in named
    assert project.replay().returncode == 0


IRQ = "def critical():\n    return 1\n"


@pytest.mark.slow
def test_interrupts_disabled_raise_the_risk_over_the_bound_and_the_coder_is_told(
    project: LoopProject,
) -> None:
    project.calc_suite("fwloop_max_risk = 0.5\n")
    project.write("fw/irq.py", IRQ)
    fixed = CALC.replace(*FIXES[0]).replace(*FIXES[1]).replace(*FIXES[2])
    fix = unified_diff("fw/calc.py", CALC, fixed)
    risky = fix + unified_diff("fw/irq.py", IRQ, IRQ.replace("return 1", "__disable_irq()"))
    coder = project.agent("coder", [coder_answer(risky), coder_answer(fix)])
    reviewer = {"decision": "approve", "must_fix": [], "risk": 0.4, "summary": "fine"}
    agent = project.agent("reviewer", [], reviewer=[reviewer])
    result = project.run(f"--fwloop-coder={coder.spec}", f"--fwloop-reviewer={agent.spec}")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    result.stdout.fnmatch_lines(
        ["*reviewer risk 0.40 + 0.2 x 1 risky pattern(s) (irq-disable) = 0.60 > fwloop_max_risk*"]
    )
    [first, second] = agent.requests("reviewer")
    assert [(r["file"], r["pattern"], r["line"]) for r in first["risky"]] == [
        ("fw/irq.py", "irq-disable", "+    __disable_irq()")
    ]
    assert second["risky"] == []
    told = coder.requests("coder")[1]["must_fix"]
    assert any("raised it to 0.60" in m["issue"] for m in told)
