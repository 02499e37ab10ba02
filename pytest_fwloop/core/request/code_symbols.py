"""What the parser finds in one source file: the values the localizer ranks (pure data).

Kept apart from the parser so the ranking and the packing (`core/request/ranking.py`) can be tested
with plain values and never import tree-sitter.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Symbol:
    """A function, type, macro, class or table: where it is and what it names."""

    name: str
    kind: str
    #: 1-based, inclusive.
    start_line: int
    end_line: int
    #: The declaration's first line(s) up to the body, one line: what a repo map shows.
    signature: str
    #: Names this symbol calls (a call graph's edges out).
    calls: frozenset[str] = frozenset()
    #: Every identifier its body mentions, calls included.
    names: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Literal:
    """A string literal: its text, its line, and the identifiers on that line (a command table's
    entry `{"crc8", cmd_crc8}` names the handler beside the command's word). In C and C++ also
    a constant an error path returns or assigns (`err = LFS_ERR_INVAL`), with the identifiers
    of the `if` condition guarding it as its names."""

    text: str
    line: int
    line_names: tuple[str, ...] = ()


@dataclass(frozen=True)
class FileSymbols:
    """One file's symbols and literals; `language` is "" for plain text (assembler, linker
    scripts, makefiles): searchable, without symbols."""

    language: str
    line_count: int
    symbols: tuple[Symbol, ...] = ()
    literals: tuple[Literal, ...] = ()
    #: Identifiers of the file outside every symbol (plain text files: all of them).
    names: frozenset[str] = field(default_factory=frozenset)

    def innermost(self, lines: Iterable[int]) -> dict[int, int]:
        """Each of `lines` held by a symbol, with the index of the innermost one holding it (the
        first of the shortest): a method rather than its class, one pass over the symbols for
        any number of lines."""
        numbers = sorted(set(lines))
        if not numbers:
            return {}
        first, last = numbers[0], numbers[-1]
        held: dict[int, tuple[int, int]] = {}  # line → (span, symbol index)
        for index, symbol in enumerate(self.symbols):
            if symbol.end_line < first or symbol.start_line > last:
                continue  # most symbols, when a frame or a literal asks for one line
            span = symbol.end_line - symbol.start_line
            low = bisect.bisect_left(numbers, symbol.start_line)
            high = bisect.bisect_right(numbers, symbol.end_line)
            for line in numbers[low:high]:
                if line not in held or span < held[line][0]:
                    held[line] = (span, index)
        return {line: index for line, (_, index) in held.items()}

    def innermost_over(self, start: int, end: int) -> list[Symbol]:
        """The innermost symbols overlapping lines start..end, variables aside: every method a
        hunk touches, not their class (`innermost` answers for single lines, this for a range
        whose symbols may nest)."""
        spans = [
            s
            for s in self.symbols
            if s.start_line <= end and start <= s.end_line and s.kind != "variable"
        ]
        return [s for s in spans if not any(o is not s and _inside(o, s) for o in spans)]


def _inside(inner: Symbol, outer: Symbol) -> bool:
    return outer.start_line <= inner.start_line and inner.end_line <= outer.end_line
