"""`docs/run-directory.md`: the prose around the run directory's records, and their fields."""

from __future__ import annotations

import enum
import types
import typing
from typing import Any, Literal, Union

from pydantic import BaseModel

from pytest_fwloop.core.machine.substates import SUBSTATES
from pytest_fwloop.core.records.round_records import (
    CallMeta,
    CandidateEntry,
    CandidatesRecord,
    CommandEntry,
    CommandsRecord,
    ConvergenceRecord,
    PanelRecord,
    PanelVote,
    RankedCandidate,
    RankingRecord,
)
from pytest_fwloop.core.records.run_records import (
    AnalysisRecord,
    CandidateRound,
    CandidatesSummary,
    Event,
    HeldPlace,
    LabgridRecord,
    MetricChange,
    MetricSeries,
    ModelServerRecord,
    Notification,
    NotificationRecord,
    RunContext,
    Summary,
    Timeline,
    TimelineEntry,
    UsageRecord,
    UsageTotals,
)
from pytest_fwloop.core.records.run_state import RunState, SavedIteration
from pytest_fwloop.core.suite.results import IterationResults, Metric, ProgressLine, TestRecord

#: Every JSON record of the run directory, in the order the docs show them.
RECORDS: tuple[tuple[str, type[BaseModel]], ...] = (
    ("summary.json", Summary),
    ("summary.json context", RunContext),
    ('summary.json["usage"]', UsageRecord),
    ("usage totals", UsageTotals),
    ('summary.json["labgrid"]', LabgridRecord),
    ('summary.json["model_servers"] entry', ModelServerRecord),
    ("labgrid place held", HeldPlace),
    ('summary.json["metrics"] metric', MetricSeries),
    ('summary.json["notifications"] entry', NotificationRecord),
    ('summary.json["candidates"]', CandidatesSummary),
    ('summary.json["candidates"] round', CandidateRound),
    ("the notification document (fwloop_notify: sent, not written)", Notification),
    ("task-events.jsonl (one line)", Event),
    ("task-timeline.json", Timeline),
    ("task-timeline.json iteration", TimelineEntry),
    ("rounds/NN/ROLE-K.meta.json", CallMeta),
    ("rounds/NN/coder-K.ranking.json", RankingRecord),
    ("rounds/NN/coder-K.ranking.json candidate", RankedCandidate),
    ("rounds/NN/convergence.json", ConvergenceRecord),
    ("rounds/NN/convergence.json metric", MetricChange),
    ("rounds/NN/convergence.json analysis", AnalysisRecord),
    ("rounds/NN/panel-K.json", PanelRecord),
    ("rounds/NN/panel-K.json vote", PanelVote),
    ("rounds/NN/candidates.json", CandidatesRecord),
    ("rounds/NN/candidates.json candidate", CandidateEntry),
    ("rounds/NN/commands.json", CommandsRecord),
    ("rounds/NN/commands.json command", CommandEntry),
    ("rounds/NN/results.json", IterationResults),
    ("rounds/NN/results.json test", TestRecord),
    ("rounds/NN/results.json metric", Metric),
    ("state.json", RunState),
    ("state.json iteration", SavedIteration),
    ("rounds/NN/results-K.jsonl line", ProgressLine),
)


