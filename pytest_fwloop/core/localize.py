"""Where the defect behind the failures most likely is (DESIGN.md §16): the tree's symbols ranked
by the failures' evidence, as an engineer reads a failure before touching code (pure).

The signals, strongest first: a traceback frame or a build diagnostic on a line of the tree; a
string literal of the code that the failing test sends or its output shows (a console test's
`crc8 01` finds the command table's `"crc8"`, and the handler named beside it); identifiers of
the failing tests and their output that the tree defines; what the symbols found so far call
and use; files the run's earlier patches, similar fixes and recent commits touched. A name
defined in many files weighs less in each, as a word in many documents does.

`TreeMap` keeps the reverse maps (name → definitions, callers, literal words) per file, so a
request after a patch updates only the files the patch changed.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from pytest_fwloop.core.code_symbols import FileSymbols, Symbol

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
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]{2,}")
_FORMAT = re.compile(r"%[-+ #0]*\d*(?:\.\d+)?[hlLqjzt]*[a-zA-Z%]|\\[nrt0]|[{}]")
_CAMEL = re.compile(r"[A-Z]+(?![a-z])[0-9]*|[A-Z]?[a-z]+[0-9]*|[0-9]+[a-z0-9]*")
#: Parts of names too common to tie a test to a symbol.
_COMMON_PARTS = frozenset({"test", "tests", "get", "set", "init", "new", "the", "and", "with"})


def name_parts(name: str) -> frozenset[str]:
    """The words of an identifier or a file stem, lower-cased: `lfs_file_seek_` and
    `LfsFileSeek` give {lfs, file, seek}; `j1939` stays whole. Words under three letters and
    the commonest ones say too little."""
    words = (w.lower() for chunk in name.split("_") for w in (_CAMEL.findall(chunk) or [chunk]))
    return frozenset(w for w in words if len(w) >= 3 and w not in _COMMON_PARTS)


#: Shortest literal fragment worth matching; shorter ones ("OK", "%d") are everywhere.
MIN_FRAGMENT = 3
#: At most this many definitions of one name count; a name defined more often says little.
MAX_DEFINITIONS = 20
#: Failing test names that vote, and how many symbols a name word may point at to count.
MAX_TEST_NAMES = 200
MAX_PART_SYMBOLS = 60
#: What one failing test's name gives the symbols named like it, shared among them.
NAME_VOTE = 8.0


@dataclass(frozen=True)
class Frame:
    """A line of the tree the evidence points at: a traceback frame or a diagnostic."""

    path: str
    line: int
    weight: float
    what: str


@dataclass
class Evidence:
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
    for word in _WORD.findall(text):
        if word not in STOPWORDS:
            counts[word] += 1
    return dict(counts)


def fragments(literal: str) -> list[str]:
    """The parts of a string literal a program's output can show verbatim: split at format
    directives and escapes, lower-cased, at least `MIN_FRAGMENT` characters with a letter."""
    parts = (part.strip().lower() for part in _FORMAT.split(literal))
    return [p for p in parts if len(p) >= MIN_FRAGMENT and any(c.isalpha() for c in p)]


@dataclass(frozen=True)
class _LiteralSite:
    fragment: str
    path: str
    line: int
    line_names: tuple[str, ...]


@dataclass
class TreeMap:
    """The tree's symbols with their reverse maps, updated file by file."""

    files: dict[str, FileSymbols] = field(default_factory=dict)
    definitions: defaultdict[str, set[tuple[str, int]]] = field(
        default_factory=lambda: defaultdict(set)
    )
    callers: defaultdict[str, set[tuple[str, int]]] = field(
        default_factory=lambda: defaultdict(set)
    )
    literals: defaultdict[str, list[_LiteralSite]] = field(
        default_factory=lambda: defaultdict(list)
    )
    #: Word of a symbol's name → the symbols (`name_parts`), and of a file's stem → the files.
    parts: defaultdict[str, set[tuple[str, int]]] = field(default_factory=lambda: defaultdict(set))
    stems: defaultdict[str, set[str]] = field(default_factory=lambda: defaultdict(set))

    def update(self, files: Mapping[str, FileSymbols]) -> int:
        """Make the map hold exactly `files`; how many files were (re)read into it."""
        changed = 0
        for path in [p for p in self.files if p not in files]:
            self._forget(path)
            changed += 1
        for path, symbols in files.items():
            if self.files.get(path) is not symbols:
                if path in self.files:
                    self._forget(path)
                self._learn(path, symbols)
                changed += 1
        return changed

    def _learn(self, path: str, symbols: FileSymbols) -> None:
        self.files[path] = symbols
        for part in _stem_parts(path):
            self.stems[part].add(path)
        for index, symbol in enumerate(symbols.symbols):
            if symbol.kind not in ("lines", "prototype"):  # a declaration points at the body
                self.definitions[symbol.name].add((path, index))
                for part in name_parts(symbol.name):
                    self.parts[part].add((path, index))
            for callee in symbol.calls:
                self.callers[callee].add((path, index))
        for literal in symbols.literals:
            for fragment in dict.fromkeys(fragments(literal.text)):
                first = _WORD.search(fragment)
                if first is not None:
                    site = _LiteralSite(fragment, path, literal.line, literal.line_names)
                    self.literals[first.group()].append(site)

    def _forget(self, path: str) -> None:
        old = self.files.pop(path)
        for part in _stem_parts(path):
            self.stems[part].discard(path)
        for index, symbol in enumerate(old.symbols):
            self.definitions[symbol.name].discard((path, index))
            for part in name_parts(symbol.name):
                self.parts[part].discard((path, index))
            for callee in symbol.calls:
                self.callers[callee].discard((path, index))
        for literal in old.literals:
            for fragment in fragments(literal.text):
                first = _WORD.search(fragment)
                if first is not None:
                    sites = self.literals[first.group()]
                    sites[:] = [s for s in sites if s.path != path]

    def symbol(self, key: tuple[str, int]) -> Symbol:
        return self.files[key[0]].symbols[key[1]]

    def enclosing(self, path: str, line: int) -> tuple[str, int] | None:
        """The innermost symbol of `path` holding `line`."""
        best: tuple[str, int] | None = None
        span = 1 << 30
        for index, symbol in enumerate(self.files[path].symbols):
            if (
                symbol.start_line <= line <= symbol.end_line
                and symbol.end_line - symbol.start_line < span
            ):
                best, span = (path, index), symbol.end_line - symbol.start_line
        return best


