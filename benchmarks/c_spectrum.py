"""Does the C spectrum get seeded C bugs to a model that knows only its messages? A script.

    .venv/bin/python benchmarks/c_spectrum.py [--only NAME] [--workdir DIR] [--source-bytes N]

For each project it seeds three one-line bugs in C that the firmware is built from, in
functions no failing test's words name, then:

1. runs `pytest --fwloop --max-iter=6 -o fwloop_c_coverage=gcov --fwloop-coder=openai:standin@URL`
   on the seeded tree (its build honours `FWLOOP_CFLAGS`/`FWLOOP_LDFLAGS`; `=qemu` for QEMU);
2. runs the same loop on a fresh seeded copy without `fwloop_c_coverage`;
3. ranks the first coder request of run 1 again three ways, keeping the whole ranking: by the
   text evidence alone (no build list, no C spectrum), with the build's file list, and with the
   build's file list and the C spectrum; and prints where each buggy function stood.

The model is `tests/standin_model.py`: it never opens a file and can fix a bug only when a coder
request's `sources` show its line with a neighbour each side.

Projects: `qemu-cortex-m`, the bundled bare-metal Cortex-M3 firmware in QEMU with its recorded
fixes applied, measured with `fwloop_c_coverage = qemu` (needs qemu-system-arm,
gcc-arm-none-eabi and pyelftools); `gateway`, the host-built firmware of
`examples/host-gateway` (33 C files, ~4,590 lines of C, 134 console tests against one firmware
process per test module, which writes its counts on SIGUSR1); `littlefs-python` (its released
sdist: lfs.c compiled into a Python extension, 109 tests; needs Cython and setuptools_scm in
this venv, as benchmarks/released_suites.py says).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from unittest import mock

from released_suites import PROJECTS as RELEASED
from released_suites import Seed, Seeded, configure, download, plant

from pytest_fwloop.core.execution.c_coverage import build_variables
from pytest_fwloop.core.gate.policy import PatchPolicy
from pytest_fwloop.core.records.agent_protocol import AgentRequest
from pytest_fwloop.core.request.ranking import Ranked, Ranking, ranking
from pytest_fwloop.core.suite.results import TestRecord
from pytest_fwloop.loop.request import localization
from pytest_fwloop.workspace import DEFAULT_PROTECTED, Workspace
from standin_model import StandinModel

ROOT = Path(__file__).resolve().parent.parent
MAX_ITER = 6
#: Folders of C a project's build does not compile.
LEGACY = ("firmware/legacy/",)
RUN_TIMEOUT = 1200.0


@dataclass(frozen=True)
class CProject:
    name: str
    why: str
    #: The unseeded tree, made under the scratch folder.
    fetch: Callable[[Path], Path]
    seeds: tuple[Seed, ...]
    #: The build, through /bin/sh: with gcov it must add $FWLOOP_CFLAGS and $FWLOOP_LDFLAGS.
    build: str
    #: What measures the C: `fwloop_c_coverage`.
    tool: str = "gcov"


def _gateway(scratch: Path) -> Path:
    target = scratch / "gateway"
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(
        ROOT / "examples" / "host-gateway", target, ignore=shutil.ignore_patterns("build")
    )
    return target


def _qemu_cortex_m(scratch: Path) -> Path:
    """The example with its recorded fixes applied: green, before the seeds."""
    target = scratch / "qemu-cortex-m"
    shutil.rmtree(target, ignore_errors=True)
    example = ROOT / "examples" / "qemu-cortex-m"
    shutil.copytree(example, target, ignore=shutil.ignore_patterns("build"))
    for answer in sorted((example / "fwloop-answers" / "coder").glob("*.json")):
        patch = json.loads(answer.read_text())["patch"]
        subprocess.run(["patch", "-s", "-p1"], cwd=target, input=patch, text=True, check=True)
    return target


def _littlefs(scratch: Path) -> Path:
    [released] = [p for p in RELEASED if p.name == "littlefs-python"]
    tree = download(released, scratch)
    configure(released, tree)
    return tree


PROJECTS = (
    CProject(
        name="gateway",
        why="examples/host-gateway: a console firmware of 33 C files, one process per test module",
        fetch=_gateway,
        seeds=(
            Seed(
                "leap-century",
                "dropped clause",
                "firmware/src/date.c",
                "bool is_leap_year(long year)",
                "    return (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;",
                "    return year % 4 == 0 && year % 100 != 0;",
            ),
            Seed(
                "hex-lower",
                "off-by-one",
                "firmware/src/hexparse.c",
                "int hex_nibble(char c)",
                "        return c - 'a' + 10;",
                "        return c - 'a' + 11;",
            ),
            Seed(
                "partition-start",
                "off-by-one",
                "firmware/src/sort.c",
                "size_t partition(long *values, size_t low, size_t high)",
                "    for (size_t i = low; i < high; i++) {",
                "    for (size_t i = low + 1; i < high; i++) {",
            ),
        ),
        build="make",
    ),
    CProject(
        name="qemu-cortex-m",
        why="examples/qemu-cortex-m (its recorded fixes applied): bare-metal Cortex-M3 in QEMU",
        fetch=_qemu_cortex_m,
        seeds=(
            Seed(
                "hex-digit",
                "off-by-one",
                "firmware/src/fmt.c",
                "static int digit_value(char c, uint32_t base)",
                "        value = c - 'A' + 10;",
                "        value = c - 'A' + 11;",
            ),
            Seed(
                "hex-nibble-mask",
                "wrong constant",
                "firmware/src/fmt.c",
                "void put_hex(uint32_t value, unsigned digits)",
                '        uart_putc("0123456789ABCDEF"[(value >> (4u * digits)) & 0xFu]);',
                '        uart_putc("0123456789ABCDEF"[(value >> (4u * digits)) & 0x7u]);',
            ),
            Seed(
                "decimal-digits",
                "wrong bound",
                "firmware/src/fmt.c",
                "void put_dec(uint32_t value)",
                "    } while (value != 0u);",
                "    } while (value > 9u);",
            ),
        ),
        build="make",
        tool="qemu",
    ),
    CProject(
        name="littlefs-python",
        why="littlefs-python 0.19.0's sdist: lfs.c in a Cython extension, 109 tests",
        fetch=_littlefs,
        seeds=next(p for p in RELEASED if p.name == "littlefs-python").seeds,
        build=(
            'CFLAGS="$FWLOOP_CFLAGS" LDFLAGS="$FWLOOP_LDFLAGS" '
            f"{sys.executable} setup.py -q build_ext --inplace"
        ),
    ),
)


@dataclass
class LoopRun:
    label: str
    outcome: str = "?"
    coder_calls: int = 0
    iterations: int = 0
    reached: set[str] = field(default_factory=set)
    seconds: float = 0.0
    trace: list[str] = field(default_factory=list)
    run_dir: Path | None = None
    tree: Path | None = None


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FWLOOP_")}
    env["CI"] = "true"
    return env


def seeded_tree(project: CProject, scratch: Path, label: str) -> tuple[Path, list[Seeded]]:
    tree = project.fetch(scratch / label)
    return tree, [plant(tree, seed) for seed in project.seeds]


def loop_run(
    project: CProject, tree: Path, seeded: list[Seeded], gcov: bool, budget: int
) -> LoopRun:
    result = LoopRun(f"C spectrum ({project.tool})" if gcov else "no C spectrum", tree=tree)
    env = _env()
    build_env = {**env, **build_variables(project.tool if gcov else "off")}
    subprocess.run(
        ["/bin/sh", "-c", project.build], cwd=tree, env=build_env, check=True, capture_output=True
    )
    args = [
        sys.executable,
        "-m",
        "pytest",
        "--fwloop",
        f"--max-iter={MAX_ITER}",
        "-p",
        "no:randomly",
        f"--fwloop-build={project.build}",
        "-o",
        "fwloop_build_shell=true",
        "-o",
        f"fwloop_source_bytes={budget}",
    ]
    if gcov:
        args += ["-o", f"fwloop_c_coverage={project.tool}"]
    with StandinModel([s.bug for s in seeded]) as model:
        started = time.perf_counter()
        subprocess.run(
            [*args, f"--fwloop-coder={model.spec}"],
            cwd=tree,
            env=env,
            capture_output=True,
            text=True,
            timeout=RUN_TIMEOUT,
            check=False,
        )
        result.seconds = time.perf_counter() - started
        seen = list(model.seen)
    result.reached = {name for s in seen for name in s.visible}
    [run_dir] = sorted((tree / ".fwloop" / "runs").iterdir())[-1:]
    result.run_dir = run_dir
    summary = json.loads((run_dir / "summary.json").read_text())
    result.outcome = str(summary.get("outcome"))
    result.coder_calls = int(summary["coder_calls"])
    result.iterations = int(summary["iterations"])
    for line in (run_dir / "task-events.jsonl").read_text().splitlines():
        event = json.loads(line)
        if event.get("event") == "LOCALIZATION":
            result.trace.append(str(event.get("reason", "")))
    return result


def standings(
    tree: Path, run_dir: Path, seeded: list[Seeded], how: str, budget: int
) -> dict[str, str]:
    """Where each seed's function stood in the first request's ranking made again `how`:
    "text" (no build list, no C spectrum), "build" (with the build's list), "spectrum" (both)."""
    results = json.loads((run_dir / "rounds" / "01" / "results.json").read_text())["tests"]
    failing = [TestRecord.model_validate(t) for t in results if t["outcome"] in ("failed", "error")]
    captured: list[list[Ranked]] = []

    def keep(*args: Any, **kwargs: Any) -> Ranking:
        ranks = ranking(*args, **kwargs)
        captured.append(ranks.ranked)
        return ranks

    rounds = Path(tempfile.mkdtemp(prefix="fwloop-c-spectrum-")) / "rounds"
    shutil.copytree(run_dir / "rounds" / "01", rounds / "01")
    # What the first coder request read besides: its round's spectrum run, if there was one.
    (rounds / "02").mkdir()
    for path in (run_dir / "rounds" / "02").glob("spectrum-run-*"):
        if path.is_file():
            shutil.copy2(path, rounds / "02" / path.name)
    if how != "spectrum":
        for path in [
            *rounds.glob("*/spectrum-*.gcov.json"),
            *rounds.glob("*/spectrum-*.qemu.json"),
        ]:
            path.unlink()
    workspace = Workspace(tree)
    workspace.take_baseline("c-spectrum-rerank")
    policy = PatchPolicy(protected=DEFAULT_PROTECTED)
    localizer = localization.Localizer(workspace, budget, lambda text: text, lambda: policy, rounds)
    if how == "text":
        localizer.build_inputs.files = lambda known: None  # type: ignore[method-assign]
    request = AgentRequest(role="coder", iteration=2, goal="g", workspace=str(tree), failures=[])
    try:
        with mock.patch.object(localization, "ranking", side_effect=keep):
            passed = sum(1 for t in results if t["outcome"] == "passed")
            done, _ = localizer.coder_request(request, failing, [], passed_in_suite=passed)
    finally:
        workspace.close(keep_tree=True)
        shutil.rmtree(rounds.parent)
    [ranked] = captured
    top = ranked[:20]
    found_unbuilt = sum(
        1
        for r in top
        if r.path.startswith(tuple(LEGACY)) or "not in the build" in " ".join(r.reasons)
    )
    sent = {(c.path, line) for c in done.sources for line in range(c.start_line, c.end_line + 1)}
    found: dict[str, str] = {"top 20 not built": str(found_unbuilt)}
    for s in seeded:
        key = (
            localizer.tree.enclosing(s.seed.path, s.line)
            if s.seed.path in localizer.tree.files
            else None
        )
        if key is None:
            found[s.seed.name] = "in no symbol"
            continue
        name = localizer.tree.symbol(key).name
        place = next((i for i, r in enumerate(ranked) if (r.path, r.index) == key), None)
        shown = "sent" if (s.seed.path, s.line) in sent else "not sent"
        found[s.seed.name] = (
            f"{name}: not ranked of {len(ranked)} ({shown})"
            if place is None
            else f"{name}: #{place + 1} of {len(ranked)} ({shown}; {ranked[place].reasons[0]})"
        )
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", choices=[p.name for p in PROJECTS])
    parser.add_argument("--workdir", type=Path)
    parser.add_argument("--source-bytes", type=int, default=40960)
    args = parser.parse_args()
    scratch = args.workdir or Path(tempfile.mkdtemp(prefix="fwloop-c-spectrum-"))
    scratch.mkdir(parents=True, exist_ok=True)
    print(f"scratch: {scratch}; fwloop_source_bytes={args.source_bytes}")
    for project in (p for p in PROJECTS if args.only in (None, p.name)):
        print(f"\n== {project.name}: {project.why}")
        tree, seeded = seeded_tree(project, scratch, "with-gcov")
        seeded_texts = {s.seed.path: (tree / s.seed.path).read_text() for s in seeded}
        with_gcov = loop_run(project, tree, seeded, True, args.source_bytes)
        other, other_seeded = seeded_tree(project, scratch, "without")
        without = loop_run(project, other, other_seeded, False, args.source_bytes)
        for run in (with_gcov, without):
            print(
                f"  {run.label}: {run.outcome}, {run.coder_calls} coder call(s), "
                f"{run.iterations} iteration(s), bugs reached {len(run.reached)}/{len(seeded)}, "
                f"{run.seconds:.0f} s"
            )
            for line in run.trace[:1]:
                print(f"    first LOCALIZATION: {line}")
        assert with_gcov.run_dir is not None
        # Ranked again on run 1's tree with its seeded files put back (the run may have fixed
        # them): its spectra name that tree, its build left its lists there.
        for path, text in seeded_texts.items():
            (tree / path).write_text(text)
        fresh, fresh_seeded = tree, seeded
        table = {
            how: standings(fresh, with_gcov.run_dir, fresh_seeded, how, args.source_bytes)
            for how in ("text", "build", "spectrum")
        }
        print("  | seed | text evidence alone | + build's file list | + C spectrum |")
        print("  |---|---|---|---|")
        for s in fresh_seeded:
            cells = " | ".join(table[how][s.seed.name] for how in ("text", "build", "spectrum"))
            print(f"  | {s.seed.name} ({s.seed.path}:{s.line}) | {cells} |")
        cells = " | ".join(table[how]["top 20 not built"] for how in ("text", "build", "spectrum"))
        print(f"  | symbols of C the build does not compile in the top 20 | {cells} |")


if __name__ == "__main__":
    main()
