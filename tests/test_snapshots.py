"""A store that does not grow with every build (DESIGN.md §6; issue 25: build output no ignore
rule covers is stored once per run and once for the current tree, not once per iteration)."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from loopkit import LoopProject, coder_answer, unified_diff
from pytest_fwloop.config.tree_rules import build_directories, harness_build_dir
from pytest_fwloop.workspace import PatchPolicy, Workspace, WorkspaceError, shadow

MIB = 1 << 20


def store_bytes(root: Path) -> int:
    objects = root / ".fwloop" / "shadow.git" / "objects"
    return sum(p.stat().st_size for p in objects.rglob("*") if p.is_file())


def rebuild(root: Path, size: int) -> None:
    """What a build does to output no ignore rule covers: new bytes every time."""
    (root / "out").mkdir(parents=True, exist_ok=True)
    (root / "out" / "firmware.bin").write_bytes(os.urandom(size))


def rebuilt(root: Path) -> bytes:
    return (root / "out" / "firmware.bin").read_bytes()


def opened(root: Path, exclude: list[str] | None = None) -> Workspace:
    (root / "src").mkdir(parents=True)
    (root / "src" / "main.c").write_text("int main(void) { return 0; }\n")
    workspace = Workspace(root, exclude or [])
    workspace.open("run-1")
    return workspace


def rebuilt_outputs(root: Path, exclude: list[str]) -> tuple[int, Workspace]:
    """Three whole-tree snapshots of a tree whose build rewrites 1 MiB of outputs each time:
    the store's growth over them."""
    workspace = opened(root, exclude)
    start = store_bytes(root)
    for n in range(3):
        rebuild(root, MIB)
        workspace.snapshot(f"before iteration {n}")
    return store_bytes(root) - start, workspace


def test_excluded_build_outputs_are_never_hashed_into_the_store(tmp_path: Path) -> None:
    kept, _ = rebuilt_outputs(tmp_path / "kept", [])
    excluded, workspace = rebuilt_outputs(tmp_path / "excluded", ["/out/"])
    assert kept >= 3 * MIB  # each whole-tree snapshot hashed the rebuild: what the option saves
    assert excluded < 64 << 10
    # The outputs stay as the build left them: a restore neither records nor deletes them.
    workspace.restore_baseline()
    assert (tmp_path / "excluded" / "out" / "firmware.bin").stat().st_size == MIB


MAIN_FIX = unified_diff(
    "src/main.c", "int main(void) { return 0; }\n", "int main(void) { return 1; }\n"
)


def test_a_checkpoint_holds_the_loops_paths_over_the_baseline(tmp_path: Path) -> None:
    root = tmp_path / "tree"
    rebuild(root, MIB)
    workspace = opened(root)
    built = rebuilt(root)
    workspace.apply(MAIN_FIX)
    rebuild(root, MIB)
    start = store_bytes(root)
    fixed = workspace.checkpoint("iteration 2")
    assert store_bytes(root) - start < 64 << 10  # the rebuilt output is not stored again
    assert workspace.shadow.read(fixed, "out/firmware.bin") == built  # the baseline's
    assert workspace.diff(workspace.baseline, fixed) == workspace.diff_from_baseline()
    workspace.restore_baseline()
    assert workspace.restore(fixed) == ["src/main.c"]
    assert "return 1;" in (root / "src" / "main.c").read_text()
    assert (root / "out" / "firmware.bin").stat().st_size == MIB  # never the loop's to restore


def test_dropped_snapshots_take_the_output_only_they_held(tmp_path: Path) -> None:
    root = tmp_path / "tree"
    rebuild(root, MIB)
    workspace = opened(root)
    kept = workspace.checkpoint("iteration 1")
    start = store_bytes(root)
    dropped = []
    for n in range(3):
        rebuild(root, 2 * MIB)
        dropped.append(workspace.snapshot(f"before iteration {n}"))
    assert store_bytes(root) - start >= 6 * MIB
    workspace.drop_snapshots()
    # What stays: the baseline, the checkpoint, and the tree as last snapshotted (git keeps
    # what its index names, so the next snapshot hashes nothing it already has).
    assert store_bytes(root) - start < 2 * MIB + (64 << 10)
    with pytest.raises(WorkspaceError, match="is not in") as gone:
        workspace.shadow.changed_paths(dropped[0])
    assert "\n" not in str(gone.value)
    now = workspace.snapshot("now")
    assert (
        workspace.shadow.read(now, "out/firmware.bin") == (root / "out/firmware.bin").read_bytes()
    )
    assert workspace.shadow.read(kept, "src/main.c") is not None
    rebuild(root, MIB)
    workspace.apply(MAIN_FIX)
    workspace.close(keep_tree=False)  # the baseline is whole: the fix is undone
    assert (root / "src" / "main.c").read_text() == "int main(void) { return 0; }\n"