def _stem_parts(path: str) -> frozenset[str]:
    stem = path.rsplit("/", 1)[-1].split(".", 1)[0]
    return name_parts(stem)


@dataclass
class Ranked:
    """A symbol with its score and the reasons, strongest first."""

    path: str
    index: int
    score: float
    reasons: list[str]
    #: The line the strongest line-level evidence named, if any: where a long symbol is cut.
    line: int | None = None


@dataclass
class _Scores:
    """Points per symbol and per kind of evidence. Within a kind the best counts and the rest
    a quarter (at most as much again), so twenty weak matches of one kind do not outweigh one
    strong one; the failing tests' name votes add up, one per test."""

    tree: TreeMap
    points: dict[tuple[str, int], dict[str, list[float]]] = field(
        default_factory=lambda: defaultdict(lambda: defaultdict(list))
    )
    reasons: dict[tuple[str, int], dict[str, float]] = field(
        default_factory=lambda: defaultdict(dict)
    )
    lines: dict[tuple[str, int], tuple[float, int]] = field(default_factory=dict)

    def add(
        self,
        key: tuple[str, int],
        points: float,
        reason: str,
        kind: str,
        line: int | None = None,
    ) -> None:
        self.points[key][kind].append(points)
        if line is not None and points > self.lines.get(key, (0.0, 0))[0]:
            self.lines[key] = (points, line)
        said = self.reasons[key]
        said[reason] = max(said.get(reason, 0.0), points)

    def totals(self) -> dict[tuple[str, int], float]:
        return {
            key: sum(_combine(k, v) for k, v in kinds.items()) for key, kinds in self.points.items()
        }

    def definitions(self, name: str) -> list[tuple[str, int]]:
        found = self.tree.definitions.get(name)
        if not found or len(found) > MAX_DEFINITIONS:
            return []
        return sorted(found)


