"""Which tests the spectrum run before a coder call measures (pure; docs/providers.md).

A run where nothing fails records no spectrum: tracing every line of the code under test costs
what it costs (cantools' suite: +46%), and most runs of a suite are green. When the coder is to
be asked and some failing test's lines were not recorded on the tree as it stands, one bounded
run records them: the failing tests (up to `MAX_FAILING`), and passing ones to rank by (up to
`MAX_PASSING`, spread evenly over the suite's order, so over its files). An even sample keeps
each line's share of passing tests an estimate of the whole suite's (`core/request/ochiai.py` scales
the sampled count back up), where tests picked for being near the failures would make the code
near them look run by more passing tests than it is.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from pytest_fwloop.core.records.nodeids import COMMAND_NODEID_PREFIX

#: Failing tests one spectrum run measures: beyond these the next ones add little Ochiai can use.
MAX_FAILING = 100
#: Passing tests one spectrum run measures: enough that a line most of them run shows it.
MAX_PASSING = 200


def spectrum_selection(
    failing: Sequence[str], passing: Sequence[str], measured: Collection[str]
) -> list[str]:
    """The node ids a spectrum run is to run, failing tests first; [] when every failing test
    was measured on this tree already (a focus run after the patch recorded it)."""
    if all(test in measured for test in failing):
        return []
    chosen = list(dict.fromkeys(failing))[:MAX_FAILING]
    return chosen + passing_sample(chosen, passing)


def passing_sample(failing: Collection[str], passing: Sequence[str]) -> list[str]:
    """The passing tests to measure beside `failing` (which a flaky rerun runs whole, however
    many): up to `MAX_PASSING`, evenly spread; a tester's command is no test to trace."""
    ruled_out = set(failing)
    others = [
        test
        for test in dict.fromkeys(passing)
        if test not in ruled_out and not test.startswith(COMMAND_NODEID_PREFIX)
    ]
    return evenly(others, MAX_PASSING)


def evenly(items: Sequence[str], count: int) -> list[str]:
    """`count` of `items` at even steps through them, in their order (all when fewer)."""
    if len(items) <= count:
        return list(items)
    if count <= 0:
        return []
    return [items[(i * len(items)) // count] for i in range(count)]
