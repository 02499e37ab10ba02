"""The option table as plain pytest needs it: every flag and ini key registered, nothing parsed.

The table itself is data, `option_table.json` beside this module: each option's name, help,
default, flag, kind and how its text is parsed, in sections. Plain pytest reads it here to
register the options; `options.py` builds the parsers from it only when a value is read (by the
loop, or by an environment fixture a test requests). Data, not code, because pytest rewrites the
asserts of every module of an installed plugin and, where bytecode is not written
(`PYTHONDONTWRITEBYTECODE`, a read-only site-packages), compiles them again in every process:
a JSON file of the same table loads in a fraction of that (benchmarks/README.md, P1).
"""

from __future__ import annotations

import argparse
import json
from importlib import resources
from typing import Any

import pytest

#: The child pytest's own flags, given by the controller (`loop/child_runner.py`).
CHILD_REPORT_FLAG = "--fwloop-child-report"
CHILD_SELECT_FLAG = "--fwloop-child-select"
#: Where a child writes its round's JUnit XML from its records (`junit_writer`).
CHILD_JUNIT_FLAG = "--fwloop-child-junit"
#: Where a whole-suite child writes which lines each test ran (`child/spectra/python_lines.py`).
CHILD_SPECTRUM_FLAG = "--fwloop-child-spectrum"
#: Where a child recording the spectrum keeps each test's gcov counts (`child/spectra/gcov.py`).
CHILD_GCOV_FLAG = "--fwloop-child-gcov"
#: Where a child recording the spectrum keeps its QEMU guests' logs
#: (`child/spectra/qemu_blocks.py`).
CHILD_QEMU_FLAG = "--fwloop-child-qemu"
#: The order file the `fwloop` command hands a controller that continues a run (DESIGN.md §11).
OPERATOR_FLAG = "--fwloop-operator"
OPERATOR_DEST = "fwloop_operator"

#: The ini type of every scalar option. pytest >= 9.2 takes a union, so a native `[tool.pytest]`
#: table may write `fwloop_max_iter = 10` as TOML gives it; older pytests read ini text only.
#: Either way `options.resolve` parses the value's text, with the option's own error messages.
SCALAR_INI_TYPE: Any = str | int | float if pytest.version_tuple >= (9, 2) else "string"


def sections() -> list[dict[str, Any]]:
    """The table: a list of `{"section": title, "see": [page of docs/, ...], "options": [row,
    ...]}`, in the order `docs/configuration.md` shows them."""
    # As the schemas are read: installed as a zip too. Pytest has imported `resources` already.
    text = (resources.files("pytest_fwloop.config") / "option_table.json").read_bytes()
    loaded: list[dict[str, Any]] = json.loads(text)
    return loaded


def rows() -> list[dict[str, Any]]:
    """Every option's row, in table order."""
    return [row for section in sections() for row in section["options"]]


def add_options(parser: pytest.Parser) -> None:
    group = parser.getgroup("fwloop", "closed-loop firmware repair (pytest-fwloop)")
    group.addoption(
        "--fwloop",
        action="store_true",
        default=False,
        help="run the suite as a coder/reviewer repair loop; without it the plugin is inert",
    )
    for row in rows():
        ini = f"fwloop_{row['name']}"
        kind = row.get("kind", "string")
        if "flag" in row:
            group.addoption(
                row["flag"],
                dest=ini,
                default=None,
                metavar=row.get("metavar", "VALUE"),
                help=f"{row['help']} (ini: {ini})",
            )
        ini_type = kind if kind in ("linelist", "bool") else SCALAR_INI_TYPE
        parser.addini(ini, row["help"], type=ini_type, default=row["default"])
    group.addoption(
        OPERATOR_FLAG,
        dest=OPERATOR_DEST,
        default="",
        metavar="FILE",
        help="continue a recorded run as an operator's order says (written by `fwloop confirm`, "
        "`followup`, `resume` and `chat`, which start pytest with it; not for direct use)",
    )
    group.addoption(CHILD_REPORT_FLAG, default="", help=argparse.SUPPRESS)
    group.addoption(CHILD_SELECT_FLAG, default="", help=argparse.SUPPRESS)
    group.addoption(CHILD_JUNIT_FLAG, default="", help=argparse.SUPPRESS)
    group.addoption(CHILD_SPECTRUM_FLAG, default="", help=argparse.SUPPRESS)
    group.addoption(CHILD_GCOV_FLAG, default="", help=argparse.SUPPRESS)
    group.addoption(CHILD_QEMU_FLAG, default="", help=argparse.SUPPRESS)
