"""Python's cached bytecode of the sources the loop writes, dropped as they are written.

Python, and pytest's assertion rewriting, reuse a module's cached bytecode while the source's
mtime, in whole seconds, and its size match what the cache recorded. The loop can write a module
twice within one second at the same size (a patch and its rollback: `a - b`, `a + b`), and the
next child pytest would then run the first version. So the cache entries of every file the loop
writes are deleted with the write, and the next import compiles what the file says.
"""

from __future__ import annotations

import contextlib
import glob
import importlib.util
from collections.abc import Iterable
from pathlib import Path


def drop_cached_bytecode(root: Path, paths: Iterable[str]) -> None:
    """Delete the cached bytecode (`__pycache__`, or under `PYTHONPYCACHEPREFIX`) of each `.py`
    among `paths`, relative to `root`: a cache only, so nothing of the user's is lost."""
    for path in paths:
        if not path.endswith(".py"):
            continue
        source = root / path
        folders = {source.parent / "__pycache__"}
        with contextlib.suppress(NotImplementedError, ValueError):
            folders.add(Path(importlib.util.cache_from_source(str(source))).parent)
        for folder in folders:
            # Every interpreter's and optimisation level's entry, and pytest's rewritten one.
            for cached in folder.glob(f"{glob.escape(source.stem)}.*.pyc"):
                with contextlib.suppress(OSError):
                    cached.unlink()
