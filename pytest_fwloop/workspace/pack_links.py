"""The shadow store's hard links of the user's pack files: a big tree's baseline without a
second copy of its blobs on disk (Zephyr: 66 MB the store no longer writes).

A pack and its index are files git only ever writes whole under a temporary name and later
unlinks, never rewrites in place (mode 0444), so a hard link shares their disk blocks and
nothing else: what the user's git does to its store later (repack, gc, a deleted `.git`) leaves
the link whole, and the store never reads an object it does not hold itself. `git clone` of a
local path links the same files for the same reason. Each linked pack gets a `.keep` so the
store's own repack leaves it as it is; once the user's store lets go of its copy (the file's
link count falls to one), `release_unshared` drops the `.keep` so the next repack takes what
the store needs into a pack of its own and the rest (the user's history) goes.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path

#: What a `.keep` of a linked pack says, for whoever finds one.
_KEEP_TEXT = "fwloop: a hard link of a pack of the user's git; released when it is unshared\n"


def link_packs(user_objects: Path, pack_dir: Path) -> list[str]:
    """Hard-link every pack (and its index) of the store at `user_objects` into `pack_dir`;
    the names linked, [] where the filesystems differ or links are refused."""
    linked = []
    for idx in sorted((user_objects / "pack").glob("pack-*.idx")):
        pack = idx.with_suffix(".pack")
        target = pack_dir / pack.name
        if not pack.is_file() or target.exists():
            continue
        try:
            os.link(pack, target)
            try:
                os.link(idx, target.with_suffix(".idx"))
            except OSError:
                target.unlink()
                raise
        except OSError:
            continue
        target.with_suffix(".keep").write_text(_KEEP_TEXT)
        linked.append(pack.name)
    return linked


def release_unshared(pack_dir: Path) -> bool:
    """Drop the `.keep` of each linked pack no other store shares any more; whether any was:
    the store's next `repack -a -d` then keeps only what it needs of it."""
    released = False
    for keep in pack_dir.glob("pack-*.keep"):
        try:
            ours = keep.read_text() == _KEEP_TEXT
            unshared = ours and keep.with_suffix(".pack").stat().st_nlink < 2
        except OSError:
            continue
        if unshared:
            keep.unlink(missing_ok=True)
            released = True
    return released
