"""The build's own file list (DESIGN.md §18): compile databases, depfiles and ninja's record
read, and C the build does not use ranked after all it does."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from pytest_fwloop.codemap.build_inputs import BuildInputs
from pytest_fwloop.codemap.parse import parse_source
from pytest_fwloop.core.gate.policy import PatchPolicy
from pytest_fwloop.core.records.agent_protocol import AgentRequest
from pytest_fwloop.core.request.build_files import (
    UNBUILT_REASON,
    BuildFiles,
    build_files,
    build_share,
    compile_database,
    depfile_inputs,
    inside,
    ninja_deps,
)
from pytest_fwloop.core.request.failure_evidence import FailureText, gather_evidence
from pytest_fwloop.core.request.ranking import TreeMap, rank
from pytest_fwloop.core.request.source_pack import repo_map
from pytest_fwloop.core.suite.results import TestRecord
from pytest_fwloop.loop.request import localization
from pytest_fwloop.loop.request.localization import Localization, Localizer
from pytest_fwloop.workspace import DEFAULT_PROTECTED, Workspace

#: The same handler in the board the build compiles and in one it does not.
HANDLER = """\
#include "crc8.h"
void cmd_crc8(char *args) { uart_printf_line("crc8 %02x", crc8_smbus(args)); }
"""
CRC8_H = "unsigned char crc8_smbus(const char *args);\n"


def test_a_depfile_names_the_source_and_headers_with_escapes_and_continuations() -> None:
    text = (
        "build/obj/crc8.o: firmware/src/crc8.c firmware/include/crc8.h \\\n"
        "  firmware/include/my\\ board.h /usr/include/stdint.h\n"
        "firmware/include/crc8.h:\n"
        "C:\\fw\\obj\\x.o: C:\\fw\\src\\x.c\n"
    )
    assert depfile_inputs(text) == [
        "firmware/src/crc8.c",
        "firmware/include/crc8.h",
        "firmware/include/my board.h",
        "/usr/include/stdint.h",
        "C:\\fw\\src\\x.c",
    ]


def test_a_compile_database_and_ninja_deps_name_paths_under_their_directory() -> None:
    database = [
        {"directory": "/t/build", "file": "../src/a.c", "command": "cc -c ../src/a.c"},
        {"directory": "/t/build", "file": "/t/src/b.c", "arguments": ["cc"]},
        {"file": "no directory"},
        "not an entry",
    ]
    assert compile_database(database) == [("/t/build", "../src/a.c"), ("/t/build", "/t/src/b.c")]
    assert compile_database({"not": "a list"}) == []
    deps = "a.o: #deps 2, deps mtime 1 (VALID)\n    /t/src/a.c\n    /t/inc/a.h\n\n"
    assert ninja_deps(deps) == ["/t/src/a.c", "/t/inc/a.h"]
    assert inside("../src/a.c", "/t/build", "/t") == "src/a.c"
    assert inside("/usr/include/stdio.h", "/t/build", "/t") is None
    assert inside("/t", "/t/build", "/t") is None


def test_a_list_naming_none_of_the_tree_s_files_says_nothing() -> None:
    known = {"src/a.c", "src/a.h"}
    assert build_files([("db", [("/elsewhere", "x.c")])], "/t", known) is None
    found = build_files(
        [("db", [("/elsewhere", "x.c")]), ("deps", [("/t", "src/a.h")])], "/t", known
    )
    assert found == BuildFiles(frozenset({"src/a.h"}), ("deps",))


def _tree(files: dict[str, str]) -> TreeMap:
    tree = TreeMap()
    tree.update({p: s for p, t in files.items() if (s := parse_source(p, t.encode()))})
    return tree


def test_c_the_build_does_not_use_is_ranked_after_all_it_does_and_says_so() -> None:
    files = {
        "boards/a/commands.c": HANDLER,
        "boards/b/commands.c": HANDLER.replace("crc8_smbus(args)", "crc8_smbus(args) + 0"),
        "include/crc8.h": CRC8_H,
        "boards/b/extra.c": 'void cmd_crc8_extra(void) { uart_printf_line("crc8 %02x", 1); }\n',
    }
    tree = _tree(files)
    failure = FailureText("tests/test_c.py::test_crc8", "AssertionError: crc8 01 gave crc8 00")
    evidence = gather_evidence([failure], [], "", "", tree.files, {}, {})
    without = rank(tree, evidence, list(files))
    built = BuildFiles(frozenset({"boards/a/commands.c", "include/crc8.h"}), ("db",))
    ranked = rank(tree, evidence, list(files), built=built)
    assert {r.path for r in without} >= {"boards/a/commands.c", "boards/b/commands.c"}
    assert sorted(r.path for r in ranked) == sorted(r.path for r in without)
    first_unbuilt = next(i for i, r in enumerate(ranked) if r.unbuilt)
    assert all(not r.unbuilt for r in ranked[:first_unbuilt])
    assert all(r.unbuilt for r in ranked[first_unbuilt:])
    assert {r.path for r in ranked[first_unbuilt:]} == {"boards/b/commands.c", "boards/b/extra.c"}
    assert all(UNBUILT_REASON in r.reasons for r in ranked[first_unbuilt:])
    entries, _ = repo_map(
        tree, ranked, list(files), [], 10_000, {"boards/b/commands.c", "boards/b/extra.c"}
    )
    assert [e.path for e in entries][-2:] in (
        ["boards/b/commands.c", "boards/b/extra.c"],
        ["boards/b/extra.c", "boards/b/commands.c"],
    )
    assert build_share(tree.files, built) == ("the build uses 2 of the tree's 4 C/C++ file(s) (db)")


MAKEFILE = """\
CPPFLAGS = -Iinclude -MMD -MP
build/%.o: boards/a/%.c | build
\t$(CC) $(CPPFLAGS) -c -o $@ $<
all: build/commands.o
build:
\tmkdir -p $@
"""


def _board_tree(root: Path) -> None:
    for path, text in {
        "boards/a/commands.c": HANDLER,
        "boards/b/commands.c": HANDLER,
        "include/crc8.h": CRC8_H,
        "Makefile": MAKEFILE.replace("all: build/commands.o", "all: build/commands.o"),
    }.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)


def _localizer(root: Path) -> Localizer:
    workspace = Workspace(root)
    workspace.take_baseline("built")
    policy = PatchPolicy(protected=DEFAULT_PROTECTED)
    return Localizer(workspace, 8192, lambda text: text, lambda: policy)


def _first_request(
    localizer: Localizer, root: Path, failure: TestRecord
) -> tuple[AgentRequest, Localization]:
    """The coder's first request for `failure`, the workspace closed after it."""
    try:
        request = AgentRequest(role="coder", iteration=1, goal="g", workspace=str(root))
        return localizer.coder_request(request, [failure], [])
    finally:
        localizer.workspace.close(keep_tree=True)


