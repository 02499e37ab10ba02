"""Where the defect behind the failures most likely is (DESIGN.md §16): the tree's symbols ranked
by the failures' evidence, as an engineer reads a failure before touching code (pure).

The signals (`core/request/failure_evidence.py` reads them from the failures): a traceback frame or
a build diagnostic on a line of the tree, and the names on that line; a string literal of the code
that the failing test sends or its output shows (a console test's `crc8 01` finds the command
table's `"crc8"`, and the handler named beside it); identifiers of the failing tests and their
output that the tree defines; the failing tests' names, whose words vote for symbols and files named
alike; what the symbols found so far call and use; files the run's earlier patches, similar fixes
and recent commits touched. A name defined in many files weighs less in each, as a word in many
documents does, and within each kind of evidence the best match counts most.

`TreeMap` keeps the reverse maps (name → definitions, callers, literal words) per file, so a
request after a patch updates only the files the patch changed.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from pytest_fwloop.core.request.build_files import UNBUILT_REASON, BuildFiles, unbuilt
from pytest_fwloop.core.request.code_symbols import FileSymbols, Symbol
from pytest_fwloop.core.request.failure_evidence import WORD, FailureClues
from pytest_fwloop.core.request.ochiai import Suspicions
from pytest_fwloop.core.request.suspicion import (
    messengers,
    most_suspicious,
    spectrum_points,
    taking_turns,
    unrun_damping,
)

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
#: Shells of wrappers followed from one symbol (`_through_wrappers`).
MAX_WRAPPERS = 3


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
        gone = [p for p in self.files if p not in files]
        for path in gone:
            self._forget(path)
        return len(gone) + self.learn(files)

    def learn(self, files: Mapping[str, FileSymbols]) -> int:
        """Hold `files` as they are given, the others as they were; how many were (re)read."""
        changed = 0
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
                first = WORD.search(fragment)
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
                first = WORD.search(fragment)
                if first is not None:
                    sites = self.literals[first.group()]
                    sites[:] = [s for s in sites if s.path != path]

    def symbol(self, key: tuple[str, int]) -> Symbol:
        return self.files[key[0]].symbols[key[1]]

    def enclosing(self, path: str, line: int) -> tuple[str, int] | None:
        """The innermost symbol of `path` holding `line`."""
        index = self.files[path].innermost([line]).get(line)
        return None if index is None else (path, index)


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
    #: Points by kind of evidence before the spectrum's factor (`_Scores.add`'s kinds).
    signals: dict[str, float] = field(default_factory=dict)
    #: What the spectrum multiplied the points by (`unrun_damping`); 1.0 where it did not.
    factor: float = 1.0
    #: C the build's file list leaves out (`core/request/build_files.py`): ranked after all
    #: it uses.
    unbuilt: bool = False


@dataclass
class Ranking:
    """The symbols of the files a patch may change, best first, and those some evidence points
    at in files it may not (tests, protected or hidden files), best first: shown to no model,
    kept so a record can say why they were not sent."""

    ranked: list[Ranked]
    withheld: list[Ranked]


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


def rank(
    tree: TreeMap,
    evidence: FailureClues,
    candidates: Iterable[str],
    suspicions: Suspicions | None = None,
    built: BuildFiles | None = None,
) -> list[Ranked]:
    """The symbols of the `candidates` files (the ones a patch may change), best first; only
    symbols some evidence points at are returned. `suspicions` are the lines the failing tests
    ran, when the run recorded them (`core/request/ochiai.py`); `built`, the files the build
    uses, when it says (C it does not use comes after all it does)."""
    return ranking(tree, evidence, candidates, suspicions, built).ranked


def ranking(
    tree: TreeMap,
    evidence: FailureClues,
    candidates: Iterable[str],
    suspicions: Suspicions | None = None,
    built: BuildFiles | None = None,
) -> Ranking:
    """`rank`'s list, with the symbols of the other files that evidence points at beside it."""
    allowed = set(candidates)
    scored = _Scores(tree)
    suspicious = most_suspicious(tree.files, suspicions) if suspicions is not None else {}
    for messenger in messengers(tree.files, tree.definitions, suspicious, evidence.raised):
        del suspicious[messenger]
    measured = suspicions.measured if suspicions is not None else {}
    for suspect, points, reason, line in spectrum_points(suspicious, measured):
        # The C a tool measured is its own signal: `gcov_spectrum`, `qemu_spectrum`.
        kind = f"{measured[suspect[0]]}_spectrum" if suspect[0] in measured else "spectrum"
        scored.add(suspect, points, reason, kind, line)
    _frame_matches(scored, evidence)
    _word_matches(scored, evidence)
    _name_matches(scored, evidence)
    _literal_matches(scored, evidence)
    _spread(scored)
    for key in list(scored.points):
        boost = evidence.files.get(key[0])
        if boost:
            scored.add(key, boost, evidence.file_reasons.get(key[0], "named by the run"), "file")
    totals = scored.totals()
    factors = (
        unrun_damping(tree.files, totals, suspicious, measured) if suspicions is not None else {}
    )
    every = [
        Ranked(
            path,
            index,
            score * factors.get((path, index), 1.0),
            _reasons(scored.reasons[(path, index)]),
            scored.lines.get((path, index), (0.0, None))[1],
            {kind: _combine(kind, v) for kind, v in scored.points[(path, index)].items()},
            factors.get((path, index), 1.0),
        )
        for (path, index), score in totals.items()
    ]
    every = [r for r in every if r.score > 0]
    every.sort(key=lambda r: (-r.score, r.path, tree.files[r.path].symbols[r.index].start_line))
    found = {(r.path, r.index): r for r in every if r.path in allowed}
    unmeasured = {k: points for k, r in found.items() if (points := _unmeasured_points(r)) > 0}
    by_text = sorted(unmeasured, key=lambda k: -unmeasured[k])
    turns = [found[key] for key in taking_turns(list(found), suspicious, by_text)]
    for item in turns:
        if unbuilt(item.path, tree.files, built):
            item.unbuilt = True
            item.reasons.append(UNBUILT_REASON)
    return Ranking(
        [r for r in turns if not r.unbuilt] + [r for r in turns if r.unbuilt],
        [r for r in every if r.path not in allowed],
    )


