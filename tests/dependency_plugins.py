"""The pytest plugins that installing pytest-fwloop brings besides its own: every `pytest11`
entry point of a distribution its required dependencies pull in, transitively (no extras).

Such a plugin loads in every pytest run of the environment, with or without `--fwloop`, and
`-p no:fwloop` does not remove it. Used by tests/test_inert.py and benchmarks (P1).
"""

from __future__ import annotations

from importlib import metadata

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

OURS = "pytest-fwloop"


def required_distributions(root: str = OURS) -> set[str]:
    """Canonical names of the distributions installing `root` pulls in, `root` excluded."""
    found: set[str] = set()
    pending = [root]
    while pending:
        for line in metadata.distribution(pending.pop()).requires or []:
            requirement = Requirement(line)
            if requirement.marker is not None and not requirement.marker.evaluate({"extra": ""}):
                continue  # an extra's, or another platform's or Python's
            name = canonicalize_name(requirement.name)
            if name not in found:
                found.add(name)
                pending.append(name)
    return found


def dependency_plugins() -> dict[str, str]:
    """Entry point name -> `module (distribution)` of each pytest plugin the required
    dependencies bring; pytest's own distribution aside."""
    return {
        entry.name: f"{entry.value} ({name})"
        for name in sorted(required_distributions() - {"pytest"})
        for entry in metadata.distribution(name).entry_points
        if entry.group == "pytest11"
    }
