"""`rules`: the built-in provider with no model, seed 001 §5.5's keyword and error-code triage.

It never writes a patch. It answers through the same JSON text as any other provider, so its
answers pass the same gate and land in the run directory the same way.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pytest_fwloop.agents.base import RawAnswer

if TYPE_CHECKING:
    from collections.abc import Sequence

    from pytest_fwloop.core.records.agent_protocol import AgentRequest, Failure


@dataclass(frozen=True)
class Category:
    """A kind of failure, the keywords that give it away, and where to look first."""

    name: str
    pattern: re.Pattern[str]
    hint: str


# Checked in order, first match wins: a HardFault often also shows a timeout, and a build
# error mentions files that a connection error would too.
CATEGORIES: tuple[Category, ...] = (
    Category(
        "crash (segfault / HardFault)",
        re.compile(
            r"segmentation fault|segfault|sigsegv|sigabrt|signal 11|exit(?: code| status)? 139|"
            r"hard ?fault|bus ?fault|usage ?fault|memmanage|core dumped|kernel panic|"
            r"stack overflow|stack smashing|watchdog reset",
            re.IGNORECASE,
        ),
        "the firmware crashed: check the fault address, stack usage and null pointers",
    ),
    Category(
        "build/compile error",
        re.compile(
            r"\berror:|undefined reference|compilation terminated|make(?:\[\d+\])?: \*\*\*|"
            r"ld returned|cannot find -l|syntaxerror|importerror|modulenotfounderror",
            re.IGNORECASE,
        ),
        "the build is broken: fix the first compiler or linker diagnostic",
    ),
    Category(
        "environment/connection",
        re.compile(
            r"environmentfailure|connection ?(?:refused|reset|error|aborted)|econnrefused|"
            r"ehostunreach|no route to host|serialexception|sshexception|broken pipe|"
            r"could not open port|address already in use|eaddrinuse",
            re.IGNORECASE,
        ),
        "the test environment is unreachable: reset it; this is not a code fault",
    ),
    Category(
        "timeout/no answer",
        re.compile(
            r"timeout|timed out|etimedout|exit(?: code| status)? 124|no answer|no response|"
            r"did not answer|pexpect\.exceptions\.eof",
            re.IGNORECASE,
        ),
        "the firmware did not answer in time: look for a hang, a lost reply or a changed prompt",
    ),
    Category(
        "assertion mismatch",
        re.compile(r"assert|expected|mismatch|!=|does not match", re.IGNORECASE),
        "the firmware answered, but not as the test expects: compare expected and actual",
    ),
)
#: What is left when no keyword matched; its pattern never matches anything.
UNCLASSIFIED = Category(
    "unclassified failure", re.compile(r"(?!)"), "read the excerpt; no known keyword matched"
)
#: Node ids named in a root cause; the rest are counted.
MAX_NAMED = 5
#: The most changed lines the rules reviewer approves; bigger patches need a real review.
MAX_REVIEW_LINES = 200
#: Code where a small mistake bricks the board rather than failing a test.
RISKY_CODE = re.compile(
    r"startup|linker|\.ld\b|\bboot|vector|flash|reset_handler|scatter|\.sct\b", re.IGNORECASE
)


def categorise(failure: Failure) -> Category:
    """The first category whose keywords appear in the failure's signature or excerpt."""
    text = f"{failure.signature}\n{failure.excerpt}"
    return next((c for c in CATEGORIES if c.pattern.search(text)), UNCLASSIFIED)


