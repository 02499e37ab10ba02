"""Every fwloop option, once: command line flag, ini twin, environment variable, default, parser;
read by precedence.

The table is data (`option_table.json`, registered with pytest by `option_table.py`, which plain
pytest loads instead of this module); here each row becomes an `OptionSpec` with its parser.
Precedence is command line > environment (`FWLOOP_<NAME>`) > ini > default, and every bad value
is a `pytest.UsageError` naming the value and where it came from. The loop reads its options all
at once (`loop_options`); an environment fixture reads its own when a test requests it.
"""

from __future__ import annotations

import os
from typing import Any

import pytest

from pytest_fwloop.config.option_spec import OptionSpec
from pytest_fwloop.config.option_table import OPERATOR_FLAG, rows

#: The provider syntaxes the coder's help lists; a test checks both against the registry.
PROVIDER_CHOICES = "claude, codex, openai:MODEL@URL, command:PATH, scripted:DIR, rules"
#: The fwloop_ssh_known_hosts value that turns strict host key checking off for unknown hosts.
KNOWN_HOSTS_ACCEPT_NEW = "insecure-accept-new"

OPTIONS: tuple[OptionSpec, ...] = tuple(OptionSpec.from_row(row) for row in rows())

_BY_NAME = {spec.name: spec for spec in OPTIONS}

#: Flags whose value is the next argument unless written `--flag=value`.
VALUE_FLAGS = frozenset(spec.flag for spec in OPTIONS if spec.flag is not None) | {OPERATOR_FLAG}


def spec_of(name: str) -> OptionSpec:
    """The option called `name` (without its `fwloop_` prefix)."""
    return _BY_NAME[name]


def resolve(config: pytest.Config, name: str) -> Any:
    """The option's value by precedence, parsed and validated."""
    spec = _BY_NAME[name]
    cli = config.getoption(spec.dest) if spec.flag is not None else None
    if cli is not None:
        return _parse(spec, cli, spec.flag or "")
    env = os.environ.get(spec.env)
    if env is not None and env != "":
        if spec.kind == "linelist":
            return [line.strip() for line in env.splitlines() if line.strip()]
        return _parse(spec, env, f"${spec.env}")
    raw = config.getini(spec.ini)
    if spec.kind == "linelist":
        return list(raw)
    if spec.kind == "bool" or raw is None:
        return raw
    if raw == []:  # pytest < 8 gives [] for an unset option registered with default None
        return _default(spec)
    if raw == spec.default or (isinstance(raw, str) and raw.strip() == ""):
        return _default(spec)
    return _parse(spec, str(raw), f"ini {spec.ini}")


def _default(spec: OptionSpec) -> Any:
    """The default as its parser reads it: a default written as the user would (`on`) is
    typed like a value the user gave."""
    if isinstance(spec.default, str) and spec.default:
        return spec.parse(spec.default)
    return spec.default


def origin(config: pytest.Config, name: str) -> str:
    """Where the option's value comes from, as an error message should name it: the flag, the
    environment variable, or the ini key (a user who wrote the ini must not be sent to a flag)."""
    spec = _BY_NAME[name]
    if spec.flag is not None and config.getoption(spec.dest) is not None:
        return spec.flag
    if os.environ.get(spec.env):
        return f"${spec.env}"
    return f"ini {spec.ini}"


def _parse(spec: OptionSpec, text: str, source: str) -> Any:
    try:
        return spec.parse(text.strip())
    except ValueError as exc:
        reason = str(exc)
        where = f"{source}={text}" if source.startswith("-") else f"{source} = {text!r}"
        raise pytest.UsageError(f"fwloop: {where}: {reason}") from None


def strip_controller_args(args: list[str]) -> list[str]:
    """The user's arguments minus the controller's own, for the child runs."""
    kept: list[str] = []
    skip_next = False
    for arg in args:
        if skip_next:
            skip_next = False
            continue
        if arg == "--fwloop":
            continue
        flag = arg.split("=", 1)[0]
        if flag in VALUE_FLAGS:
            skip_next = "=" not in arg
            continue
        kept.append(arg)
    return kept
