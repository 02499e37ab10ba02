"""The board farm's options (DESIGN.md §14): mistakes stop the run before anything happens."""

from __future__ import annotations

import pytest


def test_a_bad_tag_is_a_usage_error_naming_it(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_ok="def test_ok():\n    pass\n")
    result = pytester.runpytest_subprocess(
        "--fwloop", "--fwloop-coder=rules", "--fwloop-labgrid-reserve=board"
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*--fwloop-labgrid-reserve*'board' is not a labgrid tag (key=value, e.g. board=stm32f4)*"]
    )
    assert not (pytester.path / ".fwloop").exists()


def test_a_missing_labgrid_client_is_a_usage_error_naming_the_extra(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeini("[pytest]\nfwloop_labgrid_client = no-such-labgrid-client\n")
    pytester.makepyfile(test_ok="def test_ok():\n    pass\n")
    result = pytester.runpytest_subprocess(
        "--fwloop", "--fwloop-coder=rules", "--fwloop-labgrid-reserve=board=stm32f4"
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "*--fwloop-labgrid-reserve: the labgrid client 'no-such-labgrid-client' is not on "
            "PATH*pip install 'pytest-fwloop?labgrid?'*"
        ]
    )
    assert not (pytester.path / ".fwloop").exists()
