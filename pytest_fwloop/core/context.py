"""What the coder is told about the failures: clustered by signature and bounded (pure).

A thousand tests failing on one bug should cost the context one excerpt, not a thousand; and no
distinct failure may be crowded out, so every signature keeps at least its headline.

Sizes are exact: every budget here counts the bytes a string takes in the UTF-8 JSON the
`command:` wire sends (`json.dumps(..., ensure_ascii=False)`), and `packed_size` of what
`pack_failures` returns never exceeds the cap.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import accumulate

from pytest_fwloop.core.agent_protocol import Failure
from pytest_fwloop.core.results import TestRecord

#: Longest signature, in characters; a longer headline keeps its start and end.
SIGNATURE_CHARS = 200
#: Bytes every excerpt keeps (or its whole text, if shorter) before member lists collapse; more
#: when half the cap shared among the clusters gives more.
EXCERPT_FLOOR = 1024
#: Smallest excerpt worth sending; below it a cluster keeps only its headline.
MIN_EXCERPT = 256
#: The shortest a signature and a node id get before a whole signature is left out.
MIN_SIGNATURE_BYTES = 48
MIN_NODEID_BYTES = 32
#: Limits (signature bytes, node id bytes) tried in turn once only headlines fit; None: as is.
_SHORTENINGS: tuple[tuple[int | None, int | None], ...] = (
    (None, None),
    (160, 96),
    (96, 64),
    (64, 48),
    (MIN_SIGNATURE_BYTES, MIN_NODEID_BYTES),
)

_PATH_CHAR = r"[\w.+~@%=-]"
# Patterns that start with a literal are searched for quickly; the character before a match is
# checked afterwards, so "http://host/a/b" and "src/a/b" are left alone.
_ABSOLUTE_PATH = re.compile(rf"/{_PATH_CHAR}+(?:/{_PATH_CHAR}+)*")
_NOT_A_PATH_START = re.compile(r"[\w.~:/<>-]")
_PYTEST_TMP = re.compile(rf"/pytest-of-{_PATH_CHAR}+/pytest-(?:\d+|current)(?=/|$)")
_DURATION = re.compile(
    r"(?<![\w./-])\d+(?:\.\d+)?(?P<unit>\s?(?:ms|us|µs|ns|s|secs?|seconds?|mins?|minutes?))(?!\w)"
    r"(?: \(\d+:\d\d:\d\d\))?"
)
_DATETIME = re.compile(r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?")
_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
# Escaped as \u00XX these cost six bytes each and tell the coder nothing.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")

#: Where an excerpt or a long log was cut. It gives no count: a long log is first cut to a window
#: at each end (`_window`), so a count taken from the excerpt's input would understate the cut.
_CUT = "\n…\n"
_CRASH = re.compile(r"(?P<path>.+?):\d+: (?P<message>.*)", re.DOTALL)
_PYTEST_E = re.compile(r"^E\s+")
#: A traceback entry's location line as pytest prints it: `path:line: ...`.
_LOCATION = re.compile(r"^(?P<path>[^\s:][^:\n]*):(?P<line>\d+):", re.MULTILINE)
#: Values that change between iterations of the same failure, in the order they are replaced.
_VOLATILE = (
    (re.compile(r"(?<!\w)'[^'\n]*'(?!\w)|(?<!\w)\"[^\"\n]*\"(?!\w)"), "'…'"),
    (re.compile(r"\b[0-9a-fA-F]{8}(?:-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}\b"), "<uuid>"),
    (
        re.compile(
            r"\b0[xX][0-9a-fA-F]+\b|\b(?=[0-9a-fA-F]*[a-fA-F])(?=[0-9a-fA-F]*\d)[0-9a-fA-F]{6,}\b"
        ),
        "<hex>",
    ),
    # A minus sign only where it cannot be a hyphen or a range: "x=-1", not "3-5" or "uart-2".
    (re.compile(r"(?<![A-Za-z_])(?:(?<![\w.])-)?\d+(?:\.\d+)*"), "N"),
    (re.compile(r"\s+"), " "),
)


def packed_size(failures: Sequence[Failure]) -> int:
    """The bytes `failures` take on the `command:` wire: what the cap is measured against."""
    wire = [failure.model_dump() for failure in failures]
    return len(json.dumps(wire, ensure_ascii=False).encode())


#: One entry's keys and punctuation, plus its share of the list's separators and brackets.
_ENTRY_BYTES = packed_size([Failure(nodeid="", signature="", excerpt="")])


def guaranteed_signatures(cap_bytes: int) -> int:
    """How many distinct signatures `pack_failures` always keeps: 256 for the default 32 KiB."""
    return max(cap_bytes, 0) // (_ENTRY_BYTES + MIN_SIGNATURE_BYTES + MIN_NODEID_BYTES)


def scrub(text: str, root: str = "") -> str:
    """`text` without what changes from run to run or says nothing: paths under `root` made
    relative, pytest tmp dirs as `<tmp>`, other absolute paths cut to their last two components,
    durations as `?s`, timestamps as `<ts>`, terminal colours and control characters.

    Never longer on the wire than `text`, so a log's raw size bounds its scrubbed size.
    """
    text = text.encode("utf-8", "replace").decode()  # lone surrogates cannot go on the wire
    text = _ANSI.sub("", text).replace("\r\n", "\n").replace("\r", "\n")
    text = _CONTROL.sub("", text)
    base = root.rstrip("/")
    if base:
        under_root = re.compile(rf"{re.escape(base)}(?:/|(?!{_PATH_CHAR}))")
        text = under_root.sub(_relative_to_root, text)
    text = _ABSOLUTE_PATH.sub(_outside_path, text)
    text = _DATETIME.sub("<ts>", text)
    return _DURATION.sub(r"?\g<unit>", text)


def _starts_a_path(match: re.Match[str]) -> bool:
    return match.start() == 0 or not _NOT_A_PATH_START.match(match.string, match.start() - 1)


def _relative_to_root(match: re.Match[str]) -> str:
    if not _starts_a_path(match):
        return match[0]
    return "" if match[0].endswith("/") else "."


def _outside_path(match: re.Match[str]) -> str:
    """A pytest tmp dir as `<tmp>`, any other path cut to its last two components."""
    path = match[0]
    if not _starts_a_path(match):
        return path
    tmp = _PYTEST_TMP.search(path)
    if tmp is not None:
        return "<tmp>" + path[tmp.end() :]
    short = "…/" + "/".join(path.split("/")[-2:])
    return short if _cost(short) < _cost(path) else path


def signature(record: TestRecord, root: str = "") -> str:
    """A stable name for "the same failure", sharp enough to keep different bugs apart: the
    phase, the test function and the line of it that failed, the first line of what was raised
    (minus values that change between runs), and the file it was raised in when that is not the
    test's own (a firmware module, a driver). Firmware-side line numbers are left out, since a
    patch above them shifts them; the test's line stays, since patches change the firmware."""
    if record.env_failure:
        # The environment being down is one failure, wherever each test noticed it.
        return _bounded(f"{record.phase}: {_normalized(record.env_failure, root)}")
    test_file, _, function = record.nodeid.partition("::")
    crash = _CRASH.match(record.crash)
    if crash is not None:
        message = crash["message"]
    else:
        message = _PYTEST_E.sub("", _last_line(record.longrepr))
    message = _normalized(message, root) or record.outcome
    site = f"{test_file}::{function.partition('[')[0]}" if function else test_file
    line = _test_line(record, test_file)
    headline = f"{record.phase} {scrub(site, root)}{f':{line}' if line else ''}: {message}"
    raised_in = scrub(crash["path"], root) if crash is not None else ""
    if raised_in and not _same_file(raised_in, test_file):
        headline += f" (raised in {raised_in})"
    return _bounded(headline)


