"""The option table is data (`config/option_table.json`): each row becomes a spec with its parser,
and a row the code cannot read fails at import, not when a user first sets the option."""

from __future__ import annotations

import pytest

from pytest_fwloop.config import option_table
from pytest_fwloop.config.option_spec import OptionSpec
from pytest_fwloop.config.options import KNOWN_HOSTS_ACCEPT_NEW, OPTIONS, spec_of


def test_every_row_becomes_a_spec_in_table_order_with_unique_names_and_flags() -> None:
    names = [row["name"] for row in option_table.rows()]
    assert [spec.name for spec in OPTIONS] == names
    assert len(set(names)) == len(names)
    flags = [spec.flag for spec in OPTIONS if spec.flag]
    assert len(set(flags)) == len(flags)
    assert all(flag.startswith("--") for flag in flags)


@pytest.mark.parametrize(
    ("row", "named"),
    [
        ({"name": "x", "help": "h", "default": "", "pares": "positive_int"}, "'pares'"),
        ({"name": "x", "help": "h", "default": "", "parse": "postive_int"}, "'postive_int'"),
    ],
)
def test_a_row_the_code_cannot_read_is_an_error_naming_the_key_or_parser(
    row: dict[str, object], named: str
) -> None:
    with pytest.raises(KeyError, match=named):
        OptionSpec.from_row(row)


def test_a_row_with_choices_parses_one_of_them_and_lists_them_when_not() -> None:
    spec = spec_of("review_rule")
    assert spec.parse(" Majority ") == "majority"
    with pytest.raises(ValueError, match=r"'all' \(every member approves\) or 'majority'"):
        spec.parse("most")
    assert spec_of("build_sandbox").parse("") == "none"


def test_the_help_names_the_value_the_code_compares_with() -> None:
    """Help written in the data cannot interpolate a constant: checked here instead."""
    assert KNOWN_HOSTS_ACCEPT_NEW in spec_of("ssh_known_hosts").help


def test_plain_pytest_registers_every_flag_and_ini_key_of_the_table(
    pytester: pytest.Pytester,
) -> None:
    config = pytester.parseconfig()
    for spec in OPTIONS:
        value = config.getini(spec.ini)  # an unregistered key raises
        # pytest < 8 gives [] for an unset option whose default is None
        assert value == spec.default or (spec.default is None and value == []), spec.name
        if spec.flag:
            assert config.getoption(spec.dest) is None, spec.name
