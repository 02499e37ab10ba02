"""A scratch tree for one candidate patch (DESIGN.md §19): a snapshot with the patch applied,
written out under `.fwloop/` from the shadow store alone, so the user's tree is never touched.

The patch is applied to a scratch index (`git apply --cached`) and the index checked out
under a prefix: no file of the user's tree is read or written on the way, and nothing is left
in the store but loose objects the end of the run packs away.
"""

from __future__ import annotations

import shutil
from typing import TYPE_CHECKING

from pytest_fwloop.workspace.git_run import STATE_DIR_NAME
from pytest_fwloop.workspace.shadow import PatchApplyError
from pytest_fwloop.workspace.snapshot_blobs import patched_index

if TYPE_CHECKING:
    from pathlib import Path

    from pytest_fwloop.workspace.shadow import ShadowRepo

#: Where scratch trees go, under the tree's `.fwloop/` (which its own `.gitignore` hides).
SCRATCH_DIR = "candidates"


def scratch_root(shadow: ShadowRepo) -> Path:
    """The folder of every scratch tree of this tree."""
    return shadow.root / STATE_DIR_NAME / SCRATCH_DIR


def export_patched(shadow: ShadowRepo, commit: str, patch: str, dest: Path) -> None:
    """Write snapshot `commit` with `patch` applied into the empty folder `dest` (replaced if
    it exists); PatchApplyError with git's reason when the patch does not apply to it."""
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    # One index per tree: candidates checked side by side never share one.
    index = dest.parent / f".{dest.name}.index"
    try:
        refused = patched_index(shadow, commit, patch, index)
        if refused is not None:
            raise PatchApplyError(f"fwloop: the candidate does not apply to the tree: {refused}")
        shadow._git("checkout-index", "--all", "--force", f"--prefix={dest}/", index=index)
    finally:
        index.unlink(missing_ok=True)


def remove_scratch(dest: Path) -> None:
    """Delete a scratch tree; what its build or tests left there goes with it."""
    shutil.rmtree(dest, ignore_errors=True)
