"""The read-only tools an `openai:` coder may call (DESIGN.md §16): nothing from outside the
tree, from version control, the loop's records or a secret file; every output bounded."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from pytest_fwloop.core.request.read_tools import (
    MAX_MATCHES,
    MAX_READ_BYTES,
    MAX_READ_LINES,
    run_tool,
    tool_specs,
)
from pytest_fwloop.workspace.confined_read import ToolReader

OUTSIDE = "the victim's secret, outside the tree"


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A tree with sources, and every hostile neighbour the corpus names."""
    root = tmp_path / "fw"
    (root / "src").mkdir(parents=True)
    (root / "src" / "crc8.c").write_text("".join(f"int line{n};\n" for n in range(1, 1001)))
    (root / "src" / "main.c").write_text("int main(void) { return crc8_smbus(0, 0); }\n")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "victim.txt").write_text(OUTSIDE)
    (root / "src" / "leak.c").symlink_to(tmp_path / "outside" / "victim.txt")
    (root / "linked").symlink_to(tmp_path / "outside")
    (root / ".git").mkdir()
    (root / ".git" / "config").write_text(f"[core]\n# {OUTSIDE}\n")
    (root / ".fwloop").mkdir()
    (root / ".fwloop" / "state.json").write_text(OUTSIDE)
    (root / ".env").write_text(f"TOKEN={OUTSIDE}\n")
    (root / "src" / "id_rsa").write_text(OUTSIDE)
    (root / "blob.bin").write_bytes(b"\0\1\2" + OUTSIDE.encode())
    return root


def call(root: Path, name: str, room: int = 1 << 20, **arguments: Any) -> str:
    result = run_tool(ToolReader(root), name, json.dumps(arguments), room)
    return result.text


@pytest.mark.parametrize(
    ("name", "arguments"),
    [
        ("read_file", {"path": "../outside/victim.txt"}),
        ("read_file", {"path": "src/../../outside/victim.txt"}),
        ("read_file", {"path": "/proc/self/environ"}),
        ("read_file", {"path": str(Path("/etc/passwd"))}),
        ("read_file", {"path": "src/leak.c"}),
        ("read_file", {"path": "linked/victim.txt"}),
        ("list_dir", {"path": "linked"}),
        ("read_file", {"path": ".git/config"}),
        ("list_dir", {"path": ".git"}),
        ("read_file", {"path": ".fwloop/state.json"}),
        ("read_file", {"path": ".env"}),
        ("read_file", {"path": "src/id_rsa"}),
        ("read_file", {"path": "blob.bin"}),
        ("read_file", {"path": "src\\..\\..\\outside\\victim.txt"}),
        ("read_file", {"path": "src/crc8.c\0"}),
        ("search", {"text": "victim", "path": "../outside"}),
    ],
)
def test_nothing_outside_the_tree_or_secret_is_ever_returned(
    tree: Path, name: str, arguments: dict[str, Any]
) -> None:
    text = call(tree, name, **arguments)
    assert text.startswith("error: ")
    assert OUTSIDE not in text


def test_search_and_listing_skip_links_secrets_and_hidden_folders(tree: Path) -> None:
    found = call(tree, "search", text="secret")
    assert OUTSIDE not in found
    assert found == "no line holds 'secret'"
    listing = call(tree, "list_dir").splitlines()
    assert listing == ["blob.bin", "src/"]
    assert call(tree, "list_dir", path="src").splitlines() == ["crc8.c", "main.c"]


def test_a_read_is_numbered_and_bounded_whatever_range_is_asked(tree: Path) -> None:
    text = call(tree, "read_file", path="src/crc8.c", start_line=10, end_line=10_000_000)
    lines = text.splitlines()
    assert lines[0] == f"src/crc8.c lines 10-{10 + MAX_READ_LINES - 1} of 1000:"
    assert lines[1] == "10: int line10;"
    assert lines[-1].startswith("(")
    assert "ask from start_line" in lines[-1]
    assert len(text.encode()) <= MAX_READ_BYTES + 200
    assert call(tree, "read_file", path="src/crc8.c", start_line=5000).startswith("error: ")
    assert call(tree, "read_file", path="src/crc8.c", room=100).endswith("(cut at 100 bytes)")


def test_search_is_literal_and_capped(tree: Path) -> None:
    text = call(tree, "search", text="int line")
    assert len(text.splitlines()) == MAX_MATCHES + 1
    assert text.splitlines()[0] == "src/crc8.c:1: int line1;"
    # A pattern built to backtrack forever is just text that appears nowhere.
    assert call(tree, "search", text="(a+)+$" * 30).startswith("no line holds")
    assert call(tree, "search", text="x" * 5000).startswith("error: ")
    assert call(tree, "search", text="crc8_smbus") == (
        "src/main.c:1: int main(void) { return crc8_smbus(0, 0); }"
    )


@pytest.mark.parametrize(
    ("name", "arguments", "says"),
    [
        ("nonexistent_tool", "{}", "the tools are read_file"),
        ("read_file", "not json", "not JSON"),
        ("read_file", '{"path": "src/crc8.c", "extra": 1}', "extra: Extra inputs"),
        ("read_file", '{"path": 3}', "path: Input should be a valid string"),
        ("read_file", '{"path": "src/crc8.c", "start_line": -4}', "start_line: Input should be"),
        (
            "read_file",
            '{"path": "a.c", "start_line": 0, "end_line": 13}',
            "greater than or equal to 1",
        ),
    ],
)
def test_a_bad_call_is_refused_with_a_reason_the_model_can_act_on(
    tree: Path, name: str, arguments: str, says: str
) -> None:
    result = run_tool(ToolReader(tree), name, arguments, 4096)
    assert result.refused
    assert result.text.startswith("error: ")
    assert says in result.text
    assert "_ReadFile" not in result.text  # our type's name tells a model nothing
    assert len(result.text) < 400


def test_the_tool_specs_are_what_the_chat_api_takes() -> None:
    specs = tool_specs()
    assert [spec["function"]["name"] for spec in specs] == ["read_file", "search", "list_dir"]
    for spec in specs:
        assert spec["type"] == "function"
        assert spec["function"]["parameters"]["type"] == "object"
        assert spec["function"]["parameters"]["additionalProperties"] is False


def test_the_reader_refuses_a_link_swapped_in_after_the_check(tree: Path) -> None:
    reader = ToolReader(tree)
    target = tree / "src" / "main.c"
    target.unlink()
    os.symlink(tree.parent / "outside" / "victim.txt", target)
    assert reader.text("src/main.c") is None


def test_a_dotdot_that_stays_inside_reads_the_file_it_names(tree: Path) -> None:
    """docs/providers.md: `src/../fw/a.c` stays inside and is read as `fw/a.c`."""
    assert call(tree, "read_file", path="linked/../src/main.c").startswith("src/main.c lines 1-1")
    assert "crc8_smbus" in call(tree, "read_file", path="src/../src/main.c")


def test_every_link_reads_as_missing_even_one_inside_the_tree(tree: Path) -> None:
    (tree / "src" / "alias.c").symlink_to(tree / "src" / "main.c")
    (tree / "again").symlink_to(tree / "src")
    assert call(tree, "read_file", path="src/alias.c").startswith("error: ")
    assert call(tree, "list_dir", path="again").startswith("error: ")
    assert "alias.c" not in call(tree, "list_dir", path="src")
    assert "again/" not in call(tree, "search", text="crc8_smbus")
