"""Docs that are generated or enumerate code-defined sets must not drift from the code."""

from __future__ import annotations

from pathlib import Path

from pytest_fwloop import options, records
from pytest_fwloop.outcomes import Outcome

DOCS = Path(__file__).resolve().parents[1] / "docs"


def test_configuration_reference_is_generated_from_the_options() -> None:
    assert (DOCS / "configuration.md").read_text(encoding="utf-8") == options.render_markdown(), (
        "regenerate with `python -m pytest_fwloop.options > docs/configuration.md`"
    )


def test_run_directory_reference_is_generated_from_the_records() -> None:
    assert (DOCS / "run-directory.md").read_text(encoding="utf-8") == records.render_markdown(), (
        "regenerate with `python -m pytest_fwloop.records > docs/run-directory.md`"
    )


def test_every_outcome_is_explained_in_troubleshooting() -> None:
    text = (DOCS / "troubleshooting.md").read_text(encoding="utf-8")
    missing = [o.value for o in Outcome if f"| `{o.value}` |" not in text]
    assert missing == []


def test_option_help_names_every_registered_provider() -> None:
    from pytest_fwloop.agents.registry import PROVIDER_SYNTAX

    assert ", ".join(PROVIDER_SYNTAX) == options.PROVIDER_CHOICES


def test_every_provider_error_kind_is_an_outcome_of_the_same_name() -> None:
    """A provider failing for good ends the run as the outcome of the same name."""
    from pytest_fwloop.agents.errors import ProviderErrorKind

    kinds = {(k.name, k.value) for k in ProviderErrorKind}
    outcomes = {(o.name, o.value) for o in Outcome if o.name.startswith("PROVIDER_")}
    assert kinds == outcomes


def test_the_cores_exit_statuses_are_pytests() -> None:
    import pytest

    from pytest_fwloop.outcomes import ExitStatus

    assert {s.name: s.value for s in ExitStatus} == {
        s.name: pytest.ExitCode[s.name].value for s in ExitStatus
    }
