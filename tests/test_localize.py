"""Localization (DESIGN.md §16): symbols from tree-sitter, ranking by the failures' evidence,
packing within the budget, and the index that parses only what changed."""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_fwloop.agents.model_io import render_prompt
from pytest_fwloop.codemap.index import INDEX_VERSION, CodeIndex
from pytest_fwloop.codemap.parse import parse_source
from pytest_fwloop.core.gate.policy import PatchPolicy
from pytest_fwloop.core.records.agent_protocol import AgentRequest, SourceChunk
from pytest_fwloop.core.request.code_symbols import FileSymbols, Symbol
from pytest_fwloop.core.request.failure_evidence import FailureText, gather_evidence
from pytest_fwloop.core.request.ranking import Ranked, TreeMap, name_parts, rank
from pytest_fwloop.core.request.source_pack import (
    MAX_CHUNK_BYTES,
    failing_test_code,
    pack_sources,
    repo_map,
    wire_size,
)
from pytest_fwloop.core.suite.results import TestRecord
from pytest_fwloop.loop.request.localization import Localizer
from pytest_fwloop.workspace import DEFAULT_PROTECTED, Workspace

COMMANDS_C = """\
#include "crc8.h"
#include "uart.h"

static void cmd_version(char *args) { uart_printf_line("V1"); }

static void cmd_crc8(char *args)
{
    uint8_t bytes[8];
    size_t n = parse_hex(args, bytes);
    uart_printf_line("0x%02X", crc8_smbus(bytes, n));
}

static const struct command table[] = {
    {"version", cmd_version},
    {"crc8", cmd_crc8},
};
"""
CRC8_C = """\
#include "crc8.h"

#define CRC8_INIT 0xFFu

uint8_t crc8_smbus(const uint8_t *data, size_t len)
{
    uint8_t crc = CRC8_INIT;
    for (size_t i = 0; i < len; i++) {
        crc ^= data[i];
    }
    return crc;
}
"""
TEST_PY = """\
def test_crc8_zero(console):
    assert console.command("crc8 00") == "0x00"


def test_version(console):
    assert console.command("version") == "V1"
"""


def tree_of(files: dict[str, str]) -> TreeMap:
    tree = TreeMap()
    parsed = {p: parse_source(p, t.encode()) for p, t in files.items()}
    tree.update({p: s for p, s in parsed.items() if s is not None})
    return tree


def test_c_symbols_carry_lines_calls_and_the_names_beside_literals() -> None:
    parsed = parse_source("src/commands.c", COMMANDS_C.encode())
    assert parsed is not None
    by_name = {s.name: s for s in parsed.symbols}
    crc = by_name["cmd_crc8"]
    assert (crc.kind, crc.start_line, crc.end_line) == ("function", 6, 11)
    assert {"parse_hex", "crc8_smbus", "uart_printf_line"} <= crc.calls
    assert by_name["table"].kind == "variable"
    [entry] = [lit for lit in parsed.literals if lit.text == "crc8"]
    assert entry.line == 15
    assert "cmd_crc8" in entry.line_names


def test_cpp_and_python_symbols_and_a_file_with_syntax_errors() -> None:
    cpp = parse_source(
        "drv/uart.cpp",
        b"namespace drv {\nclass Uart {\n public:\n  int put(char c) { return write(&c, 1); }\n"
        b"};\nint Uart::flush() { return sync(); }\n}\n",
    )
    assert cpp is not None
    names = {(s.name, s.kind) for s in cpp.symbols}
    assert {("Uart", "type"), ("put", "function"), ("flush", "function")} <= names
    broken = parse_source("fw/calc.py", b"def add(a, b):\n    return a - b\n\ndef sub(a, b:\n")
    assert broken is not None
    assert "add" in {s.name for s in broken.symbols}
    plain = parse_source("link.ld", b"MEMORY\n{\n  FLASH (rx) : ORIGIN = 0x0\n}\n")
    assert plain is not None
    assert plain.language == ""
    assert "FLASH" in plain.symbols[0].names
    assert parse_source("logo.png", b"\x89PNG\0\0") is None
    assert parse_source("fw/blob.c", b"int x;\0\0\0") is None


