"""What one option is (its names, default and kind) and how its text becomes its value.

A parser returns the value or raises `ValueError` with the reason alone; `options` quotes it in a
`pytest.UsageError` naming the bad value and where it came from. The table (`option_table.json`)
names each option's parser (`"parse": "positive_int"`) or its choices; `OptionSpec.from_row`
turns a row into a spec.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


def _whole(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise ValueError("must be a whole number") from None


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise ValueError("must be a number") from None


def parse_positive_int(text: str) -> int:
    value = _whole(text)
    if value < 1:
        raise ValueError("must be a whole number >= 1")
    return value


def parse_non_negative_int(text: str) -> int:
    value = _whole(text)
    if value < 0:
        raise ValueError("must be a whole number >= 0")
    return value


def parse_positive_float(text: str) -> float:
    value = _number(text)
    if not value > 0:
        raise ValueError("must be a number > 0")
    return value


def parse_non_negative_float(text: str) -> float:
    value = _number(text)
    if not value >= 0:
        raise ValueError("must be a number >= 0")
    return value


def parse_unit_float(text: str) -> float:
    value = _number(text)
    if not 0.0 <= value <= 1.0:
        raise ValueError("must be a number between 0 and 1")
    return value


def parse_context_cap(text: str) -> int:
    value = _whole(text)
    if value < 1024:
        raise ValueError("must be at least 1024 bytes; below that no failure excerpt fits")
    return value


def parse_source_budget(text: str) -> int:
    value = _whole(text)
    if 0 < value < 4096:
        raise ValueError(
            "must be 0 (no code sent) or at least 4096 bytes; below that not one function fits"
        )
    return value


def one_of(*choices: str, meanings: tuple[str, ...] = (), blank: str = "") -> Callable[[str], str]:
    """A parser taking one of `choices`, case and surrounding blanks aside; an empty text is
    `blank` when that is given. The error lists the choices, with their `meanings` if given."""
    if meanings:
        said = " or ".join(f"'{c}' ({m})" for c, m in zip(choices, meanings, strict=True))
    else:
        said = f"one of {', '.join(choices)}"

    def parse(text: str) -> str:
        lowered = text.strip().lower() or blank
        if lowered not in choices:
            raise ValueError(f"must be {said}")
        return lowered

    return parse


def parse_on_off(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered not in ("on", "off"):
        raise ValueError("must be 'on' or 'off'")
    return lowered == "on"


def parse_bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off", ""):
        return False
    raise ValueError("must be true or false")


#: The key of the default tolerance, as `core.metrics.ANY_METRIC` reads it (a test checks they
#: agree; kept literal so plain pytest does not import the models).
ANY_METRIC = "*"


def parse_metric_tolerance(text: str) -> dict[str, float]:
    """`0.05 boot_ms=0.10 coverage=0.01` (commas allowed): a bare number is every metric's
    tolerance, `NAME=NUMBER` one metric's; relative, 0.05 = 5%."""
    tolerances: dict[str, float] = {}
    for item in text.replace(",", " ").split():
        name, _, value = item.rpartition("=")
        if _ and not name:
            raise ValueError(f"{item!r} names no metric; write NAME=NUMBER")
        try:
            number = float(value)
        except ValueError:
            raise ValueError(f"{item!r}: {value!r} is not a number") from None
        if not number >= 0:
            raise ValueError(f"{item!r}: a tolerance must be a number >= 0")
        tolerances[name or ANY_METRIC] = number
    return tolerances


def parse_text(text: str) -> str:
    return text


def parse_words(text: str) -> list[str]:
    """A list given on one line (a flag, an environment variable): separated by white space."""
    return text.split()


def parse_labgrid_tags(text: str) -> str:
    """`board=stm32f4 [key=value …]` (commas allowed), as `labgrid-client reserve` takes them:
    the tags checked and joined by single spaces."""
    tags = text.replace(",", " ").split()
    bad = [tag for tag in tags if not re.fullmatch(r"[A-Za-z0-9_.-]+=[^=\s]+", tag)]
    if bad:
        raise ValueError(f"{bad[0]!r} is not a labgrid tag (key=value, e.g. board=stm32f4)")
    return " ".join(tags)


@dataclass(frozen=True)
class OptionSpec:
    """One option. `flag` None means ini/environment only; `kind` 'linelist' reads a list."""

    name: str
    help: str
    default: Any
    parse: Callable[[str], Any] = parse_text
    flag: str | None = None
    kind: str = "string"
    metavar: str = "VALUE"
    #: A value shown in error messages (`e.g. fwloop_x = …`); set for the environment options.
    example: str = ""

    @property
    def ini(self) -> str:
        return f"fwloop_{self.name}"

    @property
    def env(self) -> str:
        return f"FWLOOP_{self.name.upper()}"

    @property
    def dest(self) -> str:
        return f"fwloop_{self.name}"

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> OptionSpec:
        """The spec of one row of `option_table.json`; a key or parser the table may not have
        is a `KeyError` naming it, so a typo in the table fails every test at import."""
        unknown = set(row) - _ROW_KEYS
        if unknown:
            raise KeyError(f"option {row.get('name')!r}: unknown key(s) {sorted(unknown)}")
        if "choices" in row:
            parse = one_of(
                *row["choices"], meanings=tuple(row.get("meanings", ())), blank=row.get("blank", "")
            )
        else:
            parse = PARSERS[row.get("parse", "text")]
        return cls(
            name=row["name"],
            help=row["help"],
            default=row["default"],
            parse=parse,
            flag=row.get("flag"),
            kind=row.get("kind", "string"),
            metavar=row.get("metavar", "VALUE"),
            example=row.get("example", ""),
        )


#: What a row of the table may say (`option_table.json`).
_ROW_KEYS = frozenset(
    {"name", "help", "default", "flag", "kind", "metavar", "example", "parse", "choices"}
    | {"meanings", "blank"}
)

#: The parsers a row names with `"parse"` (a row with `"choices"` gets `one_of`).
PARSERS: dict[str, Callable[[str], Any]] = {
    "text": parse_text,
    "words": parse_words,
    "bool": parse_bool,
    "on_off": parse_on_off,
    "positive_int": parse_positive_int,
    "non_negative_int": parse_non_negative_int,
    "positive_float": parse_positive_float,
    "non_negative_float": parse_non_negative_float,
    "unit_float": parse_unit_float,
    "context_cap": parse_context_cap,
    "source_budget": parse_source_budget,
    "metric_tolerance": parse_metric_tolerance,
    "labgrid_tags": parse_labgrid_tags,
}
