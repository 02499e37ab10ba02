"""Read a unified diff the way `git apply` (default `-p1`) reads it: one `FileChange` per file.

Names that git would reject as inconsistent are rejected here too (`PatchParseError`), so the
paths the patch policy judges are the paths git will write. Pure: no subprocess, no file I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from pytest_fwloop.core.change.posix_paths import normalize_path, show_path

# Bounded digit counts keep int() away from Python's huge-integer conversion limit.
_HUNK_HEADER = re.compile(r"@@ -(\d{1,9})(?:,(\d{1,9}))? \+(\d{1,9})(?:,(\d{1,9}))? @@")
_BINARY_FILES = re.compile(r"Binary files (.+) and (.+) differ")
_INDEX_MODE = re.compile(r"index [0-9a-fA-F]+\.\.[0-9a-fA-F]+ ([0-7]{6})")
_C_ESCAPES = {"a": 7, "b": 8, "t": 9, "n": 10, "v": 11, "f": 12, "r": 13, '"': 34, "\\": 92}


class PatchParseError(ValueError):
    """The text is not a unified diff that `git apply` could use."""


@dataclass(frozen=True)
class Hunk:
    """One hunk: its `@@ … @@` header and its added and removed lines, tag first (`+`/`-`),
    exactly as `git apply` reads them."""

    header: str
    changed: tuple[str, ...]


@dataclass(frozen=True)
class FileChange:
    """One file's part of a patch; a path is None where the diff says /dev/null."""

    old_path: str | None
    new_path: str | None
    added_lines: int = 0
    removed_lines: int = 0
    is_binary: bool = False
    new_mode: str | None = None
    old_mode: str | None = None
    is_rename: bool = False
    is_copy: bool = False
    #: The text of the change, for the checks that read lines; two changes of the same files
    #: with the same counts compare equal without it.
    hunks: tuple[Hunk, ...] = field(default=(), compare=False)

    @property
    def paths(self) -> tuple[str, ...]:
        """Every path this change names (old first), without repeats."""
        names = [p for p in (self.old_path, self.new_path) if p is not None]
        return tuple(dict.fromkeys(names))

    @property
    def is_noop(self) -> bool:
        """True when the section changes nothing (same file, no lines, no mode or name change)."""
        return (
            self.added_lines == self.removed_lines == 0
            and not self.is_binary
            and self.old_path is not None
            and self.old_path == self.new_path
            and self.old_mode == self.new_mode
        )


@dataclass
class _Section:
    """A file section while it is being read; names are collected from every header line."""

    line_no: int
    is_git: bool
    header_old: str | None = None
    header_new: str | None = None
    minus_name: str | None = None
    plus_name: str | None = None
    minus_null: bool = False
    plus_null: bool = False
    from_name: str | None = None
    to_name: str | None = None
    is_new: bool = False
    is_deleted: bool = False
    has_hunk_headers: bool = False
    added: int = 0
    removed: int = 0
    is_binary: bool = False
    old_mode: str | None = None
    new_mode: str | None = None
    is_rename: bool = False
    is_copy: bool = False
    hunks: list[Hunk] = field(default_factory=list)

    def finish(self) -> FileChange:
        old = None if self.minus_null or self.is_new else self._pick("old")
        new = None if self.plus_null or self.is_deleted else self._pick("new")
        if old is None and new is None:
            raise PatchParseError(
                f"line {self.line_no}: the file header names no file; "
                "make the diff with `git diff` (a/ and b/ prefixes)"
            )
        return FileChange(
            old_path=old,
            new_path=new,
            added_lines=self.added,
            removed_lines=self.removed,
            is_binary=self.is_binary,
            new_mode=self.new_mode,
            old_mode=self.old_mode,
            is_rename=self.is_rename,
            is_copy=self.is_copy,
            hunks=tuple(self.hunks),
        )

    def _pick(self, side: str) -> str | None:
        # Like git: rename/copy lines win, then ---/+++, then an unambiguous `diff --git` line,
        # and any two of them disagreeing is an error rather than a guess.
        if side == "old":
            names = (self.from_name, self.minus_name, self.header_old)
        else:
            names = (self.to_name, self.plus_name, self.header_new)
        given = [n for n in names if n is not None]
        if not given:
            return None
        if any(n != given[0] for n in given):
            raise PatchParseError(
                f"line {self.line_no}: inconsistent {side} file names "
                f"{' vs '.join(repr(n) for n in dict.fromkeys(given))}; send one consistent diff"
            )
        return given[0]


