"""A checkout's first snapshot starts from its own index and its objects, linked or copied
(`workspace/checkout_reads.py`, `pack_links.py`): the same snapshot as from the files alone, at
the cost of what changed, with nothing borrowed from or written to the user's git."""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import time
from typing import TYPE_CHECKING

import pytest

from pytest_fwloop.workspace import ShadowRepo, checkout_reads
from pytest_fwloop.workspace import shadow as shadow_module
from test_workspace import git, git_env, make_checkout, shadow_git, user_git_state, write

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path


@pytest.fixture(autouse=True)
def seed_small_checkouts(monkeypatch: pytest.MonkeyPatch) -> None:
    """These trees are small; a big one's index is what makes the seed worth its git calls."""
    monkeypatch.setattr(checkout_reads, "SEED_FROM_BYTES", 0)


def entries(root: Path, commit: str) -> list[str]:
    return shadow_git(root, "ls-tree", "-r", "--full-tree", commit).splitlines()


def packs(root: Path) -> list[Path]:
    return sorted((root / ".fwloop" / "shadow.git" / "objects" / "pack").glob("*.pack"))


def loose_objects(root: Path) -> int:
    counted = shadow_git(root, "count-objects", "-v").splitlines()
    return int(next(line for line in counted if line.startswith("count:")).split()[1])


