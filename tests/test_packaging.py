"""What a release ships: the sdist and the wheel built from the tracked files."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """sdist and wheel of the tracked tree, built in a copy (the build writes egg-info)."""
    tracked = (
        subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z"], capture_output=True, check=True)
        .stdout.decode()
        .split("\0")
    )
    copy = tmp_path_factory.mktemp("src")
    for name in filter(None, tracked):
        if (ROOT / name).is_file():
            (copy / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, copy / name)
    out = copy / "dist"
    build = (
        "from setuptools import build_meta as b; "
        f"b.build_sdist({str(out)!r}); b.build_wheel({str(out)!r})"
    )
    done = subprocess.run(
        [sys.executable, "-c", build], cwd=copy, check=True, capture_output=True, text=True
    )
    (copy / "build.log").write_text(done.stdout + done.stderr)
    return out


def test_the_build_uses_no_deprecated_metadata(dist: Path) -> None:
    """setuptools fails builds that still use what it deprecates once a date passes (the
    license as a TOML table: 2027-02-18)."""
    log = (dist.parent / "build.log").read_text()
    assert "deprecated" not in log.lower(), log


def test_the_sdist_ships_the_license_and_no_tests_it_cannot_run(dist: Path) -> None:
    [sdist] = dist.glob("*.tar.gz")
    with tarfile.open(sdist) as archive:
        names = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    assert {"LICENSE", "README.md", "CHANGELOG.md", "docs/providers.md"} <= names
    assert "pytest_fwloop/schemas/coder.json" in names
    assert "pytest_fwloop/config/option_table.json" in names
    assert not [n for n in names if n.startswith(("tests/", "examples/", "benchmarks/"))]


def test_the_wheel_ships_the_schemas_the_option_table_the_report_template_and_the_license(
    dist: Path,
) -> None:
    [wheel] = dist.glob("*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert {
        "pytest_fwloop/schemas/reviewer.json",
        "pytest_fwloop/config/option_table.json",
        "pytest_fwloop/templates/report.html.j2",
        "pytest_fwloop/py.typed",
    } <= set(names)
    assert any(n.endswith(".dist-info/licenses/LICENSE") or n.endswith("/LICENSE") for n in names)
    assert not [n for n in names if n.startswith("tests/")]
