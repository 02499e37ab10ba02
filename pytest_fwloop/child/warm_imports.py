"""What the forked children import from the installation, imported once by the controller so
that the later forks start with it.

Plugins import lazily: a session's end may import a whole library (a property-testing plugin's
terminal summary does), and each child run would pay that again, in every focus run, gate and
flaky rerun. A fork tells the controller which modules it imported; before the next fork the
controller imports those it may, as a fresh interpreter would have found them:

- only modules of the interpreter's installation (standard library, site-packages), never the
  user's, which every child imports afresh, and found only on the installation's search path;
- a top-level package that loaded an extension module only when the child ended with no thread
  that Python did not start (an extension may start native threads, and a controller with
  threads forks no more);
- a warm-up that starts a thread anyway stops there: the next decision spawns instead.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.machinery
import importlib.util
import os
import signal
import sys
from collections.abc import Callable, Iterable, Mapping


def is_users(location: str, installed: Iterable[str]) -> bool:
    """Whether a file is the user's (imported afresh by each child) rather than the
    installation's (kept in the fork's cache)."""
    return not any(location == root or location.startswith(root + os.sep) for root in installed)


def is_extension(location: str) -> bool:
    return location.endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES))


def learnable(
    imported: Mapping[str, str | None], installed: Iterable[str], *, native_threads: bool
) -> list[str]:
    """Of the modules a child imported (name -> file), those the controller may import for the
    next forks; parents sort before their submodules. A child that ended with no threads but
    Python's own shows that no extension it loaded left one running; after one with
    `native_threads`, packages that loaded an extension module are left out."""
    roots = tuple(installed)
    found = {
        name: location
        for name, location in imported.items()
        if location is not None and not is_users(location, roots)
    }
    native = {name.partition(".")[0] for name, location in found.items() if is_extension(location)}
    return sorted(
        name for name in found if not native_threads or name.partition(".")[0] not in native
    )


def warm(names: Iterable[str], installed: tuple[str, ...], threads: Callable[[], int]) -> int:
    """Import `names` from the installation's search path; how many were imported. Stops at
    the first import after which `threads()` counts more than one thread. The loop's own
    SIGINT and SIGTERM handlers (its abort) are put back should an import replace them."""
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        return _import_all(names, installed, threads)
    finally:
        for sig, handler in handlers.items():
            if signal.getsignal(sig) is not handler and handler is not None:
                signal.signal(sig, handler)


def _import_all(
    names: Iterable[str], installed: tuple[str, ...], threads: Callable[[], int]
) -> int:
    imported = 0
    for name in names:
        if name in sys.modules:
            continue
        top = name.partition(".")[0]
        if top in sys.modules:
            origin = getattr(sys.modules[top], "__file__", None)
        else:
            try:  # where this process would find it (nothing is run to know)
                spec = importlib.util.find_spec(top)
            except (ImportError, ValueError):
                continue
            origin = spec.origin if spec is not None else None
        if origin is None or is_users(os.path.abspath(origin), installed):
            continue  # the user's, or a namespace: never imported here
        with contextlib.suppress(Exception):
            importlib.import_module(name)
            imported += 1
        if threads() > 1:
            break
    return imported
