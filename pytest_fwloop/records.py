"""The run directory's records as models (DESIGN.md §8): one source for writers, readers and docs.

Every JSON file the loop writes under `.fwloop/runs/<run-id>/` is one of these models, dumped
with `model_dump(mode="json")`; `docs/run-directory.md` is generated from their fields
(`python -m pytest_fwloop.records > docs/run-directory.md`), and a test fails when it drifts.
Pure: pydantic and the standard library only.
"""

from __future__ import annotations

import enum
import sys
import types
import typing
from typing import Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field

from pytest_fwloop.outcomes import Outcome
from pytest_fwloop.results import IterationResults, ProgressLine, TestRecord
from pytest_fwloop.run_state import RunState, SavedIteration


class _Record(BaseModel):
    # Readers (replay, reports) reject a record that is not exactly ours.
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class UsageTotals(_Record):
    """What the providers reported over a set of calls."""

    calls: int = Field(description="calls made, failed ones included")
    unreported_calls: int = Field(description="calls whose provider reports no usage")
    input_tokens: float = Field(description="input tokens, cache reads included")
    cached_input_tokens: float = Field(description="input tokens read from a cache")
    output_tokens: float = Field(description="output tokens")
    cost_usd: float = Field(description="cost in USD, what `--fwloop-budget-usd` counts")
    tokens: float = Field(description="input + output, what `--fwloop-budget-tokens` counts")


class UsageRecord(_Record):
    """`summary.json["usage"]`: per role and in total."""

    roles: dict[str, UsageTotals] = Field(description="per role (`coder`, `reviewer`, `tester`)")
    total: UsageTotals = Field(description="over every call of the run")


class RunContext(_Record):
    """What the run was started with, for an audit: how, on what, from which commit."""

    command_line: list[str] = Field(description="the controller's argv, as started")
    python: str = Field(description="the Python version")
    pytest: str = Field(description="the pytest version")
    fwloop: str = Field(description="the pytest-fwloop version")
    plugins: dict[str, str] = Field(description="every installed pytest plugin's version, by name")
    git_head: str | None = Field(
        description="the commit the tree's own git repository was at (read only), else null"
    )
    randomly_seed: int | None = Field(
        description="the pytest-randomly seed every child run used, when that plugin is active"
    )


class Summary(_Record):
    """`summary.json`: the final record of a run."""

    run_id: str = Field(description="the run's id, also its directory name")
    outcome: Outcome = Field(description="why the run ended, in the outcome vocabulary")
    final_state: Literal["SUCCESS", "FAILURE", "ABORTED"] = Field(
        description="the terminal state of the state machine"
    )
    iterations: int = Field(description="iterations whose tests ran, the baseline included")
    convergence_type: str | None = Field(description="seed §5.19 verdict, or null")
    reason: str = Field(description="why the run ended, with the numbers that decided it")
    pass_counts: list[int] = Field(description="pass count per measured iteration")
    total_counts: list[int] = Field(description="total count per measured iteration")
    executed_counts: list[int] = Field(
        description="test executions per measured iteration: the focus, the regression gate, "
        "flaky, environment and tester reruns (carried outcomes are not executions)"
    )
    coder_calls: int = Field(description="coder calls made, retries included")
    usage: UsageRecord = Field(description="agent usage (below)")
    unresolved: list[str] = Field(description="node ids still not passing in the last iteration")
    patch: Literal["final.patch", "best.patch"] | None = Field(
        description="the patch file this run left, if any"
    )
    exit_status: int = Field(description="the exit status of `pytest --fwloop` (DESIGN.md §10)")
    mode: Literal["interactive", "ci", "auto"] = Field(description="the execution mode")
    criteria: dict[str, float] = Field(description="the convergence criteria used, by field")
    max_iter: int = Field(description="the iteration limit")
    rootdir: str = Field(description="the tree the loop worked on")
    baseline_snapshot: str = Field(description="shadow-repository commit of the baseline tree")
    internal_error: str | None = Field(
        description="`internal-error.txt` when the outcome is `internal_error`, else null"
    )
    finished: str = Field(description="UTC time the run ended (ISO 8601)")
    duration_s: float = Field(description="wall-clock seconds of the run")
    context: RunContext = Field(description="what the run was started with (below)")
    tests: dict[str, dict[str, str]] = Field(
        description="per test (node id): its outcome in each measured iteration, by number"
    )
    regressions: dict[str, list[str]] = Field(
        description="per iteration (number): the tests that passed in the iteration before it "
        "and do not pass in it"
    )
    flaky: dict[str, list[str]] = Field(
        description="per iteration (number): the tests that failed and then passed on a rerun "
        "with no code change (counted by fwloop_flaky_policy, never sent to the coder)"
    )


