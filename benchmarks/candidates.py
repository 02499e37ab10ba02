"""What K candidates per iteration buy and cost (issue 45): one candidate against four. A script.

    .venv/bin/python benchmarks/candidates.py [--workdir DIR]

Runs `pytest --fwloop --max-iter=8` on fresh copies of `examples/uart-console` (three seeded
bugs) with `fwloop_candidates` 1, 4, and 4 with `fwloop_candidate_jobs = 2`, against
`tests/standin_model.SamplingStandin`: a model behind `openai:` that knows only its messages and
writes, in about half its samples (iteration + candidate number odd), a wrong CRC start value
that compiles. Prints, side by side, the outcome, iterations and coder calls to it, the
candidates' build and test seconds as `summary.json` reports them, pass@1 and pass@K, and the
run's wall-clock seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from standin_model import SamplingStandin, bugs_of_answers  # noqa: E402

WRONG = {"01#1": ("#define CRC8_INIT 0x00u", "#define CRC8_INIT 0x01u")}
SETTINGS = (("K=1", 1, 1), ("K=4", 4, 1), ("K=4 jobs=2", 4, 2))


def one_run(workdir: Path, label: str, k: int, jobs: int) -> dict[str, Any]:
    tree = workdir / label.replace(" ", "-").replace("=", "")
    shutil.rmtree(tree, ignore_errors=True)
    shutil.copytree(
        ROOT / "examples" / "uart-console",
        tree,
        ignore=shutil.ignore_patterns("build", "__pycache__", ".fwloop"),
    )
    with SamplingStandin(bugs_of_answers(tree / "fwloop-answers"), wrong=WRONG) as model:
        env = {**os.environ, "CI": "true"}
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
            cwd=tree,
            env=env,
            capture_output=True,
            check=False,
            timeout=900,
        )
    [summary_path] = (tree / ".fwloop" / "runs").glob("*/summary.json")
    summary: dict[str, Any] = json.loads(summary_path.read_text())
    return summary


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
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="fwloop-candidates-"))
    rows = {label: row(one_run(workdir, label, k, jobs)) for label, k, jobs in SETTINGS}
    names = list(next(iter(rows.values())))
    width = max(map(len, names))
    print(f"{'uart-console':<{width}}  " + "  ".join(f"{label:>12}" for label in rows))
    for name in names:
        print(f"{name:<{width}}  " + "  ".join(f"{r[name]:>12}" for r in rows.values()))


if __name__ == "__main__":
    main()
