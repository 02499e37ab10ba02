"""What the loop reads of the user's git checkout, never writing it: the files it tracks
although an ignore rule matches them, what its last commits changed (a localization clue) and,
for a first snapshot, its index and objects.

A baseline of a big tree (Zephyr: 28,935 files, 265 MB) is mostly hashing and writing, as loose
objects, files the user's git has already hashed and packed. When the shadow store has no index
yet, the checkout's index is copied as the shadow's (its stat data describes these very files,
so git rehashes only what changed since the user's last `git add`) and the blobs it names come
from the user's store: its packs hard-linked where they can be (`pack_links.py`: no second copy
on disk), the blobs no linked pack holds copied, deltas and all, into one pack of the shadow's
own. The store never borrows objects the user may prune later (no alternates).

Only for an index of `SEED_FROM_BYTES` or more, and only where a blob in the user's index is
the file's exact bytes: no attributes file git reads (`.gitattributes`, `info/attributes`, the
user's and the system's: eol, filters, ident, encodings), no `core.autocrlf`, no split index, no
unmerged or skip-worktree entries, nothing git cannot copy. Otherwise, or when anything fails,
the baseline is taken as before, from the files alone. The user's checkout is only read.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from typing import TYPE_CHECKING

from pytest_fwloop.workspace.git_run import (
    GITLINK,
    STATE_DIR_NAME,
    WorkspaceError,
    common_dir,
    git_env,
    join_z,
    one_line,
    run_git,
    split_z,
    user_git_dir,
)
from pytest_fwloop.workspace.pack_links import link_packs

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    #: A shadow git call, its failure left to the caller: arguments, stdin, the index to use.
    ShadowGit = Callable[[list[str], bytes | None, Path], subprocess.CompletedProcess[bytes]]


#: The size of a checkout's index from which a first snapshot starts from it (about 2,500
#: files): below it, hashing the files costs less than the git calls that copy (a 40-file tree:
#: 53 ms from the files, 65 ms seeded).
SEED_FROM_BYTES = 256 * 1024


def tracked_despite_ignores(root: Path, config: list[str]) -> list[str]:
    """Files the checkout at `root` tracks although an ignore rule matches them (`config`: the
    shadow's `-c` options); [] outside a checkout."""
    checkout = user_git_dir(root)
    if checkout is None:
        return []
    env = git_env(checkout, root)
    env["GIT_OPTIONAL_LOCKS"] = "0"  # never refresh or rewrite the user's index
    args = ["ls-files", "-z", "--stage", "--cached", "--ignored", "--exclude-standard"]
    listing = run_git([*config, *args], env=env, cwd=root)
    if listing.returncode != 0:
        raise WorkspaceError(
            f"fwloop: cannot list the files tracked in {checkout}: "
            f"{one_line(listing.stderr)}; fix the checkout or run fwloop outside it"
        )
    kept = []
    for entry in split_z(listing.stdout):
        meta, _, path = entry.partition("\t")
        if meta.startswith(GITLINK) or STATE_DIR_NAME in path.split("/"):
            continue
        if os.path.lexists(root / path):
            kept.append(path)
    return kept


def recently_changed(root: Path, commits: int) -> list[str]:
    """The files the checkout's last `commits` commits changed, newest first; [] outside a
    checkout or when git cannot say (read-only: `git log`, no lock taken)."""
    checkout = user_git_dir(root)
    if checkout is None:
        return []
    env = git_env(checkout, root)
    env["GIT_OPTIONAL_LOCKS"] = "0"
    try:
        log = run_git(
            ["log", f"-n{commits}", "--name-only", "--format=", "--relative", "--"],
            env=env,
            cwd=root,
        )
    except (OSError, subprocess.SubprocessError):
        return []
    if log.returncode != 0:
        return []
    lines = log.stdout.decode("utf-8", "replace").splitlines()
    return list(dict.fromkeys(line for line in lines if line))


def seed_index(root: Path, shadow_dir: Path, index: Path, git: ShadowGit) -> bool:
    """Fill the missing shadow `index` from the checkout at `root` and copy the blobs it names
    into the store at `shadow_dir`; False (and nothing written) where the checkout cannot give
    them as the tree's exact bytes."""
    checkout = user_git_dir(root)
    if checkout is None or not _big_enough(checkout) or not _plain_bytes(root, checkout):
        return False
    scratch = index.with_name(f"{index.name}.seed")
    try:
        shutil.copyfile(checkout / "index", scratch)
        entries = _entries(shadow_dir, scratch, git)
        if entries is None:
            return False
        blobs, dropped = entries
        removal = ["update-index", "--force-remove", "-z", "--stdin"]
        if dropped and git(removal, join_z(dropped), scratch).returncode != 0:
            return False
        if blobs and not _fill_store(root, checkout, shadow_dir, blobs, (git, scratch)):
            return False
        os.replace(scratch, index)
        return True
    except OSError:
        return False
    finally:
        scratch.unlink(missing_ok=True)


def _big_enough(checkout: Path) -> bool:
    try:
        return (checkout / "index").stat().st_size >= SEED_FROM_BYTES
    except OSError:
        return False


def _plain_bytes(root: Path, checkout: Path) -> bool:
    """The checkout's blobs are its files' bytes: nothing converts them on `git add`."""
    if (checkout / "info" / "attributes").exists():
        return False
    env = _user_env(root, checkout)
    listed = run_git(["ls-files", "-z", "--", ":(glob)**/.gitattributes"], env=env, cwd=root)
    if listed.returncode != 0 or listed.stdout or any(checkout.glob("sharedindex.*")):
        return False
    asked = ["config", "--null", "--get-regexp", r"^core\.(autocrlf|attributesfile)$"]
    read = split_z(run_git(asked, env=env, cwd=root).stdout)
    # "key\nvalue"; a bare key (`autocrlf` alone, which git reads as true) has no value.
    settings = {key: value for key, _, value in (item.partition("\n") for item in read)}
    if settings.get("core.autocrlf", "false").strip().lower() != "false":
        return False
    xdg = os.environ.get("XDG_CONFIG_HOME") or os.path.expanduser("~/.config")
    attributes = [os.path.join(xdg, "git", "attributes"), "/etc/gitattributes"]
    if "core.attributesfile" in settings:
        attributes.append(os.path.expanduser(settings["core.attributesfile"]))
    return not any(os.path.exists(path) for path in attributes)


def _entries(shadow_dir: Path, index: Path, git: ShadowGit) -> tuple[list[str], list[str]] | None:
    """The blob ids the copied index keeps, and the paths it must lose: submodules (the shadow
    store holds their files) and what the store's own exclusions keep out of every snapshot
    (`.fwloop/`, bytecode caches, build output). None when an entry is unmerged or marked
    skip-worktree, or git cannot read the index."""
    listed = git(["ls-files", "-z", "--stage", "-t"], None, index)
    excludes = f"--exclude-from={shadow_dir / 'info' / 'exclude'}"
    excluded = git(["ls-files", "-z", "--cached", "--ignored", excludes], None, index)
    if listed.returncode != 0 or excluded.returncode != 0:
        return None
    dropped = set(split_z(excluded.stdout))
    blobs: list[str] = []
    for entry in split_z(listed.stdout):
        meta, _, path = entry.partition("\t")
        tag, mode, blob, stage = meta.split(" ")
        if tag != "H" or stage != "0":
            return None
        if mode == GITLINK:
            dropped.add(path)
        elif path not in dropped:
            blobs.append(blob)
    return list(dict.fromkeys(blobs)), sorted(dropped)


def _fill_store(
    root: Path,
    checkout: Path,
    shadow_dir: Path,
    blobs: list[str],
    shadow: tuple[ShadowGit, Path],
) -> bool:
    """Give the store at `shadow_dir` every one of `blobs`: the user's packs linked, then one
    pack of what they do not hold, from the user's store. `git pack-objects` reuses the packed
    data and deltas it finds (`--window=0`: no new delta search), so this costs copying."""
    pack_dir = shadow_dir / "objects" / "pack"
    pack_dir.mkdir(parents=True, exist_ok=True)
    if link_packs(common_dir(checkout) / "objects", pack_dir):
        git, index = shadow
        asked = "".join(f"{blob}\n" for blob in blobs).encode()
        checked = git(["cat-file", "--batch-check=%(objectname)"], asked, index)
        if checked.returncode != 0:
            return False
        blobs = [line.split()[0] for line in checked.stdout.decode().splitlines() if " " in line]
        if not blobs:
            return True
    env = _user_env(root, checkout)
    packed = run_git(
        ["pack-objects", "-q", "--window=0", str(pack_dir / "pack")],
        env=env,
        cwd=root,
        stdin="".join(f"{blob}\n" for blob in blobs).encode(),
    )
    return packed.returncode == 0


def _user_env(root: Path, checkout: Path) -> dict[str, str]:
    """Reading the user's checkout as their git would (their configuration), never writing
    its index."""
    env = git_env(checkout, root)
    for name in ("GIT_CONFIG_NOSYSTEM", "GIT_CONFIG_GLOBAL", "GIT_LITERAL_PATHSPECS"):
        env.pop(name)
    env["GIT_OPTIONAL_LOCKS"] = "0"
    return env
