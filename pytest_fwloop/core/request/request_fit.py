"""A request cut down to what a model's window takes (DESIGN.md §16), least needed first.

Pure: `measure` says how many bytes a request would put on the wire (the provider's own
rendering), and the parts are dropped in this order until it fits: the repo map's last files,
the similar fixes, the earlier run's evidence, the failing tests' code, the reviewer's changed
functions, the lowest-ranked source chunks, the oldest history. The failures, the patch, the
must-fix items and the build diagnostics are never cut: a request without them asks a
different question, so when they alone overflow the answer is None and the caller stops.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pytest_fwloop.core.records.agent_protocol import AgentRequest

#: The list fields that may be shortened, least needed first; `history` keeps its newest.
_DROPPABLE = (
    "repo_map",
    "similar_fixes",
    "evidence",
    "test_sources",
    "patch_functions",
    "sources",
    "history",
)


@dataclass(frozen=True)
class Fitted:
    """The request that fits, and what was left out of it, as (field, dropped, of) rows."""

    request: AgentRequest
    dropped: tuple[tuple[str, int, int], ...]

    def note(self, cap: int) -> str:
        """One line for the call's record; "" when nothing was left out."""
        if not self.dropped:
            return ""
        parts = ", ".join(f"{n} of {total} {name}" for name, n, total in self.dropped)
        return f"fitted the request into {cap} bytes of the model's window: left out {parts}"


def fit_request(
    request: AgentRequest, cap: int, measure: Callable[[AgentRequest], int]
) -> Fitted | None:
    """`request` with as little left out as makes `measure` at most `cap`; None when what is
    never cut does not fit on its own."""
    current = request
    dropped: list[tuple[str, int, int]] = []
    for name in _DROPPABLE:
        if measure(current) <= cap:
            break
        if name == "evidence":
            if current.evidence is not None:
                current = current.model_copy(update={"evidence": None})
                dropped.append(("evidence", 1, 1))
            continue
        items = list(getattr(current, name))
        keep = _most_kept(current, name, items, cap, measure)
        if keep < len(items):
            current = _kept(current, name, items, keep)
            dropped.append((name, len(items) - keep, len(items)))
    if measure(current) > cap:
        return None
    return Fitted(current, tuple(dropped))


def _kept(request: AgentRequest, name: str, items: list[object], keep: int) -> AgentRequest:
    """`request` with only `keep` of the field's items: the first ones, or history's last."""
    chosen = items[len(items) - keep :] if name == "history" else items[:keep]
    update: dict[str, object] = {name: chosen}
    if name == "repo_map":
        update["repo_map_more"] = request.repo_map_more + len(items) - keep
    return request.model_copy(update=update)


def _most_kept(
    request: AgentRequest,
    name: str,
    items: list[object],
    cap: int,
    measure: Callable[[AgentRequest], int],
) -> int:
    """The most items of the field that keep the request within `cap` (0 when none do): a
    binary search, so a repo map of hundreds of files is measured a handful of times."""
    low, high = 0, len(items)
    while low < high:
        middle = (low + high + 1) // 2
        if measure(_kept(request, name, items, middle)) <= cap:
            low = middle
        else:
            high = middle - 1
    return low
