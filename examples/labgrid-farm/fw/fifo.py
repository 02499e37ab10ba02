"""A FIFO of 4 slots: a push to a full FIFO is refused, never overwrites."""

from __future__ import annotations

SLOTS = 4


class FifoFull(Exception):
    pass


class FifoEmpty(Exception):
    pass


class Fifo:
    def __init__(self) -> None:
        self.slots: list[int] = []

    def push(self, value: int) -> None:
        if len(self.slots) > SLOTS:
            raise FifoFull
        self.slots.append(value)

    def pop(self) -> int:
        if not self.slots:
            raise FifoEmpty
        return self.slots.pop(0)

    def clear(self) -> None:
        self.slots.clear()

    def __len__(self) -> int:
        return len(self.slots)