def triage(failures: Sequence[Failure], build_diagnostics: str = "") -> dict[str, object]:
    """A coder answer without a patch: the most common category and the tests that show it."""
    found = [(failure, categorise(failure)) for failure in failures]
    counts = Counter(category for _, category in found)
    hypotheses = [f"{c.name} in {n} test(s): {c.hint}" for c, n in counts.most_common()]
    # Keyword matching is a guess; its confidence must never outrank a model's analysis.
    if build_diagnostics.strip():
        # A broken build hides every test result, so it comes first whatever the tests said.
        root_cause = f"the build is broken: {_first_diagnostic(build_diagnostics)}"
        confidence = 0.3
    elif failures:
        top, top_count = counts.most_common(1)[0]
        nodeids = [failure.nodeid for failure, category in found if category == top]
        named = ", ".join(nodeids[:MAX_NAMED])
        if len(nodeids) > MAX_NAMED:
            named += f" and {len(nodeids) - MAX_NAMED} more"
        root_cause = (
            f"{top_count} of {len(failures)} failures look like a {top.name} ({named}): {top.hint}"
        )
        confidence = round(0.3 * top_count / len(failures), 2)
    else:
        root_cause = "no failing tests were reported"
        confidence = 0.0
    return {
        "analysis": {"root_cause": root_cause, "hypotheses": hypotheses, "confidence": confidence},
        "patch": "",
        "summary": "rules triage: no patch (the rules provider never writes one)",
    }


def triage_line(failures: Sequence[Failure], build_diagnostics: str = "") -> str:
    """The triage's root cause alone: what a run whose coder gave no readable answer ends with."""
    analysis = triage(failures, build_diagnostics)["analysis"]
    assert isinstance(analysis, dict)
    return str(analysis["root_cause"])


def _first_diagnostic(diagnostics: str) -> str:
    lines = [line.strip() for line in diagnostics.splitlines() if line.strip()]
    errors = [line for line in lines if "error" in line.lower()]
    return (errors or lines)[0][:200]


def review(patch: str) -> dict[str, object]:
    """A reviewer verdict from the patch's size and what it touches."""
    if not patch.strip():
        return {
            "decision": "changes_requested",
            "must_fix": [
                {"issue": "the patch is empty; propose a unified diff that fixes a failure"}
            ],
            "risk": 0.0,
            "summary": "rules review: nothing to review",
        }
    changed = [
        line
        for line in patch.splitlines()
        if line.startswith(("+", "-")) and not line.startswith(("+++", "---"))
    ]
    removed = sum(1 for line in changed if line.startswith("-"))
    added = len(changed) - removed
    if len(changed) > MAX_REVIEW_LINES:
        return {
            "decision": "changes_requested",
            "must_fix": [
                {
                    "issue": f"the patch changes {len(changed)} lines, more than the "
                    f"{MAX_REVIEW_LINES} the rules reviewer approves; make a smaller change"
                }
            ],
            "risk": 0.8,
            "summary": "rules review: too large to approve without a model",
        }
    touched = [line for line in patch.splitlines() if line.startswith(("+++", "---", "diff "))]
    reasons = [f"{len(changed)} changed lines"]
    risk = 0.1 + 0.3 * len(changed) / MAX_REVIEW_LINES
    if any(RISKY_CODE.search(line) for line in touched + changed):
        risk += 0.3
        reasons.append("touches startup, linker, boot, vector table or flash code")
    if removed >= 10 and removed > 2 * added:
        risk += 0.2
        reasons.append(f"mostly deletes ({removed} lines removed, {added} added)")
    return {
        "decision": "approve",
        "must_fix": [],
        "risk": round(min(risk, 1.0), 2),
        "summary": "rules review: " + "; ".join(reasons),
    }


_TEST_PLAN: dict[str, object] = {
    "select": [],
    "commands": [],
    "notes": "rules tester: no model, so no extra tests or commands; the suite itself decides",
}


class RulesProvider:
    """Always available and deterministic: the fallback at the end of a failover list."""

    spec = "rules"

    def call(self, request: AgentRequest, timeout: float) -> RawAnswer:
        if request.role == "coder":
            answer = triage(request.failures, request.build_diagnostics)
        elif request.role == "reviewer":
            answer = review(request.patch)
        else:
            answer = _TEST_PLAN
        return RawAnswer(text=json.dumps(answer, ensure_ascii=False))
