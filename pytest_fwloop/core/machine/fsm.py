"""The loop's states and transition table: plain data, the single source of truth.

`docs/fsm.md` is generated from this module (`python -m pytest_fwloop.docgen docs`) and a
test fails when the two drift. The controller asks `next_state` for every move, so a transition
that is not in the table cannot happen.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class State(str, enum.Enum):
    """Seed 001's top-level states, exactly."""

    IDLE = "IDLE"
    INIT = "INIT"
    CODE_ANALYSIS = "CODE_ANALYSIS"
    PATCH_GENERATION = "PATCH_GENERATION"
    PATCH_APPLY = "PATCH_APPLY"
    BUILD_SETUP = "BUILD_SETUP"
    BUILD_RUN = "BUILD_RUN"
    TEST_SETUP = "TEST_SETUP"
    TEST_RUN = "TEST_RUN"
    RESULT_COLLECTION = "RESULT_COLLECTION"
    RESULT_ANALYSIS = "RESULT_ANALYSIS"
    CONVERGENCE_CHECK = "CONVERGENCE_CHECK"
    ERROR_RECOVERY = "ERROR_RECOVERY"
    SUCCESS = "SUCCESS"
    FAILURE = "FAILURE"
    ABORTED = "ABORTED"


TERMINAL_STATES = frozenset({State.SUCCESS, State.FAILURE, State.ABORTED})


class IterationKind(str, enum.Enum):
    """What an iteration was for; the value is what the records show."""

    BASELINE = "baseline"
    PATCH = "patch"
    CONFIRMATION = "confirmation"
    #: a patch that broke tests without raising the pass count, undone (DESIGN.md §13)
    ROLLBACK = "rollback"

    def __str__(self) -> str:  # tables, the report and the terminal show the bare value
        return self.value


class ErrorType(str, enum.Enum):
    """Error classes of seed 001 §4.2 / §5.20 that ERROR_RECOVERY distinguishes."""

    BUILD_FAILURE = "BUILD_FAILURE"
    TEST_ENV_FAILURE = "TEST_ENV_FAILURE"
    TIMEOUT = "TIMEOUT"
    ARTIFACT_MISSING = "ARTIFACT_MISSING"
    MODEL_FAILURE = "MODEL_FAILURE"
    POLICY_VIOLATION = "POLICY_VIOLATION"
    PATCH_APPLY_FAILURE = "PATCH_APPLY_FAILURE"
    FIRMWARE_NO_BOOT = "FIRMWARE_NO_BOOT"
    TEST_COMMAND_FAILURE = "TEST_COMMAND_FAILURE"
    COLLECTION_ERROR = "COLLECTION_ERROR"


class LoopEvent(str, enum.Enum):
    """Every event a state handler can return; the table below says where each leads."""

    START = "start"
    BASELINE = "baseline"
    ANALYSIS_READY = "analysis_ready"
    ANALYSIS_FAILED = "analysis_failed"
    BUDGET_EXHAUSTED = "budget_exhausted"
    PATCH_APPROVED = "patch_approved"
    REVIEW_CHANGES_REQUESTED = "review_changes_requested"
    PATCH_REPEATED = "patch_repeated"
    CODER_DECLINED = "coder_declined"
    ONLY_DECLINED_LEFT = "only_declined_left"
    CODER_UNSURE = "coder_unsure"
    CODER_INCONCLUSIVE = "coder_inconclusive"
    CODER_ABORTED = "coder_aborted"
    PATCH_REJECTED = "patch_rejected"
    PATCH_APPLIED = "patch_applied"
    APPLY_FAILED = "apply_failed"
    BUILD_READY = "build_ready"
    NO_BUILD = "no_build"
    TOOLCHAIN_MISSING = "toolchain_missing"
    PRECHECK_FAILED = "precheck_failed"
    BUILD_OK = "build_ok"
    BUILD_FAILED = "build_failed"
    ENV_READY = "env_ready"
    TEST_PLAN_READY = "test_plan_ready"
    TESTER_SCHEMA_INVALID = "tester_schema_invalid"
    TESTER_SCHEMA_INVALID_AGAIN = "tester_schema_invalid_again"
    TESTER_COMMAND_BLOCKED = "tester_command_blocked"
    TESTER_FAILED = "tester_failed"
    TESTS_FINISHED = "tests_finished"
    RESULTS_NORMALIZED = "results_normalized"
    ARTIFACTS_MISSING = "artifacts_missing"
    DECISION_PRODUCED = "decision_produced"
    ENVIRONMENT_FAILED = "environment_failed"
    FIRMWARE_NO_BOOT = "firmware_no_boot"
    COLLECTION_FAILED = "collection_failed"
    REPEATED_TEST_FAILURE = "repeated_test_failure"
    CONTINUE = "continue"
    CONFIRM = "confirm"
    CONVERGED = "converged"
    STOP = "stop"
    AWAIT_OPERATOR = "await_operator"
    DISCUSSION_COMPLETE = "discussion_complete"
    OPERATOR_FOLLOWUP = "operator_followup"
    OPERATOR_CONFIRMED = "operator_confirmed"
    RESUME = "resume"
    RESUME_TESTS = "resume_tests"
    RECOVER_TO_ANALYSIS = "recover_to_analysis"
    RECOVER_TO_BUILD = "recover_to_build"
    RECOVER_TO_TEST_SETUP = "recover_to_test_setup"
    UNRECOVERABLE = "unrecoverable"
    ABORT = "abort"
    STATE_TIMEOUT = "state_timeout"
    RUN_TIMEOUT = "run_timeout"
    CIRCUIT_BREAKER = "circuit_breaker"


