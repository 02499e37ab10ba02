"""The code a QEMU guest executed, as QEMU's own log says it (DESIGN.md §18; pure).

With `-d in_asm,exec,nochain -D FILE` QEMU writes each translation block once when it translates
it (`IN: symbol`, then one line per guest instruction: `0x000005b8:  b580  push {r7, lr}`) and a
line each time a block starts executing (`Trace 0: 0x7f... [00000000/000005b8/...] symbol`: the
second bracketed field is the guest pc; `nochain` makes every execution pass through the logger).
A test's executed instructions are the blocks it started, each with the instructions it holds;
`child/spectra/qemu_blocks.py` marks the test boundaries and maps the instructions to source lines
through the ELF's DWARF line table.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

#: The environment variable naming the folder the `fwloop_qemu` fixture's logs go to.
QEMU_EXEC_LOG_ENV = "FWLOOP_QEMU_EXEC_LOG"

_TRACE = re.compile(r"^Trace \d+: \S+ \[[0-9a-fA-F]+/([0-9a-fA-F]+)/")
_INSTRUCTION = re.compile(r"^0x([0-9a-fA-F]+):")


def exec_log_args(log: str) -> list[str]:
    """What a QEMU command line gains to log the blocks it translates and executes to `log`."""
    return ["-d", "in_asm,exec,nochain", "-D", log]


@dataclass
class ExecLog:
    """One QEMU log read so far: each block's instructions, and the text of a line cut short."""

    blocks: dict[int, list[int]] = field(default_factory=dict)
    _rest: str = ""
    _block: list[int] | None = None

    def feed(self, text: str) -> set[int]:
        """Read the log's next bytes; the blocks that started executing in them."""
        started: set[int] = set()
        lines = (self._rest + text).split("\n")
        self._rest = lines.pop()
        for line in lines:
            trace = _TRACE.match(line)
            if trace is not None:
                started.add(int(trace.group(1), 16))
                self._block = None
                continue
            if line.startswith("IN:"):
                self._block = []
                continue
            instruction = _INSTRUCTION.match(line)
            if instruction is not None and self._block is not None:
                address = int(instruction.group(1), 16)
                if not self._block:
                    self.blocks[address] = self._block
                self._block.append(address)
            elif not line.strip():
                self._block = None
        return started

    def instructions(self, started: Iterable[int]) -> set[int]:
        """The guest instructions of the blocks in `started` (a block never seen translated
        counts by its first instruction)."""
        found: set[int] = set()
        for start in started:
            found.update(self.blocks.get(start, (start,)))
        return found


@dataclass(frozen=True)
class LineTable:
    """Guest addresses to (path under the tree's root, line), from the rows of a DWARF line
    program: an address belongs to the row at or before it."""

    addresses: Sequence[int]
    places: Sequence[tuple[str, int] | None]

    @classmethod
    def of(cls, rows: Iterable[tuple[int, tuple[str, int] | None]]) -> LineTable:
        ordered = sorted(dict(rows).items())
        return cls([a for a, _ in ordered], [p for _, p in ordered])

    def lines(self, addresses: Iterable[int]) -> dict[str, set[int]]:
        found: dict[str, set[int]] = {}
        for address in addresses:
            at = bisect_right(self.addresses, address) - 1
            place = self.places[at] if at >= 0 else None
            if place is not None:
                found.setdefault(place[0], set()).add(place[1])
        return found

    def files(self) -> set[str]:
        return {place[0] for place in self.places if place is not None}
