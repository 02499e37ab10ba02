"""The tester's round (DESIGN.md §5, seed 004): its plan, and its commands through the allowlist.

A plan's `select` may only name node ids the latest run collected; its commands run only when
the allowlist admits them, each as a `tester::<argv>` record of the iteration, so a failing one
keeps the suite from counting as green and its output goes to the coder as a must-fix item.
"""

from __future__ import annotations

import dataclasses
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pytest_fwloop.agents.errors import AnswerInvalid, ProviderError
from pytest_fwloop.agents.role import RoleAgent
from pytest_fwloop.core.gate.allowlist import Argv, CommandCheck
from pytest_fwloop.core.machine.fsm import ErrorType, LoopEvent
from pytest_fwloop.core.machine.outcomes import Outcome
from pytest_fwloop.core.machine.recovery import ErrorState
from pytest_fwloop.core.records.agent_protocol import AgentRequest, MustFix, TesterAnswer
from pytest_fwloop.core.records.round_records import CommandEntry, CommandsRecord
from pytest_fwloop.core.suite.results import (
    COMMAND_NODEID_PREFIX,
    IterationResults,
    TestRecord,
    nodeids,
)
from pytest_fwloop.core.verdict.convergence import ExecutionMode
from pytest_fwloop.loop.services import Services
from pytest_fwloop.loop.state import LoopState, Step, TesterRound, provider_error
from pytest_fwloop.procs.allowlist_runner import AllowlistRunner, CommandResult
from pytest_fwloop.workspace import Workspace

#: Output of a failed tester command sent to the coder as a must-fix item.
COMMAND_MUST_FIX_CHARS = 3000


@dataclass(frozen=True)
class CommandsDone:
    """What a round's commands left: the failed ones, their must-fix items, a one-line note."""

    failed: list[CommandResult]
    must_fix: list[MustFix]
    note: str


def all_blocked(check: CommandCheck) -> ErrorState:
    """Every command the tester proposed is outside the allowlist: the run ends."""
    return ErrorState(
        ErrorType.POLICY_VIOLATION,
        f"all {len(check.blocked)} command(s) the tester proposed are blocked: "
        f"{check.blocked[0].reason}",
        LoopEvent.RECOVER_TO_ANALYSIS,
        terminal_outcome=Outcome.TESTER_COMMAND_BLOCKED,
    )


def ask_tester(
    tester: RoleAgent,
    schema: dict[str, object],
    request: AgentRequest,
    latest: IterationResults | None,
    runner: AllowlistRunner,
    *,
    retry_blocked: bool,
) -> tuple[TesterAnswer, CommandCheck]:
    """The tester's plan, `select` checked against the node ids of the latest run. With
    `retry_blocked` (auto mode) a plan whose commands are all blocked is asked for once more,
    with the reasons (seed 004's resilient policy); elsewhere it stands."""
    collected = [
        nodeid
        for nodeid in nodeids(latest.tests if latest else [])
        if not nodeid.startswith(COMMAND_NODEID_PREFIX)
    ]
    tester.schema = with_known_nodeids(schema, collected)
    plan = tester.ask(request)
    assert isinstance(plan, TesterAnswer)
    check = runner.check(c.argv for c in plan.commands)
    if not (check.only_blocked and retry_blocked):
        return plan, check
    retry = request.model_copy(
        update={
            "blocked_commands": [{"argv": list(b.argv), "reason": b.reason} for b in check.blocked],
            "constraints": [
                "every command you proposed was blocked (see blocked_commands); propose "
                "only commands that start with one of allowed_commands, or none"
            ],
        }
    )
    plan = tester.ask(retry)
    assert isinstance(plan, TesterAnswer)
    return plan, runner.check(c.argv for c in plan.commands)


def plan_tests(
    services: Services,
    loop: LoopState,
    tester: RoleAgent,
    request: AgentRequest,
    runner: AllowlistRunner,
) -> Step:
    """TEST_SETUP's question to the tester: its plan kept for the iteration, or why not."""
    recorder, settings = services.recorder, services.settings
    loop.previous_failed_commands, loop.failed_commands = loop.failed_commands, frozenset()
    try:
        plan, check = ask_tester(
            tester,
            tester.schema,
            request,
            loop.latest_results(),
            runner,
            retry_blocked=settings.mode is ExecutionMode.AUTO,
        )
    except AnswerInvalid as exc:
        return _plan_invalid(loop, exc.errors, settings.options.tester_schema_rounds)
    except ProviderError as exc:
        return loop.fail(provider_error("tester", exc), LoopEvent.TESTER_FAILED)
    loop.tester_invalid_rounds = 0
    if check.only_blocked:
        return loop.fail(all_blocked(check), LoopEvent.TESTER_COMMAND_BLOCKED)
    folder = recorder.relative(recorder.round_path(loop.current.number))
    path = recorder.write_json(f"{folder}/test-plan.json", plan.model_dump(mode="json"))
    loop.tester_round = TesterRound(plan, path, check)
    return Step(
        LoopEvent.TEST_PLAN_READY,
        f"tester: {len(plan.select)} test(s) to pre-check, {len(check.runnable)} command(s) "
        f"to run, {len(check.blocked)} blocked",
        (recorder.relative(path),),
    )