class CrashSummary(_Record):
    """`summary.json` of a run whose end itself failed before any summary was written."""

    run_id: str = Field(description="the run's id")
    outcome: Literal["internal_error"] = Field(description="always `internal_error`")
    final_state: Literal["FAILURE"] = Field(description="always `FAILURE`")
    reason: str = Field(description="the exception(s), one line each")
    exit_status: Literal[3] = Field(description="always 3")
    internal_error: Literal["internal-error.txt"] = Field(description="the traceback file")
    finished: str = Field(description="UTC time the run ended")
    duration_s: float = Field(description="wall-clock seconds of the run")


EventKind = Literal["transition", "agent_call", "internal_error", "rollback", "interrupted"]


class Event(_Record):
    """One line of `task-events.jsonl`: a step of the decision trace."""

    time: str = Field(description="UTC time (ISO 8601)")
    kind: EventKind = Field(
        description="`transition`, `agent_call`, `internal_error`, `rollback` or `interrupted` "
        "(below)"
    )
    from_state: str = Field(alias="from", description="the state before")
    to_state: str = Field(alias="to", description="the state after")
    event: str = Field(description="the event of the transition table (`docs/fsm.md`)")
    reason: str = Field(description="why, with the numbers that decided it")
    iteration: int = Field(description="1-based iteration number")
    evidence: list[str] = Field(description="paths in the run directory that back the reason")
    retry_count: int = Field(description="retries so far of the error being recovered")
    retry_reason: str | None = Field(description="why this is a retry, or null")
    role: str | None = Field(default=None, description="`agent_call` only: the agent's role")
    provider: str | None = Field(default=None, description="`agent_call` only: the provider spec")

    @classmethod
    def note(
        cls,
        time: str,
        kind: EventKind,
        states: tuple[str, str],
        event: str,
        reason: str,
        iteration: int,
        evidence: list[str] | None = None,
    ) -> Event:
        """A line that is not a retried move (`time` from rundir.utc_now)."""
        return cls(
            time=time,
            kind=kind,
            from_state=states[0],
            to_state=states[1],
            event=event,
            reason=reason,
            iteration=iteration,
            evidence=evidence or [],
            retry_count=0,
            retry_reason=None,
        )

    def to_json(self) -> dict[str, Any]:
        """The line as written: `from`/`to` keys, and no agent fields on other kinds."""
        agent_only = None if self.kind == "agent_call" else {"role", "provider"}
        return self.model_dump(mode="json", by_alias=True, exclude=agent_only)


class TimelineEntry(_Record):
    """One iteration of `task-timeline.json`."""

    iteration: int = Field(description="1-based iteration number")
    kind: str = Field(description="`baseline`, `patch` or `confirmation`")
    states: list[str] = Field(description="the states visited, in order")
    pass_count: int = Field(description="passed + xfailed")
    total_count: int = Field(description="pass count + failed + error + strict xpassed")
    counts: dict[str, int] | None = Field(description="tests per outcome, null if none ran")
    patch_summary: str = Field(description="the applied patch's summary and files")
    coder_calls: int = Field(description="coder calls made in this iteration")
    review_rounds: int = Field(description="reviewer rounds that requested changes")
    convergence_type: str | None = Field(description="the verdict after this iteration")
    reason: str = Field(description="the convergence checker's reason")
    score: float | None = Field(description="the convergence score after this iteration")
    snapshot: str | None = Field(description="shadow-repository commit of the tested tree")
    executed: int = Field(description="test executions in this iteration, reruns included")
    notes: list[str] = Field(description="what else happened (rollbacks, discarded edits)")


class Timeline(_Record):
    """`task-timeline.json`: the per-iteration view of the run, for replay."""

    run_id: str = Field(description="the run's id")
    iterations: list[TimelineEntry] = Field(description="one entry per iteration (below)")


class CallMeta(_Record):
    """`rounds/NN/ROLE-K.meta.json`: how one provider call went."""

    provider: str = Field(description="the provider spec called")
    attempt: int = Field(description="1-based, over every call of one ask and every provider")
    duration_s: float = Field(description="seconds the call took")
    errors: list[str] = Field(description="why the answer was refused, if it was")
    error_kind: str | None = Field(
        description="the provider error kind, `internal_error` for a call that crashed, or null"
    )
    retry_count: int = Field(description="earlier calls of this ask to the same provider")
    retry_reason: str | None = Field(description="why this call was made, when not the first")
    usage: dict[str, float] = Field(description="what the provider reported for this call")
    stderr_tail: str = Field(description="the last 2000 characters of the provider's stderr")


