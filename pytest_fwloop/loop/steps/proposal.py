"""Proposal mode (DESIGN.md §11; seeds 000/003/004): the operator sees a patch before it is applied.

With `--fwloop-propose=first|every`, the coder's patch is not taken to the strict gate at once:
the patch policy gives its word, the reviewer and the tester comment on it in plain text (the
roundtable; strict JSON stays for the gate that applies it), and the run stops with
`awaiting_operator_confirm`, the tree untouched, `proposal.patch` and `proposal.md` in its run
directory. In interactive mode on a terminal the operator answers at once instead: `y` sends the
patch on through the strict gate, `n` cancels, any other text goes back to the coder.

Whatever `fwloop_propose` says, a patch that changes boot-critical code no failing test names
(`core/gate/risky.py`, seed 001 §5.7) stops here the same way, once the policy passes it: only an
operator lets it through.

A follow-up on a proposal opens a discussion: when the coder answers it with an analysis and no
patch, the roundtable comments on that answer and the run ends `discussion_complete` (seeds
000/003), with nothing to confirm; an interactive plateau stays `awaiting_operator_confirm`.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

from pytest_fwloop.agents.errors import ProviderError
from pytest_fwloop.agents.role import RoleAgent
from pytest_fwloop.core.gate.gate_rules import first_refusal
from pytest_fwloop.core.gate.risky import assess, describe, unnamed_boot
from pytest_fwloop.core.machine.fsm import LoopEvent
from pytest_fwloop.core.machine.outcomes import Outcome
from pytest_fwloop.core.records.agent_protocol import (
    AgentRequest,
    CoderAnswer,
    MustFix,
    RiskyChange,
)
from pytest_fwloop.core.verdict.convergence import ExecutionMode
from pytest_fwloop.loop.services import Services
from pytest_fwloop.loop.state import LoopState, Step


class ProposalDesk:
    """Stops a patch before the gate for the operator, as `fwloop_propose` asks."""

    def __init__(self, services: Services, reviewer: RoleAgent, tester: RoleAgent | None) -> None:
        self.services = services
        # The roundtable: who comments on a proposal before the operator reads it.
        self.commenters = {"reviewer": reviewer, **({"tester": tester} if tester else {})}
        self.confirmed = 0  # proposals the operator said yes to, in this process

    def due(self, applied: int, unsure: bool = False) -> bool:
        """Whether the next patch stops here: `every` patch, the `first` one of the run, or
        (in proposal mode) one whose analysis is below fwloop_min_confidence."""
        if self.services.settings.options.propose == "every" or (
            unsure and self.services.settings.options.propose != "off"
        ):
            return True
        return (
            self.services.settings.options.propose == "first"
            and applied == 0
            and self.confirmed == 0
        )

    def stop(
        self, applied: int, loop: LoopState, request: Callable[[str, str], AgentRequest]
    ) -> Step | None:
        """When a proposal is due for the coder's answer: write it and stop, or (interactive) act
        on the operator's reply. None sends the patch on to the strict gate."""
        answer = loop.coder_answer
        assert answer is not None
        if loop.operator_approved:
            loop.operator_approved = False  # this answer only; the next patch may stop again
            return None
        if not answer.patch.strip():
            # Outside a discussion no patch is no proposal: the gate refuses it, the coder is
            # asked again.
            return self._discussion_ends(loop, request) if loop.discussing else None
        decisions = loop.current.decisions
        unsure = bool(decisions) and decisions[-1].status in ("low_confidence", "inconclusive")
        due = self.due(applied, unsure)
        boot = unnamed_boot(
            assess(
                answer.patch,
                self.services.settings.risky_patterns,
                loop.open_failures(str(self.services.settings.rootdir)),
            )
        )
        if not due and not boot:
            return None
        passes, policy = self._policy_word(answer)
        if not due and not passes:
            return None  # the gate refuses it and tells the coder: nothing to ask anyone
        loop.discussing = False
        comments = self._roundtable(answer, request)
        number = loop.current.number
        patch = self.services.recorder.write_patch("proposal.patch", answer.patch)
        text = _proposal_text(self.services.recorder.run_id, number, answer, policy, comments, boot)
        notes = self.services.recorder.write_text("proposal.md", text)
        evidence = (self.services.recorder.relative(patch), self.services.recorder.relative(notes))
        if self.services.settings.mode is ExecutionMode.INTERACTIVE and sys.stdin.isatty():
            return self._ask_at_the_terminal(loop, text, evidence)
        loop.outcome = Outcome.AWAITING_OPERATOR_CONFIRM
        run_id = self.services.recorder.run_id
        why = (
            f"proposal mode ({self.services.settings.options.propose})"
            if due
            else f"boot-critical code that no failing test names ({describe(boot)})"
        )
        loop.final_reason = (
            f"{why}: the patch of iteration {number} waits for the operator ({policy}); read "
            f"proposal.md, then `fwloop confirm {run_id}` or `fwloop followup {run_id} TEXT`"
        )
        return Step(LoopEvent.AWAIT_OPERATOR, loop.final_reason, evidence)

    def _ask_at_the_terminal(
        self, loop: LoopState, text: str, evidence: tuple[str, ...]
    ) -> Step | None:
        """Interactive mode: the operator answers the proposal where they sit."""
        self.services.terminal.proposal(text)
        reply = self.services.terminal.answer(
            "Apply this patch? [y = apply / n = stop / text = ask the coder for another] "
        )
        if reply.lower() in ("y", "yes"):
            self.confirmed += 1
            loop.current.notes.append("the operator approved the proposal")
            return None
        if reply.lower() in ("", "n", "no"):
            loop.outcome = Outcome.CANCELED
            loop.final_reason = "the operator declined the proposal"
            return Step(LoopEvent.ABORT, loop.final_reason, evidence)
        return _followed_up(loop, reply, evidence)

    def _discussion_ends(
        self, loop: LoopState, request: Callable[[str, str], AgentRequest]
    ) -> Step:
        """The coder answered the operator's follow-up with an analysis and no patch: the
        roundtable comments on it, `proposal.md` keeps it, and nothing waits to be confirmed. At
        a terminal the operator may reply once more instead."""
        answer = loop.coder_answer
        assert answer is not None
        recorder = self.services.recorder
        comments = self._roundtable(answer, request)
        (recorder.path / "proposal.patch").unlink(missing_ok=True)  # answered: nothing pending
        text = _proposal_text(
            recorder.run_id, loop.current.number, answer, "no patch", comments, []
        )
        evidence = (recorder.relative(recorder.write_text("proposal.md", text)),)
        if self.services.settings.mode is ExecutionMode.INTERACTIVE and sys.stdin.isatty():
            self.services.terminal.proposal(text)
            reply = self.services.terminal.answer(
                "Reply to the coder? [text = ask again / empty = end the discussion] "
            )
            if reply.lower() not in ("", "n", "no"):
                return _followed_up(loop, reply, evidence)
        loop.discussing = False
        loop.outcome = Outcome.DISCUSSION_COMPLETE
        loop.final_reason = (
            f"the coder answered the operator's follow-up in iteration {loop.current.number} "
            f"with no patch ({answer.summary[:120]}): the discussion is complete, nothing waits "
            f"to be confirmed; read proposal.md, then `fwloop followup {recorder.run_id} TEXT` "
            f"asks for a patch or `fwloop resume {recorder.run_id}` goes on"
        )
        return Step(LoopEvent.DISCUSSION_COMPLETE, loop.final_reason, evidence)

    def _roundtable(
        self, answer: CoderAnswer, request: Callable[[str, str], AgentRequest]
    ) -> dict[str, str]:
        """Each commenter's plain-text word on the coder's answer."""
        return {
            role: self._comment(role, agent, answer, request)
            for role, agent in self.commenters.items()
        }

    def _policy_word(self, answer: CoderAnswer) -> tuple[bool, str]:
        """Whether the strict gate's checks before the reviewer pass the patch, and in words."""
        refusal = first_refusal(
            answer.patch,
            None,
            False,
            lambda: self.services.workspace.check_patch(answer.patch, self.services.policy()),
            lambda: self.services.workspace.check_apply(answer.patch),
            answer,
        )
        if refusal is None:
            return True, "the patch policy passes it and it applies"
        reason = refusal.error.reason if refusal.error is not None else refusal.reason
        return False, f"the patch gate would refuse it: {reason}"

    @staticmethod
    def _comment(
        role: str,
        agent: RoleAgent,
        answer: CoderAnswer,
        request: Callable[[str, str], AgentRequest],
    ) -> str:
        try:
            return agent.comment(request(role, answer.patch))
        except ProviderError as exc:
            return f"(no comment: {exc.kind.value}: {exc.message})"


