"""When an operator's follow-up is a confirmation (seed 004: "if confirm signal present: run
implementation"), decided conservatively: only a short message made of nothing but assent.

The rule (docs/operator.md): the text has no question mark and at most `MAX_CHARS` characters;
lowercased, with `.` and `!` dropped and `,` `;` and their full-width forms splitting it into
clauses, every clause is, word for word, a sequence of the phrases below, at least one of them
an assent (not only `please`, `thanks`, `and` …). Anything else is an ordinary follow-up: a
"but", a negation, a file name, a number, a question, one unknown word. A follow-up that asks for
more than a yes is worth a revised proposal; a yes mistaken for a follow-up costs only that.
"""

from __future__ import annotations

import re

#: Longer than this is never a bare yes.
MAX_CHARS = 60

#: Phrases that say "apply it" (English, and the Chinese of the seeds), one word list each.
ASSENT = frozenset(
    tuple(phrase.split())
    for phrase in (
        "ok",
        "okay",
        "yes",
        "y",
        "yep",
        "yeah",
        "sure",
        "fine",
        "lgtm",
        "approved",
        "approve",
        "confirm",
        "confirmed",
        "i confirm",
        "go",
        "go ahead",
        "go for it",
        "proceed",
        "apply",
        "apply it",
        "apply that",
        "apply this",
        "apply the patch",
        "apply the fix",
        "apply the proposal",
        "do it",
        "ship it",
        "looks good",
        "sounds good",
        "looks good to me",
        "好",
        "好的",
        "可以",
        "行",
        "确认",
        "同意",
        "应用",
        "应用吧",
        "没问题",
    )
)
#: Words that may stand beside an assent and say nothing of their own.
FILLER = frozenset(
    tuple(phrase.split()) for phrase in ("please", "thanks", "thank you", "and", "then", "谢谢")
)
_PHRASES = sorted(ASSENT | FILLER, key=len, reverse=True)
_CLAUSES = re.compile(r"[,;，；、]")
_DROPPED = re.compile(r"[.!。！]")


def confirms(text: str) -> bool:
    """Whether `text` is a bare confirmation by the rule above."""
    if "?" in text or "？" in text or len(text.strip()) > MAX_CHARS:
        return False
    normalized = _DROPPED.sub(" ", text.lower().replace("\u2019", "'"))
    clauses = [c.split() for c in _CLAUSES.split(normalized)]
    clauses = [c for c in clauses if c]
    assent = [_assents(words) for words in clauses]
    return bool(clauses) and None not in assent and any(assent)


def _assents(words: list[str]) -> bool | None:
    """None when `words` are not wholly made of the phrases; else whether one is an assent.
    Every way of reading them is tried, so a filler never hides an assent's words."""
    # reach[i]: the readings of words[:i], as "an assent was among them" (True/False).
    reach: list[set[bool]] = [set() for _ in range(len(words) + 1)]
    reach[0].add(False)
    for start in range(len(words)):
        for said in reach[start]:
            for phrase in _PHRASES:
                end = start + len(phrase)
                if tuple(words[start:end]) == phrase:
                    reach[end].add(said or phrase in ASSENT)
    if not reach[-1]:
        return None
    return True in reach[-1]
