"""Docs that are generated or enumerate code-defined sets must not drift from the code."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest

from pytest_fwloop.config import options
from pytest_fwloop.core.machine.outcomes import Outcome
from pytest_fwloop.docgen.__main__ import PAGES

DOCS = Path(__file__).resolve().parents[1] / "docs"


@pytest.mark.parametrize(("page", "render"), PAGES.items(), ids=list(PAGES))
def test_generated_pages_match_what_they_document(page: str, render: Callable[[], str]) -> None:
    """The FSM, configuration and run-directory pages are renderings of the code's data."""
    assert (DOCS / page).read_text(encoding="utf-8") == render(), (
        f"docs/{page} drifted from the code; regenerate with `python -m pytest_fwloop.docgen docs`"
    )


def test_every_outcome_is_explained_in_troubleshooting() -> None:
    text = (DOCS / "troubleshooting.md").read_text(encoding="utf-8")
    missing = [o.value for o in Outcome if f"| `{o.value}` |" not in text]
    assert missing == []


def test_every_outcome_has_its_ending_in_the_endings_table() -> None:
    """docs/endings.md says, for each outcome, what the tree is left as and how to go on."""
    table = [
        line
        for line in (DOCS / "endings.md").read_text(encoding="utf-8").splitlines()
        if line.startswith("| ")
    ]
    missing = [o.value for o in Outcome if not any(f"`{o.value}`" in row for row in table)]
    assert missing == []


def test_option_help_names_every_registered_provider() -> None:
    from pytest_fwloop.agents.registry import PROVIDER_SYNTAX

    assert ", ".join(PROVIDER_SYNTAX) == options.PROVIDER_CHOICES
    assert options.PROVIDER_CHOICES in options.spec_of("coder").help


def test_every_provider_error_kind_is_an_outcome_of_the_same_name() -> None:
    """A provider failing for good ends the run as the outcome of the same name."""
    from pytest_fwloop.agents.errors import ProviderErrorKind

    kinds = {(k.name, k.value) for k in ProviderErrorKind}
    outcomes = {(o.name, o.value) for o in Outcome if o.name.startswith("PROVIDER_")}
    assert kinds == outcomes


def test_the_cores_exit_statuses_are_pytests() -> None:
    import pytest

    from pytest_fwloop.core.machine.outcomes import ExitStatus

    assert {s.name: s.value for s in ExitStatus} == {
        s.name: pytest.ExitCode[s.name].value for s in ExitStatus
    }


def test_every_relative_link_in_the_docs_names_a_file_that_exists() -> None:
    """Pages move and get renamed; a link to a page that is gone fails here, not for a reader.
    (The option table's sections link their pages through the generated configuration.md.)"""
    pages = [*DOCS.glob("*.md"), DOCS.parent / "README.md", DOCS.parent / "benchmarks/README.md"]
    broken = []
    for page in pages:
        for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text(encoding="utf-8")):
            path = target.split("#", 1)[0]
            if path and "://" not in path and not (page.parent / path).exists():
                broken.append(f"{page.name}: {target}")
    assert broken == []
