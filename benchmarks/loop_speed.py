"""What the loop costs next to plain pytest, and what focus reruns save: P2, P3, P6 of issue 11.

    python benchmarks/loop_speed.py [--rounds N] [--only P2,P3,P3c,P6] [--cache private|as-is]

Every figure is a ratio of two sides measured in the same run, in interleaved rounds (A, B, A,
B, ...; default 3 each), after one untimed run of each side (first-run costs: the loop's shadow
repository, compiled bytecode), since these 2-core machines drift by several percent over a
minute. Each side prints min / median / max wall-clock seconds; the ratio is of the medians.

Python's bytecode cache decides much of a start-up: `--cache private` (the default) gives every
process a fresh cache of its own (PYTHONPYCACHEPREFIX in the scratch folder, written on the
untimed run and read on the timed ones), as on a developer's machine; `--cache as-is` keeps the
caller's environment, e.g. PYTHONDONTWRITEBYTECODE=1 as in CI containers, where pytest rewrites
and compiles every plugin module (the loop's own among them) in every process.

- P2: `pytest --fwloop --fwloop-confirm-runs=0` on a green suite of 1,000 trivial tests ÷ plain
  `pytest` on it (goal ≤ 1.10, issue 35; was ≤ 1.15): the loop's own cost when there is
  nothing to repair.
- P3: a suite of 2,000 tests taking 2 ms each (`--test-ms`), with 5 seeded bugs (each failing
  20 tests spread over the 20 files), repaired by a coder that fixes one bug per call: time to
  green with `--fwloop-focus=on` ÷ `off` (goal ≤ 0.45, issue 35), and test
  executions, from `summary.json`'s `executed_counts`, in total (floor 0.344: DESIGN.md §13's
  full baseline and full gate, benchmarks/README.md) and after the baseline, which both sides
  run alike (goal 0.45 for the time, issue 35).
- P3c: one focused child as the loop starts it (`--fwloop-child-select` with the 100 failing
  tests of P3's suite, handed their files: `core/suite/collection.py`) ÷ plain `pytest` given the
  same 100 node ids, both spawned (goal ≤ 2, issue 35); the child collecting the whole suite
  and keeping the selection (the fallback) is shown beside it.
- P6: the loop's `-n 2` speed-up (pytest-xdist in each child) ÷ plain pytest's `-n 2` speed-up,
  on a green suite of 400 tests taking 10 ms each (goal ≥ 0.95).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

INI = "[pytest]\naddopts = -p no:cacheprovider -p no:randomly\n"
LOOP = ("--fwloop", "--fwloop-reviewer=rules", "--fwloop-mode=ci")
BUGS = 5
#: The one-bug-per-call coder: turns the first `BUGk = True` it finds off, as a diff.
CODER = """\
import json, sys
from pathlib import Path
json.load(sys.stdin)
text = Path("fw/bugs.py").read_text()
line = next(line for line in text.splitlines() if line.endswith("= True"))
fixed = text.replace(line, line.replace("True", "False"))
old, new = text.splitlines(keepends=True), fixed.splitlines(keepends=True)
import difflib
diff = "diff --git a/fw/bugs.py b/fw/bugs.py\\n" + "".join(
    difflib.unified_diff(old, new, fromfile="a/fw/bugs.py", tofile="b/fw/bugs.py")
)
print(json.dumps({"analysis": {"root_cause": line, "hypotheses": [line], "confidence": 0.9},
                  "patch": diff, "summary": f"fix {line.split()[0]}"}))
