"""The reader of a file an agent names (DESIGN.md §6, §16): nothing outside the tree is opened."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pytest_fwloop.workspace import PathRefused
from pytest_fwloop.workspace.confined_read import read_tree_text


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    (root / "src").mkdir(parents=True)
    (root / "src" / "uart.c").write_text("int x;\n")
    (tmp_path / "secret.txt").write_text("TOKEN=hunter2\n")
    return root


def test_a_file_of_the_tree_is_read_and_a_missing_one_is_none(tree: Path) -> None:
    assert read_tree_text(tree, "src/uart.c") == "int x;\n"
    assert read_tree_text(tree, "./src//uart.c") == "int x;\n"
    assert read_tree_text(tree, "src/new.c") is None
    assert read_tree_text(tree, "src/uart.c/below") is None
    assert read_tree_text(tree, "nowhere/new.c") is None


def test_undecodable_bytes_are_kept_as_git_keeps_them(tree: Path) -> None:
    (tree / "src" / "latin.c").write_bytes(b"char c = '\xe9';\n")
    text = read_tree_text(tree, "src/latin.c")
    assert text is not None
    assert text.encode("utf-8", "surrogateescape") == b"char c = '\xe9';\n"


@pytest.mark.parametrize("link_at", ["src/link.c", "linked/uart.c"])
def test_a_symlink_on_the_way_is_refused_and_never_followed(tree: Path, link_at: str) -> None:
    os.symlink(tree.parent / "secret.txt", tree / "src" / "link.c")
    os.symlink(tree.parent, tree / "linked")
    with pytest.raises(PathRefused, match="is a symlink, which the loop does not follow"):
        read_tree_text(tree, link_at)


def test_what_is_no_regular_text_file_is_refused(tree: Path) -> None:
    (tree / "src" / "blob.bin").write_bytes(b"\x7fELF\x00\x01")
    os.mkfifo(tree / "src" / "fifo")
    with pytest.raises(PathRefused, match="binary file"):
        read_tree_text(tree, "src/blob.bin")
    with pytest.raises(PathRefused, match="not a regular file"):
        read_tree_text(tree, "src/fifo")
    with pytest.raises(PathRefused, match="not a regular file"):
        read_tree_text(tree, "src")


def test_a_file_over_the_bound_is_refused_unread(tree: Path) -> None:
    (tree / "src" / "big.h").write_text("x" * 101)
    with pytest.raises(PathRefused, match="101 bytes, more than 100"):
        read_tree_text(tree, "src/big.h", limit=100)