def rank(tree: TreeMap, evidence: Evidence, candidates: Iterable[str]) -> list[Ranked]:
    """The symbols of the `candidates` files (the ones a patch may change), best first; only
    symbols some evidence points at are returned."""
    allowed = set(candidates)
    scored = _Scores(tree)
    for frame in evidence.frames:
        key = tree.enclosing(frame.path, frame.line) if frame.path in tree.files else None
        if key is not None:
            scored.add(
                key, 10.0 * frame.weight, f"{frame.what} line {frame.line}", "frame", frame.line
            )
    for word, count in evidence.words.items():
        defined = scored.definitions(word)
        for key in defined:
            weight = (1.0 + min(count, 4) / 4) / len(defined)
            scored.add(key, 3.0 * weight, f"named by the failing tests: {word}", "word")
        users = tree.callers.get(word, set())
        if defined and 0 < len(users) <= MAX_DEFINITIONS:
            for key in users:
                scored.add(key, 1.0 / len(users), f"calls {word}", "caller")
    for word, (weight, where) in evidence.frame_words.items():
        defined = scored.definitions(word)
        for key in defined:
            scored.add(
                key, 8.0 * weight / len(defined), f"named on the failing line {where}", "frame_word"
            )
    _name_matches(scored, evidence)
    _literal_matches(scored, evidence)
    _spread(scored)
    for key in list(scored.points):
        boost = evidence.files.get(key[0])
        if boost:
            scored.add(key, boost, evidence.file_reasons.get(key[0], "named by the run"), "file")
    ranked = [
        Ranked(
            path,
            index,
            score,
            _reasons(scored.reasons[(path, index)]),
            scored.lines.get((path, index), (0.0, None))[1],
        )
        for (path, index), score in scored.totals().items()
        if path in allowed and score > 0
    ]
    ranked.sort(key=lambda r: (-r.score, r.path, tree.files[r.path].symbols[r.index].start_line))
    return ranked


def _name_matches(scored: _Scores, evidence: Evidence) -> None:
    """Each failing test's name votes for the symbols and files named with its words
    (`test_file_seek` for `lfs_file_seek_`, `test_dump_j1939` for `j1939.py`): `NAME_VOTE` per
    test (as much as a traceback frame), shared among its best matches."""
    tree = scored.tree
    for test in evidence.test_names[:MAX_TEST_NAMES]:
        wanted = name_parts(test)
        if not wanted:
            continue
        overlap: dict[tuple[str, int], int] = defaultdict(int)
        rare: set[tuple[str, int]] = set()
        for part in wanted:
            found = tree.parts.get(part, ())
            for key in found:
                overlap[key] += 1
                if len(found) <= MAX_PART_SYMBOLS:
                    rare.add(key)
        overlap = {key: n for key, n in overlap.items() if key in rare}
        # A file whose stem the test's name spells out whole (`test_dump_j1939`, `j1939.py`).
        chosen_files = [
            path
            for part in wanted
            for path in tree.stems.get(part, ())
            if _stem_parts(path) <= wanted
        ]
        chosen_files = list(dict.fromkeys(chosen_files))
        best = max(overlap.values(), default=0)
        chosen = (
            [key for key, n in overlap.items() if n == best] if best >= min(2, len(wanted)) else []
        )
        if not chosen and not chosen_files:
            continue
        share = NAME_VOTE / (len(chosen) + len(chosen_files))
        for key in chosen:
            scored.add(key, share, f"named like the failing {test}", "name")
        for path in chosen_files:
            symbols = tree.files[path].symbols
            for index in range(len(symbols)):
                scored.add((path, index), share, f"in a file named like the failing {test}", "name")