def test_a_console_test_finds_the_command_handler_and_what_it_calls() -> None:
    """`crc8 00` in the failing test: the command table's "crc8" names cmd_crc8, which calls
    crc8_smbus, which uses CRC8_INIT; the test file itself is never a candidate."""
    files = {"src/commands.c": COMMANDS_C, "src/crc8.c": CRC8_C, "tests/test_console.py": TEST_PY}
    tree = tree_of(files)
    tests = failing_test_code(tree, ["tests/test_console.py::test_crc8_zero"], files, 4096)
    assert [t.symbol for t in tests] == ["test_crc8_zero"]
    evidence = gather_evidence(
        [FailureText("tests/test_console.py::test_crc8_zero", "AssertionError: '0xF3' == '0x00'")],
        [t.text for t in tests],
        "",
        "/root",
        tree.files,
        {},
    )
    ranked = rank(tree, evidence, ["src/commands.c", "src/crc8.c"])
    names = [tree.symbol((r.path, r.index)).name for r in ranked]
    assert names.index("cmd_crc8") < names.index("cmd_version")
    assert "crc8_smbus" in names[:4]
    assert "CRC8_INIT" in names
    assert all(r.path != "tests/test_console.py" for r in ranked)
    handler = ranked[names.index("cmd_crc8")]
    assert any('beside "crc8"' in reason for reason in handler.reasons)


def test_a_traceback_frame_and_a_build_diagnostic_name_their_functions() -> None:
    calc = "def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n"
    tree = tree_of({"fw/calc.py": calc, "fw/other.py": "def mul2(x):\n    return 2 * x\n"})
    failure = 'Traceback:\n  File "/root/fw/calc.py", line 2, in add\nAssertionError: 1 == 5'
    evidence = gather_evidence(
        [FailureText("t::x", failure)], [], "fw/other.py:2:5: error: bad", "/root", tree.files, {}
    )
    ranked = rank(tree, evidence, ["fw/calc.py", "fw/other.py"])
    top = {tree.symbol((r.path, r.index)).name: r for r in ranked}
    assert ranked[0].path == "fw/calc.py" or ranked[0].path == "fw/other.py"
    assert top["add"].line == 2
    assert top["mul2"].line == 2
    assert top["add"].score > top.get("mul", top["add"]).score / 2


def test_the_map_follows_changes_file_by_file() -> None:
    tree = tree_of({"a.c": "int f(void) { return g(); }\n", "b.c": "int g(void) { return 1; }\n"})
    changed = parse_source("a.c", b"int h(void) { return 2; }\n")
    assert changed is not None
    assert tree.update({"a.c": changed}) == 2  # a.c re-read, b.c forgotten
    assert tree.definitions["f"] == set()
    assert tree.definitions["g"] == set()
    assert tree.callers["g"] == set()
    assert tree.definitions["h"] == {("a.c", 0)}


def test_sources_are_whole_small_files_or_windows_of_long_functions_within_the_budget() -> None:
    long_body = "".join(f"    x += {i};\n" for i in range(2000))
    big = "int filler(void) { return 0; }\n" * 200 + f"int big(int x)\n{{\n{long_body}}}\n"
    files = {"small.c": CRC8_C, "big.c": big}
    tree = tree_of(files)
    start = next(s.start_line for s in tree.files["big.c"].symbols if s.name == "big")
    evidence = gather_evidence(
        [FailureText("t", f"big.c:{start + 1500}: assert\ncrc8_smbus wrong")],
        [],
        "",
        "",
        tree.files,
        {},
    )
    ranked = rank(tree, evidence, list(files))
    chunks = pack_sources(tree, ranked, files, 64 * 1024)
    by_path = {c.path: c for c in chunks}
    assert by_path["small.c"].start_line == 1
    assert by_path["small.c"].text == CRC8_C
    window = by_path["big.c"]
    assert window.start_line <= start + 1500 <= window.end_line
    assert len(window.text.encode()) <= MAX_CHUNK_BYTES
    lines = big.splitlines()
    assert window.text.splitlines() == lines[window.start_line - 1 : window.end_line]


