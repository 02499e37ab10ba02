"""What recording the C spectrum costs: a green 1,000-test suite under the loop with gcov on vs
off, and a QEMU test with executed-code logging on vs off. A script, not a test.

    .venv/bin/python benchmarks/c_spectrum_cost.py [--rounds N] [--only gcov,qemu]

Every figure is a ratio of two sides measured in the same run, in interleaved rounds (A, B, A,
B, ...; default 3 each) after one untimed run of each side; each side prints min / median / max
seconds and the ratio is of the medians.

- gcov: examples/host-gateway's firmware driving a generated green suite of 1,000 console tests
  (10 modules of 100, one firmware process per module, which writes its counts on SIGUSR1):
  `pytest --fwloop --fwloop-confirm-runs=0 -o fwloop_c_coverage=gcov` on the `--coverage` build
  ÷ `pytest --fwloop --fwloop-confirm-runs=0` on the plain build; plain `pytest` on the plain
  build beside them. Wall-clock seconds of the whole run.
- qemu: examples/qemu-cortex-m's 16 tests in one child pytest as the loop starts it, recording
  the spectrum with `--fwloop-child-qemu` (QEMU logs `-d in_asm,exec,nochain`) ÷ without: the
  sum of the durations of the tests after the first (whose set-up boots QEMU), and the size of
  the spectrum file written.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

SUITE_MODULE = """\
import pytest

CASES = [
    ("crc8 31 32 33 34 35 36 37 38 39", "f4"),
    ("weekday 2024-03-15", "fri"),
    ("median 5 1 3", "3.000"),
    ("popcount 0xff00ff", "16"),
    ("b64enc hello", "aGVsbG8="),
    ("fsqrt 16", "4.000"),
    ("sort 3 1 2", "1 2 3"),
    ("cobs 11 00 22", "02110222"),
    ("utf8len 41 42 43", "3"),
    ("upper gw ok", "GW OK"),
]


@pytest.mark.parametrize("number", range(100))
def test_command(gateway, number):
    line, answer = CASES[number % len(CASES)]
    assert gateway(line) == answer
"""


def timed(argv: list[str], cwd: Path, env: dict[str, str]) -> float:
    started = time.perf_counter()
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    if done.returncode not in (0,):
        raise SystemExit(
            f"c_spectrum_cost: {argv} exited {done.returncode}:\n{done.stdout[-2000:]}"
        )
    return time.perf_counter() - started


def spread(values: list[float]) -> str:
    return f"{min(values):.2f} / {statistics.median(values):.2f} / {max(values):.2f} s"


def interleaved(sides: dict[str, Callable[[], float]], rounds: int) -> dict[str, list[float]]:
    for run in sides.values():
        run()  # untimed: first-run costs
    found: dict[str, list[float]] = {name: [] for name in sides}
    for _ in range(rounds):
        for name, run in sides.items():
            found[name].append(run())
    return found


def gcov_cost(scratch: Path, rounds: int) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FWLOOP_")}
    env["CI"] = "true"
    trees: dict[str, Path] = {}
    for side, flags in (
        ("plain", {}),
        (
            "coverage",
            {"FWLOOP_CFLAGS": "--coverage -DFWLOOP_GCOV=1", "FWLOOP_LDFLAGS": "--coverage"},
        ),
    ):
        tree = scratch / side
        shutil.copytree(
            ROOT / "examples" / "host-gateway",
            tree,
            ignore=shutil.ignore_patterns("build", "test_*.py"),
        )
        for number in range(10):
            (tree / "tests" / f"test_suite_{number}.py").write_text(SUITE_MODULE)
        subprocess.run(["make", "-s"], cwd=tree, env={**env, **flags}, check=True)
        trees[side] = tree
    loop = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:randomly",
        "--fwloop",
        "--fwloop-confirm-runs=0",
        "--fwloop-coder=rules",
    ]
    plain = [sys.executable, "-m", "pytest", "-q", "-p", "no:randomly"]

    def side(argv: list[str], tree: Path) -> Callable[[], float]:
        def run() -> float:
            shutil.rmtree(tree / ".fwloop", ignore_errors=True)
            return timed(argv, tree, env)

        return run

    found = interleaved(
        {
            "plain pytest (plain build)": side(plain, trees["plain"]),
            "loop, gcov off (plain build)": side(loop, trees["plain"]),
            "loop, gcov on (--coverage build)": side(
                [*loop, "-o", "fwloop_c_coverage=gcov"], trees["coverage"]
            ),
        },
        rounds,
    )
    print("\n== gcov: a green 1,000-test console suite under the loop")
    for name, values in found.items():
        print(f"  {name}: {spread(values)}")
    off = statistics.median(found["loop, gcov off (plain build)"])
    on = statistics.median(found["loop, gcov on (--coverage build)"])
    base = statistics.median(found["plain pytest (plain build)"])
    print(
        f"  gcov on ÷ off: {on / off:.2f}; off ÷ plain pytest: {off / base:.2f};"
        f" on ÷ plain: {on / base:.2f}"
    )
    [run_dir] = sorted((trees["coverage"] / ".fwloop" / "runs").iterdir())[-1:]
    gcov = list(run_dir.glob("rounds/01/spectrum-*.gcov.json"))
    print(f"  the gcov run recorded {', '.join(p.name for p in gcov) or 'no C spectrum'}")


def qemu_cost(scratch: Path, rounds: int) -> None:
    tree = scratch / "qemu"
    shutil.copytree(
        ROOT / "examples" / "qemu-cortex-m", tree, ignore=shutil.ignore_patterns("build")
    )
    subprocess.run(["make", "-s"], cwd=tree, check=True, capture_output=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("FWLOOP_")}
    sizes: list[int] = []

    def side(logging: bool) -> Callable[[], float]:
        def run() -> float:
            out = Path(tempfile.mkdtemp(dir=scratch))
            argv = [
                sys.executable,
                "-m",
                "pytest",
                "-q",
                "-p",
                "no:randomly",
                "-p",
                "no:cacheprovider",
                f"--fwloop-child-report={out / 'results-1.json'}",
                f"--fwloop-child-spectrum={out / 'spectrum-1.json'}",
            ]
            if logging:
                argv.append(f"--fwloop-child-qemu={out / 'qemu-1'}")
            subprocess.run(argv, cwd=tree, env=env, capture_output=True, check=False)
            tests = json.loads((out / "results-1.json").read_text())["tests"]
            # The first test's set-up boots QEMU: the rest are the tests' own time.
            calls = sum(float(t.get("duration", 0.0)) for t in tests[1:])
            if logging:
                sizes.append(sum(p.stat().st_size for p in out.glob("spectrum-1.qemu.json")))
            shutil.rmtree(out)
            return calls

        return run

    found = interleaved({"exec logging off": side(False), "exec logging on": side(True)}, rounds)
    print("\n== qemu: qemu-cortex-m's tests 2-16, the sum of their durations")
    for name, values in found.items():
        print(f"  {name}: {spread(values)}")
    ratio = statistics.median(found["exec logging on"]) / statistics.median(
        found["exec logging off"]
    )
    print(f"  on ÷ off: {ratio:.2f}; the spectrum file: {max(sizes, default=0):,} bytes")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", default="gcov,qemu")
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="fwloop-c-cost-"))
    chosen = args.only.split(",")
    try:
        if "gcov" in chosen:
            gcov_cost(scratch, args.rounds)
        if "qemu" in chosen:
            qemu_cost(scratch, args.rounds)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