def test_the_first_snapshot_starts_from_the_index_and_owns_its_objects(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    make_checkout(root)
    # What no snapshot holds, though the user's git tracks it: a submodule's link, a bytecode
    # cache, build output the loop is told to leave out.
    nested = root / "vendor" / "lib"
    nested.mkdir(parents=True)
    git(nested, "init", "--quiet")
    write(nested / "lib.c", "int lib;\n")
    git(nested, "add", "lib.c")
    git(nested, "commit", "--quiet", "--message", "lib")
    write(root / "pkg" / "__pycache__" / "m.cpython-311.pyc", b"\0cached")
    write(root / "out" / "keep.txt", "tracked build output\n")
    git(root, "add", "vendor/lib", "pkg", "out")
    git(root, "status", "--porcelain")
    before = user_git_state(root)
    objects_before = git(root, "count-objects", "-v")

    seeded = ShadowRepo(root, exclude=("out/",)).snapshot("base")

    assert packs(root)
    loose = loose_objects(root)
    assert not (root / ".fwloop" / "shadow.git" / "objects" / "info" / "alternates").exists()
    assert user_git_state(root) == before
    assert git(root, "count-objects", "-v") == objects_before
    listed = entries(root, seeded)
    names = [entry.partition("\t")[2] for entry in listed]
    assert "vendor/lib/lib.c" in names
    assert "vendor/lib" not in names
    assert "out/keep.txt" not in names
    assert not [name for name in names if "__pycache__" in name]
    assert "src/uart.c" in names  # edited since the user's last `git add`
    assert "notes.txt" in names  # untracked

    shutil.rmtree(root / ".fwloop")
    monkeypatch.setattr(shadow_module, "seed_index", lambda *args: False)
    from_files = ShadowRepo(root, exclude=("out/",)).snapshot("base")
    assert not packs(root)
    assert entries(root, from_files) == listed != []  # the same files, modes and blobs
    # Hashed and written anew: only what the user's index did not already say.
    assert loose < loose_objects(root)


def test_a_small_checkout_is_snapshotted_from_its_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.undo()
    root = tmp_path / "repo"
    root.mkdir()
    make_checkout(root)
    ShadowRepo(root).snapshot("base")
    assert (root / ".git" / "index").stat().st_size < checkout_reads.SEED_FROM_BYTES
    assert not packs(root)


def test_a_seeded_store_restores_without_the_users_git(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    make_checkout(root)
    original = (root / "src" / "gpio.c").read_bytes()
    shadow = ShadowRepo(root)
    base = shadow.snapshot("base")
    assert packs(root)
    (root / ".git" / "objects").rename(tmp_path / "objects")  # the user's store emptied
    (root / ".git" / "objects" / "pack").mkdir(parents=True)
    (root / "src" / "gpio.c").write_text("broken\n")
    (root / "tools" / "flash.sh").unlink()
    assert shadow.restore(base) == ["src/gpio.c", "tools/flash.sh"]
    assert (root / "src" / "gpio.c").read_bytes() == original


def _attributes(root: Path) -> None:
    write(root / ".gitattributes", "*.txt text eol=crlf\n")


def _autocrlf(root: Path) -> None:
    git(root, "config", "core.autocrlf", "input")


def _users_attributes(root: Path) -> None:
    """The attributes file git reads for every repository of the user's (no config needed)."""
    write(root.parent / "xdg" / "git" / "attributes", "*.txt text eol=crlf\n")


@pytest.mark.parametrize(
    "converting",
    [_attributes, _autocrlf, _users_attributes],
    ids=["attributes", "autocrlf", "users-attributes"],
)
def test_a_git_that_converts_bytes_leaves_the_snapshot_to_the_files(
    tmp_path: Path, converting: Callable[[Path], None], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The user's blob is not the file's bytes (CRLF in the tree, LF in git): the snapshot
    hashes the files, so a restore gives back the CRLF."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "--quiet")
    converting(root)
    write(root / "notes.txt", b"one\r\ntwo\r\n")
    git(root, "add", "--all")
    git(root, "commit", "--quiet", "--message", "crlf")
    shadow = ShadowRepo(root)
    base = shadow.snapshot("base")
    assert not packs(root)
    assert shadow.read(base, "notes.txt") == b"one\r\ntwo\r\n"


def test_an_unmerged_index_leaves_the_snapshot_to_the_files(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "--quiet", "--initial-branch=main")
    write(root / "a.c", "int a = 0;\n")
    git(root, "add", "a.c")
    git(root, "commit", "--quiet", "--message", "base")
    git(root, "checkout", "--quiet", "-b", "other")
    write(root / "a.c", "int a = 1;\n")
    git(root, "commit", "--quiet", "--all", "--message", "one")
    git(root, "checkout", "--quiet", "main")
    write(root / "a.c", "int a = 2;\n")
    git(root, "commit", "--quiet", "--all", "--message", "two")
    merge = subprocess.run(
        ["git", "merge", "other"], cwd=root, env=git_env(), capture_output=True, check=False
    )
    assert merge.returncode != 0
    assert git(root, "ls-files", "--unmerged")  # three stages of a.c
    conflicted = (root / "a.c").read_bytes()
    shadow = ShadowRepo(root)
    base = shadow.snapshot("base")
    assert not packs(root)
    assert shadow.read(base, "a.c") == conflicted


def packed_checkout(tmp_path: Path) -> Path:
    """A checkout whose objects are in one pack, as a clone's are."""
    root = tmp_path / "repo"
    root.mkdir()
    make_checkout(root)
    git(root, "repack", "-a", "-d", "-q")
    return root


def _linked(root: Path) -> list[tuple[Path, Path]]:
    """(the user's pack, the store's) pairs that are one file."""
    user = sorted((root / ".git" / "objects" / "pack").glob("*.pack"))
    return [(u, s) for u in user for s in packs(root) if u.stat().st_ino == s.stat().st_ino]


def test_a_packed_checkout_is_linked_into_the_store_and_released_when_unshared(
    tmp_path: Path,
) -> None:
    """The user's packs are hard-linked, never copied or written; the store keeps them while
    the user's git shares them and, once it does not, keeps only what its snapshots need."""
    root = packed_checkout(tmp_path)
    history = git(root, "rev-parse", "HEAD").strip()
    original = (root / "src" / "gpio.c").read_bytes()
    before = user_git_state(root)
    user_packs = {p: p.read_bytes() for p in (root / ".git" / "objects" / "pack").iterdir()}

    shadow = ShadowRepo(root)
    base = shadow.snapshot("base")

    ((user_pack, ours),) = _linked(root)
    assert user_pack.stat().st_nlink == 2
    assert ours.with_suffix(".keep").is_file()
    assert "src/staged.c" in [e.partition("\t")[2] for e in entries(root, base)]
    shadow.pack()  # shared still: the store's repack leaves the link whole
    assert _linked(root) == [(user_pack, ours)]
    assert user_git_state(root) == before
    assert {p: p.read_bytes() for p in user_packs} == user_packs

    shutil.rmtree(root / ".git" / "objects")  # the user's git lets go (a gc, a new clone)
    (root / ".git" / "objects" / "pack").mkdir(parents=True)
    (root / "src" / "gpio.c").write_text("broken\n")
    assert shadow.restore(base) == ["src/gpio.c"]
    assert (root / "src" / "gpio.c").read_bytes() == original

    shadow.pack()
    assert not ours.with_suffix(".keep").exists()
    git_dir = root / ".fwloop" / "shadow.git"
    for _ in range(600):  # taken in by a repack in the background; up to a minute
        if not ours.exists():
            break
        time.sleep(0.1)
    assert not ours.exists()
    assert shadow.read(base, "src/gpio.c") == original
    fsck = ["git", f"--git-dir={git_dir}", "fsck", "--no-dangling", base]
    assert subprocess.run(fsck, capture_output=True, check=False).returncode == 0
    held = ["git", f"--git-dir={git_dir}", "cat-file", "-e", history]
    assert subprocess.run(held, capture_output=True, check=False).returncode != 0


def test_a_refused_link_copies_the_blobs_into_a_pack_of_the_stores(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = packed_checkout(tmp_path)

    def other_filesystem(*args: object) -> None:
        raise OSError(errno.EXDEV, "Invalid cross-device link")

    monkeypatch.setattr(os, "link", other_filesystem)
    shadow = ShadowRepo(root)
    base = shadow.snapshot("base")
    assert packs(root)
    assert _linked(root) == []
    assert not list((root / ".fwloop" / "shadow.git" / "objects" / "pack").glob("*.keep"))
    shutil.rmtree(root / ".git" / "objects")
    assert shadow.read(base, "src/gpio.c") == (root / "src" / "gpio.c").read_bytes()
