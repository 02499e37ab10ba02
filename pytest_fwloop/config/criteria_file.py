"""`--fwloop-criteria`: a preset name, or a criteria file read and validated here.

The file is a boundary, so its schema is a pydantic model here; `convergence` stays plain rules.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from pytest_fwloop.core.verdict.convergence import PRESETS, ConvergenceCriteria, CriteriaError

if sys.version_info >= (3, 11):
    import tomllib

if TYPE_CHECKING:
    import pathlib


def load_criteria(
    spec: str, rootdir: pathlib.Path, origin: str = "--fwloop-criteria"
) -> ConvergenceCriteria:
    """Resolve --fwloop-criteria: a preset name, or a .toml/.json file relative to `rootdir`;
    `origin` names where `spec` came from in errors."""
    if spec in PRESETS:
        return PRESETS[spec]
    where = f"fwloop: {origin}={spec}"
    path = rootdir / spec
    if not path.is_file():
        raise CriteriaError(
            f"{where}: {spec!r} is neither a preset nor a file ({path} not found); "
            f"use one of {', '.join(PRESETS)} or a .toml/.json criteria file"
        )
    if path.suffix not in (".toml", ".json"):
        raise CriteriaError(
            f"{where}: {path.name} is not a .toml or .json file; rename or convert it"
        )
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CriteriaError(f"{where}: cannot read {path} ({exc}); check the file") from None
    return parse_criteria(text, path.suffix, where)


class _CriteriaFile(BaseModel):
    """The schema of a --fwloop-criteria file: an optional preset plus field overrides."""

    model_config = ConfigDict(extra="forbid", strict=True)

    preset: Literal["standard", "strict", "balanced", "aggressive"] | None = None
    target_pass_rate: float | None = None
    failure_rate_threshold: float | None = None
    failure_rate_consecutive_limit: int | None = None
    avg_improvement_window: int | None = None
    slow_improvement_threshold: float | None = None
    plateau_improvement_threshold: float | None = None
    min_iterations_for_slow_improvement: int | None = None
    min_iterations_for_plateau: int | None = None
    stable_iterations_required: int | None = None
    stability_delta_threshold: float | None = None
    no_improvement_epsilon: float | None = None
    consecutive_no_improvement_limit: int | None = None


def _parse_toml(text: str, where: str) -> object:
    if sys.version_info >= (3, 11):
        try:
            return tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise CriteriaError(f"{where}: not valid TOML ({exc}); fix the file") from None
    raise CriteriaError(
        f"{where}: reading TOML needs Python 3.11 or newer; write the criteria as a .json file"
    )


def _parse_json(text: str, where: str) -> object:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise CriteriaError(f"{where}: not valid JSON ({exc}); fix the file") from None


def _validation_message(exc: ValidationError, where: str) -> str:
    error = exc.errors()[0]
    field = ".".join(str(part) for part in error["loc"])
    if error["type"] == "extra_forbidden":
        valid = ", ".join(_CriteriaFile.model_fields)
        return f"{where}: unknown field {field!r}; valid fields: {valid}"
    return f"{where}: field {field!r}: {error['msg']} (got {error['input']!r}); fix the file"


def parse_criteria(text: str, suffix: str, where: str) -> ConvergenceCriteria:
    """The criteria a .toml or .json document (`suffix`) gives: a preset plus field overrides.

    `where` names the source in every `CriteriaError`.
    """
    document = _parse_toml(text, where) if suffix == ".toml" else _parse_json(text, where)
    if not isinstance(document, dict):
        raise CriteriaError(
            f"{where}: expected a table of criteria fields, got {type(document).__name__}; "
            "write field = value pairs at the top level"
        )
    try:
        parsed = _CriteriaFile.model_validate(document)
    except ValidationError as exc:
        raise CriteriaError(_validation_message(exc, where)) from None
    overrides = parsed.model_dump(exclude_unset=True, exclude={"preset"})
    try:
        return dataclasses.replace(PRESETS[parsed.preset or "standard"], **overrides)
    except CriteriaError as exc:
        raise CriteriaError(f"{where}: {exc}") from None
