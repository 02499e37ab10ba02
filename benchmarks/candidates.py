"""What K candidates per iteration buy and cost (issue 45): one candidate against four. A script.

    .venv/bin/python benchmarks/candidates.py [--only uart-console,gateway,qemu-cortex-m]
        [--workdir DIR]

Runs `pytest --fwloop --max-iter=8` on fresh seeded copies of three firmware trees with
`fwloop_candidates` 1, 4, and 4 with `fwloop_candidate_jobs = 2`, against
`tests/standin_model.SamplingStandin`: a model behind `openai:` that knows only its messages and
writes, in about half its samples (iteration + candidate number odd), a plausible wrong fix that
compiles for each bug named in its `wrong` table. The trees:

- uart-console: the example's three bugs; the CRC fix sampled wrong;
- gateway: `examples/host-gateway` (15 C modules, a console per test module) with the three
  seeds of `c_spectrum.py`, every one of them sampled wrong;
- qemu-cortex-m: the example's three bugs (bare-metal Cortex-M3 in QEMU, one QEMU per test);
  the ADC fix sampled wrong.

Prints, side by side per tree, the outcome, iterations and coder calls to it, the candidates'
build and test seconds as `summary.json` reports them, pass@1 and pass@K, the run's seconds,
and for QEMU the most firmware instances seen alive at once in distinct candidate trees and how
many were left running after the run.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from c_spectrum import PROJECTS as C_PROJECTS  # noqa: E402
from released_suites import plant  # noqa: E402

from envs_support.procs import live_processes  # noqa: E402
from standin_model import Bug, SamplingStandin, bugs_of_answers  # noqa: E402

SETTINGS = (("K=1", 1, 1), ("K=4", 4, 1), ("K=4 jobs=2", 4, 2))


@dataclass(frozen=True)
class Tree:
    name: str
    #: Makes the seeded tree at the path given; the bugs the stand-in may fix.
    make: Callable[[Path], list[Bug]]
    #: bug name -> (the fix's line, the plausible wrong line sampled instead)
    wrong: dict[str, tuple[str, str]]
    qemu: bool = False


def _example(name: str) -> Callable[[Path], list[Bug]]:
    def make(tree: Path) -> list[Bug]:
        shutil.copytree(
            ROOT / "examples" / name,
            tree,
            ignore=shutil.ignore_patterns("build", "__pycache__", ".fwloop"),
        )
        return bugs_of_answers(tree / "fwloop-answers")

    return make


def _gateway(tree: Path) -> list[Bug]:
    [project] = [p for p in C_PROJECTS if p.name == "gateway"]
    shutil.copytree(
        ROOT / "examples" / "host-gateway", tree, ignore=shutil.ignore_patterns("build")
    )
    return [plant(tree, seed).bug for seed in project.seeds]


TREES = (
    Tree(
        "uart-console",
        _example("uart-console"),
        {"01#1": ("#define CRC8_INIT 0x00u", "#define CRC8_INIT 0x01u")},
    ),
    Tree(
        "gateway",
        _gateway,
        {
            "leap-century": (
                "    return (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;",
                "    return (year % 4 == 0 && year % 100 != 0) || year % 400 == 1;",
            ),
            "hex-lower": ("        return c - 'a' + 10;", "        return c - 'a' + 9;"),
            "partition-start": (
                "    for (size_t i = low; i < high; i++) {",
                "    for (size_t i = low; i + 1 < high; i++) {",
            ),
        },
    ),
    Tree(
        "qemu-cortex-m",
        _example("qemu-cortex-m"),
        {
            "01#1": (
                "    return raw * ADC_VREF_MV / ADC_MAX_RAW;",
                "    return raw * (ADC_VREF_MV - 1u) / ADC_MAX_RAW;",
            )
        },
        qemu=True,
    ),
)


class QemuWatch:
    """Polls /proc for the QEMU instances started under `root`: the most alive at once in
    distinct candidate trees, and the pids still alive when asked."""

    def __init__(self, root: Path) -> None:
        self.root = str(root)
        self.most = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def __enter__(self) -> QemuWatch:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()

    def alive(self) -> dict[int, str]:
        """pid -> working directory of each QEMU running in a tree under the root."""
        return {
            pid: cwd
            for pid, argv, cwd in live_processes()
            if argv and argv[0].endswith("qemu-system-arm") and cwd.startswith(self.root)
        }

    def _poll(self) -> None:
        while not self._stop.wait(0.02):
            trees = {cwd for cwd in self.alive().values() if "/.fwloop/candidates/" in cwd}
            self.most = max(self.most, len(trees))


def one_run(workdir: Path, tree: Tree, label: str, k: int, jobs: int) -> dict[str, str]:
    root = workdir / tree.name / label.replace(" ", "-").replace("=", "")
    shutil.rmtree(root, ignore_errors=True)
    bugs = tree.make(root)
    with SamplingStandin(bugs, wrong=tree.wrong) as model, QemuWatch(root) as watch:
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "--fwloop",
                "--max-iter=8",
                f"--fwloop-coder={model.spec}",
                f"--fwloop-candidates={k}",
                f"--fwloop-candidate-jobs={jobs}",
                "-p",
                "no:randomly",
            ],
            cwd=root,
            env={**os.environ, "CI": "true"},
            capture_output=True,
            check=False,
            timeout=1800,
        )
        time.sleep(0.1)
        left = watch.alive()
    [summary_path] = (root / ".fwloop" / "runs").glob("*/summary.json")
    result = row(json.loads(summary_path.read_text()))
    if tree.qemu:
        result["QEMUs at once"] = str(watch.most)
        result["QEMUs left"] = str(len(left))
    return result


def row(summary: dict[str, Any]) -> dict[str, str]:
    candidates = summary.get("candidates") or {}
    rounds = candidates.get("rounds", [])
    tokens = summary["usage"]["total"]
    return {
        "outcome": summary["outcome"],
        "iterations": str(summary["iterations"]),
        "coder calls": str(summary["coder_calls"]),
        "tokens in/out": f"{tokens['input_tokens']:.0f}/{tokens['output_tokens']:.0f}",
        "candidate builds s": f"{sum(r['build_s'] for r in rounds):.2f}",
        "candidate tests s": f"{sum(r['tests_s'] for r in rounds):.2f}",
        "pass@1 rounds": str(candidates.get("pass_at_1", "-")),
        "pass@K rounds": str(candidates.get("pass_at_k", "-")),
        "rounds with K": str(len(rounds)),
        "run s": f"{summary['duration_s']:.1f}",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default=",".join(t.name for t in TREES))
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="fwloop-candidates-"))
    for tree in (t for t in TREES if t.name in args.only.split(",")):
        rows = {label: one_run(workdir, tree, label, k, jobs) for label, k, jobs in SETTINGS}
        names = list(next(iter(rows.values())))
        width = max(map(len, names))
        print(f"{tree.name:<{width}}  " + "  ".join(f"{label:>12}" for label in rows))
        for name in names:
            print(f"{name:<{width}}  " + "  ".join(f"{r[name]:>12}" for r in rows.values()))
        print(flush=True)


if __name__ == "__main__":
    main()
