"""Workspace safety (DESIGN.md §6) with real git and files: snapshot, patch, restore, recover."""

from __future__ import annotations

import contextlib
import json
import os
import stat
import subprocess
import sys
import textwrap
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from pytest_fwloop.workspace import (
    Journal,
    PatchApplyError,
    PatchParseError,
    ShadowRepo,
    Workspace,
    WorkspaceError,
    WorkspaceLocked,
)
from pytest_fwloop.workspace.journal_record import JournalRecord

if TYPE_CHECKING:
    from collections.abc import Iterator

UART = "int uart_init(void)\n{\n    return 0;\n}\n"
LOCAL_EDIT = "/* local edit */\n"
GPIO = "int gpio;\n"

# Edits uart.c as it stands with the user's uncommitted edit, adds a file in a new directory and
# deletes gpio.c.
PATCH = """\
diff --git a/src/uart.c b/src/uart.c
--- a/src/uart.c
+++ b/src/uart.c
@@ -1,5 +1,5 @@
 int uart_init(void)
 {
-    return 0;
+    return 1;
 }
 /* local edit */
diff --git a/drivers/spi/spi.c b/drivers/spi/spi.c
new file mode 100644
--- /dev/null
+++ b/drivers/spi/spi.c
@@ -0,0 +1 @@
+int spi;
diff --git a/src/gpio.c b/src/gpio.c
deleted file mode 100644
--- a/src/gpio.c
+++ /dev/null
@@ -1 +0,0 @@
-int gpio;
"""
PATCHED = ["drivers/spi/spi.c", "src/gpio.c", "src/uart.c"]
NO_SUCH_PID = 2**22 + 1  # above the kernel's largest pid_max: never a live process


def git_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(
        GIT_CONFIG_NOSYSTEM="1",
        GIT_CONFIG_GLOBAL=os.devnull,
        GIT_AUTHOR_NAME="dev",
        GIT_AUTHOR_EMAIL="dev@example.com",
        GIT_COMMITTER_NAME="dev",
        GIT_COMMITTER_EMAIL="dev@example.com",
    )
    return env


