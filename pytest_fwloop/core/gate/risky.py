"""High-risk code in a patch (seed 001 §5.1.5, §5.7): which hunks match `fwloop_risky_patterns`,
how far that raises the patch's risk, and which boot-critical changes no failing test names.

A pattern line is `NAME KIND REGEX`. KIND `line` judges each added or removed line of the diff as
`git apply` reads it (`unified_diff`), without its `+`/`-` tag; `path` judges every path the
change names (old and new). `boot-line` and `boot-path` do the same and mark the match
boot-critical: such a change waits for the operator unless a failing test names it. The line
`firmware` stands for FIRMWARE_PATTERNS. Pure.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING

from pytest_fwloop.core.change.posix_paths import normalize_path
from pytest_fwloop.core.change.unified_diff import PatchParseError, parse_patch
from pytest_fwloop.core.machine.decimals import exact, written

if TYPE_CHECKING:  # the settings parse the patterns before the baseline's fork, without pydantic
    from pytest_fwloop.core.records.agent_protocol import RiskyChange
    from pytest_fwloop.core.suite.results import TestRecord

#: What each distinct pattern a patch matches adds to the reviewer's risk, before the
#: `fwloop_max_risk` bound: three patterns take a risk of 0.1 to 0.7.
RISK_PER_PATTERN = 0.2
#: KIND: (judges paths, boot-critical).
KINDS = {
    "line": (False, False),
    "path": (True, False),
    "boot-line": (False, True),
    "boot-path": (True, True),
}
#: Longest line (or matched text) handed to the reviewer.
MAX_SHOWN_CHARS = 200
#: Failing tests named per change.
MAX_NAMED_BY = 3
#: Risky changes listed in one agent request.
MAX_LISTED = 20
_NAME = re.compile(r"[A-Za-z0-9_.-]+")
#: The line of `fwloop_risky_patterns` that stands for FIRMWARE_PATTERNS (its default).
FIRMWARE = "firmware"
#: Firmware's high-risk code (seed 001 §5.1.5): interrupts off, flash written, the watchdog, and
#: what decides whether the board starts at all (docs/security.md lists them; a test checks).
FIRMWARE_PATTERNS = (
    r"irq-disable line (?i)\b__disable_irq\b|\bcpsid\b|\b__set_primask\b|disable_interrupts\b"
    r"|\birq_lock\b|\blocal_irq_disable\b|\bnointerrupts\b",
    r"flash-write line (?i)flash\w*(erase|write|program)|\bnvmc?_\w*(erase|write)",
    r"watchdog line (?i)watchdog|iwdg|wwdg|wdt|wdog",
    r"vector-table boot-line (?i)\b__vectors\b|\bg_pfnvectors\b|\b__isr_vector\b|\.isr_vector\b"
    r"|\.vectors\b|\bvtor\b|\bvector_table\b",
    r"reset-handler boot-line (?i)\breset_handler\b|\bsysteminit\b",
    r"linker-script boot-path (?i)\.(ld|lds|icf|sct)$",
    r"startup-code boot-path (?i)(^|/)(startup|crt0)[^/]*\.(s|c|asm)$",
    r"boot-code boot-path (?i)(^|/)boot[^/]*(/|$)",
)


@dataclass(frozen=True)
class RiskyPattern:
    """One line of `fwloop_risky_patterns`, compiled."""

    name: str
    on_path: bool
    boot_critical: bool
    regex: re.Pattern[str]


def parse_patterns(lines: Iterable[str]) -> tuple[RiskyPattern, ...]:
    """The patterns of the ini lines (`firmware`: FIRMWARE_PATTERNS); ValueError naming the
    first line that is not `NAME KIND REGEX` with a regex that compiles and cannot match an
    empty text."""
    patterns: list[RiskyPattern] = []
    for line in [p for given in lines for p in _expand(given)]:
        parts = line.split(None, 2)
        if not parts:
            continue
        if len(parts) < 3 or not _NAME.fullmatch(parts[0]) or parts[1] not in KINDS:
            raise ValueError(f"{line!r}: write NAME KIND REGEX, KIND one of {', '.join(KINDS)}")
        name, kind, text = parts
        try:
            regex = re.compile(text)
        except re.error as exc:
            raise ValueError(f"{line!r}: the regex does not compile ({exc})") from None
        if regex.search("") is not None:
            raise ValueError(
                f"{line!r}: the regex matches an empty text, so it would match every line; "
                "write one that needs at least one character"
            )
        if any(taken.name == name for taken in patterns):
            raise ValueError(
                f"{line!r}: the name {name!r} is already taken by an earlier line (`firmware` "
                "holds irq-disable, flash-write, watchdog, vector-table, reset-handler, "
                "linker-script, startup-code, boot-code); give each pattern its own name"
            )
        patterns.append(RiskyPattern(name, *KINDS[kind], regex))
    return tuple(patterns)


def _expand(line: str) -> Sequence[str]:
    return FIRMWARE_PATTERNS if line.strip() == FIRMWARE else (line,)


def find_risky(patch: str, patterns: Sequence[RiskyPattern]) -> list[RiskyChange]:
    """Each (file, hunk, pattern) the patch matches, with the first matching line; a path
    pattern once per file. A patch that does not parse matches nothing: the policy refuses it."""
    try:
        changes = parse_patch(patch)
    except PatchParseError:
        return []
    found = []
    for change in changes:
        paths = [normalize_path(path) for path in change.paths]
        for pattern in patterns:
            if pattern.on_path:
                path = next((p for p in paths if pattern.regex.search(p)), None)
                if path is not None:
                    found.append(_change(pattern, path, "", "", path))
                continue
            for hunk in change.hunks:
                for line in hunk.changed:
                    match = pattern.regex.search(line[1:])
                    if match is not None:
                        found.append(_change(pattern, paths[-1], hunk.header, line, match[0]))
                        break
    return found


def _change(pattern: RiskyPattern, file: str, hunk: str, line: str, matched: str) -> RiskyChange:
    from pytest_fwloop.core.records.agent_protocol import RiskyChange

    return RiskyChange(
        file=file,
        hunk=hunk,
        line=line[:MAX_SHOWN_CHARS],
        pattern=pattern.name,
        matched=matched[:MAX_SHOWN_CHARS],
        boot_critical=pattern.boot_critical,
    )


def with_evidence(
    changes: Sequence[RiskyChange], failing: Sequence[TestRecord]
) -> list[RiskyChange]:
    """`changes` with the failing tests that name each one: a test whose node id, crash line,
    failure text or captured output holds the change's path, its file name or (for a line)
    the text the pattern matched, as a whole word (`Reset_Handler`, not `MyReset_Handler`)."""
    reports = [(t.nodeid, "\n".join((t.nodeid, t.crash, t.longrepr, t.sections))) for t in failing]
    named = []
    for change in changes:
        words = {change.file, os.path.basename(change.file)}
        if change.hunk:
            words.add(change.matched)
        found = re.compile(
            "|".join(rf"(?<!\w){re.escape(word)}(?!\w)" for word in sorted(words) if word)
        )
        by = [nodeid for nodeid, text in reports if found.search(text)]
        named.append(change.model_copy(update={"named_by": by[:MAX_NAMED_BY]}))
    return named


def assess(
    patch: str, patterns: Sequence[RiskyPattern], failing: Sequence[TestRecord]
) -> list[RiskyChange]:
    """The patch's risky changes, each with the failing tests that name it."""
    return with_evidence(find_risky(patch, patterns), failing)