class ConvergenceRecord(_Record):
    """`rounds/NN/convergence.json`: the checker's verdict after this iteration."""

    iteration: int = Field(description="1-based iteration number")
    pass_counts: list[int] = Field(description="pass counts so far")
    total_counts: list[int] = Field(description="total counts so far")
    convergence_type: str | None = Field(description="the verdict, or null to continue")
    reason: str = Field(description="the rule that decided, with its values and thresholds")
    score: float = Field(description="the convergence score")
    criteria: dict[str, float] = Field(description="the criteria used")
    max_iter: int | None = Field(
        default=None,
        description="the iteration limit in force (a resumed run may have raised it since); "
        "null in older records",
    )


class CommandEntry(_Record):
    """One tester command in `rounds/NN/commands.json` (written without its null fields)."""

    argv: list[str] = Field(description="the command as proposed")
    reason: str = Field(description="why the tester proposed it")
    status: Literal["passed", "failed", "blocked"] = Field(description="what became of it")
    blocked_because: str | None = Field(
        default=None, description="`blocked` only: the allowlist's reason"
    )
    ended: str | None = Field(default=None, description="ran only: how it ended")
    duration_s: float | None = Field(default=None, description="ran only: seconds it took")
    log: str | None = Field(default=None, description="ran only: `commands/K.log`, its output")


class CommandsRecord(_Record):
    """`rounds/NN/commands.json`: the tester's commands of this iteration."""

    commands: list[CommandEntry] = Field(description="in the order proposed")


#: Every JSON record of the run directory, in the order the docs show them.
RECORDS: tuple[tuple[str, type[BaseModel]], ...] = (
    ("summary.json", Summary),
    ("summary.json context", RunContext),
    ('summary.json["usage"]', UsageRecord),
    ("usage totals", UsageTotals),
    ("task-events.jsonl (one line)", Event),
    ("task-timeline.json", Timeline),
    ("task-timeline.json iteration", TimelineEntry),
    ("rounds/NN/ROLE-K.meta.json", CallMeta),
    ("rounds/NN/convergence.json", ConvergenceRecord),
    ("rounds/NN/commands.json", CommandsRecord),
    ("rounds/NN/commands.json command", CommandEntry),
    ("rounds/NN/results.json", IterationResults),
    ("rounds/NN/results.json test", TestRecord),
    ("state.json", RunState),
    ("state.json iteration", SavedIteration),
    ("rounds/NN/results-K.jsonl line", ProgressLine),
)


def render_markdown() -> str:
    """`docs/run-directory.md`: the prose around the records, and one field table per record."""
    preamble = _PREAMBLE.format(
        run_files=_file_table(_RUN_FILES), round_files=_file_table(_ROUND_FILES)
    )
    sections = [preamble.strip(), "## Fields of each record"]
    for title, model in RECORDS:
        doc = (model.__doc__ or "").strip().splitlines()[0]
        rows = ["| field | type | contents |", "|---|---|---|"]
        for name, info in model.model_fields.items():
            shown = info.alias or name
            rows.append(f"| `{shown}` | {_type_name(info.annotation)} | {info.description or ''} |")
        sections.append(f"### `{title}`\n\n{doc}\n\n" + "\n".join(rows))
    return "\n\n".join(sections) + "\n"


def _file_table(files: tuple[tuple[str, str], ...]) -> str:
    rows = [f"| {name} | {contents} |" for name, contents in files]
    return "\n".join(["| file | contents |", "|---|---|", *rows])


def _type_name(annotation: Any) -> str:
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is Literal:
        return " \\| ".join(f"`{a}`" for a in args)
    if origin in (Union, types.UnionType):
        return " \\| ".join("null" if a is type(None) else _type_name(a) for a in args)
    if origin is list:
        return f"list of {_type_name(args[0])}"
    if origin is dict:
        return f"map of {_type_name(args[1])}"
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return f"one of the {annotation.__name__} values ({len(annotation)})"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation.__name__
    return {str: "string", int: "integer", float: "number", bool: "boolean", object: "any"}.get(
        annotation, str(annotation)
    )


