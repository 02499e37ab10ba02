"""A round's JUnit XML written from the child's records reads as pytest's own would."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import pytest

from pytest_fwloop.child.junit_writer import classname_and_name
from pytest_fwloop.config.option_table import CHILD_JUNIT_FLAG, CHILD_REPORT_FLAG

SUITE = """
import pytest


@pytest.fixture
def broken_setup():
    raise RuntimeError("rig <down> & out")


@pytest.fixture
def broken_teardown():
    yield
    raise OSError("console closed")


def test_passes():
    pass


def test_fails():
    assert "uart\\x07" == "spi", "bell \\x07 in the message"


def test_setup_error(broken_setup):
    pass


def test_teardown_error(broken_teardown):
    pass


def test_skips():
    pytest.skip("no board attached")


@pytest.mark.skip(reason="marked off")
def test_marked_skip():
    pass


@pytest.mark.xfail(reason="known DMA bug")
def test_xfails():
    assert 0


@pytest.mark.xfail(reason="fixed meanwhile")
def test_xpasses():
    pass


@pytest.mark.xfail(reason="must fail", strict=True)
def test_xpasses_strictly():
    pass


@pytest.mark.parametrize("baud", ['9600 <"a" & b>', "115200"])
def test_param(baud):
    assert baud != "115200"


class TestEcho:
    def test_crlf(self):
        assert True
"""


def cases(path: str) -> dict[tuple[str, str], tuple[str, str, str, str]]:
    """(classname, name) -> (element, its type, message, text) of each test case. Under xdist
    the record's traceback starts with the worker's line (`[gw0] linux -- Python 3.11.7 …`),
    which pytest's text leaves out: it is left out here too."""
    suite = ET.parse(path).getroot().find("testsuite")
    assert suite is not None
    found = {}
    for case in suite.iter("testcase"):
        inner = list(case)
        element = inner[0] if inner else None
        found[(case.get("classname", ""), case.get("name", ""))] = (
            element.tag if element is not None else "",
            element.get("type", "") if element is not None else "",
            element.get("message", "") if element is not None else "",
            re.sub(r"^\[gw\d+\] .*\n", "", element.text or "").strip()
            if element is not None
            else "",
        )
    return found


def totals(path: str) -> dict[str, str | None]:
    suite = ET.parse(path).getroot().find("testsuite")
    assert suite is not None
    return {key: suite.get(key) for key in ("name", "tests", "errors", "failures", "skipped")}


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["child", "child-xdist"])
def test_the_childs_junit_matches_pytests_own_for_the_same_session(
    pytester: pytest.Pytester, workers: list[str]
) -> None:
    """Both writers in one session: every test case, its outcome element, type, message and
    text, and the suite's counts are the same."""
    pytester.makepyfile(test_rig=SUITE)
    pytester.runpytest_subprocess(
        "-p",
        "no:randomly",
        "--junitxml=pytest.xml",
        f"{CHILD_REPORT_FLAG}=results.json",
        f"{CHILD_JUNIT_FLAG}=ours.xml",
        *workers,
    )
    theirs, ours = str(pytester.path / "pytest.xml"), str(pytester.path / "ours.xml")
    assert cases(ours) == cases(theirs)
    # pytest < 8 counts a test whose teardown errs after its call passed twice.
    assert {**totals(ours), "tests": None} == {**totals(theirs), "tests": None}
    assert totals(ours)["tests"] == str(len(cases(ours))) == "12"
    assert cases(ours)[("test_rig", 'test_param[9600 <"a" & b>]')][0] == ""
    assert cases(ours)[("test_rig", "test_fails")][2].startswith("AssertionError: bell #x07")


@pytest.mark.parametrize(
    ("nodeid", "expected"),
    [
        ("tests/test_uart.py::test_echo", ("tests.test_uart", "test_echo")),
        (
            "tests/test_uart.py::TestEcho::test_crlf[115200]",
            ("tests.test_uart.TestEcho", "test_crlf[115200]"),
        ),
        ("test_a.py::test_b[x::y/z.py]", ("test_a", "test_b[x::y/z.py]")),
    ],
)
def test_a_case_is_named_as_pytest_names_it(nodeid: str, expected: tuple[str, str]) -> None:
    assert classname_and_name(nodeid) == expected
