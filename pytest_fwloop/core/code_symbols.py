"""What the parser finds in one source file: the values the localizer ranks (pure data).

Kept apart from the parser so the ranking and the packing (`core/localize.py`) can be tested with
plain values and never import tree-sitter.
"""

from __future__ import annotations

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
