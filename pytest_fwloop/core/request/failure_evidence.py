"""What the failures say, as the localizer reads it (DESIGN.md §16): traceback frames and
diagnostics on lines of the tree, the names on those lines, identifiers, the failing tests'
names, and the text literals are looked for in (pure).

Read from a bounded sample of each failure and of all of them: a thousand failures' 10 MB of
logs cost the same as a few hundred kilobytes.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from pytest_fwloop.core.change.lines import text_lines

#: Names too common in C and Python to say where a defect is.
STOPWORDS = frozenset(
    [
        "self",
        "cls",
        "None",
        "True",
        "False",
        "def",
        "class",
        "return",
        "assert",
        "import",
        "from",
        "pass",
        "raise",
        "with",
        "yield",
        "lambda",
        "not",
        "and",
        "for",
        "while",
        "else",
        "elif",
        "try",
        "except",
        "finally",
        "int",
        "char",
        "void",
        "long",
        "short",
        "unsigned",
        "signed",
        "const",
        "static",
        "struct",
        "union",
        "enum",
        "typedef",
        "sizeof",
        "bool",
        "float",
        "double",
        "size_t",
        "uint8_t",
        "uint16_t",
        "uint32_t",
        "uint64_t",
        "int8_t",
        "int16_t",
        "int32_t",
        "int64_t",
        "str",
        "bytes",
        "list",
        "dict",
        "set",
        "tuple",
        "len",
        "print",
        "test",
        "tests",
        "error",
        "Error",
        "AssertionError",
        "assert_called_with",
        "where",
        "args",
        "kwargs",
        "main",
        "NULL",
        "nullptr",
        "true",
        "false",
        "break",
        "continue",
        "case",
        "default",
        "switch",
        "include",
        "define",
        "ifdef",
        "ifndef",
        "endif",
        "auto",
    ]
)
_FRAME_PATTERNS = (
    re.compile(r'File "(?P<path>[^"\n]+)", line (?P<line>\d{1,7})'),
    re.compile(r"(?m)^(?:\s*)(?P<path>[\w./+-]+\.[A-Za-z+]{1,4}):(?P<line>\d{1,7}):"),
    re.compile(r"(?P<path>[\w./+-]+\.[A-Za-z+]{1,4}):(?P<line>\d{1,7}):(?:\d+:)? "),
)
WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]{2,}")
#: pytest's line naming the exception a test ended with: `E   pkg.errors.LittleFSError: …`.
_RAISED = re.compile(r"^E\s+(?:[A-Za-z_]\w*\.)*([A-Za-z_]\w*):", re.MULTILINE)


@dataclass(frozen=True)
class Frame:
    """A line of the tree the evidence points at: a traceback frame or a diagnostic."""

    path: str
    line: int
    weight: float
    what: str


@dataclass
class FailureClues:
    """What the failures say, in the terms the ranking reads."""

    frames: list[Frame] = field(default_factory=list)
    #: Identifiers of the failing tests and their output, with how often they appear.
    words: dict[str, int] = field(default_factory=dict)
    #: The failure output and the tests' source, lower-cased: where literals are looked for.
    text: str = ""
    #: Files named for other reasons (earlier patches, similar fixes, recent commits) → weight.
    files: dict[str, float] = field(default_factory=dict)
    file_reasons: dict[str, str] = field(default_factory=dict)
    #: Identifiers on the lines the frames point at (what the failing line called), → weight.
    frame_words: dict[str, tuple[float, str]] = field(default_factory=dict)
    #: The failing tests' function names (parameters dropped), each counted once.
    test_names: list[str] = field(default_factory=list)
    #: Exception classes the failures raised (`E   pkg.errors.LittleFSError: …` gives
    #: `LittleFSError`): their own code runs because a test failed, not before it.
    raised: set[str] = field(default_factory=set)


def frames_in(
    text: str, root: str, known: Mapping[str, object], weight: float, what: str
) -> list[Frame]:
    """Lines of files of the tree (`known`) that `text` names as `path:line` or Python's
    `File "path", line N`; paths under `root` made relative."""
    base = root.rstrip("/") + "/" if root else ""
    found: dict[tuple[str, int], Frame] = {}
    for pattern in _FRAME_PATTERNS:
        for match in pattern.finditer(text):
            path = match["path"]
            if base and path.startswith(base):
                path = path[len(base) :]
            path = path.removeprefix("./")
            if path in known:
                key = (path, int(match["line"]))
                found.setdefault(key, Frame(path, key[1], weight, what))
    return list(found.values())


def words_in(text: str) -> dict[str, int]:
    counts: dict[str, int] = defaultdict(int)
    for word in WORD.findall(text):
        if word not in STOPWORDS:
            counts[word] += 1
    return dict(counts)


#: Bytes of failure text read per failing test, and in all: the evidence is a sample.
_TEXT_PER_TEST = 16 * 1024
_TEXT_TOTAL = 256 * 1024


@dataclass(frozen=True)
class FailureText:
    """What one failing test showed: its traceback, crash line and captured output."""

    nodeid: str
    text: str


def gather_evidence(
    failures: Sequence[FailureText],
    test_code: Sequence[str],
    diagnostics: str,
    root: str,
    known: Mapping[str, object],
    named_files: Mapping[str, tuple[float, str]],
    frame_texts: Mapping[str, str] | None = None,
) -> FailureClues:
    """The evidence of the current failures: `test_code` is the failing tests' own source,
    `diagnostics` the build's and the pre-check's, `named_files` files named for other reasons
    (path → weight, why), `frame_texts` the text of files the frames point into (read by the
    caller from `frame_paths`). A frame many failures share counts once: a hundred tests
    failing through one wrapper say no more about it than one."""
    evidence = FailureClues()
    texts: list[str] = []
    frames: dict[tuple[str, int], Frame] = {}
    for _, text in _samples(failures):
        texts.append(text)
        evidence.raised.update(_RAISED.findall(text))
        for frame in _weighted_frames(text, root, known):
            kept = frames.get((frame.path, frame.line))
            if kept is None or kept.weight < frame.weight:
                frames[(frame.path, frame.line)] = frame
    evidence.test_names = [f.nodeid.rpartition("::")[2].split("[", 1)[0] for f in failures]
    for frame in frames_in(diagnostics, root, known, 1.0, "a build diagnostic at"):
        frames.setdefault((frame.path, frame.line), frame)
    evidence.frames = list(frames.values())
    evidence.test_names = list(dict.fromkeys(evidence.test_names))
    for frame in evidence.frames:
        lines = text_lines((frame_texts or {}).get(frame.path, ""))
        if 0 < frame.line <= len(lines):
            for word in words_in(lines[frame.line - 1]):
                where = f"{frame.path}:{frame.line}"
                if evidence.frame_words.get(word, (0.0, ""))[0] < frame.weight:
                    evidence.frame_words[word] = (frame.weight, where)
    texts += test_code
    texts.append(diagnostics[:_TEXT_PER_TEST])
    joined = "\n".join(texts)
    evidence.words = words_in(joined)
    evidence.text = joined.lower()
    for path, (weight, why) in named_files.items():
        if path in known:
            evidence.files[path] = weight
            evidence.file_reasons[path] = why
    return evidence


def frame_paths(
    failures: Sequence[FailureText], root: str, known: Mapping[str, object]
) -> list[str]:
    """The files of the tree the failures' frames point into, most named first."""
    counts: dict[str, int] = defaultdict(int)
    for _, text in _samples(failures):
        for frame in frames_in(text, root, known, 1.0, ""):
            counts[frame.path] += 1
    return sorted(counts, key=lambda path: -counts[path])