@dataclass(frozen=True)
class Transition:
    source: State
    event: LoopEvent
    target: State
    meaning: str


S = State
E = LoopEvent
#: Every move the controller can make. `abort` and `state_timeout` apply from any non-terminal
#: state and are listed once in WILDCARD_TRANSITIONS.
TRANSITIONS: tuple[Transition, ...] = (
    Transition(S.IDLE, E.START, S.INIT, "pytest --fwloop started"),
    Transition(
        S.IDLE, E.ENVIRONMENT_FAILED, S.ERROR_RECOVERY, "no labgrid place could be reserved"
    ),
    Transition(
        S.IDLE,
        E.OPERATOR_CONFIRMED,
        S.PATCH_GENERATION,
        "`fwloop confirm` (or `resume` of a patch in flight): a recorded run goes on with its "
        "pending patch, through the strict gate",
    ),
    Transition(
        S.IDLE,
        E.RESUME,
        S.CODE_ANALYSIS,
        "`fwloop resume` or `followup`: a recorded run goes on from its kept tree and history",
    ),
    Transition(
        S.IDLE,
        E.RESUME_TESTS,
        S.BUILD_SETUP,
        "`fwloop resume` of a run stopped while confirming a green tree: it is tested again",
    ),
    Transition(
        S.INIT, E.BASELINE, S.BUILD_SETUP, "workspace snapshotted; iteration 1 is the baseline"
    ),
    Transition(S.CODE_ANALYSIS, E.ANALYSIS_READY, S.PATCH_GENERATION, "coder answered"),
    Transition(S.CODE_ANALYSIS, E.ANALYSIS_FAILED, S.ERROR_RECOVERY, "coder gave no usable answer"),
    Transition(
        S.CODE_ANALYSIS, E.BUDGET_EXHAUSTED, S.FAILURE, "the coder's call went over the budget"
    ),
    Transition(
        S.PATCH_GENERATION, E.PATCH_APPROVED, S.PATCH_APPLY, "policy passed, reviewer approved"
    ),
    Transition(
        S.PATCH_GENERATION,
        E.REVIEW_CHANGES_REQUESTED,
        S.CODE_ANALYSIS,
        "reviewer sent the must-fix list back to the coder",
    ),
    Transition(
        S.PATCH_GENERATION,
        E.PATCH_REPEATED,
        S.CODE_ANALYSIS,
        "the coder proposed a change already tried: told once, not applied",
    ),
    Transition(
        S.PATCH_GENERATION,
        E.CODER_DECLINED,
        S.CODE_ANALYSIS,
        "the coder declined tests (not a code defect): the others go on without them",
    ),
    Transition(
        S.PATCH_GENERATION,
        E.CODER_UNSURE,
        S.CODE_ANALYSIS,
        "confidence below fwloop_min_confidence: asked once more, with more evidence",
    ),
    Transition(
        S.PATCH_GENERATION,
        E.CODER_INCONCLUSIVE,
        S.FAILURE,
        "low confidence twice: INCONCLUSIVE (converged_with_improvement or failure)",
    ),
    Transition(
        S.PATCH_GENERATION,
        E.CODER_ABORTED,
        S.FAILURE,
        "the coder's next_action is abort (converged_with_improvement or failure)",
    ),
    Transition(
        S.CODE_ANALYSIS,
        E.ONLY_DECLINED_LEFT,
        S.FAILURE,
        "only tests the coder declined are left: converged with improvement, or failure",
    ),
    Transition(
        S.PATCH_GENERATION,
        E.PATCH_REJECTED,
        S.ERROR_RECOVERY,
        "empty, unsafe, unappliable or again repeated patch",
    ),
    Transition(
        S.PATCH_GENERATION,
        E.AWAIT_OPERATOR,
        S.ABORTED,
        "proposal mode: the proposal waits for the operator, the tree untouched",
    ),
    Transition(
        S.PATCH_GENERATION,
        E.DISCUSSION_COMPLETE,
        S.ABORTED,
        "proposal mode: the coder answered the operator's follow-up with no patch: nothing to "
        "confirm, the tree untouched",
    ),
    Transition(
        S.PATCH_GENERATION,
        E.OPERATOR_FOLLOWUP,
        S.CODE_ANALYSIS,
        "the operator answered a proposal with a follow-up for the coder",
    ),
    Transition(
        S.PATCH_GENERATION,
        E.BUDGET_EXHAUSTED,
        S.FAILURE,
        "the reviewer's call went over the budget",
    ),
    Transition(S.PATCH_APPLY, E.PATCH_APPLIED, S.BUILD_SETUP, "journalled and applied"),
    Transition(S.PATCH_APPLY, E.APPLY_FAILED, S.ERROR_RECOVERY, "git apply refused the patch"),
    Transition(S.BUILD_SETUP, E.BUILD_READY, S.BUILD_RUN, "build tool found"),
    Transition(S.BUILD_SETUP, E.NO_BUILD, S.TEST_SETUP, "no build step configured"),
    Transition(S.BUILD_SETUP, E.TOOLCHAIN_MISSING, S.ERROR_RECOVERY, "build tool not found"),
    Transition(
        S.BUILD_SETUP,
        E.PRECHECK_FAILED,
        S.ERROR_RECOVERY,
        "the patched files fail the pre-check (fwloop_precheck, Python compile): rolled back "
        "before the build, the output goes to the coder",
    ),
    Transition(S.BUILD_RUN, E.BUILD_OK, S.TEST_SETUP, "build succeeded"),
    Transition(S.BUILD_RUN, E.BUILD_FAILED, S.ERROR_RECOVERY, "build failed"),
    Transition(S.TEST_SETUP, E.ENV_READY, S.TEST_RUN, "child pytest prepared"),
    Transition(
        S.TEST_SETUP,
        E.TEST_PLAN_READY,
        S.TEST_RUN,
        "tester plan validated; its commands checked against the allowlist",
    ),
    Transition(
        S.TEST_SETUP,
        E.TESTER_SCHEMA_INVALID,
        S.TEST_RUN,
        "the tester's plan failed its schema twice: the iteration's tests run without its picks, "
        "the coder is told",
    ),
    Transition(
        S.TEST_SETUP,
        E.TESTER_SCHEMA_INVALID_AGAIN,
        S.ERROR_RECOVERY,
        "the tester's plan failed its schema in fwloop_tester_schema_rounds rounds in a row",
    ),
    Transition(
        S.TEST_SETUP,
        E.TESTER_COMMAND_BLOCKED,
        S.ERROR_RECOVERY,
        "every command the tester proposed is outside the allowlist",
    ),
    Transition(S.TEST_SETUP, E.TESTER_FAILED, S.ERROR_RECOVERY, "the tester's provider failed"),
    Transition(
        S.TEST_SETUP, E.ENVIRONMENT_FAILED, S.ERROR_RECOVERY, "the labgrid place is lost for good"
    ),
    Transition(
        S.TEST_SETUP, E.BUDGET_EXHAUSTED, S.FAILURE, "the tester's call went over the budget"
    ),
    Transition(S.TEST_RUN, E.TESTS_FINISHED, S.RESULT_COLLECTION, "child pytest exited"),
    Transition(S.RESULT_COLLECTION, E.RESULTS_NORMALIZED, S.RESULT_ANALYSIS, "results read"),
    Transition(
        S.RESULT_COLLECTION, E.ARTIFACTS_MISSING, S.ERROR_RECOVERY, "child wrote no results"
    ),
    Transition(S.RESULT_ANALYSIS, E.DECISION_PRODUCED, S.CONVERGENCE_CHECK, "counts computed"),
    Transition(
        S.RESULT_ANALYSIS, E.ENVIRONMENT_FAILED, S.ERROR_RECOVERY, "tests failed on the environment"
    ),
    Transition(
        S.RESULT_ANALYSIS,
        E.FIRMWARE_NO_BOOT,
        S.ERROR_RECOVERY,
        "the environment came up before this patch and not after it",
    ),
    Transition(
        S.RESULT_ANALYSIS,
        E.COLLECTION_FAILED,
        S.ERROR_RECOVERY,
        "the suite does not collect at the baseline: stop before any agent call",
    ),
    Transition(
        S.RESULT_ANALYSIS,
        E.REPEATED_TEST_FAILURE,
        S.ERROR_RECOVERY,
        "the same tester command failed in two consecutive rounds",
    ),
    Transition(S.CONVERGENCE_CHECK, E.CONTINUE, S.CODE_ANALYSIS, "next iteration"),
    Transition(S.CONVERGENCE_CHECK, E.CONFIRM, S.TEST_SETUP, "green once: rerun with no new patch"),
    Transition(S.CONVERGENCE_CHECK, E.CONVERGED, S.SUCCESS, "target met and confirmed"),
    Transition(S.CONVERGENCE_CHECK, E.STOP, S.FAILURE, "verdict: target not met"),
    Transition(S.CONVERGENCE_CHECK, E.AWAIT_OPERATOR, S.ABORTED, "plateau: operator decides"),
    Transition(
        S.CONVERGENCE_CHECK,
        E.CIRCUIT_BREAKER,
        S.FAILURE,
        "too many rollbacks or regressions (fwloop_circuit_breaker)",
    ),
    Transition(S.ERROR_RECOVERY, E.RECOVER_TO_ANALYSIS, S.CODE_ANALYSIS, "back to the coder"),
    Transition(S.ERROR_RECOVERY, E.RECOVER_TO_BUILD, S.BUILD_RUN, "retry the build"),
    Transition(S.ERROR_RECOVERY, E.RECOVER_TO_TEST_SETUP, S.TEST_SETUP, "reset env, rerun tests"),
    Transition(S.ERROR_RECOVERY, E.UNRECOVERABLE, S.FAILURE, "retries exhausted"),
)