@settings(max_examples=60, deadline=None)
@given(budget=st.integers(min_value=0, max_value=20_000), map_budget=st.integers(0, 3000))
def test_what_is_packed_never_exceeds_its_budget(budget: int, map_budget: int) -> None:
    files = {f"src/m{i}.c": f"int f{i}(int a) {{ return g{i}(a) + {i}; }}\n" * 40 for i in range(8)}
    tree = tree_of(files)
    evidence = gather_evidence([FailureText("t", "f1 f2 f3 g4")], [], "", "", tree.files, {})
    ranked = rank(tree, evidence, list(files))
    chunks = pack_sources(tree, ranked, files, budget)
    assert sum(wire_size(c) for c in chunks) <= budget
    entries, more = repo_map(tree, ranked, list(files), chunks, map_budget)
    assert sum(wire_size(e) for e in entries) <= map_budget
    assert len(entries) + more == len([p for p in files if p not in {c.path for c in chunks}])


def test_the_index_parses_only_what_it_has_not_seen(tmp_path: Path) -> None:
    blobs = {"b1": CRC8_C.encode(), "b2": COMMANDS_C.encode(), "b3": b"int changed;\n"}
    asked: list[list[str]] = []

    def read(ids: object) -> dict[str, bytes]:
        wanted = list(ids)  # type: ignore[call-overload]
        asked.append(wanted)
        return {i: blobs[i] for i in wanted}

    path = tmp_path / ".fwloop" / "index" / "code-index.sqlite"
    first = CodeIndex(path).symbols({"crc8.c": "b1", "commands.c": "b2", "README": "b9"}, read)
    assert set(first) == {"crc8.c", "commands.c"}
    assert asked == [["b1", "b2"]]
    # A new run: the store answers; only the changed file is read.
    again = CodeIndex(path).symbols({"crc8.c": "b1", "commands.c": "b3"}, read)
    assert asked[1:] == [["b3"]]
    assert again["crc8.c"] == first["crc8.c"]
    path.write_bytes(b"not a database" * 100)
    rebuilt = CodeIndex(path)
    assert set(rebuilt.symbols({"crc8.c": "b1"}, read)) == {"crc8.c"}
    assert "unreadable" in rebuilt.notice
    assert "rebuilt" in rebuilt.notice


def test_rows_of_another_index_version_are_deleted_not_kept(tmp_path: Path) -> None:
    path = tmp_path / "code-index.sqlite"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE files (key TEXT PRIMARY KEY, version INTEGER, data TEXT)")
    db.execute("INSERT INTO files VALUES ('old:c', 3, '{}')")
    db.commit()
    db.close()
    found = CodeIndex(path).symbols({"crc8.c": "b1"}, lambda ids: {"b1": CRC8_C.encode()})
    assert set(found) == {"crc8.c"}
    db = sqlite3.connect(path)
    assert db.execute("SELECT version, COUNT(*) FROM files GROUP BY version").fetchall() == [
        (INDEX_VERSION, 1)
    ]
    db.close()


def test_a_big_tree_is_indexed_first_where_the_build_and_failures_point_then_by_chunks(
    tmp_path: Path,
) -> None:
    files = {f"drivers/d{n}.c": f"b{n}" for n in range(600)}
    blobs = {f"b{n}": f"int d{n}(int x) {{ return x + {n}; }}\n".encode() for n in range(600)}
    asked: list[list[str]] = []

    def read(ids: object) -> dict[str, bytes]:
        wanted = list(ids)  # type: ignore[call-overload]
        asked.append(wanted)
        return {i: blobs[i] for i in wanted}

    index = CodeIndex(tmp_path / "code-index.sqlite")
    first = {"drivers/d7.c", "drivers/d512.c"}
    # No time left beyond what must be read first: only that, the rest counted as unread.
    known = index.symbols(files, read, first, seconds=0.0)
    assert set(known) == first
    assert index.unread == 598
    # Time enough: the rest, never more than one chunk's contents held at once.
    known = index.symbols(files, read, first, seconds=60.0)
    assert set(known) == set(files)
    assert index.unread == 0
    assert max(len(batch) for batch in asked) <= 256
    assert sorted(i for batch in asked for i in batch) == sorted(blobs)  # each read once


