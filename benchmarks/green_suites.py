"""What `pytest --fwloop` costs on a released suite that is already green. A script, not a test.

    .venv/bin/python benchmarks/green_suites.py [--rounds N] [--workdir DIR] [--loop-args "..."]
        [--against DIR]

Most CI runs of a suite are green, and a team that adds `--fwloop` to its CI job pays the loop's
own cost on every one of them (issue 41). This downloads cantools 39.3.0's released sdist as
`released_suites.py` does (the same pytest configuration, the same requirements), leaves it
unseeded, commits it to a git repository of its own, and times in interleaved rounds, after one
untimed run of each side:

- A: `pytest --fwloop --fwloop-coder=rules --fwloop-reviewer=rules --fwloop-mode=ci` (the
  loop's defaults otherwise: the confirmation run, focus, flaky reruns, `fwloop_source_bytes`);
- B: plain `pytest` on the same tree,

both with `-p no:randomly`; with `--against DIR`, also C: side A's command with the package
in DIR first on `PYTHONPATH` (another version of the loop, e.g. `git archive main` unpacked).
Printed: min / median / max wall seconds per side, the ratio of the
medians (goal ≤ 1.05), and the loop's run directory's `executed_counts` and spectrum files.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from released_suites import PROJECTS, configure, download

LOOP = ("--fwloop", "--fwloop-coder=rules", "--fwloop-reviewer=rules", "--fwloop-mode=ci")


def timed(tree: Path, env: dict[str, str], *args: str) -> float:
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", *args],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(
            f"green_suites: {shlex.join(args)} exited {done.returncode}:\n"
            + "\n".join(done.stdout.splitlines()[-15:])
        )
    return seconds


def spread(values: list[float]) -> str:
    return f"{min(values):.2f} / {statistics.median(values):.2f} / {max(values):.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--workdir", type=Path, help="scratch folder (default: a new temp dir)")
    parser.add_argument("--loop-args", default="", help="more arguments for side A")
    parser.add_argument("--against", type=Path, help="C: side A with this package folder")
    options = parser.parse_args()
    scratch = options.workdir or Path(tempfile.mkdtemp(prefix="fwloop-green-"))
    scratch.mkdir(parents=True, exist_ok=True)
    [project] = [p for p in PROJECTS if p.name == "cantools"]
    tree = download(project, scratch)
    print(f"{project.requirement}: {configure(project, tree)}; tree {tree}")
    env = {k: v for k, v in os.environ.items() if not k.startswith("FWLOOP_")}
    env["CI"] = "true"
    git = ["git", "-c", "user.name=bench", "-c", "user.email=bench@localhost"]
    subprocess.run(["git", "init", "-q"], cwd=tree, check=True)
    subprocess.run(["git", "add", "-A"], cwd=tree, check=True)
    subprocess.run([*git, "commit", "-qm", "sdist"], cwd=tree, check=True)
    loop = (*LOOP, *shlex.split(options.loop_args))
    other = dict(env)
    if options.against is not None:
        other["PYTHONPATH"] = os.pathsep.join([str(options.against), env.get("PYTHONPATH", "")])
    a_times: list[float] = []
    b_times: list[float] = []
    c_times: list[float] = []
    for round_ in range(options.rounds + 1):
        a = timed(tree, env, *loop)
        run_dir = sorted((tree / ".fwloop" / "runs").iterdir())[-1]  # A's, not C's
        b = timed(tree, env)
        c = timed(tree, other, *loop) if options.against is not None else 0.0
        if round_:  # the first round is untimed: bytecode, the shadow repository
            a_times.append(a)
            b_times.append(b)
            c_times.append(c)
    print(f"  A (pytest --fwloop): {spread(a_times)} s")
    print(f"  B (plain pytest):    {spread(b_times)} s")
    print(
        f"  A / B wall-clock ratio: {statistics.median(a_times) / statistics.median(b_times):.3f}"
    )
    if options.against is not None:
        ratio = statistics.median(c_times) / statistics.median(b_times)
        print(f"  C (--against {options.against}): {spread(c_times)} s; C / B: {ratio:.3f}")
    summary = json.loads((run_dir / "summary.json").read_text())
    spectra = sorted(p.name for p in run_dir.glob("rounds/*/spectrum*.json"))
    print(
        f"  A's last run: {summary['outcome']}, executed_counts {summary['executed_counts']}, "
        f"spectrum files {spectra or 'none'}"
    )


if __name__ == "__main__":
    main()