KILLED = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from pytest_fwloop.workspace import Workspace
    root = Path(sys.argv[1])
    workspace = Workspace(root)
    workspace.open("run-killed")
    before = workspace.expect_agent_edits("before the coder's call in iteration 2")
    (root / "src" / "main.c").write_text("int main(void) { return 1; }\\n")
    workspace.apply(workspace.take_agent_edits(before))
    workspace.drop_snapshots()
    print(before, flush=True)
    time.sleep(600)
    """
)


def test_a_killed_run_is_recovered_after_its_agent_snapshots_were_dropped(
    tmp_path: Path,
) -> None:
    """A finished agent call's snapshot may be gone: its edits were undone then, journalled."""
    root = tmp_path / "tree"
    opened(root).close(keep_tree=True)
    controller = subprocess.Popen(
        [sys.executable, "-c", KILLED, str(root)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert controller.stdout is not None
    try:
        before = controller.stdout.readline().strip()
        patched = "return 1;" in (root / "src" / "main.c").read_text()
    finally:
        controller.kill()
        _, errors = controller.communicate()
    assert before, errors
    assert patched
    workspace = Workspace(root)
    with pytest.raises(WorkspaceError):
        workspace.shadow.changed_paths(before)
    report = workspace.open("run-next")
    assert report is not None
    assert report.restored_paths == ("src/main.c",)
    assert (root / "src" / "main.c").read_text() == "int main(void) { return 0; }\n"
    workspace.close(keep_tree=True)


OUTPUT = 4_000_000
PATCHES = 5
#: The build of the loop's run below: it logs the size of `.fwloop/` (before it writes
#: anything), then writes OUTPUT bytes, new ones, where no ignore rule covers them.
BUILD = f"""\
import os, pathlib, sys
store = sum(p.stat().st_size for p in pathlib.Path(".fwloop").rglob("*") if p.is_file())
with open(sys.argv[1], "a") as log:
    log.write(f"{{store}}\\n")
pathlib.Path("out").mkdir(exist_ok=True)
pathlib.Path("out/firmware.bin").write_bytes(os.urandom({OUTPUT}))
"""


@pytest.mark.slow
def test_a_run_whose_build_rewrites_its_output_keeps_the_store_bounded(
    project: LoopProject,
) -> None:
    """Each iteration's build writes 4 MB the snapshots see: the store holds the baseline's
    output and the current one, never one per iteration (it held 24 MB before the sixth build),
    and every guarantee that reads the store still holds: the restore at the end, best.patch,
    replay, `fwloop apply`."""
    log = project.pytester.path / "store.log"
    project.write("fw/__init__.py", "")
    project.write("fw/level.py", "LEVEL = 0\n")
    project.write("build.py", BUILD)
    tests = "".join(f"\ndef test_level_{k}():\n    assert LEVEL >= {k}\n" for k in range(1, 7))
    others = "".join(f"\ndef test_other_{k}():\n    pass\n" for k in range(20))
    project.write("tests/test_level.py", f"from fw.level import LEVEL\n{tests}{others}")
    project.write(
        "pytest.ini",
        "[pytest]\ntestpaths = tests\npythonpath = .\n"
        f"fwloop_build = {sys.executable} build.py {log}\n",
    )
    subprocess.run([sys.executable, "build.py", os.devnull], cwd=project.root, check=True)
    levels = [f"LEVEL = {n}\n" for n in range(PATCHES + 1)]
    coder = project.agent(
        "coder",
        [coder_answer(unified_diff("fw/level.py", a, b)) for a, b in itertools.pairwise(levels)],
    )
    result = project.run(f"--fwloop-coder={coder.spec}", f"--max-iter={PATCHES + 1}")
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    summary = project.summary()
    assert summary["outcome"] == "max_iterations_reached"
    assert summary["pass_counts"] == [20, 21, 22, 23, 24, 25]
    sizes = [int(line) for line in log.read_text().splitlines()]
    assert len(sizes) == PATCHES + 1  # one build per iteration
    assert OUTPUT < sizes[0] < OUTPUT + MIB  # the baseline's output, stored once
    assert all(size < 2 * OUTPUT + MIB for size in sizes[1:]), sizes  # and the current one

    assert (project.root / "fw/level.py").read_text() == "LEVEL = 0\n"  # restored at the end
    [run_dir] = project.run_dirs()
    assert "+LEVEL = 5" in (run_dir / "best.patch").read_text()
    assert store_bytes(project.root) < 2 * OUTPUT + MIB
    replayed = project.replay()
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    applied = project.fwloop("apply", "last")
    assert applied.returncode == 0, applied.stdout + applied.stderr
    assert (project.root / "fw/level.py").read_text() == "LEVEL = 5\n"
    assert store_bytes(project.root) < 2 * OUTPUT + MIB


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


def test_a_big_store_is_packed_in_the_background_and_nothing_is_lost(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(shadow, "PACK_AT_ONCE", 0)  # every store counts as big
    _, workspace = rebuilt_outputs(tmp_path / "tree", [])
    baseline = workspace.baseline
    workspace.close(keep_tree=True)  # returns without waiting for the repack
    git_dir = tmp_path / "tree" / ".fwloop" / "shadow.git"
    objects = git_dir / "objects"
    for _ in range(600):  # the repack runs on its own; give it up to a minute
        if list((objects / "pack").glob("*.pack")) and not list(objects.glob("??/*")):
            break
        time.sleep(0.1)
    assert [p for p in objects.glob("??/*") if p.is_file()] == []
    fsck = subprocess.run(
        ["git", f"--git-dir={git_dir}", "fsck", "--no-dangling", baseline],
        capture_output=True,
        text=True,
        check=False,
    )
    assert fsck.returncode == 0, fsck.stderr


def test_the_zephyr_harness_build_dir_is_an_output_folder_when_inside_the_tree(
    tmp_path: Path,
) -> None:
    root = tmp_path / "zephyr"
    assert harness_build_dir(root, root, "build") == "build"
    assert harness_build_dir(root, root / "samples" / "shell", "build") == "samples/shell/build"
    assert harness_build_dir(root, root, str(tmp_path / "elsewhere")) is None
    assert harness_build_dir(root, root, None) is None
    assert build_directories("ninja -C build", "build") == ["/build/"]


@pytest.mark.parametrize(
    ("build", "directories"),
    [
        (["cmake", "--build", "build/fw"], ["/build/fw/"]),
        ("cmake -S . -B out", ["/out/"]),
        (["ninja", "-C", "bld"], ["/bld/"]),
        (["meson", "compile", "-C=x"], ["/x/"]),
        (["cmake", "--build", "out [arm]*"], ["/out \\[arm\\]\\*/"]),  # git's specials, literal
        (["make", "-C", "firmware"], []),  # a source directory, not outputs
        (["cmake", "--build", "/abs/path"], []),  # outside the tree
        (["west", "build", "-b", "native_sim", "-d", "build/sim"], ["/build/sim/"]),
        ("west build -b qemu_cortex_m3 --build-dir=out/m3", ["/out/m3/"]),
        ("west build -b native_sim samples/hello", ["/build/"]),  # west's own default
        ("west flash", []),
        (None, []),
    ],
)
def test_the_build_directory_is_excluded_where_the_command_names_it(
    build: list[str] | str | None, directories: list[str]
) -> None:
    assert build_directories(build) == directories


def test_the_code_index_listing_after_changes_is_the_whole_listing(tmp_path: Path) -> None:
    """`source_files` reads only what changed since its last listing: the same files and blob
    ids as a listing of the whole snapshot, whatever the change (a deleted snapshot too)."""
    from pytest_fwloop.workspace import snapshot_blobs

    root = tmp_path / "tree"
    workspace = opened(root)
    (root / "src" / "gone.c").write_text("int gone;\n")
    (root / "src" / "becomes_link.c").write_text("int link;\n")
    (root / "src" / "becomes_dir").write_text("a file first\n")
    first_commit, first = workspace.source_files()
    assert {"src/main.c", "src/gone.c", "src/becomes_link.c"} <= set(first)

    (root / "src" / "main.c").write_text("int main(void) { return 1; }\n")
    (root / "src" / "gone.c").unlink()
    (root / "src" / "new.c").write_text("int fresh;\n")
    (root / "src" / "becomes_link.c").unlink()
    (root / "src" / "becomes_link.c").symlink_to("main.c")
    (root / "src" / "becomes_dir").unlink()
    (root / "src" / "becomes_dir").mkdir()
    (root / "src" / "becomes_dir" / "inner.c").write_text("int inner;\n")
    (root / "tool.sh").write_text("#!/bin/sh\n")
    (root / "tool.sh").chmod(0o755)
    commit, listed = workspace.source_files()
    whole = snapshot_blobs.files(workspace.shadow, commit)
    assert listed == whole
    assert "src/gone.c" not in listed
    assert "src/becomes_link.c" not in listed
    assert {"src/new.c", "src/becomes_dir/inner.c", "tool.sh"} <= set(listed)
    assert listed["src/main.c"] != first["src/main.c"]

    workspace.drop_snapshots()  # the last listing's snapshot may be gone from the store
    (root / "src" / "new.c").write_text("int fresher;\n")
    commit, listed = workspace.source_files()
    assert listed == snapshot_blobs.files(workspace.shadow, commit)
    assert first_commit != commit
