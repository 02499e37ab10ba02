from __future__ import annotations

import pytest

from pytest_fwloop.config.options import spec_of
from pytest_fwloop.core.machine import fsm
from pytest_fwloop.core.machine.fsm import LoopEvent, State

SEED_STATES = [
    "IDLE",
    "INIT",
    "CODE_ANALYSIS",
    "PATCH_GENERATION",
    "PATCH_APPLY",
    "BUILD_SETUP",
    "BUILD_RUN",
    "TEST_SETUP",
    "TEST_RUN",
    "RESULT_COLLECTION",
    "RESULT_ANALYSIS",
    "CONVERGENCE_CHECK",
    "ERROR_RECOVERY",
    "SUCCESS",
    "FAILURE",
    "ABORTED",
]


def test_states_are_seed_001s_top_level_set() -> None:
    assert [s.value for s in State] == SEED_STATES


def test_baseline_path_of_design_section_3() -> None:
    path = [State.IDLE]
    for event in (
        LoopEvent.START,
        LoopEvent.BASELINE,
        LoopEvent.BUILD_READY,
        LoopEvent.BUILD_OK,
        LoopEvent.ENV_READY,
        LoopEvent.TESTS_FINISHED,
        LoopEvent.RESULTS_NORMALIZED,
        LoopEvent.DECISION_PRODUCED,
    ):
        path.append(fsm.next_state(path[-1], event))
    assert path[1:] == [
        State.INIT,
        State.BUILD_SETUP,
        State.BUILD_RUN,
        State.TEST_SETUP,
        State.TEST_RUN,
        State.RESULT_COLLECTION,
        State.RESULT_ANALYSIS,
        State.CONVERGENCE_CHECK,
    ]


def test_continuing_goes_through_the_coder_and_the_reviewer_gate() -> None:
    state = fsm.next_state(State.CONVERGENCE_CHECK, LoopEvent.CONTINUE)
    assert state is State.CODE_ANALYSIS
    state = fsm.next_state(state, LoopEvent.ANALYSIS_READY)
    assert state is State.PATCH_GENERATION
    # The only way into PATCH_APPLY is an approved patch.
    sources = {t.source for t in fsm.TRANSITIONS if t.target is State.PATCH_APPLY}
    assert sources == {State.PATCH_GENERATION}
    assert fsm.next_state(state, LoopEvent.PATCH_APPROVED) is State.PATCH_APPLY


@pytest.mark.parametrize("state", [s for s in State if s not in fsm.TERMINAL_STATES])
def test_abort_and_timeout_apply_from_every_live_state(state: State) -> None:
    assert fsm.next_state(state, LoopEvent.ABORT) is State.ABORTED
    assert fsm.next_state(state, LoopEvent.STATE_TIMEOUT) is State.ERROR_RECOVERY


@pytest.mark.parametrize("state", sorted(fsm.TERMINAL_STATES))
def test_terminal_states_have_no_way_out(state: State) -> None:
    with pytest.raises(fsm.IllegalTransition, match="terminal"):
        fsm.next_state(state, LoopEvent.ABORT)


def test_unknown_event_is_a_bug_not_a_silent_move() -> None:
    with pytest.raises(fsm.IllegalTransition, match="no transition from BUILD_RUN"):
        fsm.next_state(State.BUILD_RUN, LoopEvent.PATCH_APPROVED)


def test_every_state_is_reachable_and_every_live_state_has_an_exit() -> None:
    reachable = {State.IDLE}
    frontier = [State.IDLE]
    while frontier:
        source = frontier.pop()
        for t in fsm.TRANSITIONS:
            if t.source is source and t.target not in reachable:
                reachable.add(t.target)
                frontier.append(t.target)
    assert reachable | {State.ABORTED} == set(State)
    sources = {t.source for t in fsm.TRANSITIONS}
    assert sources == set(State) - fsm.TERMINAL_STATES


def test_error_recovery_resumes_only_where_seed_001_allows() -> None:
    targets = {t.target for t in fsm.TRANSITIONS if t.source is State.ERROR_RECOVERY}
    assert targets == {State.CODE_ANALYSIS, State.BUILD_RUN, State.TEST_SETUP, State.FAILURE}


@pytest.mark.parametrize("state", [s for s in State if s not in fsm.TERMINAL_STATES])
def test_every_live_state_has_a_timeout_option_and_a_legal_resume(state: State) -> None:
    bound = fsm.STATE_TIMEOUTS[state]
    assert spec_of(bound.option).default > 0
    if bound.resume is not None:
        fsm.next_state(State.ERROR_RECOVERY, bound.resume)


def test_terminal_states_have_no_timeout() -> None:
    assert not set(fsm.STATE_TIMEOUTS) & fsm.TERMINAL_STATES