def test_a_cli_agent_gets_the_locations_without_the_text() -> None:
    chunk = SourceChunk(path="src/crc8.c", start_line=1, end_line=12, symbol="f", text=CRC8_C)
    request = AgentRequest(
        role="coder", iteration=2, goal="g", workspace="/w", sources=[chunk], test_sources=[chunk]
    )
    prompt = render_prompt(request)
    sent = json.loads(prompt.split("The request:\n", 1)[1])
    assert sent["sources"][0]["path"] == "src/crc8.c"
    assert sent["sources"][0]["text"] == ""
    assert "CRC8_INIT" not in prompt
    assert request.sources[0].text == CRC8_C  # the request itself, and its record, keep it


def test_failing_test_code_strips_parameters_and_is_bounded() -> None:
    files = {"tests/test_console.py": TEST_PY}
    tree = tree_of(files)
    ids = ["tests/test_console.py::test_version[a]", "tests/test_console.py::test_version[b]"]
    [chunk] = failing_test_code(tree, ids, files, 4096)
    assert chunk.symbol == "test_version"
    assert "(read-only)" in chunk.reason
    assert failing_test_code(tree, ids, files, 10) == []
    assert isinstance(tree.files["tests/test_console.py"], FileSymbols)


def test_the_reviewer_gets_the_whole_functions_a_patch_changes_and_no_neighbours() -> None:
    from pytest_fwloop.codemap.changed_functions import changed_functions

    fixed = CRC8_C.replace("0xFFu", "0x00u").replace(
        "crc ^= data[i];", "crc ^= data[i];\n        crc = step(crc);"
    )
    functions = changed_functions("src/crc8.c", CRC8_C, fixed)
    by_symbol = {f.symbol: f for f in functions}
    assert set(by_symbol) == {"CRC8_INIT", "crc8_smbus"}
    body = by_symbol["crc8_smbus"]
    assert body.before.startswith("uint8_t crc8_smbus(")
    assert body.before.endswith("}\n")
    assert "crc = step(crc);" in body.after
    assert "step" not in body.before
    assert (body.before_line, body.after_line) == (5, 5)


IFDEF_C = """\
int lfs_file_opencfg_(int flags)
{
#ifdef LFS_READONLY
    if (flags) {
#else
    if (flags & 3) {
#endif
        return 1;
    }
    return 0;
}

int lfs_file_seek_(int pos, int whence)
{
    if (whence == 1) {
        return pos;
    }
    return -1;
}
"""


def test_a_c_file_whose_ifdef_branches_each_open_a_block_still_has_its_functions() -> None:
    """littlefs's lfs.c: `#ifdef … if (x) { #else … if (y) { #endif` nests only per branch;
    read as one text, every function after it was lost in one ERROR node."""
    parsed = parse_source("lfs.c", IFDEF_C.encode())
    assert parsed is not None
    spans = {s.name: (s.start_line, s.end_line) for s in parsed.symbols}
    assert spans["lfs_file_seek_"] == (13, 19)  # the file's own line numbers
    assert "lfs_file_opencfg_" in spans


SHELL_TABLE_C = """\
#ifdef CONFIG_FAST
static int speed(void) { return 2; }
#else
static int speed(void) { return 1; }
#endif

static int cmd_version(void) { return speed(); }

static int cmd_cycles(void)
{
\treturn 42;
}

static int cmd_uptime(void)
{
\treturn 7;
}

SHELL_STATIC_SUBCMD_SET_CREATE(sub_kernel,
\tSHELL_CMD(cycles, NULL, "Kernel cycles.", cmd_cycles),
#if defined(CONFIG_REBOOT)
\tSHELL_CMD(reboot, NULL, "Reboot.", NULL),
#endif
\tSHELL_CMD(version, NULL, "Kernel version.", cmd_version),
\tSHELL_SUBCMD_SET_END
);

SHELL_CMD_REGISTER(kernel, &sub_kernel, "Kernel commands", NULL);
BUILD_ASSERT(sizeof(int) == 4);
"""