_RUN_FILES: tuple[tuple[str, str], ...] = (
    (
        "`summary.json`",
        (
            "the final record (`Summary`). A run whose end itself failed keeps what was written "
            "before the failure, with `outcome`, `final_state`, `reason`, `exit_status` and "
            "`internal_error` set; when nothing was, a `CrashSummary`"
        ),
    ),
    (
        "`task-events.jsonl`",
        "the decision trace, one `Event` per line (below)",
    ),
    (
        "`task-timeline.json`",
        (
            "per iteration (`Timeline`): kind, states visited, counts, patch summary, coder calls, "
            "review rounds, verdict, reason and score, the snapshot of the tested tree, notes"
        ),
    ),
    (
        "`report.md`",
        "the human report: outcome, reason, per-iteration table, what still fails",
    ),
    (
        "`proposal.patch`, `proposal.md`",
        "proposal mode (`--fwloop-propose`): the coder's patch waiting for the operator, and "
        "its analysis, the patch policy's word and the roundtable's comments (docs/operator.md)",
    ),
    (
        "`state.json`",
        "what another process needs to continue the run (`RunState`, below), rewritten "
        "atomically after every move; read by `fwloop confirm`, `followup`, `resume`, `rerun` "
        "and `chat` (docs/operator.md)",
    ),
    (
        "`threads/<id>/meta.json`, `threads/<id>/messages.jsonl`",
        "the operator's threads (seed 004): `meta.json` has `id`, `title`, `created_at`, "
        "`run_id`, `role`; `messages.jsonl` one message a line (`time`, `author`, `kind`, "
        "`text`), only appended; `calls/K.request.json` and `calls/K.answer.txt` each provider "
        "call of a chat. `operator` holds follow-ups and confirm notes (every agent "
        "request carries them as `operator_messages`), `chat-<role>` a `fwloop chat`",
    ),
    (
        "`report.html`",
        "the same for a browser, self-contained (inline CSS and SVG, no script): the pass-rate "
        "chart with the target line, the iterations, a test × iteration matrix, each round's "
        "analysis, diff, review and tester results, the decision trace, links to the logs; "
        "rewritten at each iteration end (`running`) and at the end",
    ),
    (
        "`final.patch`",
        (
            "on success: the real difference between the baseline and the final tree, for "
            "every path "
            "the loop wrote (the tree keeps it)"
        ),
    ),
    (
        "`best.patch`",
        (
            "otherwise: the cumulative diff of the best iteration, if it beat the baseline "
            "(the tree "
            "is restored)"
        ),
    ),
    (
        "`recovered.json`",
        "present when this run first recovered a tree left by a killed controller",
    ),
    (
        "`internal-error.txt`",
        (
            "present when the run ended with `internal_error`: the traceback(s) of the "
            "exception (a "
            "second one when ending the run failed too)"
        ),
    ),
    (
        "`rounds/NN/`",
        "one folder per iteration, below",
    ),
)

