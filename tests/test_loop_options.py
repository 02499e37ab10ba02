"""The loop's options, read once by precedence into one value the settings are derived from."""

from __future__ import annotations

import pytest

from pytest_fwloop.config.loop_options import LOOP_OPTION_NAMES, read_options
from pytest_fwloop.config.options import OPTIONS


def test_the_value_holds_every_option_of_the_table_but_the_environment_fixtures() -> None:
    """An option added to the table reaches the loop only through this value; the fixtures'
    options (those with an example for their errors) are read by the fixture that needs them."""
    assert tuple(spec.name for spec in OPTIONS if not spec.example) == LOOP_OPTION_NAMES


def test_each_option_comes_from_the_flag_then_the_environment_then_the_ini(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("MAX_ITER", "GOAL", "PROTECT", "REVIEW_ROUNDS"):
        monkeypatch.delenv(f"FWLOOP_{name}", raising=False)
    monkeypatch.setenv("FWLOOP_GOAL", "from the environment")
    pytester.makeini(
        "[pytest]\n"
        "fwloop_max_iter = 3\n"
        "fwloop_goal = from the ini\n"
        "fwloop_protect =\n    fw/boot/**\n    fw/keys/**\n"
    )
    options = read_options(pytester.parseconfig("--max-iter=5"))
    assert options.max_iter == 5
    assert options.goal == "from the environment"
    assert options.protect == ("fw/boot/**", "fw/keys/**")
    assert options.review_rounds == 3
    assert [options.origin(n) for n in ("max_iter", "goal", "protect", "review_rounds")] == [
        "--max-iter",
        "$FWLOOP_GOAL",
        "ini fwloop_protect",
        "ini fwloop_review_rounds",
    ]


def test_a_bad_value_is_a_usage_error_naming_it_and_where_it_was_written(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("FWLOOP_CONTEXT_BYTES", raising=False)
    pytester.makeini("[pytest]\nfwloop_context_bytes = 100\n")
    with pytest.raises(pytest.UsageError) as raised:
        read_options(pytester.parseconfig())
    assert str(raised.value) == (
        "fwloop: ini fwloop_context_bytes = '100': must be at least 1024 bytes; below that no "
        "failure excerpt fits"
    )
