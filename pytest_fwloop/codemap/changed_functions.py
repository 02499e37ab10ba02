"""The functions a patch changes, whole, before and after it: what the reviewer is sent of the
code (DESIGN.md §16), found by a line diff of the file's two texts and its parsed symbols."""

from __future__ import annotations

import difflib
from collections.abc import Sequence

from pytest_fwloop.codemap.parse import parse_source
from pytest_fwloop.core.change.lines import text_lines
from pytest_fwloop.core.records.agent_protocol import PatchFunction
from pytest_fwloop.core.request.code_symbols import FileSymbols


def changed_functions(path: str, old_text: str, new_text: str) -> list[PatchFunction]:
    """Pairs of (before, after) symbols holding the lines the patch changes, as a line diff of
    the two texts finds them (context lines do not count)."""
    old = parse_source(path, old_text.encode()) if old_text else None
    new = parse_source(path, new_text.encode()) if new_text else None
    old_lines, new_lines = text_lines(old_text), text_lines(new_text)
    matcher = difflib.SequenceMatcher(None, old_lines, new_lines, autojunk=False)
    found: dict[str, PatchFunction] = {}
    for tag, old_low, old_high, new_low, new_high in matcher.get_opcodes():
        if tag == "equal":
            continue
        before = _overlapping(old, old_lines, old_low + 1, old_high - old_low)
        after = _overlapping(new, new_lines, new_low + 1, new_high - new_low)
        for name in dict.fromkeys([*before, *after]):
            if name in found:
                continue
            b_line, b_text = before.get(name, (0, ""))
            a_line, a_text = after.get(name, (0, ""))
            found[name] = PatchFunction(
                path=path,
                symbol=name,
                before_line=b_line,
                before=b_text,
                after_line=a_line,
                after=a_text,
            )
    return list(found.values())


def _overlapping(
    file: FileSymbols | None, lines: Sequence[str], start: int, count: int
) -> dict[str, tuple[int, str]]:
    """The innermost symbols of `file` holding lines start..start+count-1 (an insertion,
    count 0, is held by the symbol around it); a window of lines where none does."""
    if file is None or not lines:
        return {}
    end = start + max(count, 1) - 1
    spans = file.innermost_over(start, end)
    if not spans:
        low, high = max(start - 5, 1), min(end + 5, len(lines))
        return {f"lines {low}-{high}": (low, "".join(f"{x}\n" for x in lines[low - 1 : high]))}
    return {
        s.name: (s.start_line, "".join(f"{x}\n" for x in lines[s.start_line - 1 : s.end_line]))
        for s in spans
    }


#: What a localization may meet that leaves the request as it was: an unreadable store, git
#: refusing the snapshot, a file the parser chokes on. The coder is asked all the same.
