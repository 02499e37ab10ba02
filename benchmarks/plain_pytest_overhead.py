"""What the installed plugin costs a plain `pytest` run (no `--fwloop`): P1 of issue 11.

    python benchmarks/plain_pytest_overhead.py [--rounds N]

A generated suite of 1,000 and one of 10,000 trivial tests is run with the plugin installed (A)
and without the plugins installing it brings (B): `-p no:fwloop`, and `-p no:NAME` for each
pytest plugin of its required dependencies (tests/dependency_plugins.py; goal: none, which
`-p no:fwloop` alone would leave loaded). Alternately, N rounds each (default 5), because these
2-core machines drift by several percent over a minute. Printed per suite: the child CPU time
(user + system) of each side as min / median / max, and the ratio of medians A / B (goal ≤ 1.02).
Also printed: the loop's heavy modules imported by a plain run (goal: none), the dependency
plugins B left out, and whether bytecode is written (`PYTHONDONTWRITEBYTECODE`: without it,
pytest compiles the plugin's assert-rewritten modules in every process). Run it with the Python
of the environment to measure, e.g. a venv holding only the package and its dependencies.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from dependency_plugins import dependency_plugins

HEAVY = (
    "pydantic",
    "jsonschema",
    "urllib.request",
    "paramiko",
    "pexpect",
    "serial",
    "pytest_fwloop.loop.entry",
)
PROBE = """
import sys
def pytest_sessionfinish(session):
    heavy = sorted({m for m in sys.modules for h in HEAVY if m == h or m.startswith(h + ".")})
    print("\\nHEAVY", " ".join(heavy) or "-")
"""


def suite(root: Path, tests: int) -> Path:
    folder = root / f"suite-{tests}"
    folder.mkdir()
    per_file = 500
    for index in range(0, tests, per_file):
        body = "".join(f"def test_{n}():\n    assert {n} == {n}\n\n" for n in range(per_file))
        (folder / f"test_{index // per_file:03d}.py").write_text(body)
    (folder / "conftest.py").write_text(f"HEAVY = {HEAVY!r}\n{PROBE}")
    (folder / "pytest.ini").write_text("[pytest]\naddopts = -p no:cacheprovider -p no:randomly\n")
    return folder


def cpu_seconds(folder: Path, *extra: str) -> tuple[float, str]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-s", *extra],
        cwd=folder,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTEST_ADDOPTS": ""},
        check=True,
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    heavy = next(line for line in done.stdout.splitlines() if line.startswith("HEAVY"))
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), heavy


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    rounds = parser.parse_args().rounds
    plugins = dependency_plugins()
    without_ours = ["-p", "no:fwloop", *(arg for name in plugins for arg in ("-p", f"no:{name}"))]
    print(f"dependency plugins: {', '.join(plugins.values()) or 'none'}")
    # Pytest caches the plugin's assert-rewritten modules only where bytecode may be written;
    # elsewhere it compiles them in every process, so the figure depends on it.
    print(f"bytecode written: {'no' if sys.dont_write_bytecode else 'yes'} ({sys.executable})")
    with tempfile.TemporaryDirectory() as scratch:
        for tests in (1_000, 10_000):
            folder = suite(Path(scratch), tests)
            with_plugin: list[float] = []
            without: list[float] = []
            heavy = ""
            for _ in range(rounds):
                seconds, heavy = cpu_seconds(folder)
                with_plugin.append(seconds)
                without.append(cpu_seconds(folder, *without_ours)[0])
            ratio = statistics.median(with_plugin) / statistics.median(without)
            print(
                f"{tests:>6} tests  installed {min(with_plugin):.2f}/"
                f"{statistics.median(with_plugin):.2f}/{max(with_plugin):.2f} s CPU  "
                f"without {min(without):.2f}/{statistics.median(without):.2f}/"
                f"{max(without):.2f} s CPU  ratio {ratio:.3f} (goal <= 1.02)  "
                f"heavy modules: {heavy.removeprefix('HEAVY ')}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