def _literal_matches(scored: _Scores, evidence: Evidence) -> None:
    """Literals of the code that the failure output or the tests' source show verbatim."""
    if not evidence.text:
        return
    words = set(_WORD.findall(evidence.text))
    matched: dict[str, list[_LiteralSite]] = {}
    for word in words:
        for site in scored.tree.literals.get(word, ()):
            if site.fragment in evidence.text:
                matched.setdefault(site.fragment, []).append(site)
    for fragment, sites in matched.items():
        files = {site.path for site in sites}
        if len(files) > MAX_DEFINITIONS:
            continue
        specific = min(1.0, len(fragment) / 8) / len(files)
        shown = fragment if len(fragment) <= 40 else fragment[:39] + "…"
        for site in sites:
            key = scored.tree.enclosing(site.path, site.line)
            if key is not None:
                scored.add(
                    key, 4.0 * specific, f'holds "{shown}" (line {site.line})', "literal", site.line
                )
            for name in site.line_names:
                defined = scored.definitions(name)
                for target in defined:
                    if target != key:
                        scored.add(
                            target,
                            6.0 * specific / len(defined),
                            f'named beside "{shown}" on line {site.line}',
                            "beside",
                        )


def _spread(scored: _Scores, hops: int = 2) -> None:
    """Along the code, `hops` steps: what the found symbols call (half their score) and the
    macros, types and tables they use (a quarter); each hop starts from what the last one
    reached, so a handler's callee's macro is found too. A symbol reached from many takes the
    best of them, not their sum: a helper that every failing test calls is not the defect for
    being called a hundred times."""
    frontier = dict(sorted(scored.totals().items(), key=lambda item: -item[1])[:80])
    for hop in range(1, hops + 1):
        reached: dict[tuple[str, int], tuple[float, str]] = {}
        for key, score in frontier.items():
            symbol = scored.tree.symbol(key)
            for name, share, how in (
                *((callee, 0.5, "called by") for callee in symbol.calls),
                *((name, 0.25, "used by") for name in symbol.names - symbol.calls),
            ):
                defined = scored.definitions(name)
                for target in defined:
                    points = share * score / len(defined)
                    if target != key and points > reached.get(target, (0.0, ""))[0]:
                        reached[target] = (points, f"{how} {symbol.name}")
        for target, (points, reason) in reached.items():
            scored.add(target, points, reason, f"hop{hop}")
        best = sorted(reached.items(), key=lambda item: -item[1][0])[:80]
        frontier = {target: points for target, (points, _) in best}


def _combine(kind: str, values: list[float]) -> float:
    if kind == "name":
        return sum(values)
    best = max(values)
    return best + min(0.25 * (sum(values) - best), best)


def _reasons(said: dict[str, float]) -> list[str]:
    return [reason for reason, _ in sorted(said.items(), key=lambda item: -item[1])[:3]]


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
) -> Evidence:
    """The evidence of the current failures: `test_code` is the failing tests' own source,
    `diagnostics` the build's and the pre-check's, `named_files` files named for other reasons
    (path → weight, why), `frame_texts` the text of files the frames point into (read by the
    caller from `frame_paths`). A frame many failures share counts once: a hundred tests
    failing through one wrapper say no more about it than one."""
    evidence = Evidence()
    texts: list[str] = []
    frames: dict[tuple[str, int], Frame] = {}
    for _, text in _samples(failures):
        texts.append(text)
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
        lines = (frame_texts or {}).get(frame.path, "").splitlines()
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
