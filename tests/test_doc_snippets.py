"""The docs' snippets, pasted as a user would: every ini block is read by pytest itself and each
`fwloop_*` value it sets must parse; the minimal coder must answer in the coder's schema."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from pytest_fwloop.agents.registry import parse_role_specs
from pytest_fwloop.config.options import resolve
from pytest_fwloop.core.records.agent_protocol import load_schema

ROOT = Path(__file__).resolve().parent.parent
DOCS = sorted([ROOT / "README.md", *ROOT.glob("docs/*.md"), *ROOT.glob("examples/*/README.md")])
FENCE = re.compile(r"^```(\w+)\n(.*?)^```$", re.MULTILINE | re.DOTALL)
ROLES = ("coder", "reviewer", "tester")


def snippets(language: str) -> list[tuple[str, str]]:
    found = []
    for doc in DOCS:
        for number, match in enumerate(FENCE.finditer(doc.read_text(encoding="utf-8")), 1):
            if match.group(1) == language:
                found.append((f"{doc.relative_to(ROOT)}#{number}", match.group(2)))
    return found


INI = snippets("ini")


def test_the_docs_have_ini_snippets_to_check() -> None:
    assert len(INI) >= 6


#: The options Zephyr's pytest-twister-harness adds, which its snippets' `addopts` name: the
#: plugin is in the user's environment, not in ours.
TWISTER_HARNESS_OPTIONS = """
def pytest_addoption(parser):
    parser.addoption("--twister-harness", action="store_true")
    parser.addoption("--device-type")
    parser.addoption("--build-dir")
"""


@pytest.mark.parametrize("text", [text for _, text in INI], ids=[name for name, _ in INI])
def test_every_ini_snippet_parses_as_written(pytester: pytest.Pytester, text: str) -> None:
    ini = text if "[pytest]" in text else "[pytest]\n" + text
    if "--twister-harness" in ini:
        pytester.makeconftest(TWISTER_HARNESS_OPTIONS)
    pytester.makeini(ini)
    config = pytester.parseconfig()
    keys = re.findall(r"^(fwloop_\w+)\s*=", ini, re.MULTILINE)
    assert keys
    for key in keys:
        name = key.removeprefix("fwloop_")
        value = resolve(config, name)
        assert "#" not in str(value), f"{key}: a comment became part of the value: {value!r}"
        if name in ROLES:
            parse_role_specs(value, name, pytester.path)


def test_the_minimal_coder_answers_in_the_coders_schema(tmp_path: Path) -> None:
    [code] = [text for name, text in snippets("python") if name.startswith("docs/providers.md")]
    coder = tmp_path / "coder.py"
    coder.write_text(code)
    request = {"role": "coder", "iteration": 2, "failures": [{"nodeid": "t.py::test_a"}]}
    done = subprocess.run(
        [sys.executable, str(coder)], input=json.dumps(request), capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    jsonschema.validate(json.loads(done.stdout), load_schema("coder"))