def raised_risk(risk: float, changes: Sequence[RiskyChange]) -> tuple[Decimal, str]:
    """The patch's risk: the reviewer's `risk` plus RISK_PER_PATTERN for each distinct pattern
    matched, at most 1; and the sum as the trace shows it. The sum is exact decimal arithmetic on
    the numbers as written, so 0.1 + 0.2 x 3 is the 0.7 docs/security.md promises, not
    0.7000000000000001, and 0.7000001 stays 0.7000001."""
    names = sorted({change.pattern for change in changes})
    if not names:
        return exact(risk), written(risk)
    total = min(Decimal(1), exact(risk) + exact(RISK_PER_PATTERN) * len(names))
    return total, (
        f"{written(risk)} + {RISK_PER_PATTERN:g} x {len(names)} risky pattern(s) "
        f"({', '.join(names)}) = {written(total)}"
    )


def unnamed_boot(changes: Sequence[RiskyChange]) -> list[RiskyChange]:
    """The boot-critical changes no failing test names: the operator must confirm them."""
    return [change for change in changes if change.boot_critical and not change.named_by]


def describe(changes: Sequence[RiskyChange]) -> str:
    """`file: pattern (matched)` for each change, on one line."""
    return "; ".join(
        f"{c.file}: {c.pattern}" + (f" (`{c.matched}`)" if c.hunk else "") for c in changes
    )
