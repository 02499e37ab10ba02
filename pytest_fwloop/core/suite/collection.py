"""How a child that runs only some tests finds them (DESIGN.md §13), as a plain decision.

A focus run, a flaky rerun or the tester's pre-check runs a few tests of a suite. Handed those
tests' files as its arguments, pytest imports those modules and walks nothing else; but other
arguments could change what it selects or how (the paths the user named, `--pyargs`, a
conftest.py beside the selected tests that a whole run loads, the ini file found from other
paths). Where they could, the child collects what a whole run collects and keeps only the
selected tests, and the trace says why. Kept apart from `focus` so the controller's settings
read it without pydantic (the baseline's child starts before the controller imports it).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Collection:
    """What decides how a child that runs only some tests may find them, read once from the
    controller's configuration (`config.settings.collection_of`)."""

    #: The test paths the user's arguments (or addopts) name; none when pytest collects its
    #: `testpaths` or the directory it was started in.
    named: tuple[str, ...] = ()
    pyargs: bool = False
    #: The ini file the run's options come from, pinned for a child handed other arguments.
    inifile: str | None = None
    #: Where a whole run collects (absolute), and the folders it does not enter (patterns).
    roots: tuple[str, ...] = ()
    norecursedirs: tuple[str, ...] = ()


def collection_paths(
    select: Iterable[str], collection: Collection, conftest_dirs: Iterable[str]
) -> tuple[list[str], str]:
    """The test files a child that runs only `select` can be given as its arguments, so that
    pytest collects those modules and walks nothing else; or none, and why, where that could
    change what is selected or how. The child then collects what a whole run collects, keeping
    only the selected tests (`child.plugin.Selection`), as it always did.

    Node ids are the rootdir's; `conftest_dirs` are the rootdir-relative folders holding a
    `conftest.py` that a whole run could load. Files come in the order pytest walks them.
    """
    if collection.named:
        return [], (
            f"the run names its test paths ({' '.join(collection.named)}), which a child "
            "handed the selected files would not collect"
        )
    if collection.pyargs:
        return [], "--pyargs reads a child's arguments as module names"
    if collection.inifile is None:
        return [], "no ini file pins the rootdir and options of a child handed other arguments"
    files: set[str] = set()
    for nodeid in select:
        path, marker, _ = nodeid.partition("::")
        if not marker or path.startswith("/") or ".." in path.split("/"):
            return [], f"{nodeid} names no test file under the rootdir"
        files.add(path)
    above = {".", *(parent for path in files for parent in _parents(path))}
    beside = sorted(folder for folder in conftest_dirs if folder not in above)
    if beside:
        return [], (
            f"{beside[0]}/conftest.py lies beside the selected tests, not above them: a child "
            "collecting only their files would not load it"
        )
    return sorted(files, key=lambda path: path.split("/")), ""


def _parents(path: str) -> list[str]:
    parts = path.split("/")[:-1]
    return ["/".join(parts[:end]) for end in range(1, len(parts) + 1)]