def test_a_table_a_macro_defines_is_a_symbol_even_with_a_conditional_entry() -> None:
    """Zephyr's kernel_service.c: a command's entry is a line of a macro's table, held by no
    function; an `#if` entry splits the table, a few lines of the file unreadable as written."""
    parsed = parse_source("kernel_service.c", SHELL_TABLE_C.encode())
    assert parsed is not None
    spans = [(s.name, s.kind, s.start_line, s.end_line) for s in parsed.symbols]
    assert ("sub_kernel", "variable", 19, 26) in spans  # the whole table, line 24 in it
    assert ("kernel", "variable", 28, 28) in spans
    # Both branches' definitions stay: the file as written is read first.
    assert [s[2] for s in spans if s[0] == "speed"] == [2, 4]
    assert not [s for s in spans if s[0] in ("BUILD_ASSERT", "sizeof")]
    [held] = parsed.innermost([24]).values()
    assert parsed.symbols[held].name == "sub_kernel"


def test_a_generated_file_is_left_out() -> None:
    assert parse_source("src/lfs.c", b"/* Generated by Cython 3.0.11 */\nint f(void);\n") is None
    assert parse_source("gen/regs.h", b"// DO NOT EDIT: made by regs.py\n#define R 1\n") is None


def test_name_parts_split_identifiers_and_stems_into_words() -> None:
    assert name_parts("lfs_file_seek_") == {"lfs", "file", "seek"}
    assert name_parts("LfsFileSeek") == {"lfs", "file", "seek"}
    assert name_parts("test_dump_j1939") == {"dump", "j1939"}


def test_a_failing_tests_name_points_at_the_symbol_and_the_file_named_like_it() -> None:
    files = {
        "lfs.c": IFDEF_C,
        "j1939.py": "def is_pdu_format_1(pgn):\n    return pgn < 240\n",
        "dbc.py": "def load(x):\n    return x\n",
    }
    tree = tree_of(files)
    failures = [
        FailureText("t.py::test_file_seek", "assert 3 == 4"),
        FailureText("t.py::test_dump_j1939", "assert 'a' == 'b'"),
    ]
    evidence = gather_evidence(failures, [], "", "", tree.files, {})
    ranked = rank(tree, evidence, list(files))
    names = [tree.symbol((r.path, r.index)).name for r in ranked]
    assert names[:2] == ["lfs_file_seek_", "is_pdu_format_1"] or names[:2] == [
        "is_pdu_format_1",
        "lfs_file_seek_",
    ]
    assert "load" not in names


def test_a_traceback_through_a_wrapper_names_the_c_function_called_on_its_line() -> None:
    """A Python traceback ends in lfs.pyx, on the line that calls the C library: the C function
    named there ranks, though no frame is in C."""
    pyx = "def mount(fs):\n    rc = lfs_mount(fs.ptr, fs.cfg)\n    return rc\n"
    c = "int lfs_mount(void *lfs, void *cfg)\n{\n    return lfs_mount_(lfs, cfg);\n}\n"
    files = {"src/lfs.pyx": pyx, "lfs.c": c + "int lfs_mount_(void *l, void *c) { return 0; }\n"}
    tree = tree_of(files)
    failure = FailureText("t::test_x", "src/lfs.pyx:2: in lfs.mount\nLittleFSError: -22")
    evidence = gather_evidence([failure], [], "", "", tree.files, {}, {"src/lfs.pyx": pyx})
    ranked = rank(tree, evidence, ["lfs.c"])
    names = [tree.symbol((r.path, r.index)).name for r in ranked]
    assert names[0] == "lfs_mount"
    assert "lfs_mount_" in names
    assert any("named on the failing line src/lfs.pyx:2" in r for r in ranked[0].reasons)


