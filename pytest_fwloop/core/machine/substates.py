"""Sub-states (seed 001 §3.2): the named steps of work done inside one state, as data.

A sub-state is not a move of the state machine: the trace records it as an event of kind
`substate` whose `from` and `to` are both its state, between the transitions into and out of
that state. `fwloop replay` checks each one against this table; `docs/run-directory.md` lists it.
Seed 001 names `LOG_TRIAGE`, `ROOT_CAUSE_HYPOTHESIS`, `CHANGE_IMPACT_ESTIMATE`, `HEALTH_CHECK`,
`FETCH_LOGS`, `NORMALIZE` and `ATTACH_ARTIFACTS`; the others name work this loop does that the
seed's list does not (a review panel, focus and gate runs, flaky reruns, the tester's commands).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from pytest_fwloop.core.machine.fsm import State


class SubState(str, enum.Enum):
    LOG_TRIAGE = "LOG_TRIAGE"
    SPECTRUM_RUN = "SPECTRUM_RUN"
    LOCALIZATION = "LOCALIZATION"
    ROOT_CAUSE_HYPOTHESIS = "ROOT_CAUSE_HYPOTHESIS"
    CHANGE_IMPACT_ESTIMATE = "CHANGE_IMPACT_ESTIMATE"
    REVIEW_PANEL = "REVIEW_PANEL"
    CANDIDATE_TRIAL = "CANDIDATE_TRIAL"
    CANDIDATE_CHOICE = "CANDIDATE_CHOICE"
    HEALTH_CHECK = "HEALTH_CHECK"
    TESTER_PRECHECK = "TESTER_PRECHECK"
    FOCUS_RUN = "FOCUS_RUN"
    GATE_RUN = "GATE_RUN"
    FLAKY_RERUN = "FLAKY_RERUN"
    TESTER_COMMANDS = "TESTER_COMMANDS"
    FETCH_LOGS = "FETCH_LOGS"
    NORMALIZE = "NORMALIZE"
    ATTACH_ARTIFACTS = "ATTACH_ARTIFACTS"


@dataclass(frozen=True)
class SubStateRow:
    """The state a sub-state belongs to, and what its event says."""

    state: State
    meaning: str


SUBSTATES: dict[SubState, SubStateRow] = {
    SubState.LOG_TRIAGE: SubStateRow(
        State.CODE_ANALYSIS,
        "before each coder call: the failing tests clustered by signature within "
        "`fwloop_context_bytes`, with the regressions and must-fix items sent along",
    ),
    SubState.SPECTRUM_RUN: SubStateRow(
        State.CODE_ANALYSIS,
        "before a coder call whose failing tests no run recorded on this tree (the baseline's, a "
        "gate's regressions): one bounded child run records which lines each ran, with an even "
        "sample of the passing tests (docs/providers.md, the spectrum); `evidence` is its "
        "selection and log",
    ),
    SubState.LOCALIZATION: SubStateRow(
        State.CODE_ANALYSIS,
        "before each coder call: the tree's code ranked by the failures' evidence (DESIGN.md "
        "§16): files indexed and parsed, what went into `sources`, `test_sources` and "
        "`repo_map` within `fwloop_source_bytes`, and how long it took",
    ),
    SubState.ROOT_CAUSE_HYPOTHESIS: SubStateRow(
        State.CODE_ANALYSIS,
        "the coder's answer: its root cause, how many hypotheses, its confidence",
    ),
    SubState.CHANGE_IMPACT_ESTIMATE: SubStateRow(
        State.CODE_ANALYSIS,
        "what the proposed patch touches: files, lines added and removed",
    ),
    SubState.REVIEW_PANEL: SubStateRow(
        State.PATCH_GENERATION,
        "a review panel's decision (`fwloop_review_panel`): each member's vote and risk, the "
        "rule, and whether the decision was split; `evidence` is its `panel-K.json`",
    ),
    SubState.CANDIDATE_TRIAL: SubStateRow(
        State.PATCH_GENERATION,
        "one of K candidates (`fwloop_candidates`) checked in a scratch tree of its own: the "
        "gate, its build, its focus run and, for the leader, the whole suite; `evidence` is its "
        "folder `candidates/K/`",
    ),
    SubState.CANDIDATE_CHOICE: SubStateRow(
        State.PATCH_GENERATION,
        "the choice among the candidates: which one is applied and why, pass@1 against pass@K; "
        "`evidence` is `candidates.json`",
    ),
    SubState.HEALTH_CHECK: SubStateRow(
        State.TEST_SETUP,
        "tests lost their environment in the last run: it is set up afresh (the fixtures' "
        "health check runs again in a new child) and they rerun; with a board farm, the "
        "place's check",
    ),
    SubState.TESTER_PRECHECK: SubStateRow(
        State.TEST_RUN, "the tester's selection run first, as a quick signal"
    ),
    SubState.FOCUS_RUN: SubStateRow(
        State.TEST_RUN,
        "after a patch, only the tests that did not pass ran (`fwloop_focus`); how they did",
    ),
    SubState.GATE_RUN: SubStateRow(
        State.TEST_RUN,
        "the focused tests passed, so the whole suite ran as the regression gate",
    ),
    SubState.FLAKY_RERUN: SubStateRow(
        State.TEST_RUN,
        "new failures rerun with no code change (`fwloop_flaky_reruns`): how many, how many "
        "passed (flaky)",
    ),
    SubState.TESTER_COMMANDS: SubStateRow(
        State.TEST_RUN, "the tester's commands through the allowlist: passed, failed, blocked"
    ),
    SubState.FETCH_LOGS: SubStateRow(
        State.RESULT_COLLECTION,
        "the child's records read (or rebuilt from its progress stream when it died)",
    ),
    SubState.NORMALIZE: SubStateRow(
        State.RESULT_COLLECTION,
        "the records merged into the iteration's results: environment reruns, carried "
        "outcomes, flaky policy, known failures, tester commands",
    ),
    SubState.ATTACH_ARTIFACTS: SubStateRow(
        State.RESULT_COLLECTION,
        "`results.json` written and the tested tree snapshotted; `evidence` names the files",
    ),
}


def misplaced(name: str, state: str) -> str | None:
    """Why a `substate` event named `name`, seen while the trace is in `state`, cannot be
    (one line), or None when the table puts it there."""
    try:
        row = SUBSTATES[SubState(name)]
    except ValueError:
        return f"{name!r} is not a sub-state"
    if row.state.value != state:
        return f"sub-state {name} belongs to {row.state.value}, the trace is in {state}"
    return None
