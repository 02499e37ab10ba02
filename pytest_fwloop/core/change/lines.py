"""The lines of a text as git, compilers and tree-sitter count them: only `\n` ends a line.

`str.splitlines` also breaks at form feeds (`^L`, common in old C and Emacs-edited files),
`\r`, `\v` and Unicode separators, so a line number it gives after one of them is off by one
from the number a diagnostic, a traceback or a hunk header names. Every line number the loop
sends or reads is counted here.
"""

from __future__ import annotations

import re

_LINE = re.compile(r"[^\n]*\n|[^\n]+\Z")


def split_lines(text: str) -> list[str]:
    """The lines of `text`, each with its `\\n` (the last may lack one)."""
    return _LINE.findall(text)


def text_lines(text: str) -> list[str]:
    """The lines of `text` without their `\\n`; a final `\\n` starts no line (`""` has none)."""
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return lines
