"""CODE_ANALYSIS with `fwloop_candidates = K`: the coder asked K times on the same evidence.

One request is assembled (so localization runs once, and every candidate sees the same code),
then sent K times with `candidate` saying which one is asked: a provider varies its sampling
by it (`openai:` sends it as the `seed`), a `command:` or `scripted:` stand-in may vary its
answer. A candidate whose call gives no usable answer is only that candidate's loss; when
none answers, the first one's failure is the state's, as with one answer.
"""

from __future__ import annotations

from collections.abc import Callable

from pytest_fwloop.agents.role import RoleAgent
from pytest_fwloop.core.machine.fsm import LoopEvent
from pytest_fwloop.core.machine.recovery import ErrorState
from pytest_fwloop.core.records.agent_protocol import CoderAnswer, MustFix
from pytest_fwloop.core.records.round_records import call_files
from pytest_fwloop.loop.request.desk import Assembled, as_candidate
from pytest_fwloop.loop.services import Services
from pytest_fwloop.loop.state import LoopState, Step
from pytest_fwloop.loop.steps.analysis import ask_coder


def ask_candidates(
    services: Services,
    loop: LoopState,
    coder: RoleAgent,
    assemble: Callable[[], Assembled],
    k: int,
) -> Step:
    """The K answers kept in `loop.candidate_answers`; `loop.coder_answer` is the first with a
    patch (else the first), which the decline and confidence rules judge as with one answer."""
    loop.candidate_answers = []
    assembled = assemble()
    must_fix = list(loop.must_fix)
    answers: list[tuple[str, CoderAnswer | None]] = []
    folder = services.recorder.round_path(loop.current.number)
    first_failure: tuple[Step, ErrorState | None, list[MustFix]] | None = None
    lost: list[str] = []
    for number in range(1, k + 1):
        asked = as_candidate(assembled, number, k)
        loop.must_fix = list(must_fix)
        step = ask_coder(services, loop, coder, _given(asked))
        made = call_files(folder, "coder", "meta.json")
        call = made[-1].name.split(".")[0] if made else f"candidate-{number}"
        if step.event is LoopEvent.ANALYSIS_READY and loop.coder_answer is not None:
            answers.append((call, loop.coder_answer))
            continue
        answers.append((call, None))
        lost.append(f"candidate {number}: {step.reason[:160]}")
        if first_failure is None:
            first_failure = (step, loop.error, list(loop.must_fix))
        loop.error = None
    answered = [a for _, a in answers if a is not None]
    if not answered:
        assert first_failure is not None
        step, loop.error, loop.must_fix = first_failure
        return step
    loop.must_fix = must_fix
    loop.candidate_answers = answers
    loop.coder_answer = next((a for a in answered if a.patch.strip()), answered[0])
    patches = sum(1 for a in answered if a.patch.strip())
    reason = f"{len(answered)} of {k} candidates answered, {patches} with a patch"
    return Step(LoopEvent.ANALYSIS_READY, "; ".join([reason, *lost]))


def _given(assembled: Assembled) -> Callable[[], Assembled]:
    """`ask_coder`'s assembler for a request assembled already."""
    return lambda: assembled
