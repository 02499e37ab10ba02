"""`scripted:DIR`: replays recorded answers, one per call and role, for demos, tests and replay.

Two layouts. `DIR/<role>/*.json`: each file is one raw answer, in natural name order
(`2.json` before `10.json`). An earlier run directory, recognised by its `rounds/` folder:
`DIR/rounds/<nn>/<role>-<k>.answer.txt` in (round, k) order; empty answers there are the calls
that failed before answering, so they are skipped.

Free-text requests (a proposal's roundtable, `fwloop chat`: no schema) get one fixed line and use
no answer up, so recorded answers stay aligned with the strict calls they were recorded for. A
run continued by `fwloop confirm` or `resume` starts a new
process: `skip` moves past the answers the run already used.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, get_args

from pytest_fwloop.agents.base import RawAnswer
from pytest_fwloop.agents.errors import ProviderError, ProviderErrorKind, SpecError
from pytest_fwloop.core.records.agent_protocol import Role

if TYPE_CHECKING:
    from pytest_fwloop.core.records.agent_protocol import AgentRequest

_DIGITS = re.compile(r"(\d+)")


def _natural_key(name: str) -> tuple[tuple[int, int | str], ...]:
    """Sort key under which `2.json` comes before `10.json`."""
    return tuple(
        (0, int(part)) if part.isdigit() else (1, part) for part in _DIGITS.split(name) if part
    )


class ScriptedProvider:
    """Hands out the recorded answers of each role in order; each instance counts on its own."""

    def __init__(self, directory: str, rootdir: Path) -> None:
        self.spec = f"scripted:{directory}"
        self._root = Path(directory) if Path(directory).is_absolute() else rootdir / directory
        if not self._root.is_dir():
            raise SpecError(
                f"{self._root} is not a directory; record answers there or fix the path"
            )
        self._answers = {role: self._recorded(role) for role in get_args(Role)}
        self._used: dict[str, int] = {}

    def _recorded(self, role: Role) -> list[Path]:
        rounds = self._root / "rounds"
        if rounds.is_dir():
            pattern = re.compile(rf"{role}-\d+\.answer\.txt")
            recorded = [
                path
                for path in rounds.glob("*/*.answer.txt")
                if pattern.fullmatch(path.name) and path.stat().st_size > 0
            ]
            return sorted(
                recorded, key=lambda path: (_natural_key(path.parent.name), _natural_key(path.name))
            )
        return sorted((self._root / role).glob("*.json"), key=lambda path: _natural_key(path.name))

    def skip(self, role: Role, used: int) -> None:
        """Answers of `role` that earlier processes of this run already gave."""
        self._used[role] = used

    def call(self, request: AgentRequest, timeout: float) -> RawAnswer:
        answers = self._answers[request.role]
        used = self._used.get(request.role, 0)
        if not request.schema_:
            return RawAnswer(text=f"({self.spec} replays recorded answers; it has no comment)")
        if used >= len(answers):
            raise ProviderError(
                ProviderErrorKind.PROVIDER_BAD_OUTPUT,
                self.spec,
                f"{self.spec} has no {request.role} answer left ({used} used); "
                "record more answers or use another provider",
            )
        self._used[request.role] = used + 1
        path = answers[used]
        try:
            return RawAnswer(text=path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError) as exc:
            raise ProviderError(
                ProviderErrorKind.PROVIDER_BAD_OUTPUT,
                self.spec,
                f"cannot read the recorded answer {path}: {exc}",
            ) from None