_ROUND_FILES: tuple[tuple[str, str], ...] = (
    (
        "`coder-K.request.json`, `reviewer-K.request.json`, `tester-K.request.json`",
        "the K-th request of that role in this iteration, exactly as sent",
    ),
    (
        "`coder-K.answer.txt`, `…answer.json`, `…meta.json`",
        "the raw answer, the parsed JSON (when it parsed), and the call's `CallMeta`",
    ),
    (
        "`rejected-K-WHY.diff`",
        "a patch that was refused (`policy`, `apply`, `review`, `risk`, `repeat`)",
    ),
    (
        "`review.json`",
        (
            "the reviewer's validated verdict on the applied patch (also given to tests via the "
            "`fwloop_review` fixture)"
        ),
    ),
    (
        "`patch.diff`",
        (
            "the patch applied in this iteration (for a coder that edited the workspace "
            "itself, the "
            "diff of its edits)"
        ),
    ),
    (
        "`test-plan.json`",
        (
            "the tester's validated plan for the applied patch (also given to tests via the "
            "`fwloop_test_plan` fixture)"
        ),
    ),
    (
        "`tester-select.txt`, `precheck.log`, `precheck-results.json`",
        (
            "the tester's selection and its pre-check run (informative; the full run is the "
            "one that "
            "counts)"
        ),
    ),
    (
        "`commands.json`, `commands/K.log`",
        "each tester command (`CommandsRecord`), and the tail of the K-th command's output",
    ),
    (
        "`build.log`",
        "the build's output",
    ),
    (
        "`pytest.log`, `junit.xml`, `results-1.json`",
        (
            "the first child pytest run's output, JUnit XML and raw per-test record (the JUnit "
            "XML is pytest's own when you pass `--junitxml`, which receives a copy of it; "
            "otherwise the child writes it from its records, in pytest's default shape); each "
            "further run of the iteration (the regression gate after a focus run, an "
            "environment rerun) writes `pytest-2.log`, `junit-2.xml`, `results-2.json`, and so "
            "on. Next to each `results-K.json`, `results-K.jsonl`: the child's progress as it "
            "ran, one `ProgressLine` per line (the loop's live progress; the results are rebuilt "
            "from it when the child dies before writing them, e.g. pytest-timeout's thread "
            "method)"
        ),
    ),
    (
        "`focus-select.txt`",
        "the node ids a focus run selected (`--fwloop-focus`, DESIGN.md §13)",
    ),
    (
        "`flaky-K.log`, `flaky-K-select.txt`, `flaky-K-results.json`",
        "the K-th flaky rerun of the first run's new failures (`flaky-2-K…` for the second run)",
    ),
    (
        "`results.json`",
        (
            "the iteration's structured per-test results (`IterationResults`): the run that "
            "counts (the gate's when one ran) merged with its environment reruns, and, after a "
            "focus run that did not reach the gate, the other tests' last full-run records "
            "marked `carried`"
        ),
    ),
    (
        "`console/`",
        "per-test console transcripts written by the environment fixtures",
    ),
    (
        "`convergence.json`",
        "the checker's verdict (`ConvergenceRecord`)",
    ),
)

_PREAMBLE = """
<!-- Generated by `python -m pytest_fwloop.records > docs/run-directory.md`; edit records.py. -->

# The run directory

Each `pytest --fwloop` run writes `.fwloop/runs/<run-id>/` under the rootdir (`--fwloop-run-dir`
changes the parent). `.fwloop/` carries its own `.gitignore` of `*`. Every file is written through
one redacting writer: values of environment variables named like secrets (`*KEY*`, `*TOKEN*`,
`*SECRET*`, `*PASSW*`, …) are replaced with `[redacted:NAME]`, including in the logs of the build
and of the child pytest runs. Every record the loop writes is UTF-8: a lone surrogate in agent
text (which UTF-8 cannot encode) is written as its `\\udXXX` escape, which in a JSON file reads
back as the same string. `final.patch` and `best.patch` are the exception: written byte for byte
as git gave the diff, so that a change to a source file that is not UTF-8 still applies.

Every JSON record is a pydantic model of `pytest_fwloop.records` (or `pytest_fwloop.results`):
load one with `Summary.model_validate_json(path.read_text())` and a file that is not exactly a
record of this version is refused. Their fields are listed at the end of this page.

{run_files}

The `kind` of an `Event`:

- `transition`: a move of the state machine, always one row of the table in `docs/fsm.md`.
  `retry_count` and `retry_reason` are set on the moves out of `ERROR_RECOVERY` that retry.
- `agent_call`: a provider call that was a retry (a re-ask after an invalid answer, a transient
  error's retry) or a failover to the next provider of the role. It is not a transition: `from`
  and `to` are both the state the call was made in, `event` is `agent_retry`, and it adds `role`
  and `provider`; `evidence` is the call's `…meta.json`. First calls are not events; every call
  is in `rounds/NN/`.
- `internal_error`: an exception ended the loop in the state `from`; `to` is `FAILURE`, `event`
  is `internal_error`, `evidence` is `internal-error.txt`. Not a row of the table: no state
  leads there by design.
- `rollback`: in `CONVERGENCE_CHECK` (both `from` and `to`), the iteration's patch broke tests
  that passed before it without raising the pass count, and was undone (`reason` names them);
  the iteration's `kind` in the timeline is `rollback` and the coder is told.
- `interrupted`: written by `fwloop resume` for a controller that was killed: `from` is the
  state it died in, `to` is `ABORTED`; the resumed controller's moves follow from `IDLE`.
  A continued run's trace (after `fwloop confirm`, `followup` or `resume`) walks from `IDLE`
  again after each end, with `operator_confirmed`, `resume` or `resume_tests`.

`rounds/NN/`:

{round_files}

A run can be replayed: `--fwloop-coder=scripted:.fwloop/runs/<run-id>` answers each call with the
raw answer recorded for it, in order.
"""


if __name__ == "__main__":
    sys.stdout.write(render_markdown())
