"""The knowledge base (pytest_fwloop/knowledge/store.py, memory.py): a real SQLite file, real
concurrent writer processes, and the `fwloop kb` command."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from pytest_fwloop.cli.main import main
from pytest_fwloop.core.machine.fsm import IterationKind
from pytest_fwloop.core.records.agent_protocol import DeclinedBefore
from pytest_fwloop.core.records.redaction import Redactor
from pytest_fwloop.core.suite.results import IterationResults, TestRecord
from pytest_fwloop.knowledge.fixes import remember, similar_fixes
from pytest_fwloop.knowledge.store import KnowledgeBase, KnowledgeError, StoredFix
from pytest_fwloop.loop.state import Iteration


def fix(summary: str, *signatures: str, run_id: str = "run-1") -> StoredFix:
    return StoredFix(
        run_id=run_id,
        iteration=2,
        outcome="pass count 1 -> 2",
        signatures=list(signatures),
        nodeids=["tests/test_uart.py::test_crc8"],
        excerpts=["E   AssertionError: assert '0xFB' == '0xF4'"],
        analysis="the CRC starts from 0xFF",
        summary=summary,
        patch=f"diff --git a/src/crc8.c b/src/crc8.c\n+ {summary}\n",
        files=["src/crc8.c"],
    )


@pytest.fixture
def base(tmp_path: Path) -> KnowledgeBase:
    return KnowledgeBase(tmp_path / "kb" / "knowledge.sqlite")


def test_the_best_matching_fixes_come_first(base: KnowledgeBase) -> None:
    crc = base.store(fix("crc init", "call tests/test_uart.py::test_crc8:12: AssertionError"))
    base.store(fix("ring full", "call tests/test_buf.py::test_full:3: AssertionError"))
    found = base.search("test_crc8 AssertionError")
    assert [f.id for f in found][:1] == [crc]
    similar = base.similar(["call tests/test_uart.py::test_crc8:12: AssertionError: x"])
    assert similar[0].summary == "crc init"
    # A run is not shown its own fixes: they are in its history already.
    assert base.similar(["call tests/test_uart.py::test_crc8:12: AssertionError"], "run-1") == []


def test_a_query_with_fts_syntax_is_only_words(base: KnowledgeBase) -> None:
    base.store(fix("crc init", "crc8"))
    assert base.search('crc8" OR (NEAR* -') != []
    assert base.search("*") == []


def test_forget_removes_a_fix_from_the_index_too(base: KnowledgeBase) -> None:
    kept = base.store(fix("keep", "uart"))
    gone = base.store(fix("gone", "uart"))
    assert base.forget(gone)
    assert not base.forget(gone)
    assert [f.id for f in base.search("uart")] == [kept]


def test_a_file_that_is_not_a_knowledge_base_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "knowledge.sqlite"
    path.write_text("not sqlite " * 100)
    with pytest.raises(KnowledgeError, match="not a knowledge base this version reads"):
        KnowledgeBase(path).search("crc")
    assert similar_fixes(KnowledgeBase(path), ["crc"], "run-2", 10_000)[1].startswith(
        "knowledge base not used: "
    )


WRITER = """
import sys
from pathlib import Path
from pytest_fwloop.knowledge.store import KnowledgeBase, StoredFix
base = KnowledgeBase(Path(sys.argv[1]))
for n in range(int(sys.argv[3])):
    base.store(StoredFix(run_id=sys.argv[2], iteration=n, outcome="x",
                         signatures=[f"sig{sys.argv[2]}x{n}"],
                         nodeids=[], excerpts=[], analysis="", summary=f"writer {sys.argv[2]}",
                         patch="", files=[]))
