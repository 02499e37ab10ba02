"""`--fwloop-criteria`: a preset name, or a criteria file read here and parsed by the core."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pytest_fwloop.convergence import PRESETS, ConvergenceCriteria, CriteriaError, parse_criteria

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
