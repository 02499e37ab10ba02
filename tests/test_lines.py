"""One count of lines everywhere (core/change/lines.py): only `\n` ends a line, as git, the
compiler and tree-sitter count them, so a form feed (`^L`) or a lone `\r` shifts no number the
loop sends or reads."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from pytest_fwloop.core.change.lines import split_lines, text_lines
from pytest_fwloop.core.request.failure_evidence import FailureText, gather_evidence
from pytest_fwloop.core.request.ranking import rank
from pytest_fwloop.core.request.read_tools import run_tool
from pytest_fwloop.core.request.source_pack import pack_sources
from pytest_fwloop.workspace.confined_read import ToolReader
from test_localize import tree_of

#: An old-style C file: a form feed between sections, a stray carriage return in a comment.
PAGED_C = (
    "/* section one */\n"
    "\f\n"
    "int first(int a) { return a + 1; }\n"
    "/* a comment with a lone \r inside */\n"
    "\f\n"
    "int crc8_smbus(int crc)\n"
    "{\n"
    "    return crc ^ 0x07;\n"
    "}\n"
)


@given(st.text(alphabet="ab\n\r\f\v\x1c\u2028", max_size=40))
def test_lines_are_what_git_counts(text: str) -> None:
    assert "".join(split_lines(text)) == text
    assert text_lines(text) == [line.removesuffix("\n") for line in split_lines(text)]
    assert len(text_lines(text)) == text.count("\n") + (0 if text.endswith("\n") or not text else 1)


def test_a_chunk_after_a_form_feed_is_its_lines_exactly() -> None:
    files = {"src/paged.c": PAGED_C + "\n" * 4000 + "int pad(void) { return 0; }\n"}
    tree = tree_of(files)
    symbols = {s.name: s for s in tree.files["src/paged.c"].symbols}
    assert symbols["crc8_smbus"].start_line == 6
    evidence = gather_evidence(
        [FailureText("t", "src/paged.c:8: error: crc8_smbus")], [], "", "", tree.files, {}
    )
    [chunk, *_] = pack_sources(tree, rank(tree, evidence, list(files)), files, 64 * 1024)
    assert chunk.symbol == "crc8_smbus"
    lines = files["src/paged.c"].split("\n")
    assert chunk.text == "".join(
        f"{line}\n" for line in lines[chunk.start_line - 1 : chunk.end_line]
    )
    assert "return crc ^ 0x07;" in chunk.text


def test_a_whole_small_file_ends_on_its_last_line() -> None:
    files = {"src/paged.c": PAGED_C}
    tree = tree_of(files)
    assert tree.files["src/paged.c"].line_count == 9
    evidence = gather_evidence([FailureText("t", "crc8_smbus")], [], "", "", tree.files, {})
    [chunk] = pack_sources(tree, rank(tree, evidence, list(files)), files, 64 * 1024)
    assert (chunk.start_line, chunk.end_line, chunk.text) == (1, 9, PAGED_C)


def test_read_file_numbers_lines_as_the_compiler_does(tmp_path: Path) -> None:
    (tmp_path / "paged.c").write_text(PAGED_C, newline="")
    read = run_tool(
        ToolReader(tmp_path), "read_file", json.dumps({"path": "paged.c", "start_line": 6}), 4096
    )
    assert "6: int crc8_smbus(int crc)" in read.text
    assert "8:     return crc ^ 0x07;" in read.text
    assert "of 9:" in read.text