"""


def test_parallel_runs_writing_one_file_lose_nothing(base: KnowledgeBase) -> None:
    writers = [
        subprocess.Popen([sys.executable, "-c", WRITER, str(base.path), f"w{k}", "40"])
        for k in range(4)
    ]
    assert [w.wait(timeout=120) for w in writers] == [0, 0, 0, 0]
    assert len(base.recent(1000)) == 160
    # Every row is in the full-text index too, found by its own word.
    assert all(len(base.search(f"sigw{k}x{n}")) == 1 for k in range(4) for n in range(40))


def test_a_fix_is_stored_redacted_with_the_failures_it_fixed(base: KnowledgeBase) -> None:
    before = IterationResults(
        exitstatus=1,
        tests=[
            TestRecord(nodeid="t.py::a", outcome="passed", phase="call"),
            TestRecord(nodeid="t.py::b", outcome="failed", phase="call", crash="t.py:4: E"),
        ],
    )
    after = IterationResults(
        exitstatus=0, tests=[t.model_copy(update={"outcome": "passed"}) for t in before.tests]
    )
    iteration = Iteration(
        2,
        IterationKind.PATCH,
        patch="diff --git a/fw.c b/fw.c\n+++ b/fw.c\n+key=hunter2-secret\n",
        results=after,
    )
    note = remember(
        base,
        "run-9",
        before,
        iteration,
        "hunter2-secret leaked",
        Redactor({"API_KEY": "hunter2-secret"}),
        "",
    )
    assert note == "fix stored in the knowledge base as #1"
    [found] = base.recent()
    assert found.signatures == ["call t.py::b:4: E"]
    assert "hunter2-secret" not in found.patch
    assert "[redacted:API_KEY]" in found.patch
    not_better = Iteration(3, IterationKind.PATCH, patch="x", results=before)
    assert remember(base, "run-9", before, not_better, "", Redactor({}), "") == ""


def test_fwloop_kb_lists_searches_and_forgets(
    base: KnowledgeBase, capsys: pytest.CaptureFixture[str]
) -> None:
    base.store(fix("crc init", "crc8"))
    where = ["--knowledge", str(base.path)]
    assert main(["kb", "list", *where]) == 0
    assert "crc init" in capsys.readouterr().out
    assert main(["kb", "search", "crc8", *where]) == 0
    assert "run-1#2" in capsys.readouterr().out
    assert main(["kb", "forget", "1", *where]) == 0
    assert main(["kb", "forget", "1", *where]) == 1
    assert capsys.readouterr().err == f"fwloop: no fix #1 in {base.path}\n"


def test_fwloop_kb_shows_the_verdicts_later_coders_are_told_and_forgets_one(
    base: KnowledgeBase, capsys: pytest.CaptureFixture[str]
) -> None:
    """A wrong "not a code defect" verdict would be sent to every later run's coder: the
    operator must be able to see it and take it out."""
    signature = "call tests/test_uart.py::test_baud:7: AssertionError"
    base.store_verdicts(
        [
            DeclinedBefore(
                nodeid="tests/test_uart.py::test_baud",
                signature=signature,
                status="declined",
                reason="the lab's UART adapter is unplugged",
                run_id="run-1",
                outcome="failure",
            )
        ]
    )
    where = ["--knowledge", str(base.path)]
    assert main(["kb", "verdicts", *where]) == 0
    out = capsys.readouterr().out
    assert "declined" in out
    assert "tests/test_uart.py::test_baud" in out
    assert "the lab's UART adapter is unplugged" in out
    [shown] = base.recent_verdicts()
    assert main(["kb", "forget", "--verdict", str(shown.id), *where]) == 0
    assert capsys.readouterr().out == f"fwloop: verdict #{shown.id} forgotten\n"
    assert base.verdicts_for([signature]) == []
    assert main(["kb", "forget", "--verdict", str(shown.id), *where]) == 1
    assert capsys.readouterr().err == f"fwloop: no verdict #{shown.id} in {base.path}\n"
    assert main(["kb", "verdicts", *where]) == 0
    assert capsys.readouterr().out == "no verdict\n"