def _samples(failures: Sequence[FailureText]) -> Iterator[tuple[FailureText, str]]:
    """Each failure with its sample, until the samples total `_TEXT_TOTAL`: the evidence is
    read from a bounded part of a thousand failures' logs."""
    total = 0
    for failure in failures:
        if total > _TEXT_TOTAL:
            return
        text = _sample(failure.text)
        total += len(text)
        yield failure, text


def _sample(text: str) -> str:
    if len(text) <= _TEXT_PER_TEST:
        return text
    # The head says where it began, the tail what failed.
    return text[: _TEXT_PER_TEST // 4] + "\n" + text[-(_TEXT_PER_TEST * 3 // 4) :]


def _weighted_frames(text: str, root: str, known: Mapping[str, object]) -> list[Frame]:
    """The frames of one failure: the innermost inside the tree is the likeliest place, the
    outer ones count less."""
    found = frames_in(text, root, known, 0.6, "in the traceback at")
    # The innermost is often a helper that raises; the one that called it weighs almost as
    # much (`lfs.pyx:309` calls `lfs_mount`, then `_raise_on_error` raises at line 81).
    for depth, weight in ((-1, 1.0), (-2, 0.8)):
        if len(found) >= -depth:
            frame = found[depth]
            found[depth] = Frame(frame.path, frame.line, weight, frame.what)
    return found
