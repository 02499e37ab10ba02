"""One unified diff from whatever form a coder's change came in (DESIGN.md §16).

A coder answers with `edits` (search/replace) or with a unified diff whose numbers or prefixes
`git apply` would not take. Either is turned here into the texts the files would have, and those
into one `git apply` diff: the only form the policy, the reviewer, the records and replay see.
A quote that matches no place, or more than one, is a must-fix item naming the nearest lines.

Pure: the files' current texts are handed in (None: no such file); nothing is read or written.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from difflib import SequenceMatcher

from pytest_fwloop.core.change.lines import split_lines
from pytest_fwloop.core.change.loose_diff import LooseFile, LooseHunk
from pytest_fwloop.core.change.posix_paths import normalize_path
from pytest_fwloop.core.change.quote_places import Miss, Place, find_place
from pytest_fwloop.core.records.agent_protocol import FileEdit, MustFix

#: Edits one answer may carry; more is not a fix but a rewrite, which a patch expresses better.
MAX_EDITS = 64
#: Lines of context around each change of a built diff, as `git diff` writes them.
CONTEXT = 3

Files = Mapping[str, "str | None"]


@dataclass(frozen=True)
class Built:
    """The diff built, and a line per thing that was repaired or found loosely (for the trace)."""

    diff: str
    notes: tuple[str, ...]


@dataclass(frozen=True)
class Unmatched:
    """Why no diff could be built: one must-fix item per quote that found no single place."""

    must_fix: tuple[MustFix, ...]


def edit_paths(edits: Sequence[FileEdit]) -> list[str]:
    """The paths the edits name, normalised, first mention first: what must be judged and read."""
    return list(dict.fromkeys(normalize_path(edit.path) for edit in edits))


def diff_paths(sections: Sequence[LooseFile]) -> list[str]:
    return list(dict.fromkeys(normalize_path(section.path) for section in sections))


def build_from_edits(edits: Sequence[FileEdit], files: Files) -> Built | Unmatched:
    """Apply each edit, in order, to the text the ones before it left; an empty `search`
    creates a file that does not exist yet."""
    if len(edits) > MAX_EDITS:
        return _unmatched(f"{len(edits)} edits is more than {MAX_EDITS}; send fewer, larger ones")
    texts = dict(files)
    problems: list[MustFix] = []
    notes: list[str] = []
    for number, edit in enumerate(edits, 1):
        path = normalize_path(edit.path)
        where = f"edits[{number}] ({path})"
        text = texts.get(path)
        if not edit.search:
            if text is not None:
                problems.append(
                    MustFix(
                        issue=f"{where}: an empty search creates a file, and this file exists; "
                        "quote the lines to replace in `search`",
                        file=path,
                    )
                )
            elif not edit.replace:
                problems.append(MustFix(issue=f"{where}: creates an empty file", file=path))
            else:
                texts[path] = edit.replace
                notes.append(f"{where} creates the file")
            continue
        if text is None:
            problems.append(
                MustFix(
                    issue=f"{where}: no such file; edit an existing file, or give an empty "
                    "`search` to create one",
                    file=path,
                )
            )
            continue
        place = find_place(text, edit.search)
        if isinstance(place, Miss):
            problems.append(
                MustFix(
                    issue=f"{where}: the search {place.reason()}",
                    file=path,
                    line=place.nearest_line,
                )
            )
            continue
        replace = edit.replace
        if place.loose:
            replace = _reindent(edit.search, text[place.start : place.end], replace)
            notes.append(f"{where} found with whitespace ignored")
        texts[path] = text[: place.start] + replace + text[place.end :]
    if problems:
        return Unmatched(tuple(problems))
    diff = render_diff(files, {p: t for p, t in texts.items() if t is not None})
    if not diff:
        return _unmatched("the edits change nothing; send edits whose replace differs from search")
    return Built(diff, (f"{len(edits)} edit(s) became a diff", *notes))


def build_from_diff(sections: Sequence[LooseFile], files: Files) -> Built | Unmatched:
    """Place every hunk of a leniently read diff by its lines alone and rebuild the diff."""
    texts = dict(files)
    problems: list[MustFix] = []
    notes: list[str] = []
    if any(section.unprefixed for section in sections):
        notes.append("paths given without a/ b/ prefixes")
    for section in sections:
        path = normalize_path(section.path)
        text = texts.get(path)
        if section.created:
            created = "".join(line for h in section.hunks for t, line in h.ops if t == "+")
            if text is not None:
                problems.append(_apply_issue(path, "the diff creates it, and it exists"))
            elif not created:
                problems.append(_apply_issue(path, "the diff creates it empty"))
            else:
                texts[path] = created
            continue
        if text is None:
            problems.append(_apply_issue(path, "no such file"))
            continue
        placed = _place_hunks(path, text, section.hunks)
        if isinstance(placed, Unmatched):
            problems.extend(placed.must_fix)
            continue
        texts[path], found = placed
        notes.extend(found)
    if problems:
        return Unmatched(tuple(problems))
    diff = render_diff(files, {p: t for p, t in texts.items() if t is not None})
    if not diff:
        return _unmatched("the patch changes nothing once placed; send a diff with changes")
    return Built(diff, tuple(notes))


def render_diff(before: Files, after: Mapping[str, str]) -> str:
    """The `git diff` of each file from its text in `before` (None: new) to `after`."""
    out: list[str] = []
    for path, new in after.items():
        old = before.get(path)
        if old == new:
            continue
        name_a, name_b = _quoted(f"a/{path}"), _quoted(f"b/{path}")
        out.append(f"diff --git {name_a} {name_b}\n")
        out.append("new file mode 100644\n--- /dev/null\n" if old is None else f"--- {name_a}\n")
        out.append(f"+++ {name_b}\n")
        out.extend(_hunk_lines(split_lines(old or ""), split_lines(new)))
    return "".join(out)


def _place_hunks(
    path: str, text: str, hunks: Sequence[LooseHunk]
) -> tuple[str, list[str]] | Unmatched:
    """The text with every hunk applied, each placed on the original text; or why not."""
    spans: list[tuple[int, int, str, int]] = []
    problems: list[MustFix] = []
    notes: list[str] = []
    for number, hunk in enumerate(hunks, 1):
        where = f"hunk {number} `{hunk.header[:60]}`"
        if not hunk.old:
            problems.append(
                _apply_issue(path, f"{where} has no context lines; give the lines around it")
            )
            continue
        place = find_place(text, hunk.old, whole_lines=True)
        replaced = None if isinstance(place, Miss) else _replace_lines(hunk, text, place)
        if isinstance(place, Miss) or replaced is None:
            miss = place if isinstance(place, Miss) else None
            reason = miss.reason() if miss else "matches no place line for line"
            problems.append(
                _apply_issue(
                    path,
                    f"{where}: its old side (context and removed lines) {reason}",
                    miss.nearest_line if miss else None,
                )
            )
            continue
        line = text.count("\n", 0, place.start) + 1
        given = hunk.given
        if given is None or given[0] != line or place.loose:
            said = "no line number" if given is None else f"line {given[0]}"
            how = ", whitespace ignored" if place.loose else ""
            notes.append(f"{path}: {where} found at line {line} (its header said {said}{how})")
        spans.append((place.start, place.end, replaced, number))
    spans.sort()
    for (_, end, _, first), (start, _, _, second) in itertools.pairwise(spans):
        if start < end:
            problems.append(_apply_issue(path, f"hunks {first} and {second} change the same lines"))
    if problems:
        return Unmatched(tuple(problems))
    pieces, at = [], 0
    for start, end, replaced, _ in spans:
        pieces += [text[at:start], replaced]
        at = end
    pieces.append(text[at:])
    return "".join(pieces), notes


def _replace_lines(hunk: LooseHunk, text: str, place: Place) -> str | None:
    """What the hunk makes of the lines it was found at: context kept as the file has it,
    removals dropped, additions as written (re-indented as the found lines are); None when
    the found lines are not one per quoted line."""
    found = split_lines(text[place.start : place.end])
    olds = [line for tag, line in hunk.ops if tag != "+"]
    if len(found) != len(olds):
        return None
    shift = _shift(olds, found) if place.loose else None
    lines = iter(found)
    out: list[str] = []
    for tag, line in hunk.ops:
        if tag == " ":
            out.append(next(lines))
        elif tag == "-":
            next(lines)
        else:
            out.append(_shifted(line, shift))
    return "".join(out)


def _reindent(search: str, found: str, replace: str) -> str:
    """A replacement for lines found with whitespace ignored: indented as the found lines are
    (not as the model remembered them), and ending a line where they did."""
    shift = _shift(split_lines(search), split_lines(found))
    text = "".join(_shifted(line, shift) for line in split_lines(replace))
    if found.endswith("\n") and text and not text.endswith("\n"):
        text += "\n"
    return text


def _shift(quoted: Sequence[str], found: Sequence[str]) -> tuple[str, str] | None:
    """(remove, add): how the first non-blank found line's indentation differs from the quote's."""
    said = next((line for line in quoted if line.strip()), "")
    have = next((line for line in found if line.strip()), "")
    said_indent = said[: len(said) - len(said.lstrip())]
    have_indent = have[: len(have) - len(have.lstrip())]
    if have_indent.startswith(said_indent):
        return "", have_indent[len(said_indent) :]
    if said_indent.startswith(have_indent):
        return said_indent[len(have_indent) :], ""
    return None


def _shifted(line: str, shift: tuple[str, str] | None) -> str:
    if shift is None or not line.strip():
        return line
    remove, add = shift
    return add + (line[len(remove) :] if remove and line.startswith(remove) else line)


def _hunk_lines(a: list[str], b: list[str]) -> Iterator[str]:
    """The hunks of a line diff, `git diff` style; the common head and tail (but the context)
    are left out of the comparison, so an edit of a large file costs what it changes."""
    head = 0
    while head < min(len(a), len(b)) and a[head] == b[head]:
        head += 1
    tail = 0
    while tail < min(len(a), len(b)) - head and a[-1 - tail] == b[-1 - tail]:
        tail += 1
    low = max(0, head - CONTEXT)
    cut = max(0, tail - CONTEXT)
    matcher = SequenceMatcher(None, a[low : len(a) - cut], b[low : len(b) - cut], autojunk=False)
    for group in matcher.get_grouped_opcodes(CONTEXT):
        i1, i2 = group[0][1] + low, group[-1][2] + low
        j1, j2 = group[0][3] + low, group[-1][4] + low
        yield f"@@ -{_range(i1, i2 - i1)} +{_range(j1, j2 - j1)} @@\n"
        for tag, a1, a2, b1, b2 in group:
            if tag == "equal":
                yield from (_line(" ", line) for line in a[a1 + low : a2 + low])
                continue
            yield from (_line("-", line) for line in a[a1 + low : a2 + low])
            yield from (_line("+", line) for line in b[b1 + low : b2 + low])


def _range(start: int, length: int) -> str:
    if length == 0:
        return f"{start},0"
    return f"{start + 1}" if length == 1 else f"{start + 1},{length}"


def _line(tag: str, line: str) -> str:
    return f"{tag}{line}" if line.endswith("\n") else f"{tag}{line}\n\\ No newline at end of file\n"


def _quoted(name: str) -> str:
    """A name as git writes it: C-quoted when it holds a space, a quote, a backslash, a control
    or a non-ASCII character."""
    if all(" " < char < "\x7f" and char not in '"\\' for char in name):
        return name
    escapes = {'"': '\\"', "\\": "\\\\", "\t": "\\t", "\n": "\\n"}
    out = []
    for char in name:
        if char in escapes:
            out.append(escapes[char])
        elif " " <= char < "\x7f":
            out.append(char)
        else:
            out.extend(f"\\{byte:03o}" for byte in char.encode("utf-8", "surrogateescape"))
    return '"' + "".join(out) + '"'


def _apply_issue(path: str, what: str, line: int | None = None) -> MustFix:
    return MustFix(issue=f"{path}: {what}", file=path, line=line)


def _unmatched(issue: str) -> Unmatched:
    return Unmatched((MustFix(issue=issue),))
