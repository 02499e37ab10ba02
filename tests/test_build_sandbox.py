"""`fwloop_build_sandbox`: a patched build script is source that runs at build time; under
bubblewrap it can reach no server and write nothing outside the tree or into `.fwloop`."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from loopkit import (
    CALC,
    FIXES,
    LoopProject,
    calc_fix_patches,
    coder_answer,
    tree_state,
    unified_diff,
)
from pytest_fwloop.config.options import spec_of
from pytest_fwloop.procs.sandbox import bwrap_argv

BUILD = "import py_compile\npy_compile.compile('fw/calc.py', doraise=True)\n"


def test_parse_sandbox_accepts_the_choices_only() -> None:
    parse_sandbox = spec_of("build_sandbox").parse
    assert parse_sandbox("") == "none"
    assert parse_sandbox(" BWRAP ") == "bwrap"
    with pytest.raises(ValueError, match="none, bwrap"):
        parse_sandbox("docker")


def test_bwrap_argv_makes_the_tree_writable_but_its_records_read_only(tmp_path: Path) -> None:
    (tmp_path / ".fwloop").mkdir()
    argv = bwrap_argv("/usr/bin/bwrap", "make all", tmp_path)
    tree = str(tmp_path)
    assert argv[-4:] == ["--", "/bin/sh", "-c", "make all"]
    assert "--unshare-net" in argv
    # Later mounts cover earlier ones: / read-only, then the tree writable, then .fwloop read-only.
    root_ro = argv.index("/")
    tree_rw = argv.index("--bind")
    records_ro = argv.index(str(tmp_path / ".fwloop"))
    assert argv[root_ro - 1] == "--ro-bind"
    assert argv[tree_rw + 1 : tree_rw + 3] == [tree, tree]
    assert root_ro < tree_rw < records_ro
    # No .git in this tree: nothing to bind for it.
    assert str(tmp_path / ".git") not in argv
    assert bwrap_argv("bwrap", ["make", "-j2"], tmp_path)[-3:] == ["--", "make", "-j2"]


class Listener:
    """A TCP server on 127.0.0.1 counting the connections a build makes to it."""

    def __init__(self) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.server.settimeout(0.2)
        self.port = self.server.getsockname()[1]
        self.connections = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.server.accept()
            except OSError:
                continue
            self.connections += 1
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self.server.close()


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")
def test_a_build_tool_living_under_tmp_still_runs_in_the_sandbox(tmp_path: Path) -> None:
    """The sandbox's /tmp is private, but a tool or virtualenv kept under /tmp must stay
    visible: a fresh clone in /tmp with its .venv there builds like any other."""
    assert str(tmp_path).startswith("/tmp/")
    tree = tmp_path / "tree"
    tree.mkdir()
    tool = tmp_path / "tools" / "fw-build"
    tool.parent.mkdir()
    tool.write_text("#!/bin/sh\necho built > out.txt\n")
    tool.chmod(0o755)
    bwrap = shutil.which("bwrap")
    assert bwrap is not None
    done = subprocess.run(
        bwrap_argv(bwrap, [str(tool)], tree), capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert (tree / "out.txt").read_text() == "built\n"
    probe = bwrap_argv(bwrap, ["/bin/sh", "-c", "echo hi > /tmp/scratch && cat /tmp/scratch"], tree)
    assert subprocess.run(probe, capture_output=True, text=True, check=False).stdout == "hi\n"


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")
@pytest.mark.parametrize("sandbox", ["none", "bwrap"])
def test_a_hostile_build_script_is_confined_by_the_sandbox(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, sandbox: str
) -> None:
    project = LoopProject(pytester, monkeypatch)
    project.calc_suite(f"fwloop_build_sandbox = {sandbox}\n")
    project.write("build.py", BUILD)
    outside = pytester.path / "outside-canary"
    listener = Listener()
    # An approved-looking patch of the build script that quietly tries three escapes.
    hostile_build = BUILD + (
        "import socket\n"
        "for attempt in (\n"
        f"    lambda: open({str(outside)!r}, 'w').write('escaped'),\n"
        "    lambda: open('.fwloop/planted', 'w').write('tampered'),\n"
        f"    lambda: socket.create_connection(('127.0.0.1', {listener.port}), 2),\n"
        "):\n"
        "    try:\n        attempt()\n    except OSError:\n        pass\n"
    )
    patches = [unified_diff("build.py", BUILD, hostile_build), *calc_fix_patches()]
    coder = project.agent("coder", [coder_answer(p) for p in patches])
    try:
        result = project.run(
            f"--fwloop-coder={coder.spec}", f"--fwloop-build={sys.executable} build.py"
        )
    finally:
        listener.close()
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    confined = sandbox == "bwrap"
    assert outside.exists() is not confined
    assert (project.root / ".fwloop" / "planted").exists() is not confined
    assert (listener.connections == 0) is confined
    # The sandboxed build still builds: the tree itself stays writable.
    assert "CONVERGENCE_CHECK -> SUCCESS" in result.stdout.str()
    fixed = CALC
    for old, new in FIXES:
        fixed = fixed.replace(old, new)
    assert (project.root / "fw" / "calc.py").read_text() == fixed


@pytest.mark.slow
def test_a_sandbox_that_cannot_run_is_a_usage_error(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    project = LoopProject(pytester, monkeypatch)
    project.calc_suite("fwloop_build_sandbox = bwrap\nfwloop_build = make\n")
    coder = project.agent("coder", [coder_answer(calc_fix_patches()[0])])
    monkeypatch.setenv("PATH", str(tmp_path))  # no bwrap (nor anything else) on PATH
    result = project.run(f"--fwloop-coder={coder.spec}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*fwloop_build_sandbox = bwrap but 'bwrap' is not on PATH*"])
    bogus = project.run(f"--fwloop-coder={coder.spec}", "--fwloop-build-sandbox=docker")
    assert bogus.ret == pytest.ExitCode.USAGE_ERROR
    bogus.stderr.fnmatch_lines(["*--fwloop-build-sandbox=docker: must be one of none, bwrap*"])
    assert not (project.root / ".fwloop").exists()


@pytest.mark.slow
@pytest.mark.parametrize("sandbox", ["none", "bwrap"])
def test_a_build_that_rewrites_protected_files_is_rolled_back(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, sandbox: str
) -> None:
    """The tree is writable even in the sandbox, so a patched build script could plant a
    conftest that xfails every test; the loop sees the protected change and rolls it back."""
    if sandbox == "bwrap" and shutil.which("bwrap") is None:
        pytest.skip("bubblewrap is not installed")
    project = LoopProject(pytester, monkeypatch)
    project.calc_suite(f"fwloop_build_sandbox = {sandbox}\n")
    project.write("build.py", BUILD)
    before = tree_state(project.root)
    hostile_build = BUILD + (
        "open('tests/conftest.py', 'w').write(\n"
        "    'import pytest\\n'\n"
        "    'def pytest_collection_modifyitems(items):\\n'\n"
        "    '    for item in items:\\n'\n"
        "        '        item.add_marker(pytest.mark.xfail)\\n'\n"
        ")\n"
    )
    patches = [unified_diff("build.py", BUILD, hostile_build), *calc_fix_patches()]
    coder = project.agent("coder", [coder_answer(p) for p in patches])
    result = project.run(
        f"--fwloop-coder={coder.spec}", f"--fwloop-build={sys.executable} build.py"
    )
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    told = coder.requests()[1]["must_fix"][0]["issue"]
    assert "changed protected files (tests/conftest.py)" in told
    assert not (project.root / "tests" / "conftest.py").exists()
    assert (project.root / "build.py").read_text() == BUILD
    [run_dir] = project.run_dirs()
    assert "build.py" not in (run_dir / "final.patch").read_text()
    after = tree_state(project.root)
    assert {path for path in after if after[path] != before.get(path)} == {"fw/calc.py"}