def test_a_frame_that_a_hundred_failures_share_counts_once() -> None:
    files = {
        "wrap.py": "def call(x):\n    return lib(x)\n",
        "other.py": "def lib(x):\n    return x\n",
    }
    tree = tree_of(files)
    one = gather_evidence(
        [FailureText("t::a", 'File "wrap.py", line 2')], [], "", "", tree.files, {}
    )
    many = gather_evidence(
        [FailureText(f"t::a{i}", 'File "wrap.py", line 2') for i in range(100)],
        [],
        "",
        "",
        tree.files,
        {},
    )
    assert len(one.frames) == len(many.frames) == 1


def test_a_whole_function_is_sent_with_the_lines_around_it() -> None:
    """`git apply` anchors a hunk with no context after its change at the end of the file: a
    two-line function sent bare could not be patched at its last line."""
    long_file = "".join(f"def filler_{i}(x):\n    return x + {i}\n\n\n" for i in range(120))
    text = long_file + "def is_pdu_format_1(pdu_format):\n    return pdu_format < 240\n\n\n# end\n"
    tree = tree_of({"j1939.py": text})
    [index] = [
        i for i, s in enumerate(tree.files["j1939.py"].symbols) if s.name == "is_pdu_format_1"
    ]
    ranked = [Ranked("j1939.py", index, 1.0, ["named"])]
    [chunk] = pack_sources(tree, ranked, {"j1939.py": text}, 4000)
    symbol = tree.files["j1939.py"].symbols[index]
    assert (chunk.start_line, chunk.end_line) == (symbol.start_line - 2, symbol.end_line + 2)
    assert chunk.text.splitlines()[-2:] == ["", ""]


def test_asked_again_the_coder_is_sent_the_code_ranked_next(tmp_path: Path) -> None:
    root = tmp_path / "tree"
    root.mkdir()
    notes = "".join(f"    # step {n}: scale the reading by the channel's gain\n" for n in range(12))
    for i in range(12):
        (root / f"mod_{i}.py").write_text(f"def handler_{i}(x):\n{notes}    return x * {i}\n")
    failure = TestRecord(
        nodeid="tests/test_all.py::test_all",
        outcome="failed",
        phase="call",
        longrepr=" ".join(f"handler_{i}" for i in range(12)),
    )
    workspace = Workspace(root)
    workspace.take_baseline("again")
    policy = PatchPolicy(protected=DEFAULT_PROTECTED)
    localizer = Localizer(workspace, 4096, lambda text: text, lambda: policy)
    try:
        request = AgentRequest(role="coder", iteration=2, goal="g", workspace=str(root))
        first, _ = localizer.coder_request(request, [failure], [])
        second, _ = localizer.coder_request(request, [failure], [], again=True)
        third, _ = localizer.coder_request(request, [failure], [], again=True)
        next_round = request.model_copy(update={"iteration": 3})
        fourth, _ = localizer.coder_request(next_round, [failure], [], again=True)
    finally:
        workspace.close(keep_tree=True)

    def paths(done: AgentRequest) -> set[str]:
        return {chunk.path for chunk in done.sources}

    assert paths(first)
    assert paths(second)
    assert paths(first).isdisjoint(paths(second))
    assert paths(third).isdisjoint(paths(first) | paths(second))
    # A new iteration starts from the top, whatever came before.
    assert paths(fourth) == paths(first)


def test_a_hunk_over_two_methods_names_both_methods_not_their_class() -> None:
    def symbol(name: str, kind: str, start: int, end: int) -> Symbol:
        return Symbol(name=name, kind=kind, start_line=start, end_line=end, signature=name)

    file = FileSymbols(
        language="python",
        line_count=20,
        symbols=(
            symbol("Board", "class", 1, 20),
            symbol("Board.reset", "method", 2, 8),
            symbol("LIMIT", "variable", 4, 4),
            symbol("Board.read", "method", 10, 18),
        ),
    )
    assert [s.name for s in file.innermost_over(4, 12)] == ["Board.reset", "Board.read"]
    assert [s.name for s in file.innermost_over(9, 9)] == ["Board"]
    assert file.innermost_over(21, 25) == []