"""


def green_suite(root: Path, tests: int, per_file: int, sleep_ms: float = 0.0) -> Path:
    root.mkdir(parents=True)
    pause = f"    time.sleep({sleep_ms / 1000})\n" if sleep_ms else ""
    for start in range(0, tests, per_file):
        body = "import time\n\n" + "".join(
            f"def test_{n}():\n{pause}    assert {n} == {n}\n\n"
            for n in range(start, min(start + per_file, tests))
        )
        (root / f"test_{start // per_file:03d}.py").write_text(body)
    (root / "pytest.ini").write_text(INI)
    return root


def seeded_suite(root: Path, test_ms: float = 2.0) -> Path:
    """2,000 tests in 20 files, `test_ms` each; test i checks bug i % 100 when below BUGS."""
    root.mkdir(parents=True)
    (root / "fw").mkdir()
    (root / "fw" / "__init__.py").write_text("")
    (root / "fw" / "bugs.py").write_text("".join(f"BUG{k} = True\n" for k in range(BUGS)))
    coder = root / "coder.py"
    coder.write_text(f"#!{sys.executable}\n{CODER}")
    coder.chmod(0o755)
    for file in range(20):
        tests = []
        for n in range(file * 100, file * 100 + 100):
            check = f"    assert not bugs.BUG{n % 100}\n" if n % 100 < BUGS else ""
            tests.append(
                f"def test_{n}():\n    time.sleep({test_ms / 1000})\n{check}    assert True\n\n"
            )
        (root / f"test_{file:02d}.py").write_text("import time\n\nfrom fw import bugs\n\n\n")
        with (root / f"test_{file:02d}.py").open("a") as stream:
            stream.write("".join(tests))
    (root / "pytest.ini").write_text(INI + "testpaths = .\n")
    return root


def reset(root: Path) -> None:
    """Undo what a run left (kept fixes, run records) so each round starts from the same tree."""
    (root / "fw" / "bugs.py").write_text("".join(f"BUG{k} = True\n" for k in range(BUGS)))
    subprocess.run(["rm", "-rf", str(root / ".fwloop")], check=True)


#: The environment every measured process gets (set by `main` from `--cache`).
ENV: dict[str, str] = {}


def pytest_wall(folder: Path, *args: str, ok: tuple[int, ...] = (0,)) -> float:
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", *args],
        cwd=folder,
        capture_output=True,
        text=True,
        env={**ENV, "PYTEST_ADDOPTS": "", "CI": "true"},
        stdin=subprocess.DEVNULL,
        check=False,
    )
    seconds = time.perf_counter() - start
    if done.returncode not in ok:
        sys.exit(f"{' '.join(args)} exited {done.returncode}:\n{done.stdout[-2000:]}")
    return seconds


def interleaved(
    rounds: int, a: Callable[[], float], b: Callable[[], float]
) -> tuple[list[float], list[float]]:
    a(), b()  # untimed: what only a first run pays
    sides: tuple[list[float], list[float]] = ([], [])
    for _ in range(rounds):
        sides[0].append(a())
        sides[1].append(b())
    return sides


def spread(values: list[float]) -> str:
    return f"{min(values):.2f} / {statistics.median(values):.2f} / {max(values):.2f}"


def ratio(label: str, a: list[float], b: list[float], goal: str) -> None:
    print(f"  A: {spread(a)} s\n  B: {spread(b)} s")
    print(f"  {label}: {statistics.median(a) / statistics.median(b):.3f} (goal {goal})")


def p2(scratch: Path, rounds: int) -> None:
    print("P2: pytest --fwloop --fwloop-confirm-runs=0 (A) / plain pytest (B), 1,000 green tests")
    folder = green_suite(scratch / "p2", 1_000, 500)
    loop = (*LOOP, "--fwloop-coder=rules", "--fwloop-confirm-runs=0")
    a, b = interleaved(rounds, lambda: pytest_wall(folder, *loop), lambda: pytest_wall(folder))
    ratio("wall-clock ratio", a, b, "<= 1.10")


def p3(scratch: Path, rounds: int, test_ms: float = 2.0) -> None:
    print(
        f"P3: 2,000 tests of {test_ms:g} ms, 5 seeded bugs, one fix per coder call: "
        "focus on (A) / off (B)"
    )
    folder = seeded_suite(scratch / "p3", test_ms)
    executions: dict[str, list[int]] = {"on": [], "off": []}
    after: dict[str, list[int]] = {"on": [], "off": []}

    def repair(focus: str) -> float:
        reset(folder)
        seconds = pytest_wall(
            folder,
            *LOOP,
            f"--fwloop-coder=command:{folder / 'coder.py'}",
            f"--fwloop-focus={focus}",
        )
        [run] = (folder / ".fwloop" / "runs").iterdir()
        summary = json.loads((run / "summary.json").read_text())
        if summary["outcome"] != "success":
            sys.exit(f"P3 focus={focus} ended {summary['outcome']}: {summary['reason']}")
        executions[focus].append(sum(summary["executed_counts"]))
        after[focus].append(sum(summary["executed_counts"][1:]))
        return seconds

    a, b = interleaved(rounds, lambda: repair("on"), lambda: repair("off"))
    ratio("time-to-green ratio", a, b, "<= 0.45")
    for label, counts, floor in (
        ("in total", executions, " (floor 0.344)"),
        ("after the baseline", after, ""),
    ):
        on, off = statistics.median(counts["on"]), statistics.median(counts["off"])
        print(f"  test executions {label}: {on:.0f} / {off:.0f} = {on / off:.3f}{floor}")


def p3c(scratch: Path, rounds: int, test_ms: float = 2.0) -> None:
    print("P3c: a focused child of 100 tests (A), collecting the whole suite (C) / plain pytest")
    print("     given the same 100 node ids (B), P3's suite")
    from pytest_fwloop.core.suite.collection import Collection, collection_paths

    folder = seeded_suite(scratch / "p3c", test_ms)
    select = [f"test_{n // 100:02d}.py::test_{n}" for n in range(2000) if n % 100 < BUGS]
    listed = folder / "select.txt"
    listed.write_text("\n".join(select) + "\n")
    inifile = str(folder / "pytest.ini")
    files, why = collection_paths(select, Collection(inifile=inifile), ["."])
    assert not why, why
    child = (
        f"--fwloop-child-report={folder / 'out' / 'results.json'}",
        f"--fwloop-child-select={listed}",
    )
    handed = (*child, f"--rootdir={folder}", "-c", inifile, *(str(folder / f) for f in files))
    ok = (0, 1)
    sides: tuple[list[float], list[float], list[float]] = ([], [], [])
    for timed in (False, *([True] * rounds)):  # the first round untimed, as `interleaved`
        for side, args in zip(sides, (handed, select, child), strict=True):
            seconds = pytest_wall(folder, *args, ok=ok)
            if timed:
                side.append(seconds)
    a, b, c = sides
    ratio("focused child / plain pytest on its node ids", a, b, "<= 2")
    print(f"  C: {spread(c)} s; C / B: {statistics.median(c) / statistics.median(b):.3f}")


def p6(scratch: Path, rounds: int) -> None:
    print("P6: the loop's -n 2 speed-up / plain pytest's -n 2 speed-up, 400 tests of 10 ms")
    folder = green_suite(scratch / "p6", 400, 100, sleep_ms=10)
    loop = (*LOOP, "--fwloop-coder=rules", "--fwloop-confirm-runs=0")
    plain_1, plain_2 = interleaved(
        rounds, lambda: pytest_wall(folder), lambda: pytest_wall(folder, "-n", "2")
    )
    loop_1, loop_2 = interleaved(
        rounds, lambda: pytest_wall(folder, *loop), lambda: pytest_wall(folder, *loop, "-n", "2")
    )
    plain = statistics.median(plain_1) / statistics.median(plain_2)
    looped = statistics.median(loop_1) / statistics.median(loop_2)
    print(f"  plain: {spread(plain_1)} s, -n 2: {spread(plain_2)} s, speed-up {plain:.2f}")
    print(f"  loop:  {spread(loop_1)} s, -n 2: {spread(loop_2)} s, speed-up {looped:.2f}")
    print(f"  speed-up ratio: {looped / plain:.3f} (goal >= 0.95)")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", default="P2,P3,P3C,P6")
    parser.add_argument("--test-ms", type=float, default=2.0, help="P3: each test's duration")
    parser.add_argument("--cache", choices=("private", "as-is"), default="private")
    options = parser.parse_args()
    chosen = {name.strip().upper() for name in options.only.split(",")}
    with tempfile.TemporaryDirectory() as scratch:
        ENV.update(os.environ)
        if options.cache == "private":
            ENV.pop("PYTHONDONTWRITEBYTECODE", None)
            ENV["PYTHONPYCACHEPREFIX"] = str(Path(scratch) / "pycache")
        written = "not written" if ENV.get("PYTHONDONTWRITEBYTECODE") else "written"
        where = ENV.get("PYTHONPYCACHEPREFIX", "__pycache__ folders")
        print(f"bytecode cache: {options.cache} ({where}, {written})")
        if "P2" in chosen:
            p2(Path(scratch), options.rounds)
        if "P3" in chosen:
            p3(Path(scratch), options.rounds, options.test_ms)
        if "P3C" in chosen:
            p3c(Path(scratch), options.rounds, options.test_ms)
        if "P6" in chosen:
            p6(Path(scratch), options.rounds)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
