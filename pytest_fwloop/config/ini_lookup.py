"""The rootdir's fwloop options as pytest would read them, for the `fwloop` command.

The `fwloop` command runs outside pytest but must look where `pytest --fwloop` writes: the run
directories (`fwloop_run_dir`) and the knowledge base (`fwloop_knowledge`). Precedence is the
loop's: `FWLOOP_<NAME>`, then the first configuration file pytest would use in the rootdir
(pytest.ini or .pytest.ini whatever they hold, pyproject.toml with `[tool.pytest.ini_options]` or
`[tool.pytest]`, tox.ini with `[pytest]`, setup.cfg with `[tool:pytest]`), then the default.
"""

from __future__ import annotations

import configparser
import os
import sys
from pathlib import Path
from typing import Any

from pytest_fwloop.config.options import spec_of

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - pytest brings tomli where tomllib is missing
    import tomli as tomllib  # type: ignore[import-not-found, unused-ignore]

#: (file, section) in pytest's order; None: the file counts even without the section.
_INI_FILES = (
    ("pytest.ini", "pytest"),
    (".pytest.ini", "pytest"),
    ("pyproject.toml", None),
    ("tox.ini", "pytest"),
    ("setup.cfg", "tool:pytest"),
)


class IniError(Exception):
    """A configuration file that cannot be read; the message names it."""


def option_value(root: Path, name: str) -> str:
    """The value of option `fwloop_<name>` for runs in `root`, as text."""
    spec = spec_of(name)
    from_env = os.environ.get(spec.env)
    if from_env:
        return from_env
    found = _ini_options(root)
    if found is not None and spec.ini in found:
        return str(found[spec.ini]).strip()
    return str(spec.default)


def _ini_options(root: Path) -> dict[str, Any] | None:
    """The options of the configuration file pytest would use in `root`, or None."""
    for name, section in _INI_FILES:
        path = root / name
        if not path.is_file():
            continue
        try:
            if name == "pyproject.toml":
                tool = tomllib.loads(path.read_text(encoding="utf-8")).get("tool", {})
                table = tool.get("pytest")
                if isinstance(table, dict):
                    options = table.get("ini_options", table)
                    return options if isinstance(options, dict) else {}
                continue
            parser = configparser.ConfigParser(interpolation=None, strict=False)
            parser.read_string(path.read_text(encoding="utf-8"), source=str(path))
        except (OSError, ValueError, configparser.Error) as exc:
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise IniError(f"fwloop: cannot read {path}: {first}") from None
        if parser.has_section(section or ""):
            return dict(parser.items(section or ""))
        if name in ("pytest.ini", ".pytest.ini"):
            return {}  # pytest uses it even without a [pytest] section
    return None