def _normalized(message: str, root: str) -> str:
    message = _first_line(scrub(message, root))
    for pattern, replacement in _VOLATILE:
        message = pattern.sub(replacement, message)
    return message.strip()


def _test_line(record: TestRecord, test_file: str) -> str:
    """The line of the test's own file where it failed: its frame in the traceback (pytest's
    `path:line: ...` location lines), else the crash line when the crash is in that file."""
    if test_file:
        for text in (record.longrepr, record.crash):
            for found in _LOCATION.finditer(text):
                if _same_file(found["path"], test_file):
                    return found["line"]
    return ""


def _same_file(path: str, test_file: str) -> bool:
    return path == test_file or path.endswith(f"/{test_file}")


def _bounded(headline: str) -> str:
    if len(headline) <= SIGNATURE_CHARS:
        return headline
    half = (SIGNATURE_CHARS - 1) // 2
    return f"{headline[:half]}…{headline[len(headline) - half :]}"


def _first_line(text: str) -> str:
    # Not splitlines(): it also splits at form feeds and other characters a value may hold.
    return next((line.strip() for line in text.split("\n") if line.strip()), "")


def _last_line(text: str) -> str:
    return text.rstrip().rpartition("\n")[2].strip()


def excerpt(text: str, budget: int) -> str:
    """Head and tail of `text` within `budget` bytes, the tail weighted three to one: the end of a
    traceback says what failed, the start where it began. "" when not even the cut mark fits."""
    if _cost(text) <= budget:
        return text
    room = budget - _cost(_CUT)
    if room <= 0:
        return ""
    return f"{_prefix(text, room // 4)}{_CUT}{_suffix(text, room - room // 4)}"


