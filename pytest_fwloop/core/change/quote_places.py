"""Where a model's remembered text sits in a file: exactly one place, or why not (DESIGN.md §16).

A model quotes code from memory. Its quote is looked for exactly first, then line by line with
differences in whitespace ignored; zero or several places are a miss, named with the file's
nearest lines and their numbers so the model's next quote can be right. Pure: texts are handed
in, and every search is linear in the file's size (`str.find`), whatever the quote holds.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from difflib import SequenceMatcher

from pytest_fwloop.core.change.lines import split_lines

#: Lines of the file shown around the nearest place, and how much of each.
MAX_SHOWN_LINES = 8
MAX_SHOWN_CHARS = 160
#: Places named when a quote matches several.
MAX_NAMED_PLACES = 5
#: Characters of a line compared when looking for the nearest one (keeps the search linear).
_COMPARED_CHARS = 120


def squeeze(line: str) -> str:
    """A line with every run of whitespace made one space and none at either end."""
    return " ".join(line.split())


@dataclass(frozen=True)
class Place:
    """Where a quote was found: characters `start:end` of the text, and whether only a
    whitespace-blind comparison found it (then `start:end` spans whole lines)."""

    start: int
    end: int
    loose: bool


@dataclass(frozen=True)
class Miss:
    """Why a quote found no single place: `places` lists the 1-based first lines of its places
    (several), empty when it has none; `shown` is the nearest lines, numbered."""

    places: tuple[int, ...]
    shown: str
    nearest_line: int | None

    def reason(self) -> str:
        """One sentence for the model: what went wrong and what to send instead."""
        if self.places:
            named = ", ".join(str(n) for n in self.places[:MAX_NAMED_PLACES])
            more = " and more" if len(self.places) > MAX_NAMED_PLACES else ""
            return (
                f"matches more than one place (lines {named}{more}); quote more of the "
                f"lines around the one you mean so that it matches exactly one:\n{self.shown}"
            )
        if not self.shown:
            return "matches no place: the file is empty"
        return (
            "matches no place, not even with whitespace ignored; copy it exactly from the "
            f"file. The nearest lines are:\n{self.shown}"
        )


def find_place(text: str, quote: str, *, whole_lines: bool = False) -> Place | Miss:
    """The one place of `quote` in `text`: exactly, else line by line ignoring whitespace.

    `whole_lines` asks an exact match to start and end at line boundaries (a diff's hunk); a
    search/replace quote may match inside a line.
    """
    exact = _exact_starts(text, quote, whole_lines)
    if len(exact) == 1:
        return Place(exact[0], exact[0] + len(quote), loose=False)
    starts = _line_starts(text)
    if len(exact) > 1:
        return _several([_line_of(starts, s) for s in exact], text)
    loose = _loose_places(text, quote, starts)
    if len(loose) == 1:
        first, last = loose[0]
        end = starts[last] if last < len(starts) else len(text)
        return Place(starts[first], end, loose=True)
    if loose:
        return _several([first + 1 for first, _ in loose], text)
    return nearest(text, quote)


def nearest(text: str, quote: str) -> Miss:
    """The lines of `text` most like the start of `quote`, numbered, for a model to copy."""
    lines = split_lines(text)
    if not lines:
        return Miss((), "", None)
    wanted = next((squeeze(line) for line in split_lines(quote) if line.strip()), "")
    shown_count = min(MAX_SHOWN_LINES, max(3, len(split_lines(quote)) + 2))
    best, best_score = 0, -1.0
    matcher = SequenceMatcher(autojunk=False)
    matcher.set_seq2(wanted[:_COMPARED_CHARS])
    for index, line in enumerate(lines):
        matcher.set_seq1(squeeze(line)[:_COMPARED_CHARS])
        # The cheap upper bounds first: the full ratio only for a line that could win.
        if matcher.real_quick_ratio() <= best_score or matcher.quick_ratio() <= best_score:
            continue
        score = matcher.ratio()
        if score > best_score:
            best, best_score = index, score
    first = max(0, best - 1)
    return Miss((), number_lines(lines, first, first + shown_count), best + 1)


def number_lines(lines: list[str], first: int, stop: int) -> str:
    """Lines `first:stop` (0-based) as `  12| text`, each bounded."""
    width = len(str(min(stop, len(lines))))
    shown = []
    for index in range(first, min(stop, len(lines))):
        line = lines[index].rstrip("\n")
        if len(line) > MAX_SHOWN_CHARS:
            line = line[: MAX_SHOWN_CHARS - 1] + "…"
        shown.append(f"{index + 1:>{width}}| {line}")
    return "\n".join(shown)


def _exact_starts(text: str, quote: str, whole_lines: bool) -> list[int]:
    """Up to two starts of `quote` in `text` (overlapping ones count)."""
    found: list[int] = []
    if not quote:
        return found
    at = text.find(quote)
    while at >= 0 and len(found) < 2:
        at_start = at == 0 or text[at - 1] == "\n"
        end = at + len(quote)
        at_end = quote.endswith("\n") or end == len(text)
        if not whole_lines or (at_start and at_end):
            found.append(at)
        at = text.find(quote, at + 1)
    return found


def _loose_places(text: str, quote: str, starts: list[int]) -> list[tuple[int, int]]:
    """Up to two places `(first, stop)` (0-based line indexes) where the quote's lines, blank
    ones at either end left out, equal the text's lines once whitespace is squeezed."""
    wanted = [squeeze(line) for line in split_lines(quote)]
    while wanted and not wanted[0]:
        wanted.pop(0)
    while wanted and not wanted[-1]:
        wanted.pop()
    if not wanted:
        return []
    # Joined with a separator no squeezed line holds, the line-by-line comparison is one
    # linear `find` per candidate; the separators pin it to whole lines.
    have = "\n" + "\n".join(squeeze(text[s:e]) for s, e in _spans(text, starts)) + "\n"
    needle = "\n" + "\n".join(wanted) + "\n"
    offsets = _offsets(have)
    places: list[tuple[int, int]] = []
    at = have.find(needle)
    while at >= 0 and len(places) < 2:
        first = bisect.bisect_right(offsets, at) - 1
        places.append((first, first + len(wanted)))
        at = have.find(needle, at + 1)
    return places


def _spans(text: str, starts: list[int]) -> list[tuple[int, int]]:
    ends = [*starts[1:], len(text)]
    return list(zip(starts, ends, strict=True))


def _offsets(joined: str) -> list[int]:
    """Where each line of the joined, squeezed text starts its `\\n` separator."""
    offsets, at = [], joined.find("\n")
    while at >= 0 and at < len(joined) - 1:
        offsets.append(at)
        at = joined.find("\n", at + 1)
    return offsets


def _line_starts(text: str) -> list[int]:
    starts = [0] if text else []
    at = text.find("\n")
    while at >= 0 and at + 1 < len(text):
        starts.append(at + 1)
        at = text.find("\n", at + 1)
    return starts


def _line_of(starts: list[int], offset: int) -> int:
    """The 1-based line holding character `offset`."""
    return bisect.bisect_right(starts, offset)


def _several(places: list[int], text: str) -> Miss:
    lines = split_lines(text)
    shown = "\n".join(number_lines(lines, n - 1, n) for n in places[:MAX_NAMED_PLACES])
    return Miss(tuple(places), shown, places[0])
