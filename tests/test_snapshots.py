"""Snapshots that do not grow without bound (DESIGN.md §13 / issue: a smarter, cheaper loop)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pytest_fwloop.config.settings import build_directories
from pytest_fwloop.workspace import PatchPolicy, Workspace


def store_bytes(root: Path) -> int:
    objects = root / ".fwloop" / "shadow.git" / "objects"
    return sum(p.stat().st_size for p in objects.rglob("*") if p.is_file())


def rebuilt_outputs(root: Path, exclude: list[str]) -> tuple[int, Workspace]:
    """Three snapshots of a tree whose build rewrites 1 MiB of outputs each time: the store's
    growth over them."""
    (root / "src").mkdir(parents=True)
    (root / "src" / "main.c").write_text("int main(void) { return 0; }\n")
    workspace = Workspace(root, exclude)
    workspace.open("run-1")
    start = store_bytes(root)
    for n in range(3):
        (root / "out").mkdir(exist_ok=True)
        (root / "out" / "firmware.bin").write_bytes(os.urandom(1 << 20))
        workspace.checkpoint(f"iteration {n}")
    return store_bytes(root) - start, workspace


def test_excluded_build_outputs_add_nothing_to_the_store(tmp_path: Path) -> None:
    kept, _ = rebuilt_outputs(tmp_path / "kept", [])
    excluded, workspace = rebuilt_outputs(tmp_path / "excluded", ["/out/"])
    assert kept >= 3 << 20  # each rebuild stored whole: the growth the option stops
    assert excluded < 64 << 10
    # The outputs stay as the build left them: a restore neither records nor deletes them.
    workspace.restore_baseline()
    assert (tmp_path / "excluded" / "out" / "firmware.bin").stat().st_size == 1 << 20


CHANGE_CONFIG = (
    "diff --git a/out/config.h b/out/config.h\n--- a/out/config.h\n+++ b/out/config.h\n"
    "@@ -1 +1 @@\n-#define A 1\n+#define A 2\n"
)
NEW_FILE = (
    "diff --git a/out/extra.h b/out/extra.h\nnew file mode 100644\n--- /dev/null\n"
    "+++ b/out/extra.h\n@@ -0,0 +1 @@\n+#define B 1\n"
)


@pytest.mark.parametrize("hidden_by", ["exclude", "gitignore"])
def test_a_patch_to_a_file_no_snapshot_holds_is_refused(tmp_path: Path, hidden_by: str) -> None:
    """Such a file could not be restored, only deleted: the gate refuses to touch it (it did
    delete the user's file at the end of a failed run before)."""
    root = tmp_path / "tree"
    (root / "out").mkdir(parents=True)
    (root / "out" / "config.h").write_text("#define A 1\n")
    if hidden_by == "gitignore":
        (root / ".gitignore").write_text("out/\n")
    workspace = Workspace(root, ["/out/"] if hidden_by == "exclude" else [])
    workspace.open("run-1")
    [violation] = workspace.check_patch(CHANGE_CONFIG, PatchPolicy())
    assert (violation.path, violation.rule) == ("out/config.h", "unsnapshotted")
    # A new file there is the loop's own, and a restore removes it as it should.
    assert workspace.check_patch(NEW_FILE, PatchPolicy()) == []
    workspace.apply(NEW_FILE)
    workspace.restore_baseline()
    assert not (root / "out" / "extra.h").exists()
    assert (root / "out" / "config.h").read_text() == "#define A 1\n"


def test_the_end_of_a_run_packs_the_store(tmp_path: Path) -> None:
    _, workspace = rebuilt_outputs(tmp_path / "tree", [])
    workspace.close(keep_tree=True)
    objects = tmp_path / "tree" / ".fwloop" / "shadow.git" / "objects"
    loose = [p for p in objects.glob("??/*") if p.is_file()]
    assert loose == []
    assert list((objects / "pack").glob("*.pack"))


@pytest.mark.parametrize(
    ("build", "directories"),
    [
        (["cmake", "--build", "build/fw"], ["/build/fw/"]),
        ("cmake -S . -B out", ["/out/"]),
        (["ninja", "-C", "bld"], ["/bld/"]),
        (["meson", "compile", "-C=x"], ["/x/"]),
        (["make", "-C", "firmware"], []),  # a source directory, not outputs
        (["cmake", "--build", "/abs/path"], []),  # outside the tree
        (None, []),
    ],
)
def test_the_build_directory_is_excluded_where_the_command_names_it(
    build: list[str] | str | None, directories: list[str]
) -> None:
    assert build_directories(build) == directories
