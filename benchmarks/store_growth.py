"""How big `.fwloop/` grows when the build rewrites output that no ignore rule covers (issue 25).

    python benchmarks/store_growth.py [--sources 5000] [--output-mb 200] [--iterations 10]

A project of `--sources` C files (none ignored, no `fwloop_snapshot_exclude`) whose build,
`build.py`, writes one object file per source into `out/`: `--output-mb` in all, new random
bytes at every build, as a real toolchain's embedded timestamps and paths make them; built once
before the run, as a developer's tree is. Its suite has one test per patch; the coder (a script
outside the tree) fixes one a call, so every iteration is kept and the run ends
`max_iterations_reached` after `--iterations` iterations (the baseline's included), its tree
restored to the baseline; `fwloop apply last` then puts the best tree back, as a user would.

The build records the size of `.fwloop/` before it writes anything: one row per iteration, the
store as the iterations before it left it. Then the size after the run (packed) and after
`fwloop apply`. Sizes are bytes of the files (`du --apparent-size`), in MB of 10^6 bytes; the
random output does not compress, so they are the same on every machine.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest_fwloop

BUILD = """\
import os, pathlib, sys

def size(path):
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())

with open(sys.argv[1], "a") as log:
    log.write(f"{size(pathlib.Path('.fwloop'))} {size(pathlib.Path('.fwloop/shadow.git'))}\\n")
out = pathlib.Path("out")
out.mkdir(exist_ok=True)
sources = sorted(pathlib.Path("src").glob("*.c"))
each = int(sys.argv[2]) // len(sources)
for source in sources:
    (out / (source.stem + ".o")).write_bytes(os.urandom(each))
"""

#: The coder: raises LEVEL by one, as a diff: each call makes one more test pass.
CODER = """\
import difflib, json, sys
from pathlib import Path
json.load(sys.stdin)
text = Path("fw/level.py").read_text()
level = int(text.split("=")[1])
fixed = f"LEVEL = {level + 1}\\n"
diff = "diff --git a/fw/level.py b/fw/level.py\\n" + "".join(difflib.unified_diff(
    text.splitlines(keepends=True), fixed.splitlines(keepends=True),
    fromfile="a/fw/level.py", tofile="b/fw/level.py"))
print(json.dumps({"analysis": {"root_cause": "level", "hypotheses": ["level"], "confidence": 0.9},
                  "patch": diff, "summary": f"level {level + 1}"}))
"""


def project(root: Path, sources: int, output_bytes: int, tests: int, log: Path) -> None:
    """The tree the loop edits: sources, the build, and `tests` tests passing one a patch."""
    (root / "src").mkdir(parents=True)
    for n in range(sources):
        (root / "src" / f"mod_{n:04d}.c").write_text(
            f"/* module {n} */\nint mod_{n}(int x) {{ return x * {n} + 1; }}\n"
        )
    (root / "fw").mkdir()
    (root / "fw" / "__init__.py").write_text("")
    (root / "fw" / "level.py").write_text("LEVEL = 0\n")
    (root / "build.py").write_text(BUILD)
    (root / "tests").mkdir()
    (root / "tests" / "test_level.py").write_text(
        "from fw.level import LEVEL\n\n"
        + "".join(
            f"\ndef test_level_{k}():\n    assert LEVEL >= {k}\n" for k in range(1, tests + 1)
        )
        # Mostly green, so the loop's failure-rate rule does not end the run early.
        + "".join(f"\ndef test_other_{k}():\n    pass\n" for k in range(4 * tests))
    )
    (root / "pytest.ini").write_text(
        "[pytest]\ntestpaths = tests\npythonpath = .\naddopts = -p no:randomly\n"
        f"fwloop_build = {sys.executable} build.py {log} {output_bytes}\n"
    )
    # The baseline holds one output.
    subprocess.run(
        [sys.executable, "build.py", os.devnull, str(output_bytes)], cwd=root, check=True
    )


def tree_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


def megabytes(size: int) -> str:
    return f"{size / 1e6:8.1f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sources", type=int, default=5000)
    parser.add_argument("--output-mb", type=float, default=200.0)
    parser.add_argument("--iterations", type=int, default=10)
    args = parser.parse_args()
    output_bytes = int(args.output_mb * 1e6)
    with tempfile.TemporaryDirectory(prefix="fwloop-store-") as scratch:
        root, log = Path(scratch) / "proj", Path(scratch) / "sizes.log"
        project(root, args.sources, output_bytes, args.iterations, log)
        coder = Path(scratch) / "coder.py"
        coder.write_text(f"#!{sys.executable}\n{CODER}")
        coder.chmod(0o755)
        env = {k: v for k, v in os.environ.items() if not k.startswith("FWLOOP_")}
        started = time.monotonic()
        run = subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "--fwloop",
                f"--fwloop-coder=command:{coder}",
                "--fwloop-reviewer=rules",
                "--fwloop-mode=ci",
                f"--max-iter={args.iterations}",
                "-q",
            ],
            cwd=root,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        duration = time.monotonic() - started
        [run_dir] = (root / ".fwloop" / "runs").iterdir()
        summary = json.loads((run_dir / "summary.json").read_text())
        after_run = tree_bytes(root / ".fwloop"), tree_bytes(root / ".fwloop" / "shadow.git")
        applied = subprocess.run(
            [sys.executable, "-m", "pytest_fwloop.cli", "apply", "last"],
            cwd=root,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        after_apply = tree_bytes(root / ".fwloop"), tree_bytes(root / ".fwloop" / "shadow.git")
        rows = [tuple(map(int, line.split())) for line in log.read_text().splitlines()]
        level = (root / "fw" / "level.py").read_text().strip()
    print(f"pytest_fwloop from {Path(pytest_fwloop.__file__).parent}")
    print(
        f"{args.sources} sources, {output_bytes / 1e6:.0f} MB of build output rewritten by every "
        f"build, {args.iterations} iterations: outcome {summary['outcome']}, pass counts "
        f"{summary['pass_counts']} (exit {run.returncode}, {duration:.0f} s)"
    )
    print(f"{'':33} {'.fwloop/ MB':>11} {'shadow.git MB':>13} {'growth MB':>9}")
    previous = None
    for number, (total, shadow) in enumerate(rows, 1):
        growth = "" if previous is None else megabytes(total - previous)
        print(
            f"{'before the build of iteration ' + str(number):33} {megabytes(total):>11} "
            f"{megabytes(shadow):>13} {growth:>9}"
        )
        previous = total
    for label, (total, shadow) in (
        ("after the run (packed)", after_run),
        ("after `fwloop apply last`", after_apply),
    ):
        print(f"{label:33} {megabytes(total):>11} {megabytes(shadow):>13}")
    print(f"fwloop apply: exit {applied.returncode}, fw/level.py now {level!r}")
    if run.returncode not in (0, 1) or applied.returncode != 0:
        print(run.stdout[-3000:], run.stderr[-3000:], applied.stdout, applied.stderr, sep="\n")


if __name__ == "__main__":
    main()
