"""LOCALIZATION before each coder request (DESIGN.md §16): the tree indexed, its code ranked by
the failures' evidence, and the best of it put in the request for a model that cannot read it.

The edge of `core/request/ranking.py` and `core/request/source_pack.py`: it takes the tree from a
snapshot, the symbols from the code index, the failures from the loop, and reads only the files it
sends.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pytest_fwloop.codemap.build_inputs import BuildInputs
from pytest_fwloop.codemap.changed_functions import changed_functions
from pytest_fwloop.codemap.index import INDEX_NAME, CodeIndex
from pytest_fwloop.codemap.parse import language_of
from pytest_fwloop.core.change.unified_diff import PatchParseError, parse_patch, touched_paths
from pytest_fwloop.core.gate.policy import PatchPolicy, path_violations
from pytest_fwloop.core.machine.substates import SubState
from pytest_fwloop.core.records.agent_protocol import (
    AgentRequest,
    MapEntry,
    PatchFunction,
    SourceChunk,
)
from pytest_fwloop.core.records.round_records import RankingRecord, call_files
from pytest_fwloop.core.request.build_files import (
    BUILT_LANGUAGES,
    BuildFiles,
    build_share,
    unbuilt,
)
from pytest_fwloop.core.request.code_symbols import FileSymbols
from pytest_fwloop.core.request.failure_evidence import (
    FailureClues,
    FailureText,
    frame_paths,
    gather_evidence,
)
from pytest_fwloop.core.request.hidden_paths import is_secret
from pytest_fwloop.core.request.ochiai import Suspicions, suspicious_lines
from pytest_fwloop.core.request.ranking import Ranked, TreeMap, ranking
from pytest_fwloop.core.request.ranking_audit import audit
from pytest_fwloop.core.request.source_pack import failing_test_code, pack_sources, repo_map
from pytest_fwloop.core.suite.results import TestRecord
from pytest_fwloop.core.suite.signature import signature
from pytest_fwloop.loop.request.background_index import INDEX_ERRORS, BackgroundReading
from pytest_fwloop.loop.request.spectrum_files import SpectrumReader
from pytest_fwloop.loop.services import Services
from pytest_fwloop.loop.state import LoopState
from pytest_fwloop.workspace import Workspace
from pytest_fwloop.workspace.checkout_reads import recently_changed

#: Files whose text is read to pick chunks from: the best-ranked ones only.
_FILES_READ = 48
#: What the first request may spend reading and parsing files beyond those it must read first
#: (a tree of 30,000 files is never indexed whole before the first coder call, issue 44); the
#: rest is read in the background (`background_index.py`), so a later request stays quick.
PARSE_SECONDS = 5.0
#: Files in a tree from which, when the build has a file list, unbuilt C is never indexed.
BIG_TREE = 5000
#: Files the frames point into whose lines are read for the names they call.
_FRAME_FILES = 20
#: Commits of the user's history whose files count as recently changed.
_RECENT_COMMITS = 20


@dataclass
class Localization:
    """What one localization did, for the trace."""

    files: int
    parsed: int
    ranked: int
    seconds: float
    sources_bytes: int
    #: Every candidate ranked and what became of it, for `coder-K.ranking.json`.
    ranking: RankingRecord
    #: What the build uses of the tree's C, as its own file lists say
    #: (`core/request/build_files.py`).
    build: str
    #: Indexable files not read yet: the background reads them before the next request.
    unread: int = 0
    #: What the index had to say (a store it rebuilt), taken before the background starts.
    notice: str = ""


@dataclass
class Localizer:
    """One per run: the index and the tree map live as long as the controller."""

    workspace: Workspace
    #: fwloop_source_bytes: what the code sent to a model may take, in bytes.
    source_bytes: int
    redact: Callable[[str], str]
    #: The policy as it stands: after the baseline it protects every module tests came from.
    policy: Callable[[], PatchPolicy]
    #: The run's round folders, where its child runs record their spectra.
    rounds: Path | None = None
    index: CodeIndex = field(init=False)
    spectra: SpectrumReader | None = field(init=False, default=None)
    build_inputs: BuildInputs = field(init=False)
    tree: TreeMap = field(default_factory=TreeMap)
    _recent: dict[str, tuple[float, str]] | None = None
    #: Whether a path may be patched and shown, under `_judged_by`: paths recur each request.
    _verdicts: dict[str, bool] = field(default_factory=dict)
    _judged_by: PatchPolicy | None = None
    #: The symbols sent to the coder in an iteration (its number, their keys): asked again in
    #: it, the coder is shown the ranking's next page.
    _shown: tuple[int, set[tuple[str, int]]] = (0, set())
    #: What the last request left unindexed, read while the loop waits on other things.
    background: BackgroundReading = field(default_factory=BackgroundReading)

    def __post_init__(self) -> None:
        self.index = CodeIndex(self.workspace.shadow.state_dir / "index" / INDEX_NAME)
        self.build_inputs = BuildInputs(self.workspace.root)
        if self.rounds is not None:
            self.spectra = SpectrumReader(self.rounds, self.workspace.root)

    def coder_request(
        self,
        request: AgentRequest,
        failing: Sequence[TestRecord],
        earlier_patches: Sequence[str],
        again: bool = False,
        passed_in_suite: int | None = None,
    ) -> tuple[AgentRequest, Localization]:
        """`request` with `sources`, `test_sources` and `repo_map` filled in. `again`: the
        coder was unsure of what it was sent in this iteration; it gets the code ranked next.
        `passed_in_suite`: the tests that passed in the latest whole-suite results, of which the
        spectrum may hold a sample (`core/request/spectrum_sample.py`)."""
        self.background.stop()
        started = time.perf_counter()
        _, files = self.workspace.source_files()
        built = self.build_inputs.files(files)
        first = self._read_first(request, failing, earlier_patches, files, built)
        seconds = PARSE_SECONDS if not self.tree.files else 0.0
        order = _index_order(files, built)
        symbols = self.index.symbols(order, self.workspace.read_blobs, first, seconds)
        unread = self.index.unread
        parsed = self.tree.update(symbols)
        policy = self.policy()
        if policy != self._judged_by:
            self._verdicts, self._judged_by = {}, policy
        editable = [p for p in symbols if self._editable(p, policy)]
        tests, evidence = self._clues(request, failing, earlier_patches, files, symbols)
        suspicions = self._suspicions(failing, passed_in_suite)
        ranks = ranking(self.tree, evidence, editable, suspicions, built)
        ranked = ranks.ranked
        map_bytes = self.source_bytes // 4
        sources, sent, shown = self._pick(request.iteration, again, ranked, files, map_bytes)
        left_out = {p for p in editable if unbuilt(p, symbols, built)}
        entries, more = repo_map(self.tree, ranked, editable, sources, map_bytes, left_out)
        record = audit(
            self.tree,
            ranks,
            iteration=request.iteration,
            sources=sent,
            mapped=self._mapped(ranked, entries),
            shown_before=shown,
            withheld_because=lambda path: self._withheld_because(path, policy),
        )
        done = request.model_copy(
            update={
                "sources": sources,
                "test_sources": tests,
                "repo_map": entries,
                "repo_map_more": more,
            }
        )
        report = Localization(
            files=len(symbols),
            parsed=parsed,
            ranked=len(ranked),
            seconds=time.perf_counter() - started,
            sources_bytes=sum(len(c.text.encode()) for c in sources),
            ranking=record,
            build=build_share(symbols, built),
            unread=unread,
            notice=self.index.notice,
        )
        self.index.notice = ""
        if unread:
            self.background.start(self.index, order, self.workspace.read_blobs, self._learn)
        return done, report

    def _learn(self, symbols: dict[str, FileSymbols]) -> None:
        """What the background read, learned and judged before the next request needs it (in
        its thread): that request then finds these very objects and does neither again."""
        self.tree.learn(symbols)
        if self._judged_by is not None:
            for path in symbols:
                self._editable(path, self._judged_by)

    def _pick(
        self,
        iteration: int,
        again: bool,
        ranked: Sequence[Ranked],
        files: Mapping[str, str],
        map_bytes: int,
    ) -> tuple[list[SourceChunk], set[tuple[str, int]], set[tuple[str, int]]]:
        """The sources to send: the best of what this iteration has not shown yet when the
        coder asks `again`, else the best; with what is sent and what was shown before."""
        number, shown = self._shown
        if number != iteration or not again:
            shown = set()
        fresh = [r for r in ranked if (r.path, r.index) not in shown]
        best = list(dict.fromkeys(r.path for r in fresh))[:_FILES_READ]
        texts = self._texts(files, best)
        budget = self.source_bytes - map_bytes - self.source_bytes // 8
        sources = pack_sources(self.tree, fresh, texts, budget)
        sent = self._sent(fresh, sources)
        self._shown = (iteration, shown | sent)
        return sources, sent, shown

    def _read_first(
        self,
        request: AgentRequest,
        failing: Sequence[TestRecord],
        earlier_patches: Sequence[str],
        files: Mapping[str, str],
        built: BuildFiles | None,
    ) -> set[str]:
        """The files indexed before any other, whatever their reading costs: what the build
        compiles, the failing tests' files, the files the failures' frames and the build's
        diagnostics point into, and the files earlier patches touched."""
        first = set(built.files) if built is not None else set()
        first.update(
            n.split("::", 1)[0] for n in _one_per_signature(failing, str(self.workspace.root))
        )
        texts = [
            FailureText(t.nodeid, "\n".join((t.longrepr, t.crash, t.sections))) for t in failing
        ]
        texts.append(FailureText("build", request.build_diagnostics))
        first.update(frame_paths(texts, str(self.workspace.root), files))
        patches = [*earlier_patches, *(fix.patch for fix in request.similar_fixes)]
        first.update(_patched(patches, ""))
        return first

    def _clues(
        self,
        request: AgentRequest,
        failing: Sequence[TestRecord],
        earlier_patches: Sequence[str],
        files: Mapping[str, str],
        symbols: Mapping[str, FileSymbols],
    ) -> tuple[list[SourceChunk], FailureClues]:
        """The failing tests' own code (sent read-only) and what the failures, that code, the
        build and the run's history say, in the terms the ranking reads."""
        nodeids = _one_per_signature(failing, str(self.workspace.root))
        test_paths = list(dict.fromkeys(n.split("::", 1)[0] for n in nodeids))[:_FILES_READ]
        test_texts = self._texts(files, [p for p in test_paths if p in symbols])
        tests = failing_test_code(self.tree, nodeids, test_texts, self.source_bytes // 8)
        named = {**self._recent_files(), **_patched(earlier_patches, "patched earlier in this run")}
        for fix in request.similar_fixes:
            named.update(_patched([fix.patch], f"fixed before in run {fix.run_id}"))
        texts_of_failures = [
            FailureText(t.nodeid, "\n".join((t.longrepr, t.crash, t.sections))) for t in failing
        ]
        root = str(self.workspace.root)
        framed = frame_paths(texts_of_failures, root, symbols)[:_FRAME_FILES]
        clues = gather_evidence(
            texts_of_failures,
            [chunk.text for chunk in tests],
            request.build_diagnostics,
            root,
            symbols,
            named,
            self._texts(files, framed),
        )
        return tests, clues

    def patch_functions(self, patch: str) -> list[PatchFunction]:
        """The functions `patch` changes, whole, before and after it (for the reviewer); the
        patch has passed the policy and `git apply --check` already."""
        try:
            changes = parse_patch(patch)
        except PatchParseError:
            return []
        commit, files = self.workspace.source_files()
        after = self.workspace.patched_files(commit, patch)
        found: list[PatchFunction] = []
        spent = 0
        for change in changes:
            path = change.new_path or change.old_path
            if path is None or is_secret(path) or change.is_binary:
                continue
            old_path = change.old_path
            old_text = self._texts(files, [old_path]).get(old_path, "") if old_path else ""
            new_blob = after.get(path)
            new_text = (
                self.redact(
                    self.workspace.read_blobs([new_blob])
                    .get(new_blob, b"")
                    .decode("utf-8", "replace")
                )
                if new_blob
                else ""
            )
            for function in changed_functions(path, old_text, new_text):
                size = len(function.before.encode()) + len(function.after.encode())
                if spent + size > self.source_bytes:
                    return found
                spent += size
                found.append(function)
        return found

    def _sent(
        self, ranked: Sequence[Ranked], sources: Sequence[SourceChunk]
    ) -> set[tuple[str, int]]:
        """The ranked symbols whose first line, or whose named line, a chunk shows."""
        spans: dict[str, list[tuple[int, int]]] = {}
        for chunk in sources:
            spans.setdefault(chunk.path, []).append((chunk.start_line, chunk.end_line))
        sent: set[tuple[str, int]] = set()
        for item in ranked:
            first = self.tree.symbol((item.path, item.index)).start_line
            if any(
                low <= first <= high or (item.line is not None and low <= item.line <= high)
                for low, high in spans.get(item.path, ())
            ):
                sent.add((item.path, item.index))
        return sent

    def _mapped(
        self, ranked: Sequence[Ranked], entries: Sequence[MapEntry]
    ) -> set[tuple[str, int]]:
        """The ranked symbols whose signature a repo-map entry lists (`LINE: SIGNATURE`)."""
        lines = {e.path: {int(s.split(":", 1)[0]) for s in e.symbols} for e in entries}
        return {
            (r.path, r.index)
            for r in ranked
            if self.tree.symbol((r.path, r.index)).start_line in lines.get(r.path, ())
        }

    def _withheld_because(self, path: str, policy: PatchPolicy) -> str:
        if is_secret(path):
            return "hidden"
        broken = path_violations(path, policy)
        return broken[0].rule if broken else "not a file a patch may change"

    def _suspicions(
        self, failing: Sequence[TestRecord], passed_in_suite: int | None
    ) -> Suspicions | None:
        """The lines the failing tests ran, by Ochiai (`core/request/ochiai.py`); None when none of
        them was measured (each failed in its fixtures' set-up, before its call): then the
        spectrum says nothing of them, and no code is the less likely for it."""
        recorded = self.spectra.newest() if self.spectra is not None else None
        if recorded is None:
            return None
        measured = {t.nodeid for t in failing} & set(recorded.spectrum.tests)
        if not measured:
            return None
        return suspicious_lines(recorded.spectrum, measured, recorded.passed, passed_in_suite)

    def _editable(self, path: str, policy: PatchPolicy) -> bool:
        verdict = self._verdicts.get(path)
        if verdict is None:
            verdict = not is_secret(path) and not path_violations(path, policy)
            self._verdicts[path] = verdict
        return verdict

    def _texts(self, files: Mapping[str, str], paths: Sequence[str]) -> dict[str, str]:
        wanted = {p: files[p] for p in paths if p in files}
        blobs = self.workspace.read_blobs(wanted.values())
        return {
            path: self.redact(blobs[blob].decode("utf-8", "replace"))
            for path, blob in wanted.items()
            if blob in blobs
        }

    def _recent_files(self) -> dict[str, tuple[float, str]]:
        """Files the user's last commits changed, once a run."""
        if self._recent is None:
            changed = recently_changed(self.workspace.root, _RECENT_COMMITS)
            self._recent = dict.fromkeys(changed, (0.5, "changed in a recent commit"))
        return self._recent


def _one_per_signature(failing: Sequence[TestRecord], root: str) -> list[str]:
    """The failing tests' node ids, one of each failure signature first: the test code sent
    shows every kind of failure before a second test of one kind."""
    first: dict[str, str] = {}
    for test in failing:
        first.setdefault(signature(test, root), test.nodeid)
    leaders = list(first.values())
    return [*leaders, *(t.nodeid for t in failing if t.nodeid not in set(leaders))]


def _patched(patches: Sequence[str], why: str) -> dict[str, tuple[float, str]]:
    named: dict[str, tuple[float, str]] = {}
    for patch in patches:
        try:
            paths = touched_paths(patch)
        except PatchParseError:
            continue
        for path in paths:
            named[path] = (1.5, why)
    return named


def _index_order(files: Mapping[str, str], built: BuildFiles | None) -> dict[str, str]:
    """`files` in the order the index reads them when its time is short: the C the build does
    not compile last (it ranks last too), and on a big tree not at all (a Zephyr tree's
    thousands of unbuilt drivers would fill the memory and the store for nothing)."""
    if built is None:
        return dict(files)
    later = {p for p in files if p not in built.files and language_of(p) in BUILT_LANGUAGES}
    kept = {p: b for p, b in files.items() if p not in later}
    if len(files) >= BIG_TREE:
        return kept
    return {**kept, **{p: files[p] for p in later}}


def with_code(
    services: Services,
    loop: LoopState,
    localizer: Localizer,
    request: AgentRequest,
    failing: Sequence[TestRecord],
) -> AgentRequest:
    """`request` with the tree's code a model of its role is sent (DESIGN.md §16): the coder's
    ranked sources, the reviewer's changed functions; as it was with `fwloop_source_bytes=0`."""
    if services.settings.options.source_bytes <= 0:
        return request
    if request.role == "coder":
        return localize(services, loop, localizer, request, failing)
    if request.role == "reviewer" and request.patch:
        return review_context(services, loop, localizer, request)
    return request


def localize(
    services: Services,
    loop: LoopState,
    localizer: Localizer,
    request: AgentRequest,
    failing: Sequence[TestRecord],
) -> AgentRequest:
    """The coder's request with the tree's best-ranked code, the step traced as LOCALIZATION."""
    number = loop.current.number
    patches = [it.patch for it in loop.iterations if it.patch]
    again = any(d.status == "low_confidence" for d in loop.current.decisions)
    latest = loop.latest_results()
    passed = sum(t.outcome == "passed" for t in latest.tests) if latest is not None else None
    try:
        done, report = localizer.coder_request(request, failing, patches, again, passed)
    except INDEX_ERRORS as exc:
        reason = f"no code sent: {type(exc).__name__}: {exc}"
        services.substate(number, SubState.LOCALIZATION, reason[:300])
        return request
    notice = f"; {report.notice}" if report.notice else ""
    if report.unread:
        notice += (
            f"; {report.unread} file(s) not indexed yet: read in the background before the "
            "next request"
        )
    folder = services.recorder.round_path(number)
    # Beside the first call made with this request: a re-ask of the same request shares it.
    stem = f"coder-{len(call_files(folder, 'coder', 'meta.json')) + 1}"
    written = services.recorder.write_json(
        f"{services.recorder.relative(folder)}/{stem}.ranking.json",
        report.ranking.model_dump(),
    )
    services.substate(
        number,
        SubState.LOCALIZATION,
        f"{report.files} file(s) indexed ({report.parsed} read anew), {report.ranked} "
        f"symbol(s) ranked; sent {len(done.sources)} source chunk(s) ({report.sources_bytes} "
        f"bytes), {len(done.test_sources)} test function(s), {len(done.repo_map)} repo-map "
        f"file(s) (+{done.repo_map_more} not listed) within fwloop_source_bytes="
        f"{localizer.source_bytes} in {report.seconds:.2f}s; {report.build}{notice}"
        f"{'; the next-ranked code, as the coder was unsure' if again else ''}",
        [services.recorder.relative(written)],
    )
    return done


def review_context(
    services: Services, loop: LoopState, localizer: Localizer, request: AgentRequest
) -> AgentRequest:
    """The reviewer's request with the whole functions the patch changes, before and after."""
    try:
        functions = localizer.patch_functions(request.patch)
    except INDEX_ERRORS as exc:
        loop.current.notes.append(f"the reviewer was sent no functions: {exc}"[:300])
        return request
    return request.model_copy(update={"patch_functions": functions})