def _tree_of(count: int) -> tuple[dict[str, str], dict[str, bytes]]:
    files = {f"drivers/d{n}.c": f"b{n}" for n in range(count)}
    blobs = {f"b{n}": f"int d{n}(int x) {{ return x + {n}; }}\n".encode() for n in range(count)}
    return files, blobs


def test_a_stopped_reading_ends_within_a_file_and_leaves_the_rest_unread(tmp_path: Path) -> None:
    files, blobs = _tree_of(600)
    stop = threading.Event()

    def read(ids: object) -> dict[str, bytes]:
        stop.set()  # asked to stop as soon as the first chunk is read
        return {i: blobs[i] for i in ids}  # type: ignore[attr-defined]

    index = CodeIndex(tmp_path / "code-index.sqlite")
    known = index.symbols(files, read, seconds=60.0, stop=stop)
    assert known == {}
    assert index.unread == 600


def test_a_blob_the_store_no_longer_holds_is_read_later_not_remembered_as_empty(
    tmp_path: Path,
) -> None:
    """A snapshot the store dropped while the background read it: its files stay unread."""
    files, blobs = _tree_of(3)
    index = CodeIndex(tmp_path / "code-index.sqlite")
    gone = {"b1"}
    known = index.symbols(files, lambda ids: {i: blobs[i] for i in ids if i not in gone}, ())
    assert set(known) == {"drivers/d0.c", "drivers/d2.c"}
    assert index.unread == 1
    again = CodeIndex(tmp_path / "code-index.sqlite")  # the next run, the same store
    known = again.symbols(files, lambda ids: {i: blobs[i] for i in ids}, ())
    assert set(known) == set(files)
    assert "d1" in {s.name for s in known["drivers/d1.c"].symbols}


def test_each_chunk_is_handed_on_as_it_is_known_and_a_stop_keeps_what_was(
    tmp_path: Path,
) -> None:
    """The background's reading: what it read before it was stopped is learned already."""
    files, blobs = _tree_of(600)
    stop = threading.Event()
    chunks: list[dict[str, FileSymbols]] = []

    def learn(symbols: dict[str, FileSymbols]) -> None:
        chunks.append(symbols)
        stop.set()  # the next request arrives as the first chunk is learned

    index = CodeIndex(tmp_path / "code-index.sqlite")
    read = lambda ids: {i: blobs[i] for i in ids}  # noqa: E731
    known = index.symbols(files, read, seconds=60.0, stop=stop, learn=learn)
    assert len(chunks) == 1
    assert set(chunks[0]) == set(known) == set(list(files)[:256])
    assert index.unread == 600 - 256


def test_a_store_that_git_cannot_read_leaves_the_background_reading_quiet(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The shadow store refusing a read (a WorkspaceError, as localization's own errors are)
    leaves the files for later, as any failure of the cache does: nothing escapes the thread."""
    from pytest_fwloop.loop.request.background_index import BackgroundReading
    from pytest_fwloop.workspace import WorkspaceError

    escaped: list[BaseException | None] = []
    monkeypatch.setattr(threading, "excepthook", lambda args: escaped.append(args.exc_value))

    def refused(ids: object) -> dict[str, bytes]:
        raise WorkspaceError("fwloop: git cat-file failed in the shadow repository")

    files, blobs = _tree_of(3)
    index = CodeIndex(tmp_path / "code-index.sqlite")
    background = BackgroundReading()
    background.start(index, files, refused, lambda symbols: None)
    for _ in range(200):  # let it reach the read and end on its own
        if not background.running:
            break
        time.sleep(0.01)
    background.stop()
    assert escaped == []
    # Nothing was remembered of the refused read: a store that reads again gives all three.
    assert len(index.symbols(files, lambda ids: {i: blobs[i] for i in ids})) == 3