def render_markdown() -> str:
    """`docs/run-directory.md`: the prose around the records, and one field table per record."""
    preamble = _PREAMBLE.format(
        run_files=_file_table(_RUN_FILES),
        round_files=_file_table(_ROUND_FILES),
        substates=_substate_table(),
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


def _substate_table() -> str:
    rows = [
        f"| `{sub.value}` | `{row.state.value}` | {row.meaning} |" for sub, row in SUBSTATES.items()
    ]
    return "\n".join(["| sub-state | in state | what its line says |", "|---|---|---|", *rows])


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
        "request carries them as `operator_messages`), `chat-<role>` (or `chat-<role>-<role>` "
        "for several roles, `role` then `coder,reviewer`) a `fwloop chat`, whose last message "
        "may be a `task` handed to the loop (`--start`)",
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
        "the K-th request of that role in this iteration, as the `command:` protocol's JSON: "
        "what a `command:` provider reads on stdin byte for byte; `claude`, `codex` and "
        "`openai:` are sent the same fields rendered as their prompt or chat messages "
        "(docs/providers.md)",
    ),
    (
        "`coder-K.answer.txt`, `…answer.json`, `…meta.json`",
        "the raw answer, the parsed JSON (when it parsed), and the call's `CallMeta`",
    ),
    (
        "`coder-K.built.diff`",
        "the one diff the loop built from the K-th coder answer, when that answer sent `edits` or "
        "a diff `git apply` would not take as written (hunk numbers, `a/` `b/`); the answer "
        'itself stays as it came in `coder-K.answer.*` (docs/providers.md, "The forms of a '
        'change")',
    ),
    (
        "`coder-K.ranking.json`",
        "every candidate the localizer ranked for the coder request first sent in call K "
        "(`RankingRecord`; calls that re-ask the same request share it): its place, its points "
        "by kind of evidence, the spectrum's factor, whether its code or only its signature was "
        "sent, and why not; `fwloop show RUN --why PATH[:SYMBOL]` reads it (docs/providers.md, "
        '"Why a function was sent")',
    ),
    (
        "`coder-K.tools.json`",
        "an `openai:` coder's read-only tool calls in call K, in order: each call's `id`, `name`, "
        "`arguments` (first 500 characters), whether it was `refused`, and its `result` with its "
        "size (`result_bytes`), as the model was sent it",
    ),
    (
        "`rejected-K-WHY.diff`",
        "a patch that was refused (`policy`, `apply`, `review`, `risk`, `repeat`)",
    ),
    (
        "`review.json`",
        (
            "the reviewer's validated verdict on the applied patch (also given to tests via the "
            "`fwloop_review` fixture); with a review panel, the panel's: its decision, the "
            "merged must-fix items of the members that asked for changes, its highest risk"
        ),
    ),
    (
        "`panel-K.json`",
        "with a review panel (`fwloop_review_panel`, docs/providers.md): its K-th decision in "
        "this iteration (`PanelRecord`): the rule, each member's vote and the call it came from "
        "(`reviewer-K.*`), whether it was split, the highest risk",
    ),
    (
        "`candidates.json`, `candidates/K/`",
        "with `fwloop_candidates` above 1 (docs/providers.md): every candidate of this "
        "iteration, its checks, scores and why it won or lost (`CandidatesRecord`); in "
        "`candidates/K/` its `patch.diff`, `build.log`, `focus.log` and `focus-results.json`, "
        "and `gate.log` and `gate-results.json` when it ran the whole suite. A second choice "
        "in the same iteration (none survived the first) is `candidates-2.json`",
    ),
    (
        "`patch.diff`",
        (
            "the patch applied in this iteration (for a coder that edited the workspace "
            "itself, the "
            "diff of its edits; for one that sent `edits` or a diff to repair, the diff "
            "built from them)"
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
        "`build-precheck.log`, `build-precheck-2.log`, …",
        (
            "the pre-check of the applied patch before the build (`fwloop_precheck`, the compile "
            "of written Python files): each check, its output's tail and how it ended; a later "
            "patch of the same iteration writes the next number"
        ),
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
            "method; the file of a child that died may end in zero bytes after its last line, "
            "which readers skip)"
        ),
    ),
    (
        "`spectrum-K.json`",
        (
            "which lines of the tree's Python each test of run K ran, for localization "
            "(DESIGN.md §16; docs/providers.md, the spectrum): `{root, tests, sets, files}`, "
            "`files` mapping each path under `root` to its lines, each line to an index into "
            "`sets`, each set the indices into `tests` of the tests that ran it. One file per "
            "pytest-xdist worker (`spectrum-K.gw0.json`). Written only by a patch's own run "
            "(the focus run, or the whole suite with `--fwloop-focus=off`): never by the "
            "baseline, a gate or a confirmation; none when `fwloop_source_bytes` is 0 or "
            "something else measured the run (pytest-cov, a debugger)"
        ),
    ),
    (
        "`spectrum-run-K.log`, `spectrum-run-K-select.txt`, `spectrum-run-K-results.json`, "
        "`spectrum-run-K.json`",
        (
            "the spectrum run before a coder call (`SPECTRUM_RUN`): when some failing test the "
            "coder will hear of has no lines recorded on the tree as it stands (the baseline's "
            "failures, a gate's regressions), one child runs the failing tests and an even "
            "sample of the passing ones, recording which lines each ran (the same shape as "
            "`spectrum-K.json`, with `spectrum-run-K.gcov.json` and `spectrum-run-K.qemu.json` "
            "beside it under `fwloop_c_coverage`, their counts waiting in `gcov-run-K/`, "
            "`qemu-run-K/`); its outcomes count for nothing but the ranking"
        ),
    ),
    (
        "`spectrum-K.gcov.json`",
        (
            "with `fwloop_c_coverage = gcov`: which lines of the tree's C each test of run K "
            "ran, read with gcov (DESIGN.md §18; docs/providers.md, the C spectrum); the same "
            'format plus `measured`, every file gcov measured by tool (`{"src/x.c": '
            "\"gcov\"}`). A worker's is `spectrum-K.gw0.gcov.json`. Each test's counts wait "
            "in `gcov-K/` until the child run ends; that folder is then removed"
        ),
    ),
    (
        "`spectrum-K.qemu.json`",
        (
            "with `fwloop_c_coverage = qemu`: which lines of the tree's C each test's QEMU "
            "guest executed, from QEMU's execution log mapped through the firmware's DWARF "
            "(docs/providers.md, the C spectrum); the same format as `spectrum-K.gcov.json`. "
            "The logs wait in `qemu-K/` until the child run ends"
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
        "`spectrum-flaky-K.json`",
        (
            "the lines each test of the last flaky rerun ran, when the run it reruns recorded "
            "none (the baseline's, a gate's): its failures and an even sample of the passing "
            "tests, whose outcomes are in `flaky-K-results.json` and count only for the "
            "ranking (docs/providers.md, the spectrum); C spectra and workers' files beside it "
            "as for `spectrum-K.json`"
        ),
    ),
    (
        "`results.json`",
        (
            "the iteration's structured per-test results (`IterationResults`): the run that "
            "counts (the gate's when one ran) merged with its environment reruns, and, after a "
            "focus run that did not reach the gate, the other tests' last full-run records "
            "marked `carried`; each test's metrics, and the run's `coverage`"
        ),
    ),
    (
        "`console/`",
        (
            "per-test console transcripts written by the environment fixtures (`<node id>.log`), "
            "and each failing test's part of the device logs of pytest-embedded, labgrid or a "
            "`pytest_fwloop_device_logs` hook (`<node id>.<log name>.log`; environments.md)"
        ),
    ),
    (
        "`convergence.json`",
        "the checker's verdict (`ConvergenceRecord`), each metric against the baseline, and the "
        "analysis printed after the iteration ([metrics.md](metrics.md))",
    ),
)

_PREAMBLE = """
<!-- Generated by `python -m pytest_fwloop.docgen docs`; edit core/*records.py. -->

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
- `substate`: work done inside a state (seed 001 §3.2), not a move: `from` and `to` are both
  that state, `event` is the sub-state's name (the table below), `reason` what was done with
  its numbers, `evidence` the files it read or wrote. It sits between the transitions into and
  out of its state; `fwloop replay` checks that each stays in the state the table puts it in.
  `report.html` shows them indented under their state in the decision trace.
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
- `applied`: written by `fwloop apply` after the run ended: `from` and `to` are its terminal
  state, `iteration` the one whose tree was put in place (`reason` says so).
- `notification`: one delivery of a notification (`fwloop_notify`, docs/ci.md) where the loop
  stood: `CONVERGENCE_CHECK` at a plateau, the terminal state at the end (`from` and `to` both);
  `reason` says where it went and, when it failed, why. Not a move.

The sub-states:

{substates}

`rounds/NN/`:

{round_files}

A run can be replayed: `--fwloop-coder=scripted:.fwloop/runs/<run-id>` answers each call with the
raw answer recorded for it, in order.
"""
