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
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import accumulate

from pytest_fwloop.core.records.agent_protocol import Failure
from pytest_fwloop.core.suite.results import TestRecord
from pytest_fwloop.core.suite.signature import (
    CUT,
    excerpt,
    head_within,
    scrub,
    signature,
    tail_within,
    wire_bytes,
)

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


def packed_size(failures: Sequence[Failure]) -> int:
    """The bytes `failures` take on the `command:` wire: what the cap is measured against."""
    wire = [failure.model_dump() for failure in failures]
    return len(json.dumps(wire, ensure_ascii=False).encode())


#: One entry's keys and punctuation, plus its share of the list's separators and brackets.
_ENTRY_BYTES = packed_size([Failure(nodeid="", signature="", excerpt="")])


def guaranteed_signatures(cap_bytes: int) -> int:
    """How many distinct signatures `pack_failures` always keeps: 256 for the default 32 KiB."""
    return max(cap_bytes, 0) // (_ENTRY_BYTES + MIN_SIGNATURE_BYTES + MIN_NODEID_BYTES)


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
        self.signature_cost = wire_bytes(self.signature)
        self.nodeid_costs = [wire_bytes(nodeid) for nodeid in self.nodeids]
        self.nodeid_totals = [0, *accumulate(self.nodeid_costs)]

    def listed(self, limit: int | None) -> int:
        """How many tests are named under `limit`: all of them when a count entry would cost
        as much as naming the rest."""
        members = len(self.nodeids)
        if limit is None or members <= limit:
            return members
        named = (members - limit) * (_ENTRY_BYTES + self.signature_cost)
        named += self.nodeid_totals[members] - self.nodeid_totals[limit]
        return members if named <= self._countwire_bytes(limit) else limit

    def fixedwire_bytes(self, limit: int | None) -> int:
        """Bytes of this cluster's entries under `limit`, with the excerpt still empty."""
        listed = self.listed(limit)
        cost = listed * (_ENTRY_BYTES + self.signature_cost) + self.nodeid_totals[listed]
        return cost + (self._countwire_bytes(listed) if listed < len(self.nodeids) else 0)

    def _countwire_bytes(self, listed: int) -> int:
        note = _count_note(len(self.nodeids) - listed)
        return _ENTRY_BYTES + self.signature_cost + self.nodeid_costs[listed] + wire_bytes(note)

    def want(self, bound: int) -> int:
        """Bytes of the whole excerpt before scrubbing, which only shrinks it; past `bound` just a
        number above it, since the exact size of a log no budget can hold does not matter."""
        texts = [text for text in (self.longrepr, self.sections) if text]
        if sum(len(text) for text in texts) > bound:  # a character costs at least one byte
            return bound + 1
        return wire_bytes("\n".join(texts))

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
        if not (longrepr and sections) or wire_bytes(whole) <= budget:
            return excerpt(whole, budget)
        budget -= wire_bytes("\n")
        sections_budget = min(wire_bytes(sections), budget // 3)
        longrepr_budget = min(wire_bytes(longrepr), budget - sections_budget)
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
    return f"{text[:head]}{CUT}{text[len(text) - tail :]}"


def _with_members(clusters: list[_Cluster], cap_bytes: int, root: str) -> list[Failure] | None:
    """Steps 1-3 of `pack_failures`; None when not even one named test per cluster and its count
    entry fit."""

    def fixed(limit: int | None) -> int:
        return sum(cluster.fixedwire_bytes(limit) for cluster in clusters)

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
        if spent + cost + wire_bytes(note) > cap_bytes:
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
    if limit is None or wire_bytes(text) <= limit:
        return text
    tag = f" #{hashlib.blake2b(text.encode(), digest_size=3).hexdigest()}" if tagged else ""
    room = limit - wire_bytes("…") - len(tag)
    head = head_within(text, room // 2)
    return f"{head}…{tail_within(text, room - room // 2)}{tag}"