@pytest.mark.skipif(shutil.which("make") is None or shutil.which("cc") is None, reason="no cc")
def test_a_make_build_s_depfiles_are_its_list_and_the_trace_counts_them(tmp_path: Path) -> None:
    root = tmp_path / "tree"
    root.mkdir()
    _board_tree(root)
    known = {"boards/a/commands.c", "boards/b/commands.c", "include/crc8.h"}
    inputs = BuildInputs(root)
    assert inputs.files(known) is None  # not built yet: as without a list
    subprocess.run(["make", "-s", "all"], cwd=root, check=True)
    found = inputs.files(known)
    assert found == BuildFiles(
        frozenset({"boards/a/commands.c", "include/crc8.h"}), ("1 depfile(s)",)
    )
    failure = TestRecord(
        nodeid="tests/test_c.py::test_crc8",
        outcome="failed",
        phase="call",
        longrepr="AssertionError: crc8 01 gave crc8 00",
    )
    localizer = _localizer(root)
    done, report = _first_request(localizer, root, failure)
    assert report.build == "the build uses 2 of the tree's 3 C/C++ file(s) (1 depfile(s))"
    paths = [chunk.path for chunk in done.sources]
    assert paths.index("boards/a/commands.c") < paths.index("boards/b/commands.c")
    unbuilt = next(c for c in done.sources if c.path == "boards/b/commands.c")
    assert UNBUILT_REASON in unbuilt.reason