#: The evidence that shows a symbol's own text: a literal of it in the output, a frame in it.
_VERBATIM = ("literal", "frame")


def _unmeasured_points(item: Ranked) -> float:
    """What the failing output shows verbatim of `item` (its literals, a frame in it) where
    the spectrum says nothing of it (no line of it counted, run or unrun: a table, a macro, a
    type); 0 for what the spectrum judged. Names alone (a macro the output's words name) do
    not count: they would fill the places with every header's macros."""
    if item.factor != 1.0 or any(kind.endswith("spectrum") for kind in item.signals):
        return 0.0
    return sum(item.signals.get(kind, 0.0) for kind in _VERBATIM)


def _frame_matches(scored: _Scores, evidence: FailureClues) -> None:
    """A traceback frame or a build diagnostic on a line: the symbol holding it."""
    tree = scored.tree
    for frame in evidence.frames:
        key = tree.enclosing(frame.path, frame.line) if frame.path in tree.files else None
        if key is not None:
            scored.add(
                key, 10.0 * frame.weight, f"{frame.what} line {frame.line}", "frame", frame.line
            )


def _word_matches(scored: _Scores, evidence: FailureClues) -> None:
    """Identifiers of the failing tests and their output that the tree defines, the symbols
    that call them, and the names on the lines the frames point at."""
    for word, count in evidence.words.items():
        defined = scored.definitions(word)
        for key in defined:
            weight = (1.0 + min(count, 4) / 4) / len(defined)
            scored.add(key, 3.0 * weight, f"named by the failing tests: {word}", "word")
        users = scored.tree.callers.get(word, set())
        if defined and 0 < len(users) <= MAX_DEFINITIONS:
            for key in users:
                scored.add(key, 1.0 / len(users), f"calls {word}", "caller")
    for word, (weight, where) in evidence.frame_words.items():
        defined = scored.definitions(word)
        for key in defined:
            scored.add(
                key, 8.0 * weight / len(defined), f"named on the failing line {where}", "frame_word"
            )


def _name_matches(scored: _Scores, evidence: FailureClues) -> None:
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


def _literal_matches(scored: _Scores, evidence: FailureClues) -> None:
    """Literals of the code that the failure output or the tests' source show verbatim."""
    if not evidence.text:
        return
    words = set(WORD.findall(evidence.text))
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
    being called a hundred times. What a symbol wraps takes its whole score, in no hop."""
    frontier = _through_wrappers(
        scored, dict(sorted(scored.totals().items(), key=lambda item: -item[1])[:80]), 0
    )
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
        frontier = _through_wrappers(scored, {t: points for t, (points, _) in best}, hop)


def _through_wrappers(
    scored: _Scores, frontier: dict[tuple[str, int], float], hop: int
) -> dict[tuple[str, int], float]:
    """`frontier` with what its symbols wrap, each at its wrapper's score: a function calling
    one named like itself (`dir_read` → `lfs_dir_read` → `lfs_dir_read_`, a binding, a
    locking shell, an implementation) hands the failure on whole, up to `MAX_WRAPPERS` deep."""
    grown = dict(frontier)
    todo = list(frontier.items())
    for _ in range(MAX_WRAPPERS):
        found: list[tuple[tuple[str, int], float]] = []
        for key, score in todo:
            symbol = scored.tree.symbol(key)
            for callee in symbol.calls:
                if not _wraps(symbol.name, callee):
                    continue
                for target in scored.definitions(callee):
                    if target != key and score > grown.get(target, 0.0):
                        grown[target] = score
                        scored.add(target, score, f"wrapped by {symbol.name}", f"wrap{hop}")
                        found.append((target, score))
        if not found:
            break
        todo = found
    return grown


def _wraps(outer: str, inner: str) -> bool:
    """Whether `inner` is named as what `outer` wraps: its name holds the outer one whole, as
    words (`mount` → `lfs_mount` → `lfs_mount_`; `read` is not in `thread_create`). A test is
    named after what it tests, not a shell."""
    a, b = outer.strip("_").lower(), inner.strip("_").lower()
    if len(a) < 4 or a.startswith("test"):
        return False
    return re.search(rf"(?:^|_){re.escape(a)}(?:_|$)", b) is not None


def _combine(kind: str, values: list[float]) -> float:
    if kind == "name":
        return sum(values)
    best = max(values)
    return best + min(0.25 * (sum(values) - best), best)


def _reasons(said: dict[str, float]) -> list[str]:
    return [reason for reason, _ in sorted(said.items(), key=lambda item: -item[1])[:3]]
