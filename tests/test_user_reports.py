"""The user's report files: the JUnit XML of the round, named, or copied as it was."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from pytest_fwloop.child.files import next_attempt
from pytest_fwloop.reports.user_files import UserReports, with_properties

JUNIT = b'<?xml version="1.0"?><testsuites><testsuite name="pytest" tests="1"/></testsuites>'


def test_every_suite_gets_the_run_and_the_iteration() -> None:
    root = ET.fromstring(with_properties(JUNIT, "run-7", 3))
    names = {p.get("name"): p.get("value") for p in root.iter("property")}
    assert names == {"fwloop_run": "run-7", "fwloop_iteration": "3"}


def test_a_junit_file_cut_short_is_copied_as_it_was(tmp_path: Path) -> None:
    (tmp_path / "junit.xml").write_bytes(JUNIT[:40])
    target = tmp_path / "ci" / "junit.xml"
    [line] = UserReports(target, None).deliver(next_attempt(tmp_path), "run-7", 1)
    assert "copied as it was" in line
    assert target.read_bytes() == JUNIT[:40]