def _followed_up(loop: LoopState, reply: str, evidence: tuple[str, ...]) -> Step:
    """The operator's text at the terminal goes back to the coder: a discussion is open."""
    loop.discussing = True
    loop.must_fix = [MustFix(issue=f"the operator's follow-up on your proposal: {reply}")]
    return Step(LoopEvent.OPERATOR_FOLLOWUP, f"operator: {reply[:120]}", evidence)


def _boot_section(boot: list[RiskyChange]) -> list[str]:
    """proposal.md's list of boot-critical changes no failing test names, if any."""
    if not boot:
        return []
    return [
        "## Boot-critical code no failing test names",
        "",
        "The patch changes code the board needs to start (fwloop_risky_patterns), and no "
        "test that fails names it: it is applied only if you confirm it.",
        "",
        *[
            f"- `{c.file}`" + (f" {c.hunk} `{c.line}`" if c.hunk else "") + f": {c.pattern}"
            for c in boot
        ],
        "",
    ]


def _proposal_text(
    run_id: str,
    number: int,
    answer: CoderAnswer,
    policy: str,
    comments: dict[str, str],
    boot: list[RiskyChange],
) -> str:
    lines = [
        f"# Proposal for iteration {number}",
        "",
        f"**Summary:** {answer.summary}",
        "",
        f"**Root cause (coder):** {answer.analysis.root_cause}",
        f"**Confidence:** {answer.analysis.confidence:.2f}",
        "",
        f"**Patch policy:** {policy}",
        "",
    ]
    lines += _boot_section(boot)
    for role, comment in comments.items():
        lines += [f"## The {role}'s comment", "", comment, ""]
    if not answer.patch.strip():
        return "\n".join(
            [
                *lines,
                "## Hypotheses",
                "",
                *[f"- {hypothesis}" for hypothesis in answer.analysis.hypotheses],
                "",
                "The coder answered with no patch: the discussion is complete and nothing waits "
                f"to be confirmed. To go on: `fwloop followup {run_id} TEXT` asks it again (for "
                f"a patch, say so); `fwloop resume {run_id}` continues the loop "
                "(docs/operator.md).",
                "",
            ]
        )
    lines += [
        "## The patch",
        "",
        "```diff",
        answer.patch.rstrip("\n"),
        "```",
        "",
        f"To go on: `fwloop confirm {run_id}` applies it through the strict gate and continues "
        f"the run; `fwloop followup {run_id} TEXT` asks the coder for a revised proposal "
        "(docs/operator.md).",
        "",
    ]
    return "\n".join(lines)
