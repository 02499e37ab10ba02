"""The ranking on disk (DESIGN.md §18): every candidate with its score by signal, its rank and
its fate, and `fwloop show --why`'s answer from it (pure: plain values, no run)."""

from __future__ import annotations

import pytest

from pytest_fwloop.core.request.failure_evidence import FailureText, gather_evidence
from pytest_fwloop.core.request.ranking import Ranking, TreeMap, ranking
from pytest_fwloop.core.request.ranking_audit import MAX_AUDITED, audit, why
from test_localize import tree_of

CALC = "def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n"
TEST = "from fw.calc import add\n\n\ndef test_add():\n    assert add(1, 4) == 5\n"
FAILURE = (
    'Traceback:\n  File "/root/tests/test_calc.py", line 5, in test_add\n'
    '  File "/root/fw/calc.py", line 2, in add\nAssertionError: -3 == 5'
)


def ranked_calc() -> tuple[TreeMap, Ranking]:
    tree = tree_of({"fw/calc.py": CALC, "tests/test_calc.py": TEST})
    evidence = gather_evidence(
        [FailureText("tests/test_calc.py::test_add", FAILURE)], [], "", "/root", tree.files, {}
    )
    return tree, ranking(tree, evidence, ["fw/calc.py"])


def test_each_candidate_carries_its_signals_rank_and_fate() -> None:
    tree, ranks = ranked_calc()
    add = next(r for r in ranks.ranked if tree.symbol((r.path, r.index)).name == "add")
    record = audit(
        tree,
        ranks,
        iteration=2,
        sources={(add.path, add.index)},
        mapped=set(),
        shown_before=set(),
        withheld_because=lambda path: "protected",
    )
    rows = {(c.path, c.symbol): c for c in record.candidates}
    sent = rows[("fw/calc.py", "add")]
    assert (sent.rank, sent.sent, sent.why_not) == (1, "source", None)
    assert sent.signals["frame"] == 10.0
    assert sent.factor == 1.0  # no spectrum recorded: nothing damped
    assert sent.score == pytest.approx(sum(sent.signals.values()) * sent.factor, abs=1e-3)
    test = rows[("tests/test_calc.py", "test_add")]
    assert (test.rank, test.sent, test.why_not) == (None, "no", "protected")
    assert record.ranked == len(ranks.ranked)
    assert record.withheld == len(ranks.withheld) >= 1
    assert record.left_out == 0
    unsent = [c for c in record.candidates if c.rank is not None and c.sent == "no"]
    assert all(c.why_not == "budget" for c in unsent)


def test_why_answers_for_sent_unsent_and_unranked_symbols() -> None:
    tree, ranks = ranked_calc()
    add = next(r for r in ranks.ranked if tree.symbol((r.path, r.index)).name == "add")
    record = audit(
        tree,
        ranks,
        iteration=2,
        sources=set(),
        mapped={(add.path, add.index)},
        shown_before=set(),
        withheld_because=lambda path: "protected",
    )
    [line] = why([("02/coder-1.ranking.json", record)], "fw/calc.py:add")
    assert line.startswith("02/coder-1.ranking.json: fw/calc.py:add (lines 1-2) rank 1 of ")
    assert "frame 10" in line
    assert "sent as a signature only (budget)" in line
    [line] = why([("02/coder-1.ranking.json", record)], "tests/test_calc.py:test_add")
    assert "withheld" in line
    assert "not sent (protected)" in line
    [line] = why([("r", record)], "fw/absent.py")
    assert line == "r: fw/absent.py was not ranked: no evidence pointed at it"


def test_the_record_is_bounded_and_counts_what_it_leaves_out() -> None:
    tree, ranks = ranked_calc()
    many = Ranking(ranks.ranked * (MAX_AUDITED // len(ranks.ranked) + 1), ranks.withheld)
    record = audit(
        tree,
        many,
        iteration=3,
        sources=set(),
        mapped=set(),
        shown_before=set(),
        withheld_because=lambda path: "hidden",
    )
    assert len(record.candidates) == MAX_AUDITED
    assert record.left_out == len(many.ranked) + len(many.withheld) - MAX_AUDITED
    [line, *_] = why([("r", record)], "fw/absent.py")
    assert line.endswith(f"(or ranked below the {MAX_AUDITED} listed)")