#: Moves allowed from every non-terminal state (seed 001 §5.1).
WILDCARD_TRANSITIONS: tuple[tuple[LoopEvent, State, str], ...] = (
    (E.ABORT, S.ABORTED, "SIGINT, SIGTERM or `fwloop cancel`"),
    (E.STATE_TIMEOUT, S.ERROR_RECOVERY, "state exceeded its timeout (error type TIMEOUT)"),
    (E.RUN_TIMEOUT, S.FAILURE, "the whole run exceeded --fwloop-timeout (outcome timeout)"),
)


@dataclass(frozen=True)
class StateBound:
    """A state's timeout: the option that sets it, and what going over it means.

    `resume` set: the state waits on something outside the loop (an agent, the build, the tests);
    that wait is cut at the deadline and ERROR_RECOVERY resumes at `resume` (error type TIMEOUT,
    retried as `recovery.RULES` allows). `resume` None: the state only does bookkeeping (git on
    the snapshot store, files), which is never cut, since a cut git operation could leave the tree
    half restored; it is judged when it ends, and one over its timeout ends the run.
    """

    option: str
    resume: LoopEvent | None


#: Seed 001 §4: every state has a timeout; over it, `state_timeout` leads to ERROR_RECOVERY with
#: error type TIMEOUT. `option` names the `fwloop_<option>` ini option / flag giving the seconds.
STATE_TIMEOUTS: dict[State, StateBound] = {
    S.IDLE: StateBound("state_timeout", None),
    S.INIT: StateBound("state_timeout", None),
    S.CODE_ANALYSIS: StateBound("state_timeout", E.RECOVER_TO_ANALYSIS),
    S.PATCH_GENERATION: StateBound("state_timeout", E.RECOVER_TO_ANALYSIS),
    S.PATCH_APPLY: StateBound("state_timeout", None),
    S.BUILD_SETUP: StateBound("state_timeout", None),
    S.BUILD_RUN: StateBound("build_timeout", E.RECOVER_TO_BUILD),
    S.TEST_SETUP: StateBound("state_timeout", E.RECOVER_TO_TEST_SETUP),
    S.TEST_RUN: StateBound("test_timeout", E.RECOVER_TO_TEST_SETUP),
    S.RESULT_COLLECTION: StateBound("state_timeout", None),
    S.RESULT_ANALYSIS: StateBound("state_timeout", None),
    S.CONVERGENCE_CHECK: StateBound("state_timeout", None),
    S.ERROR_RECOVERY: StateBound("state_timeout", None),
}


_TABLE: dict[tuple[State, LoopEvent], State] = {(t.source, t.event): t.target for t in TRANSITIONS}


class IllegalTransition(RuntimeError):
    """The controller asked for a move the table does not allow: a bug, never user error."""


def next_state(current: State, event: LoopEvent) -> State:
    """Return the state `event` leads to from `current`, or raise IllegalTransition."""
    if current in TERMINAL_STATES:
        raise IllegalTransition(f"{current.value} is terminal; no event '{event.value}' applies")
    for wildcard_event, target, _ in WILDCARD_TRANSITIONS:
        if event == wildcard_event:
            return target
    try:
        return _TABLE[(current, event)]
    except KeyError:
        raise IllegalTransition(f"no transition from {current.value} on '{event.value}'") from None
