"""What the agents cost, and the run budget that stops the loop when they cost too much (pure).

Providers report what they can (`RawAnswer.usage`): `input_tokens` (cache reads included),
`cached_input_tokens`, `output_tokens`, `cost_usd`. A call that reports nothing still counts as
a call, so a budget over a provider that never reports cost is visibly unenforced, not silently.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from pytest_fwloop.core.machine.decimals import exact, over, written

USAGE_KEYS = ("input_tokens", "cached_input_tokens", "output_tokens", "cost_usd")


class BudgetExhausted(Exception):
    """An agent call took the run over its budget; the message says which and by how much."""


@dataclass
class Usage:
    """Sums over calls; `tokens` is what a token budget counts (input plus output)."""

    calls: int = 0
    unreported_calls: int = 0
    totals: dict[str, float] = field(default_factory=lambda: dict.fromkeys(USAGE_KEYS, 0.0))

    @property
    def tokens(self) -> float:
        return self.totals["input_tokens"] + self.totals["output_tokens"]

    @property
    def cost_usd(self) -> float:
        return self.totals["cost_usd"]

    def add(self, usage: Mapping[str, float]) -> None:
        self.calls += 1
        reported = {key: usage[key] for key in USAGE_KEYS if key in usage}
        if not reported:
            self.unreported_calls += 1
        for key, value in reported.items():
            self.totals[key] = _sum(key, self.totals[key], value)

    @classmethod
    def from_dict(cls, document: Mapping[str, float | int]) -> Usage:
        return cls(
            calls=int(document.get("calls", 0)),
            unreported_calls=int(document.get("unreported_calls", 0)),
            totals={key: float(document.get(key, 0.0)) for key in USAGE_KEYS},
        )

    def merge(self, other: Usage) -> None:
        self.calls += other.calls
        self.unreported_calls += other.unreported_calls
        for key in USAGE_KEYS:
            self.totals[key] = _sum(key, self.totals[key], other.totals[key])

    def to_dict(self) -> dict[str, float | int]:
        return {
            "calls": self.calls,
            "unreported_calls": self.unreported_calls,
            **{key: _tidy(value) for key, value in self.totals.items()},
            "tokens": _tidy(self.tokens),
        }


@dataclass
class UsageLedger:
    """Usage per role and in total, for `summary.json["usage"]` and the budget."""

    roles: dict[str, Usage] = field(default_factory=dict)
    total: Usage = field(default_factory=Usage)

    def add(self, role: str, usage: Mapping[str, float]) -> None:
        self.roles.setdefault(role, Usage()).add(usage)
        self.total.add(usage)

    @classmethod
    def from_dict(cls, document: Mapping[str, object]) -> UsageLedger:
        """The ledger `to_dict` wrote: a continued run counts the calls made before it."""
        roles = document.get("roles")
        ledger = cls()
        for role, usage in (roles if isinstance(roles, dict) else {}).items():
            ledger.roles[role] = Usage.from_dict(usage)
            ledger.total.merge(ledger.roles[role])
        return ledger

    def to_dict(self) -> dict[str, object]:
        return {
            "roles": {role: usage.to_dict() for role, usage in self.roles.items()},
            "total": self.total.to_dict(),
        }


@dataclass(frozen=True)
class Budget:
    """`--fwloop-budget-usd` and `--fwloop-budget-tokens`; None is no limit."""

    usd: float | None = None
    tokens: int | None = None

    def overrun(self, spent: Usage) -> str | None:
        """Why `spent` is over budget, with the numbers; None while it is within."""
        if self.usd is not None and over(spent.cost_usd, self.usd):
            return (
                f"the agents' reported cost {written(spent.cost_usd, 0)} USD exceeds "
                f"--fwloop-budget-usd={self.usd:g} after {spent.calls} call(s)"
            )
        if self.tokens is not None and spent.tokens > self.tokens:
            return (
                f"the agents used {spent.tokens:.0f} tokens (input + output), over "
                f"--fwloop-budget-tokens={self.tokens} after {spent.calls} call(s)"
            )
        return None


def _sum(key: str, total: float, value: float) -> float:
    """Costs add in decimal, as the providers wrote them (0.1 + 0.2 is the 0.3 a budget of 0.3
    allows); token counts are whole numbers, which a float adds exactly."""
    if key != "cost_usd":
        return total + value
    return float(exact(total) + exact(value))


def _tidy(value: float) -> float | int:
    """Token counts as integers in the records; costs keep their fraction."""
    return int(value) if float(value).is_integer() else round(value, 6)