def _cost(text: str) -> int:
    """Bytes `text` takes inside a JSON string on the wire, quotes excluded. A lone surrogate (it
    cannot go on the wire; `scrub` replaces it) counts as the three bytes Python would need."""
    return len(json.dumps(text, ensure_ascii=False).encode("utf-8", "surrogatepass")) - 2


def _prefix(text: str, budget: int) -> str:
    """The longest start of `text` within `budget` bytes; a character costs at least one."""
    low, high = 0, min(len(text), budget)
    while low < high:
        middle = (low + high + 1) // 2
        if _cost(text[:middle]) <= budget:
            low = middle
        else:
            high = middle - 1
    return text[:low]


def _suffix(text: str, budget: int) -> str:
    return _prefix(text[::-1], budget)[::-1]


@dataclass
class _Cluster:
    """The failing tests sharing one signature; the first one's texts, still raw, stand for all."""

    signature: str
    nodeids: list[str]
    longrepr: str
    sections: str
    signature_cost: int = field(init=False)
    nodeid_costs: list[int] = field(init=False)
    nodeid_totals: list[int] = field(init=False)

    def __post_init__(self) -> None:
        self.signature_cost = _cost(self.signature)
        self.nodeid_costs = [_cost(nodeid) for nodeid in self.nodeids]
        self.nodeid_totals = [0, *accumulate(self.nodeid_costs)]

    def listed(self, limit: int | None) -> int:
        """How many tests are named under `limit`: all of them when a count entry would cost
        as much as naming the rest."""
        members = len(self.nodeids)
        if limit is None or members <= limit:
            return members
        named = (members - limit) * (_ENTRY_BYTES + self.signature_cost)
        named += self.nodeid_totals[members] - self.nodeid_totals[limit]
        return members if named <= self._count_cost(limit) else limit

    def fixed_cost(self, limit: int | None) -> int:
        """Bytes of this cluster's entries under `limit`, with the excerpt still empty."""
        listed = self.listed(limit)
        cost = listed * (_ENTRY_BYTES + self.signature_cost) + self.nodeid_totals[listed]
        return cost + (self._count_cost(listed) if listed < len(self.nodeids) else 0)

    def _count_cost(self, listed: int) -> int:
        note = _count_note(len(self.nodeids) - listed)
        return _ENTRY_BYTES + self.signature_cost + self.nodeid_costs[listed] + _cost(note)

    def want(self, bound: int) -> int:
        """Bytes of the whole excerpt before scrubbing, which only shrinks it; past `bound` just a
        number above it, since the exact size of a log no budget can hold does not matter."""
        texts = [text for text in (self.longrepr, self.sections) if text]
        if sum(len(text) for text in texts) > bound:  # a character costs at least one byte
            return bound + 1
        return _cost("\n".join(texts))

    def lead_excerpt(self, budget: int, root: str) -> str:
        """The traceback's and the captured output's excerpts, two thirds to the traceback: cut
        as one text, the output's tail would crowd out the assertion that failed."""
        # Only the ends an excerpt can show (twice over, in case scrubbing halves them) are
        # scrubbed: the cost follows the cap, not the size of the log.
        longrepr, sections = (
            scrub(_window(text, budget // 2, budget * 3 // 2), root)
            for text in (self.longrepr, self.sections)
        )
        whole = "\n".join(text for text in (longrepr, sections) if text)
        if not (longrepr and sections) or _cost(whole) <= budget:
            return excerpt(whole, budget)
        budget -= _cost("\n")
        sections_budget = min(_cost(sections), budget // 3)
        longrepr_budget = min(_cost(longrepr), budget - sections_budget)
        parts = (excerpt(longrepr, longrepr_budget), excerpt(sections, budget - longrepr_budget))
        return "\n".join(part for part in parts if part)


def _count_note(unlisted: int) -> str:
    return (
        f"this test and {unlisted - 1} more fail with this signature; "
        "not listed, to stay within the context cap"
    )


def _omitted_note(signatures: int, tests: int) -> str:
    return (
        f"{signatures} distinct signatures ({tests} tests), this one first, "
        "are left out to stay within the context cap"
    )


def pack_failures(records: Sequence[TestRecord], cap_bytes: int, root: str = "") -> list[Failure]:
    """The failures as the coder gets them: one cluster per signature, biggest first, within
    `cap_bytes` as measured by `packed_size`.

    A cluster is its first test with the excerpt, then its other tests by node id with an empty
    excerpt. When that does not fit, things give way in this order:
    1. excerpts shrink, down to `EXCERPT_FLOOR` bytes each or half the cap between them,
       whichever is more;
    2. member lists collapse: at most N tests are named per cluster, and one more entry (a real
       test of the cluster) states how many are not listed; N falls to 1;
    3. excerpts shrink below the floor; under `MIN_EXCERPT` they go, smallest clusters first;
    4. one entry per cluster, no excerpt, no count; then signatures and node ids are shortened,
       down to `MIN_SIGNATURE_BYTES` and `MIN_NODEID_BYTES` (a shortened signature ends in a
       digest of the whole, so distinct ones stay distinct);
    5. only past `guaranteed_signatures(cap_bytes)` signatures (256 at 32 KiB) are any left out:
       the last entry kept names the first of them and says how many signatures and tests are
       missing.
    Below two bytes not even `[]` fits; it is returned all the same.
    """
    grouped: dict[str, list[TestRecord]] = {}
    for record in records:
        grouped.setdefault(signature(record, root), []).append(record)
    # Stable sort: equal sizes keep the order in which their first failure was reported.
    clusters = [
        _Cluster(
            signature=sig,
            nodeids=[_encodable(member.nodeid) for member in members],
            longrepr=members[0].longrepr,
            sections=members[0].sections,
        )
        for sig, members in sorted(grouped.items(), key=lambda item: -len(item[1]))
    ]
    if not clusters:
        return []
    return _with_members(clusters, cap_bytes, root) or _headlines(clusters, cap_bytes)


def _encodable(text: str) -> str:
    return text.encode("utf-8", "replace").decode()


def _window(text: str, head: int, tail: int) -> str:
    """`text` cut to its first `head` and last `tail` characters, when longer."""
    if len(text) <= head + tail:
        return text
    return f"{text[:head]}{_CUT}{text[len(text) - tail :]}"


def _with_members(clusters: list[_Cluster], cap_bytes: int, root: str) -> list[Failure] | None:
    """Steps 1-3 of `pack_failures`; None when not even one named test per cluster and its count
    entry fit."""

    def fixed(limit: int | None) -> int:
        return sum(cluster.fixed_cost(limit) for cluster in clusters)

    if fixed(1) > cap_bytes:  # checked first: sizing the logs of thousands of clusters is slow
        return None
    wants = [cluster.want(cap_bytes) for cluster in clusters]
    # Names of more tests failing the same way tell the coder less than the excerpts do.
    share = max(EXCERPT_FLOOR, cap_bytes // (2 * len(clusters)))
    floor = sum(min(want, share) for want in wants)
    limit: int | None = None
    if fixed(None) + floor > cap_bytes:
        limit, high = 1, max(len(cluster.nodeids) for cluster in clusters)
        if fixed(1) + floor > cap_bytes:
            high = 1  # step 3: one test named per cluster, excerpts under the floor
        while limit < high:
            middle = (limit + high + 1) // 2
            if fixed(middle) + floor <= cap_bytes:
                limit = middle
            else:
                high = middle - 1
    budgets = _allot(cap_bytes - fixed(limit), wants)
    failures: list[Failure] = []
    for cluster, budget in zip(clusters, budgets, strict=True):
        listed = cluster.listed(limit)
        failures.append(
            Failure(
                nodeid=cluster.nodeids[0],
                signature=cluster.signature,
                excerpt=cluster.lead_excerpt(budget, root),
            )
        )
        failures.extend(
            Failure(nodeid=nodeid, signature=cluster.signature, excerpt="")
            for nodeid in cluster.nodeids[1:listed]
        )
        if listed < len(cluster.nodeids):
            note = _count_note(len(cluster.nodeids) - listed)
            failures.append(
                Failure(nodeid=cluster.nodeids[listed], signature=cluster.signature, excerpt=note)
            )
    return failures


def _allot(room: int, wants: list[int]) -> list[int]:
    """Equal shares of `room`, none above what a cluster wants; shares under `MIN_EXCERPT` are not
    worth sending, so then whole `MIN_EXCERPT` shares go to the first (biggest) clusters."""
    if sum(wants) <= room:
        return list(wants)
    remaining, sharing = room, len(wants)
    # Wants that fit an equal share are met; the rest share what is left equally. The loop
    # always stops early, since the wants add up to more than the room.
    for want in sorted(wants):
        if want > remaining // sharing:
            break
        remaining -= want
        sharing -= 1
    level = remaining // sharing
    if level >= MIN_EXCERPT:
        return [min(want, level) for want in wants]
    budgets = []
    for want in wants:
        budget = min(want, MIN_EXCERPT)
        budget = budget if budget <= room else 0
        room -= budget
        budgets.append(budget)
    return budgets


def _headlines(clusters: list[_Cluster], cap_bytes: int) -> list[Failure]:
    """Steps 4-5 of `pack_failures`: one entry per signature, shortened as far as needed."""
    for signature_limit, nodeid_limit in _SHORTENINGS:
        # An upper bound: a shortened string never costs more than its limit.
        bound = sum(
            _ENTRY_BYTES
            + _at_most(cluster.signature_cost, signature_limit)
            + _at_most(cluster.nodeid_costs[0], nodeid_limit)
            for cluster in clusters
        )
        if bound <= cap_bytes:
            return [_headline(cluster, signature_limit, nodeid_limit) for cluster in clusters]
    heads = [_headline(cluster, MIN_SIGNATURE_BYTES, MIN_NODEID_BYTES) for cluster in clusters]
    costs = [packed_size([head]) for head in heads]
    if sum(costs) <= cap_bytes:
        return heads
    # The closing entry is the headline of the first signature left out, its excerpt the count.
    kept, closing = 0, None
    spent, tests_left = 0, sum(len(cluster.nodeids) for cluster in clusters)
    for index, (head, cost) in enumerate(zip(heads, costs, strict=True)):
        note = _omitted_note(len(heads) - index, tests_left)
        if spent + cost + _cost(note) > cap_bytes:
            break
        kept, closing = index, head.model_copy(update={"excerpt": note})
        spent += cost
        tests_left -= len(clusters[index].nodeids)
    if closing is None:
        # Too small a cap even for the closing entry: the headlines that fit, nothing more.
        return heads[: sum(1 for total in accumulate(costs) if total <= cap_bytes)]
    return [*heads[:kept], closing]


def _at_most(cost: int, limit: int | None) -> int:
    return cost if limit is None else min(cost, limit)


def _headline(cluster: _Cluster, signature_limit: int | None, nodeid_limit: int | None) -> Failure:
    return Failure(
        nodeid=_shorten(cluster.nodeids[0], nodeid_limit),
        signature=_shorten(cluster.signature, signature_limit, tagged=True),
        excerpt="",
    )


def _shorten(text: str, limit: int | None, tagged: bool = False) -> str:
    """`text` within `limit` bytes, its start and end kept; a tagged one ends in a digest of the
    whole text, so two signatures that differ only in the middle stay distinct."""
    if limit is None or _cost(text) <= limit:
        return text
    tag = f" #{hashlib.blake2b(text.encode(), digest_size=3).hexdigest()}" if tagged else ""
    room = limit - _cost("…") - len(tag)
    head = _prefix(text, room // 2)
    return f"{head}…{_suffix(text, room - room // 2)}{tag}"