def parse_patch(text: str) -> list[FileChange]:
    """Read a git-format or plain unified diff into one `FileChange` per file section."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    sections: list[_Section] = []
    index = 0
    while index < len(lines):
        line = lines[index]
        header = line.rstrip("\r")
        current = sections[-1] if sections else None
        if header.startswith("diff --git "):
            section = _Section(line_no=index + 1, is_git=True)
            section.header_old, section.header_new = _git_header_names(header[11:], index + 1)
            sections.append(section)
        elif (
            header.startswith("--- ")
            and index + 1 < len(lines)
            and lines[index + 1].startswith("+++ ")
        ):
            if current is None or not current.is_git or current.has_hunk_headers:
                current = _Section(line_no=index + 1, is_git=False)
                sections.append(current)
            _read_file_headers(current, header[4:], lines[index + 1].rstrip("\r")[4:], index + 1)
            index += 2
            continue
        elif line.startswith("@@"):
            if current is None or not current.has_hunk_headers:
                raise PatchParseError(
                    f"line {index + 1}: hunk before any ---/+++ file header; "
                    "send a complete unified diff"
                )
            index = _read_hunk(lines, index, current)
            continue
        elif (match := _BINARY_FILES.fullmatch(header)) is not None:
            # GNU `diff -r` prints one such line per binary file, with no header of its own.
            if (
                current is None
                or not current.is_git
                or current.has_hunk_headers
                or current.is_binary
            ):
                current = _Section(line_no=index + 1, is_git=False)
                sections.append(current)
            _read_binary_names(current, match, index + 1)
        elif current is not None and current.is_git and not current.has_hunk_headers:
            _read_extended_header(current, header, index + 1)
        index += 1
    if not sections:
        raise PatchParseError(
            "no file header (`diff --git` or `---`/`+++`) found; send a unified diff"
        )
    return [section.finish() for section in sections]


def touched_paths(text: str) -> list[str]:
    """Every normalised path a patch reads or writes, sorted; raises `PatchParseError`."""
    names = {normalize_path(p) for change in parse_patch(text) for p in change.paths}
    return sorted(names)


def _read_file_headers(section: _Section, minus: str, plus: str, line_no: int) -> None:
    old = _header_path(minus, line_no)
    new = _header_path(plus, line_no + 1)
    section.minus_null = old is None
    section.plus_null = new is None
    section.minus_name = None if old is None else _strip_prefix(old, line_no)
    section.plus_name = None if new is None else _strip_prefix(new, line_no + 1)
    section.has_hunk_headers = True


def _read_binary_names(section: _Section, match: re.Match[str], line_no: int) -> None:
    section.is_binary = True
    if section.is_git:
        return
    old, new = _name(match[1], line_no), _name(match[2], line_no)
    section.minus_null = old == "/dev/null"
    section.plus_null = new == "/dev/null"
    section.minus_name = None if section.minus_null else _strip_prefix(old, line_no)
    section.plus_name = None if section.plus_null else _strip_prefix(new, line_no)


def _read_extended_header(section: _Section, line: str, line_no: int) -> None:
    keyword, _, value = line.partition(" ")
    if line.startswith(("old mode ", "deleted file mode ")):
        section.old_mode = line.rsplit(" ", 1)[1]
        section.is_deleted = section.is_deleted or keyword == "deleted"
    elif line.startswith(("new mode ", "new file mode ")):
        section.new_mode = line.rsplit(" ", 1)[1]
        section.is_new = section.is_new or line.startswith("new file ")
    elif line.startswith(("rename from ", "rename old ", "copy from ")):
        section.from_name = _name(value.split(" ", 1)[1], line_no)
        section.is_rename = keyword == "rename"
        section.is_copy = keyword == "copy"
    elif line.startswith(("rename to ", "rename new ", "copy to ")):
        section.to_name = _name(value.split(" ", 1)[1], line_no)
    elif line == "GIT binary patch":
        # The base85 lines after it never look like a header: they hold no spaces and start
        # with a length letter.
        section.is_binary = True
    elif (match := _INDEX_MODE.match(line)) is not None:
        section.old_mode = section.old_mode or match[1]
        section.new_mode = section.new_mode or match[1]


def _read_hunk(lines: list[str], index: int, section: _Section) -> int:
    """Consume one hunk starting at `index`; return the index of the first line after it."""
    start = index + 1
    match = _HUNK_HEADER.match(lines[index])
    if match is None:
        raise PatchParseError(
            f"line {start}: malformed hunk header {show_path(lines[index][:80])!r}"
        )
    old_left = 1 if match[2] is None else int(match[2])
    new_left = 1 if match[4] is None else int(match[4])
    changed: list[str] = []
    index += 1
    while old_left > 0 or new_left > 0:
        if index >= len(lines):
            raise PatchParseError(
                f"line {start}: hunk ends early; its header's line counts do not match its body"
            )
        tag = lines[index][:1]
        if tag in (" ", ""):
            old_left -= 1
            new_left -= 1
        elif tag == "-":
            old_left -= 1
            section.removed += 1
            changed.append(lines[index])
        elif tag == "+":
            new_left -= 1
            section.added += 1
            changed.append(lines[index])
        elif tag != "\\":
            raise PatchParseError(
                f"line {index + 1}: unexpected line inside the hunk started on line {start}; "
                "its header's line counts do not match its body"
            )
        if old_left < 0 or new_left < 0:
            raise PatchParseError(
                f"line {start}: hunk body is longer than its header's line counts say"
            )
        index += 1
    while index < len(lines) and lines[index].startswith("\\"):
        index += 1
    section.hunks.append(Hunk(match[0], tuple(changed)))
    return index


def _git_header_names(rest: str, line_no: int) -> tuple[str | None, str | None]:
    """Names from `diff --git A B`, or (None, None) unless both name the same file (git's rule)."""
    if rest.startswith('"'):
        first, tail = _unquote(rest, line_no)
        if not tail.startswith(" "):
            raise PatchParseError(f"line {line_no}: malformed `diff --git` line; send a git diff")
        pairs = [(first, _name(tail[1:], line_no))]
    elif rest.endswith('"') and ' "' in rest:
        split = rest.index(' "')
        pairs = [(rest[:split], _unquote(rest[split + 1 :], line_no)[0])]
    else:
        # Unquoted names may contain spaces: try every split, as git does.
        pairs = [(rest[:i], rest[i + 1 :]) for i, char in enumerate(rest) if char == " "]
    for first, second in pairs:
        old, new = _strip_once(first), _strip_once(second)
        if old is not None and old == new:
            return old, new
    return None, None


def _header_path(field: str, line_no: int) -> str | None:
    """The path of a ---/+++ field; None for /dev/null."""
    name = _unquote(field, line_no)[0] if field.startswith('"') else field.split("\t", 1)[0]
    return None if name == "/dev/null" else name


def _name(text: str, line_no: int) -> str:
    return _unquote(text, line_no)[0] if text.startswith('"') else text


def _strip_once(name: str) -> str | None:
    """`name` without its first directory (git apply -p1); absolute names are kept whole."""
    if name.startswith("/"):
        return name
    slash = name.find("/")
    return None if slash < 0 else name[slash + 1 :]


def _strip_prefix(name: str, line_no: int) -> str:
    stripped = _strip_once(name)
    if stripped is None:
        raise PatchParseError(
            f"line {line_no}: path {show_path(name)!r} has no a/ or b/ prefix for git apply -p1; "
            "make the diff with `git diff`"
        )
    return stripped


def _unquote(text: str, line_no: int) -> tuple[str, str]:
    """Decode the C-quoted git path that starts `text`; return it and the text after it."""
    out = bytearray()
    index = 1
    while index < len(text):
        char = text[index]
        if char == '"':
            return out.decode("utf-8", "surrogateescape"), text[index + 1 :]
        if char != "\\":
            out += char.encode("utf-8", "surrogatepass")
            index += 1
            continue
        escape = text[index + 1 : index + 2]
        octal = text[index + 1 : index + 4]
        if escape in _C_ESCAPES:
            out.append(_C_ESCAPES[escape])
            index += 2
        elif re.fullmatch(r"[0-3][0-7]{2}", octal):
            out.append(int(octal, 8))
            index += 4
        else:
            raise PatchParseError(f"line {line_no}: bad escape in quoted path; send a git diff")
    raise PatchParseError(f"line {line_no}: unterminated quoted path; send a git diff")