def _plan_invalid(loop: LoopState, errors: list[str], limit: int) -> Step:
    """A plan that failed its schema twice in this round. Seed 004 iterates: the iteration's
    tests run without the tester's picks (the focus as it stands, the full suite as the gate
    when due) and the coder is told its patch went untested by the tester. `limit` such
    rounds in a row (fwloop_tester_schema_rounds; 0: never) stop the run, as two invalid
    reviews do: a tester that cannot plan is a provider or prompt to fix, not a patch."""
    loop.tester_invalid_rounds += 1
    said = "; ".join(errors[:2])
    if limit and loop.tester_invalid_rounds >= limit:
        return loop.fail(
            ErrorState(
                ErrorType.MODEL_FAILURE,
                f"the tester's plan failed its schema in {loop.tester_invalid_rounds} rounds in "
                f"a row (fwloop_tester_schema_rounds={limit}), each after one re-ask: {said}",
                LoopEvent.RECOVER_TO_ANALYSIS,
                terminal_outcome=Outcome.TESTER_SCHEMA_INVALID,
            ),
            LoopEvent.TESTER_SCHEMA_INVALID_AGAIN,
        )
    note = f"tester_schema_invalid: {said}"
    loop.current.notes.append(note)
    loop.must_fix.append(
        MustFix(
            issue=f"tester_schema_invalid: the tester could not plan tests for your patch of "
            f"iteration {loop.current.number} (its plan failed its schema: {said}), so only the "
            "suite checks it; say in your next summary which tests and commands exercise "
            "your change"
        )
    )
    return Step(
        LoopEvent.TESTER_SCHEMA_INVALID,
        f"{note}; the iteration's tests run without the tester's picks, the coder is told",
    )


def run_tester_commands(
    services: Services,
    folder: Path,
    tester: TesterRound,
    runner: AllowlistRunner,
    protected_changed_since: Callable[[str], list[str]],
    time_left: Callable[[], float],
) -> CommandsDone:
    """Run the plan's allowlisted commands, recording each in `commands.json`. A command that
    changes a protected path (an allowed `make test` runs a Makefile the coder may have
    patched) fails, and the path is put back. None starts once TEST_RUN's time is spent."""
    workspace, recorder = services.workspace, services.recorder
    abort, timeout = services.abort, services.settings.options.command_timeout
    reasons = {tuple(c.argv): c.reason for c in tester.plan.commands}
    entries = [
        CommandEntry(
            argv=list(b.argv),
            reason=reasons.get(b.argv, ""),
            status="blocked",
            blocked_because=b.reason,
        )
        for b in tester.commands.blocked
    ]
    failed: list[CommandResult] = []
    for index, argv in enumerate(tester.commands.runnable, 1):
        if abort.is_set() or time_left() <= 0:
            break
        log = folder / "commands" / f"{index}.log"
        result = _run_guarded(index, argv, log, runner, workspace, protected_changed_since)
        tester.records.append(command_record(result, timeout))
        if not result.passed:
            failed.append(result)
        entries.append(
            CommandEntry(
                argv=list(argv),
                reason=reasons.get(argv, ""),
                status="passed" if result.passed else "failed",
                ended=result.describe(timeout),
                duration_s=round(result.duration, 3),
                log=recorder.relative(log),
            )
        )
    recorder.write_json(
        f"{recorder.relative(folder)}/commands.json",
        CommandsRecord(commands=entries).model_dump(mode="json", exclude_none=True),
    )
    return _commands_done(tester, failed, timeout)


def _run_guarded(
    index: int,
    argv: Argv,
    log: Path,
    runner: AllowlistRunner,
    workspace: Workspace,
    protected_changed_since: Callable[[str], list[str]],
) -> CommandResult:
    """Run one command; protected paths it changed are put back and fail it, since an allowed
    command may run a file the coder patched."""
    before = workspace.snapshot(f"before tester command {index}")
    result = runner.run(argv, log)
    tampered = protected_changed_since(before)
    if tampered:
        workspace.touched.update(tampered)
        workspace.restore(before)
        result = dataclasses.replace(result, tampered=tuple(tampered))
    return result


def _commands_done(
    tester: TesterRound, failed: list[CommandResult], timeout: float
) -> CommandsDone:
    """Each failed command becomes a must-fix item with its output tail, for the coder."""
    must_fix = [
        MustFix(
            issue=f"the tester's command `{shlex.join(r.argv)}` failed "
            f"({r.describe(timeout)}); make it pass. Its output "
            f"ends:\n{r.output[-COMMAND_MUST_FIX_CHARS:]}"
        )
        for r in failed
    ]
    ran = len(tester.records)
    note = (
        f"tester commands: {ran - len(failed)} passed, {len(failed)} failed, "
        f"{len(tester.commands.blocked)} blocked"
    )
    if failed:  # seed 004's round outcome: the coder's history shows it
        note = f"test_failed: {note}"
    return CommandsDone(failed, must_fix, note)


def with_known_nodeids(schema: dict[str, object], known: list[str]) -> dict[str, object]:
    """The tester's schema with `select` limited to the node ids the latest run collected, so an
    unknown id fails the strict-JSON gate like any schema error: re-asked once, then
    tester_schema_invalid. A replaced schema without a `select` array is left as it is."""
    properties = schema.get("properties")
    if not isinstance(properties, dict) or not isinstance(properties.get("select"), dict):
        return schema
    select: dict[str, object] = properties["select"]
    items = select.get("items")
    limited = {**(items if isinstance(items, dict) else {}), "enum": known}
    return {**schema, "properties": {**properties, "select": {**select, "items": limited}}}


def command_record(result: CommandResult, timeout: float) -> TestRecord:
    """A tester command as one test of the iteration: passed, or failed with its output tail."""
    return TestRecord(
        nodeid=COMMAND_NODEID_PREFIX + shlex.join(result.argv),
        outcome="passed" if result.passed else "failed",
        phase="call",
        duration=result.duration,
        longrepr="" if result.passed else result.output,
        crash="" if result.passed else f"tester command {result.describe(timeout)}",
    )
