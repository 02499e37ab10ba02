"""Test modules rewritten once per loop, not once per forked child.

pytest rewrites the asserts of each test module and conftest a run imports, and keeps the result
as a `.pyc` beside it. Where no bytecode is written (`PYTHONDONTWRITEBYTECODE`, as in most CI
images) every child pytest rewrites every test file again: ~15 ms for a file of 100 tests, in
each focus run, gate and flaky rerun. A fork names the files it rewrote (`child_report`); the
controller rewrites them itself while the next child runs, on the other core, as that child's
hook would (same configuration, same source); the forks after that take the code from the
memory they inherit, for each file whose bytes are still those it was made from. Nothing is
written to disk; a spawned child rewrites as pytest always does.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import CodeType
from typing import Any

import pytest

from pytest_fwloop.child.warm_imports import is_users


@dataclass(frozen=True)
class Rewritten:
    """A test file's rewritten code, and the digest of the bytes it was made from."""

    digest: bytes
    code: CodeType


def _digest(source: bytes) -> bytes:
    return hashlib.sha256(source).digest()


class RewriteCache:
    """The controller's side: what the forks rewrote, rewritten once here."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.codes: dict[str, Rewritten] = {}
        self._pending: set[str] = set()

    def learn(self, paths: Iterable[str]) -> None:
        """Files a fork rewrote itself: new ones, or ones changed since they were held."""
        self._pending.update(paths)

    def fill(self, stop: Callable[[], bool] = lambda: False) -> None:
        """Rewrite what the forks named, until `stop()` (the child it overlaps has ended: the
        rest waits for the next one). A file that cannot be read or rewritten here, or that
        changed meanwhile, is left to the children, which rewrite and report it as pytest
        does; so is everything, should this pytest lack the private function used."""
        from _pytest.assertion import rewrite

        rewrite_test = getattr(rewrite, "_rewrite_test", None)
        if not callable(rewrite_test):
            self._pending.clear()
            return
        for name in sorted(self._pending):
            if stop():
                return
            self._pending.discard(name)
            path = Path(name)
            try:
                source = path.read_bytes()
                code = rewrite_test(path, self.config)[1]
                unchanged = path.read_bytes() == source
            except Exception:  # only an optimisation: the child does it as it always did
                continue
            if unchanged and isinstance(code, CodeType):
                self.codes[name] = Rewritten(_digest(source), code)


def serve(
    codes: Mapping[str, Rewritten], rewritten: list[str], installed: tuple[str, ...]
) -> None:  # pragma: no cover - runs in the fork, which coverage does not follow
    """In a fork, before pytest starts: pytest's rewriting hook takes the code of a file whose
    bytes are those of `codes`, and each file of the user's it still rewrites itself is added
    to `rewritten` (a plugin's module is imported once by the controller, `warm_imports`)."""
    from _pytest.assertion import rewrite

    read_pyc: Callable[..., CodeType | None] | None = getattr(rewrite, "_read_pyc", None)
    rewrite_test: Callable[..., tuple[Any, CodeType]] | None = getattr(
        rewrite, "_rewrite_test", None
    )
    if read_pyc is None or rewrite_test is None:
        return  # a pytest without them: its children rewrite as it does

    def held_or_read(source: Path, pyc: Path, *rest: Any) -> CodeType | None:
        held = codes.get(str(source))
        if held is not None:
            with contextlib.suppress(OSError):
                if _digest(Path(source).read_bytes()) == held.digest:
                    return held.code
        return read_pyc(source, pyc, *rest)

    def recorded(fn: Path, config: pytest.Config) -> tuple[Any, CodeType]:
        if is_users(str(fn), installed):
            rewritten.append(str(fn))
        return rewrite_test(fn, config)

    rewrite._read_pyc = held_or_read  # type: ignore[assignment, unused-ignore]
    rewrite._rewrite_test = recorded  # type: ignore[assignment, unused-ignore]
