"""The user's own report files (`--junitxml`, pytest-html's `--html`) for the final tree.

Each child run writes its reports into its round (the loop's own `--junitxml` and `--html` come
last on the child's command line, so they win over the user's); when the run ends, the round
that tested the tree the user is left with is copied to the user's paths: the last iteration on
success, the baseline when the tree was restored. The JUnit file gains properties naming the
run and the iteration, so a CI dashboard shows where its numbers come from.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pytest_fwloop.child.files import Attempt


@dataclass(frozen=True)
class UserReports:
    """Where the user asked for reports, resolved against the directory pytest ran in."""

    junit: Path | None
    html: Path | None

    @classmethod
    def of(cls, config: pytest.Config) -> UserReports:
        base = config.invocation_params.dir
        junit = config.getoption("xmlpath", None)
        html = config.getoption("htmlpath", None)
        return cls(base / junit if junit else None, base / html if html else None)

    def child_args(self, report: Path, run_id: str, iteration: int) -> list[str]:
        """The child's own HTML report in its round (its JUnit XML is always written), named
        by pytest-metadata when installed (pytest-html depends on it)."""
        if self.html is None:
            return []
        return [
            f"--html={report}",
            *("--metadata", "fwloop_run", run_id),
            *("--metadata", "fwloop_iteration", str(iteration)),
        ]

    def deliver(self, run: Attempt, run_id: str, iteration: int) -> list[str]:
        """Copy the reports of a whole-suite run to the user's paths; one line for each file
        written."""
        import xml.etree.ElementTree as ET  # at the end only: not on the way to the tests

        written = []
        junit, html, round_folder = run.junit, run.html, run.log.parent
        if self.junit is not None and junit.is_file():
            self.junit.parent.mkdir(parents=True, exist_ok=True)
            raw = junit.read_bytes()
            try:
                self.junit.write_bytes(with_properties(raw, run_id, iteration))
                written.append(f"JUnit XML of iteration {iteration}: {self.junit}")
            except ET.ParseError as exc:  # a child killed while writing it
                self.junit.write_bytes(raw)
                written.append(
                    f"JUnit XML of iteration {iteration}, copied as it was ({exc}): {self.junit}"
                )
        if self.html is not None and html.is_file():
            self.html.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(html, self.html)
            if (round_folder / "assets").is_dir():
                assets = self.html.parent / "assets"
                shutil.copytree(round_folder / "assets", assets, dirs_exist_ok=True)
            written.append(f"HTML report of iteration {iteration}: {self.html}")
        return written


def with_properties(xml: bytes, run_id: str, iteration: int) -> bytes:
    """pytest's JUnit XML with `fwloop_run` and `fwloop_iteration` on every test suite."""
    import xml.etree.ElementTree as ET

    root = ET.fromstring(xml)
    suites = [root] if root.tag == "testsuite" else root.findall("testsuite")
    for suite in suites:
        properties = suite.find("properties")
        if properties is None:
            properties = ET.Element("properties")
            suite.insert(0, properties)
        for name, value in (("fwloop_run", run_id), ("fwloop_iteration", str(iteration))):
            ET.SubElement(properties, "property", name=name, value=value)
    return bytes(ET.tostring(root, encoding="utf-8", xml_declaration=True))
