"""What forked children import from the installation is imported once by the controller:
learned by plain rules, imported only from the installation's search path."""

from __future__ import annotations

import json
import signal
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from loopkit import LoopProject
from pytest_fwloop.child.warm_imports import is_users, learnable, warm

SITE = "/venv/lib/python3.11/site-packages"


@pytest.mark.parametrize(
    ("location", "users"),
    [
        (f"{SITE}/serial/__init__.py", False),
        (SITE, False),
        (f"{SITE}-extra/x.py", True),  # a prefix, not the folder
        ("/home/me/fw/conftest.py", True),
    ],
)
def test_the_users_modules_are_those_outside_the_installation(location: str, users: bool) -> None:
    assert is_users(location, [SITE]) is users


@pytest.mark.parametrize("native_threads", [False, True])
def test_only_modules_of_the_installation_are_learned(native_threads: bool) -> None:
    imported = {
        "hypothesis.core": f"{SITE}/hypothesis/core.py",
        "hypothesis": f"{SITE}/hypothesis/__init__.py",
        # numpy loaded an extension: after a child that ended with threads Python did not
        # start, the whole package stays out (an extension may start native threads).
        "numpy": f"{SITE}/numpy/__init__.py",
        "numpy.core._multiarray_umath": f"{SITE}/numpy/core/_multiarray_umath.cpython-311.so",
        "fw.calc": "/home/me/fw/calc.py",  # the user's: imported afresh by each child
        "conftest": "/home/me/conftest.py",
        "builtin_like": None,
    }
    native = [] if native_threads else ["numpy", "numpy.core._multiarray_umath"]
    assert learnable(imported, [SITE], native_threads=native_threads) == [
        "hypothesis",
        "hypothesis.core",
        *native,
    ]


@pytest.fixture
def roots(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Path, Path]]:
    """An installation folder and a user folder before it on sys.path, both holding `shadowed`;
    every module imported from them is forgotten afterwards."""
    installed, user = tmp_path / "site", tmp_path / "proj"
    for folder in (installed, user):
        folder.mkdir()
        (folder / "shadowed.py").write_text(f"WHERE = {folder.name!r}\n")
    (installed / "warmpkg").mkdir()
    (installed / "warmpkg" / "__init__.py").write_text("")
    (installed / "warmpkg" / "sub.py").write_text("VALUE = 1\n")
    (user / "mine.py").write_text("raise AssertionError('user code must not run here')\n")
    monkeypatch.syspath_prepend(str(installed))
    monkeypatch.syspath_prepend(str(user))
    for name in ("shadowed", "warmpkg", "warmpkg.sub", "mine"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    yield installed, user
    for name in ("shadowed", "warmpkg", "warmpkg.sub", "mine"):
        sys.modules.pop(name, None)


def test_warming_imports_from_the_installation_only(roots: tuple[Path, Path]) -> None:
    installed, _ = roots
    count = warm(["mine", "shadowed", "warmpkg", "warmpkg.sub"], (str(installed),), lambda: 1)
    assert count == 2
    assert "warmpkg.sub" in sys.modules
    # The user's, found first here: not run in the controller (each child imports its own).
    assert "mine" not in sys.modules
    assert "shadowed" not in sys.modules


def test_warming_keeps_the_loops_abort_handlers(roots: tuple[Path, Path]) -> None:
    installed, _ = roots
    (installed / "grabby.py").write_text(
        "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\n"
    )
    mine = signal.getsignal(signal.SIGINT)
    try:
        assert warm(["grabby"], (str(installed),), lambda: 1) == 1
        assert signal.getsignal(signal.SIGINT) is mine
    finally:
        signal.signal(signal.SIGINT, mine)
        sys.modules.pop("grabby", None)


def test_warming_stops_once_a_thread_was_started(roots: tuple[Path, Path]) -> None:
    installed, _ = roots
    threads = iter([2, 2, 2])
    assert warm(["warmpkg", "warmpkg.sub"], (str(installed),), lambda: next(threads)) == 1
    assert "warmpkg" in sys.modules
    assert "warmpkg.sub" not in sys.modules


LAZY_PLUGIN_CONFTEST = """\
import json, sys
from pathlib import Path


def pytest_sessionstart(session):
    with open(Path(__file__).parent / "seen.jsonl", "a") as stream:
        stream.write(json.dumps("colorsys" in sys.modules) + "\\n")


def pytest_terminal_summary(terminalreporter):
    import colorsys  # a plugin's lazy import at the end of every session
"""


@pytest.mark.slow
def test_what_one_child_imported_lazily_the_next_ones_start_with(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The baseline imports `colorsys` at its end; the controller imports it before the next
    fork (the flaky reruns of the baseline's failures), which therefore starts with it."""
    project = LoopProject(pytester, monkeypatch)
    project.calc_suite()
    project.write("tests/conftest.py", LAZY_PLUGIN_CONFTEST)
    result = project.run("--fwloop-coder=rules")
    assert result.ret == 1  # the rules coder writes no patch
    lines = (project.root / "tests" / "seen.jsonl").read_text().splitlines()
    # The baseline and its two flaky reruns (the last records the spectrum the coder call
    # needs, so no spectrum run follows: issue 41).
    assert [json.loads(line) for line in lines] == [False, True, True]