@pytest.mark.skipif(shutil.which("make") is None or shutil.which("cc") is None, reason="no cc")
def test_with_no_time_to_spare_the_index_reads_what_the_build_compiles_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "tree"
    root.mkdir()
    _board_tree(root)
    # Another board's handler, not the same bytes as the built one (the index reads blobs).
    (root / "boards/b/commands.c").write_text(HANDLER.replace("crc8 %02x", "crc8 = %02x"))
    subprocess.run(["make", "-s", "all"], cwd=root, check=True)
    monkeypatch.setattr(localization, "PARSE_SECONDS", 0.0)
    failure = TestRecord(
        nodeid="tests/test_c.py::test_crc8", outcome="failed", phase="call", longrepr="crc8 01"
    )
    localizer = _localizer(root)
    done, report = _first_request(localizer, root, failure)
    assert "boards/a/commands.c" in {chunk.path for chunk in done.sources}
    assert "boards/b/commands.c" not in {chunk.path for chunk in done.sources}
    assert report.unread == 2  # the unbuilt C and the Makefile: read in the background
    for _ in range(600):
        if not localizer.background.running:
            break
        time.sleep(0.05)
    localizer.background.stop()
    assert localizer.index.unread == 0
    request = AgentRequest(role="coder", iteration=2, goal="g", workspace=str(root))
    _, later = localizer.coder_request(request, [failure], [])
    localizer.background.stop()
    assert later.unread == 0
    assert later.files == report.files + 2  # what the background read, in this request's map
    assert later.parsed == 0  # and learned there too: the request itself learned nothing
    assert not localizer.background.running


@pytest.mark.skipif(shutil.which("cmake") is None or shutil.which("ninja") is None, reason="ninja")
def test_a_cmake_ninja_build_is_read_through_its_database_and_ninja(tmp_path: Path) -> None:
    root = tmp_path / "tree"
    root.mkdir()
    _board_tree(root)
    (root / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.13)\nproject(fw C)\n"
        "add_library(fw STATIC boards/a/commands.c)\n"
        "target_include_directories(fw PRIVATE include)\n"
    )
    subprocess.run(
        ["cmake", "-G", "Ninja", "-S", ".", "-B", "out", "-DCMAKE_EXPORT_COMPILE_COMMANDS=ON"],
        cwd=root,
        check=True,
        capture_output=True,
    )
    subprocess.run(["ninja", "-C", "out"], cwd=root, check=True, capture_output=True)
    known = {"boards/a/commands.c", "boards/b/commands.c", "include/crc8.h"}
    found = BuildInputs(root).files(known)
    assert found is not None
    # The database names the source; ninja's deps log adds the header it included.
    assert found.files == {"boards/a/commands.c", "include/crc8.h"}
    assert found.origins == ("out/compile_commands.json", "ninja -C out")
    assert json.loads((root / "out" / "compile_commands.json").read_text())


def test_the_index_s_notice_is_the_request_s_own_taken_before_the_background_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A store that would not open is rebuilt: the request's report says so once, whatever
    the background reading does with the index after it."""
    root = tmp_path / "tree"
    root.mkdir()
    _board_tree(root)
    monkeypatch.setattr(localization, "PARSE_SECONDS", 0.0)  # a rest left for the background
    localizer = _localizer(root)
    localizer.index.path.parent.mkdir(parents=True, exist_ok=True)
    localizer.index.path.write_bytes(b"not a sqlite database" * 100)
    failure = TestRecord(nodeid="tests/test_c.py::test_crc8", outcome="failed", phase="call")
    _, report = _first_request(localizer, root, failure)
    localizer.background.stop()
    assert "unreadable" in report.notice
    assert report.unread
    assert localizer.index.notice == ""