def git(cwd: Path, *args: str, env: dict[str, str] | None = None) -> str:
    """Run the user's git (never the shadow's) and return its output."""
    result = subprocess.run(
        ["git", *args], cwd=cwd, env=env or git_env(), capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def shadow_git(root: Path, *args: str) -> str:
    env = git_env()
    env["GIT_DIR"] = str(root / ".fwloop" / "shadow.git")
    return git(root, *args, env=env)


def listing(root: Path) -> dict[str, tuple[int, bytes]]:
    """Every path under root (but .git and .fwloop at the top) with its mode and content."""
    entries: dict[str, tuple[int, bytes]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        if here == root:
            dirnames[:] = [d for d in dirnames if d not in (".git", ".fwloop")]
        for name in [*dirnames, *filenames]:
            path = here / name
            mode = path.lstat().st_mode
            if stat.S_ISLNK(mode):
                content = os.readlink(path).encode()
            elif stat.S_ISREG(mode):
                content = path.read_bytes()
            else:
                content = b""
            entries[path.relative_to(root).as_posix()] = (mode, content)
    return entries


def user_git_state(repo: Path) -> dict[str, object]:
    """Everything fwloop must not change in the user's repository; the index is read first."""
    dot_git = repo / ".git"
    index = dot_git / "index"
    return {
        "index": index.read_bytes(),
        "index_mtime": index.stat().st_mtime_ns,
        "HEAD": (dot_git / "HEAD").read_bytes(),
        "config": (dot_git / "config").read_bytes(),
        "refs": git(repo, "rev-parse", "--all"),
        "named_refs": git(repo, "for-each-ref"),
        "stash": git(repo, "stash", "list"),
        "status": git(repo, "--no-optional-locks", "status", "--porcelain=v2"),
    }


def write(path: Path, text: str | bytes, mode: int = 0o644) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    path.chmod(mode)


def make_tree(root: Path) -> None:
    """The files both layouts share; the plain one also gets the uncommitted edit."""
    write(root / "src" / "uart.c", UART)
    write(root / "src" / "gpio.c", GPIO)
    write(root / "tests" / "test_uart.py", "def test_uart():\n    pass\n")
    write(root / "tools" / "flash.sh", "#!/bin/sh\nexit 0\n", mode=0o755)
    write(root / ".gitignore", "build/\n*.o\n")
    (root / "uart-link.c").symlink_to("src/uart.c")


def make_checkout(root: Path) -> None:
    """A checkout with a stash, a branch, a staged change, an edit, untracked and ignored files."""
    make_tree(root)
    git(root, "init", "--quiet", "--initial-branch=main")
    git(root, "add", "--all")
    git(root, "commit", "--quiet", "--message", "base")
    git(root, "branch", "feature")
    write(root / "src" / "gpio.c", "int gpio = 2;\n")
    git(root, "stash", "--quiet")
    write(root / "src" / "staged.c", "int staged;\n")
    git(root, "add", "src/staged.c")
    write(root / "src" / "uart.c", UART + LOCAL_EDIT)
    write(root / "notes.txt", "untracked notes\n")
    write(root / "build" / "fw.bin", bytes(range(256)))
    write(root / ".git" / "info" / "exclude", "*.local\n")
    write(root / "board.local", "excluded by .git/info/exclude\n")
    git(root, "status", "--porcelain")  # settle the index's stat cache before the test reads it


@contextlib.contextmanager
def other_controller(root: Path) -> Iterator[JournalRecord]:
    """The journal of another controller that is alive (a sleeping process) until the end."""
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        record = JournalRecord(
            run_id="run-other",
            baseline="0" * 40,
            pid=other.pid,
            started_at=datetime.now(timezone.utc),
        )
        write(root / ".fwloop" / "journal.json", record.model_dump_json())
        yield record
    finally:
        other.kill()
        other.wait()


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    make_checkout(root)
    return root


@pytest.fixture
def plain(tmp_path: Path) -> Path:
    root = tmp_path / "plain"
    root.mkdir()
    make_tree(root)
    write(root / "src" / "uart.c", UART + LOCAL_EDIT)
    write(root / "build" / "fw.bin", bytes(range(256)))
    return root


@pytest.fixture(autouse=True)
def fixed_umask() -> Iterator[None]:
    """Git writes files as 0666 & ~umask; pin it so comparing modes means the same everywhere."""
    previous = os.umask(0o022)
    yield
    os.umask(previous)


@pytest.fixture(autouse=True)
def hostile_git_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """GIT_* variables a developer shell might carry; fwloop must ignore every one of them."""
    decoy = tmp_path / "decoy.git"
    monkeypatch.setenv("GIT_DIR", str(decoy))
    monkeypatch.setenv("GIT_INDEX_FILE", str(decoy / "index"))
    monkeypatch.setenv("GIT_WORK_TREE", str(tmp_path))
    monkeypatch.setenv("GIT_CONFIG_PARAMETERS", "'core.hooksPath'='/nonexistent'")


@pytest.mark.parametrize("layout", ["plain", "checkout"])
def test_apply_then_restore_leaves_tree_and_user_git_untouched(
    layout: str, request: pytest.FixtureRequest
) -> None:
    root: Path = request.getfixturevalue(layout)
    before = listing(root)
    git_before = user_git_state(root) if layout == "checkout" else None
    workspace = Workspace(root)

    assert workspace.open("run-1") is None
    assert workspace.apply(PATCH) == PATCHED
    assert (root / "src" / "uart.c").read_text() == UART.replace("0;", "1;") + LOCAL_EDIT
    assert not (root / "src" / "gpio.c").exists()
    assert (root / "drivers" / "spi" / "spi.c").read_text() == "int spi;\n"
    assert "+int spi;" in workspace.diff_from_baseline()
    assert workspace.restore_baseline() == PATCHED
    workspace.close(keep_tree=False)

    assert listing(root) == before
    assert not (root / ".fwloop" / "journal.json").exists()
    if git_before is not None:
        assert user_git_state(root) == git_before
    assert (root / ".fwloop" / ".gitignore").read_text() == "*\n"


def test_no_write_to_the_tree_before_the_journal_names_the_baseline(plain: Path) -> None:
    """A new run's baseline tests start between the baseline snapshot and the journal: until
    the journal exists the loop refuses to write, so a controller killed then has changed
    nothing, and the next run has nothing to restore."""
    workspace = Workspace(plain)
    assert workspace.take_baseline("run-early") is None
    assert not (plain / ".fwloop" / "journal.json").exists()
    with pytest.raises(RuntimeError, match="begin"):
        workspace.apply(PATCH)
    assert (plain / "src" / "uart.c").read_text() == UART + LOCAL_EDIT
    workspace.begin_journal("run-early")
    record = JournalRecord.model_validate_json((plain / ".fwloop" / "journal.json").read_text())
    assert (record.run_id, record.baseline) == ("run-early", workspace.baseline)
    workspace.close(keep_tree=True)
    assert Workspace(plain).open("run-next") is None


def test_a_journal_that_refused_to_begin_is_not_removed_at_close(plain: Path) -> None:
    """Between the baseline and the journal a new run's tests start; should another live
    controller's journal be there by then, ours refuses to begin, and closing the run leaves
    that journal alone (it names that controller's baseline)."""
    workspace = Workspace(plain)
    workspace.take_baseline("run-mine")
    with other_controller(plain) as record:
        with pytest.raises(WorkspaceLocked):
            workspace.begin_journal("run-mine")
        workspace.close(keep_tree=True)
    assert Journal(plain / ".fwloop").pending() == record


def test_close_keeping_the_tree_keeps_the_fix(plain: Path) -> None:
    workspace = Workspace(plain)
    workspace.open("run-ok")
    assert workspace.check_apply(PATCH) is None
    workspace.apply(PATCH)
    fixed = workspace.checkpoint("fixed")
    assert workspace.diff(workspace.baseline, fixed) == workspace.diff_from_baseline()
    assert workspace.check_apply(PATCH) is not None  # already applied
    after = listing(plain)
    workspace.close(keep_tree=True)
    assert listing(plain) == after
    assert workspace.diff(workspace.baseline, fixed)  # the run's baseline outlives close()
    with pytest.raises(RuntimeError, match="begin"):
        workspace.apply(PATCH)  # no unjournalled writes after close()
    assert not (plain / ".fwloop" / "journal.json").exists()


def test_every_write_is_journalled_before_and_marked_done_after(plain: Path) -> None:
    workspace = Workspace(plain)
    workspace.open("run-j")
    workspace.apply(PATCH)
    workspace.restore_baseline()
    record = JournalRecord.model_validate_json((plain / ".fwloop" / "journal.json").read_text())
    assert (record.run_id, record.baseline, record.pid) == (
        "run-j",
        workspace.baseline,
        os.getpid(),
    )
    assert [(e.action, e.paths, e.done) for e in record.entries] == [
        ("apply", PATCHED, True),
        ("restore", PATCHED, True),
    ]


CONTROLLER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from pytest_fwloop.workspace import Workspace
    workspace = Workspace(Path(sys.argv[1]))
    workspace.open("run-killed")
    workspace.apply(Path(sys.argv[2]).read_text())
    print(workspace.baseline, flush=True)
    time.sleep(600)
    """
)


@pytest.mark.parametrize("layout", ["plain", "checkout"])
def test_killed_controller_is_recovered_on_next_open(
    layout: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    root: Path = request.getfixturevalue(layout)
    before = listing(root)
    patch_file = tmp_path / "fix.patch"
    patch_file.write_text(PATCH)
    controller = subprocess.Popen(
        [sys.executable, "-c", CONTROLLER, str(root), str(patch_file)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert controller.stdout is not None
    try:
        baseline = controller.stdout.readline().strip()
        applied = not (root / "src" / "gpio.c").exists()
    finally:
        controller.kill()
        _, errors = controller.communicate()
    assert baseline, errors
    assert applied

    workspace = Workspace(root)
    report = workspace.open("run-next")

    assert report is not None
    assert (report.run_id, report.baseline, report.restored_paths) == (
        "run-killed",
        baseline,
        tuple(PATCHED),
    )
    assert listing(root) == before
    # What the dead run left is still in the shadow repository.
    assert "+    return 1;" in workspace.shadow.diff(report.baseline, report.salvage)
    workspace.close(keep_tree=False)
    assert listing(root) == before


def test_live_controller_locks_the_workspace(plain: Path) -> None:
    with other_controller(plain) as record, pytest.raises(WorkspaceLocked) as caught:
        Workspace(plain).open("run-mine")
    message = str(caught.value)
    assert "\n" not in message
    assert f"pid {record.pid}" in message
    assert "run-other" in message
    assert "use `fwloop cancel` or wait" in message
    assert not (plain / ".fwloop" / "shadow.git").exists()


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc start times")
def test_a_reused_pid_does_not_lock(plain: Path) -> None:
    state_dir = plain / ".fwloop"
    record = JournalRecord(
        run_id="run-old",
        baseline="1" * 40,
        pid=os.getpid(),
        process_start=-1,  # an earlier process that had our pid
        started_at=datetime.now(timezone.utc),
    )
    write(state_dir / "journal.json", record.model_dump_json())
    assert Journal(state_dir).pending() == record


def test_dead_journal_with_unknown_baseline_is_reported_not_guessed(plain: Path) -> None:
    record = JournalRecord(
        run_id="run-gone",
        baseline="2" * 40,
        pid=NO_SUCH_PID,
        started_at=datetime.now(timezone.utc),
    )
    write(plain / ".fwloop" / "journal.json", record.model_dump_json())
    with pytest.raises(WorkspaceError, match=r"snapshot '2+' is not in .*shadow\.git") as caught:
        Workspace(plain).open("run-new")
    assert "\n" not in str(caught.value)
    assert Journal(plain / ".fwloop").pending() == record


@pytest.mark.parametrize("content", ["{not json", '{"run_id": 7}', "[]"])
def test_corrupt_journal_is_reported_in_one_line(plain: Path, content: str) -> None:
    write(plain / ".fwloop" / "journal.json", content)
    with pytest.raises(WorkspaceError, match=r"journal\.json is not a valid fwloop journal") as err:
        Journal(plain / ".fwloop").pending()
    assert "\n" not in str(err.value)
    assert str(err.value).endswith("inspect it and your tree, then delete it")


def test_journal_refuses_to_overwrite_a_dead_runs_journal(plain: Path) -> None:
    workspace = Workspace(plain)
    workspace.open("run-a")
    state = json.loads((plain / ".fwloop" / "journal.json").read_text())
    state["pid"] = NO_SUCH_PID
    (plain / ".fwloop" / "journal.json").write_text(json.dumps(state))
    with pytest.raises(WorkspaceError, match="was left by run run-a"):
        Journal(plain / ".fwloop").begin("run-b", workspace.baseline)


def test_journal_writes_need_begin() -> None:
    with pytest.raises(RuntimeError, match="begin"):
        Journal(Path("unused")).intend("apply", ["x"])


def test_patch_that_does_not_apply_leaves_tree_unchanged(plain: Path) -> None:
    workspace = Workspace(plain)
    workspace.open("run-bad")
    before = listing(plain)
    stale = PATCH.replace("-    return 0;", "-    return 42;")
    reason = workspace.shadow.check_apply(stale)
    assert reason is not None
    assert "\n" not in reason
    assert "src/uart.c" in reason
    with pytest.raises(PatchApplyError, match="does not apply") as caught:
        workspace.apply(stale)
    assert "\n" not in str(caught.value)
    assert listing(plain) == before
    assert workspace.shadow.check_apply(PATCH) is None
    with pytest.raises(PatchParseError):
        workspace.apply("not a patch\n")
    workspace.close(keep_tree=False)


def test_root_in_a_subdirectory_of_a_repository_applies_relative_to_root(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    firmware = repo / "firmware"
    write(firmware / "src" / "uart.c", UART)
    write(firmware / "src" / "gpio.c", GPIO)
    write(repo / "README", "top\n")
    git(repo, "init", "--quiet")
    git(repo, "add", "--all")
    git(repo, "commit", "--quiet", "--message", "base")
    write(firmware / "src" / "uart.c", UART + LOCAL_EDIT)
    git_before = user_git_state(repo)
    before = listing(firmware)

    workspace = Workspace(firmware)
    workspace.open("run-sub")
    assert workspace.apply(PATCH) == PATCHED
    assert "return 1;" in (firmware / "src" / "uart.c").read_text()
    assert (firmware / "drivers" / "spi" / "spi.c").is_file()
    assert not (repo / "drivers").exists()
    assert ".fwloop" not in git(repo, "--no-optional-locks", "status", "--porcelain")
    workspace.close(keep_tree=False)

    assert listing(firmware) == before
    assert user_git_state(repo) == git_before


def test_shadow_never_holds_git_or_fwloop_and_user_status_ignores_it(checkout: Path) -> None:
    shadow = ShadowRepo(checkout)
    commit = shadow.snapshot("first")
    write(checkout / ".fwloop" / "runs" / "r1" / "summary.json", "{}")
    second = shadow.snapshot("second")
    names = shadow_git(checkout, "ls-tree", "-r", "--name-only", second).splitlines()

    assert shadow_git(checkout, "log", "--format=%s", second).splitlines() == ["second", "first"]
    assert shadow_git(checkout, "rev-parse", f"{second}^") == commit + "\n"
    assert not [n for n in names if n.startswith((".git/", ".fwloop/"))]
    assert "build/fw.bin" not in names  # ignored by .gitignore
    assert "board.local" not in names  # ignored by .git/info/exclude
    assert {"notes.txt", "src/staged.c", "src/uart.c", "uart-link.c", ".gitignore"} <= set(names)
    assert (checkout / ".fwloop" / ".gitignore").read_text() == "*\n"
    assert ".fwloop" not in git(checkout, "--no-optional-locks", "status", "--porcelain", "-uall")


def test_files_the_user_tracks_despite_gitignore_are_snapshotted(checkout: Path) -> None:
    write(checkout / "build" / "config.h", "#define BOARD 1\n")
    git(checkout, "add", "--force", "build/config.h")
    shadow = ShadowRepo(checkout)
    base = shadow.snapshot("base")
    write(checkout / "build" / "config.h", "#define BOARD 2\n")
    assert shadow.changed_paths(base) == ["build/config.h"]
    assert shadow.restore(base) == ["build/config.h"]
    assert (checkout / "build" / "config.h").read_text() == "#define BOARD 1\n"


def test_restore_brings_back_content_modes_symlinks_and_deleted_files(plain: Path) -> None:
    write(plain / ".gitattributes", "* text=auto eol=crlf\n")
    write(plain / "src" / "mixed.c", b"a\r\nb\nc\r\n")
    shadow = ShadowRepo(plain)
    base = shadow.snapshot("base")
    before = listing(plain)

    write(plain / "src" / "uart.c", "changed\n", mode=0o755)
    write(plain / "src" / "mixed.c", b"a\nb\nc\n")
    (plain / "tools" / "flash.sh").unlink()
    (plain / "uart-link.c").unlink()
    (plain / "uart-link.c").symlink_to("src/gpio.c")
    (plain / "src" / "gpio.c").unlink()
    write(plain / "src" / "gpio.c" / "inner.c", "a directory where a file was\n")
    write(plain / "new" / "deep" / "file.c", "new\n")
    write(plain / "build" / "out.o", b"\x7fELF")

    changed = [
        "new/deep/file.c",
        "src/gpio.c",
        "src/gpio.c/inner.c",
        "src/mixed.c",
        "src/uart.c",
        "tools/flash.sh",
        "uart-link.c",
    ]
    assert shadow.changed_paths(base) == changed
    assert shadow.restore(base) == changed
    assert (plain / "build" / "out.o").read_bytes() == b"\x7fELF"  # ignored: left alone
    (plain / "build" / "out.o").unlink()
    assert listing(plain) == before
    assert shadow.changed_paths(base) == []


def test_restore_of_some_paths_only(plain: Path) -> None:
    shadow = ShadowRepo(plain)
    base = shadow.snapshot("base")
    write(plain / "src" / "uart.c", "changed\n")
    write(plain / "tools" / "flash.sh", "changed\n", mode=0o755)
    assert shadow.restore(base, ["./src"]) == ["src/uart.c"]
    assert shadow.changed_paths(base) == ["tools/flash.sh"]


def test_diff_applies_back_including_binary_and_mode_changes(plain: Path) -> None:
    shadow = ShadowRepo(plain)
    base = shadow.snapshot("base")
    write(plain / "src" / "uart.c", "changed\n", mode=0o755)
    write(plain / "assets" / "logo.bin", bytes(range(256)) * 4)
    (plain / "src" / "gpio.c").unlink()
    after = listing(plain)
    patch = shadow.diff(base)
    fixed = shadow.snapshot("fixed")

    assert shadow.diff(base, fixed) == patch
    assert "GIT binary patch" in patch
    assert shadow.restore(base) == ["assets/logo.bin", "src/gpio.c", "src/uart.c"]
    assert shadow.apply(patch) == ["assets/logo.bin", "src/gpio.c", "src/uart.c"]
    assert listing(plain) == after


def test_nested_repositories_are_snapshotted_as_files_and_left_intact(plain: Path) -> None:
    committed = plain / "vendor" / "hal"
    write(committed / "hal.c", "int hal;\n")
    write(committed / ".gitignore", "*.o\n")
    write(committed / "hal.o", b"\0obj")
    git(committed, "init", "--quiet")
    git(committed, "add", "--all")
    git(committed, "commit", "--quiet", "--message", "hal")
    fresh = plain / "vendor" / "rtos"
    git(plain, "init", "--quiet", str(fresh))  # a repository without any commit
    write(fresh / "task.c", "int task;\n")
    before = listing(plain)
    nested_git_before = user_git_state(committed)

    workspace = Workspace(plain)
    workspace.open("run-nested")
    names = shadow_git(plain, "ls-tree", "-r", "--name-only", workspace.baseline).splitlines()
    assert {"vendor/hal/hal.c", "vendor/hal/.gitignore", "vendor/rtos/task.c"} <= set(names)
    assert "vendor/hal/hal.o" not in names  # the nested repository's own .gitignore holds
    patch = (
        "--- a/vendor/hal/hal.c\n+++ b/vendor/hal/hal.c\n@@ -1 +1 @@\n-int hal;\n+int hal2;\n"
        "--- a/vendor/rtos/task.c\n+++ b/vendor/rtos/task.c\n@@ -1 +1 @@\n-int task;\n+int t2;\n"
    )
    assert workspace.apply(patch) == ["vendor/hal/hal.c", "vendor/rtos/task.c"]
    workspace.close(keep_tree=False)

    assert listing(plain) == before
    assert user_git_state(committed) == nested_git_before


@pytest.mark.parametrize("commit", ["0" * 40, "--git-dir", "HEAD~5"])
def test_unknown_snapshot_is_one_line(plain: Path, commit: str) -> None:
    shadow = ShadowRepo(plain)
    shadow.snapshot("only")
    write(plain / "src" / "uart.c", "changed\n")
    before = listing(plain)
    with pytest.raises(WorkspaceError, match="is not in") as caught:
        shadow.restore(commit)
    assert "\n" not in str(caught.value)
    assert listing(plain) == before


def test_missing_git_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "no-bin"))
    with pytest.raises(WorkspaceError, match="git is not on PATH") as caught:
        ShadowRepo(tmp_path).ensure()
    assert "\n" not in str(caught.value)


def test_ensure_is_idempotent(plain: Path) -> None:
    shadow = ShadowRepo(plain)
    shadow.ensure()
    first = shadow.snapshot("one")
    again = ShadowRepo(plain)
    again.ensure()
    assert shadow_git(plain, "rev-parse", "HEAD") == first + "\n"
    assert again.changed_paths(first) == []


# Same size before and after: Python's bytecode cache tells them apart by mtime (in whole
# seconds) and size only.
MINUS = "def f(a, b):\n    return a - b\n"
PLUS_PATCH = """\
diff --git a/fw/calc.py b/fw/calc.py
--- a/fw/calc.py
+++ b/fw/calc.py
@@ -1,2 +1,2 @@
 def f(a, b):
-    return a - b
+    return a + b
"""


def imported_f(root: Path) -> str:
    """What a fresh interpreter that writes bytecode (a developer's default) imports."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    return subprocess.run(
        [sys.executable, "-c", "from fw.calc import f; print(f(5, 3))"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


def test_a_module_rewritten_within_the_second_is_not_imported_from_stale_bytecode(
    plain: Path,
) -> None:
    """A patch and its rollback can write a module twice within one second at the same size
    (`a - b` -> `a + b`); the next child must import what the file says, not the bytecode
    Python cached after the first write (stamped with the same second and size)."""
    write(plain / "fw" / "calc.py", MINUS)
    workspace = Workspace(plain)
    workspace.open("run-pyc")
    source = plain / "fw" / "calc.py"
    stamp = source.stat().st_mtime_ns
    assert imported_f(plain) == "2"  # the cache now holds `a - b`
    workspace.apply(PLUS_PATCH)
    os.utime(source, ns=(stamp, stamp))  # written within the same second
    assert imported_f(plain) == "8"
    workspace.restore_baseline()
    os.utime(source, ns=(stamp, stamp))
    assert imported_f(plain) == "2"
    workspace.close(keep_tree=False)


def test_no_snapshot_holds_bytecode_caches_even_where_the_users_git_tracks_them(
    checkout: Path,
) -> None:
    """Dropping a written module's cache must not count as the patch changing another path,
    and a restore must never write back cached bytecode of another version."""
    write(checkout / "fw" / "calc.py", MINUS)
    write(checkout / "fw" / "__pycache__" / "calc.cpython-311.pyc", b"committed by mistake")
    git(checkout, "add", "--force", "fw")
    git(checkout, "commit", "--quiet", "--message", "with a cache")
    workspace = Workspace(checkout)
    workspace.open("run-pyc")
    assert workspace.apply(PLUS_PATCH) == ["fw/calc.py"]
    assert not (checkout / "fw" / "__pycache__" / "calc.cpython-311.pyc").exists()
    for snapshot in (workspace.baseline, workspace.snapshot("now")):
        names = shadow_git(checkout, "ls-tree", "-r", "--name-only", snapshot).split()
        assert "fw/calc.py" in names
        assert [n for n in names if "__pycache__" in n] == []
    assert workspace.restore_baseline() == ["fw/calc.py"]
    workspace.close(keep_tree=False)
