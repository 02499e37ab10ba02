"""Does localization get seeded bugs of released projects to a model? A script, not a test.

    .venv/bin/python benchmarks/released_suites.py [--only NAME] [--workdir DIR] [--keep]

For each project it downloads the released sdist from PyPI (`pip download --no-binary :all:`),
unpacks it, seeds three one-line bugs in the library code (never the tests), writes the pytest
configuration only where the project has none, builds the compiled code once where there is
some, and runs `pytest --fwloop --max-iter=6 --fwloop-coder=openai:standin@URL` (with
`--fwloop-build` to rebuild after each patch where there is compiled code). The model is
`tests/standin_model.py`: it never opens a file and knows each bug as the inverse of its seed (the
seeded line with three lines either side, and the original), so it can fix a bug only when a
coder request's `sources` show its line with one neighbour on each side.

Printed per project: bugs whose code reached the model in any coder request / bugs seeded, the
outcome, iterations, coder calls, the largest coder request (HTTP body bytes), the localization
time per request (the LOCALIZATION sub-state lines of the run's task-events.jsonl), and for each
bug never shown: where it is, the top five `sources` each request ranked instead (with their
reasons), and where its function stood in the whole ranking (the first request's localization
made again on the seeded tree, keeping what the request had no room for). Then, to say which
signals would have found the bugs: per seeded C file, the lines tree-sitter could not read, as
the file is and with its `#else` branches blanked; per Python seed, where per-test coverage
(coverage.py contexts, Ochiai) would have put its line. Before the run, each seed is checked
to be one the stand-in would fix if it were shown the whole file.

Needs, in the venv that runs it (the projects' build and test requirements; pip downloads the
sdists without build isolation, so their build backends must be importable):

    .venv/bin/pip install cython setuptools_scm bitstruct python-can textparser diskcache \
        argparse_addons crccheck parameterized

and a C compiler for littlefs-python.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import re
import shlex
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from unittest import mock

from pytest_fwloop.codemap.parse import language_of, parse_source
from pytest_fwloop.core.gate.policy import PatchPolicy
from pytest_fwloop.core.records.agent_protocol import AgentRequest
from pytest_fwloop.core.request.ranking import Ranked, Ranking, ranking
from pytest_fwloop.core.suite.results import TestRecord
from pytest_fwloop.loop.request import localization
from pytest_fwloop.workspace import DEFAULT_PROTECTED, Workspace

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from standin_model import Bug, StandinModel, find  # noqa: E402

MAX_ITER = 6
CONTEXT = 3  # lines either side of a seed in the bug the stand-in knows
RUN_TIMEOUT = 900.0
SOURCE_BYTES = 40960  # the fwloop_source_bytes default


@dataclass(frozen=True)
class Seed:
    """One seeded bug: in `path`, the first `old` line after the line holding `anchor`."""

    name: str
    kind: str
    path: str
    anchor: str
    old: str
    new: str


@dataclass(frozen=True)
class Project:
    name: str
    requirement: str
    why: str
    ini: str  # written as pytest.ini only when the project configures pytest nowhere
    seeds: tuple[Seed, ...]
    needs: tuple[str, ...]  # modules the build and the suite import
    build: tuple[str, ...] = ()  # argv after the interpreter; run once, then after each patch


PROJECTS = (
    Project(
        name="cantools",
        requirement="cantools==39.3.0",
        why="pure Python, CAN/DBC tooling used by embedded teams; 296 fast tests in its sdist",
        ini=(
            "[pytest]\ntestpaths = tests\npythonpath = src\n"
            # matplotlib is not installed: the plot tests cannot import (they fail unseeded).
            "addopts = --ignore=tests/test_plot.py --ignore=tests/test_plot_without_mock.py"
            " --ignore=tests/test_plot_unittests.py\n"
        ),
        seeds=(
            Seed(
                "j1939-pdu1",
                "inverted condition",
                "src/cantools/j1939.py",
                "def is_pdu_format_1(pdu_format):",
                "    return (pdu_format < 240)",
                "    return (pdu_format >= 240)",
            ),
            Seed(
                "dbc-mux-range",
                "off-by-one",
                "src/cantools/database/can/formats/dbc.py",
                "for lower, upper in signal_multiplexer_value[4]:",
                "            multiplexer_ids.extend(range(lower, upper + 1))",
                "            multiplexer_ids.extend(range(lower, upper))",
            ),
            Seed(
                "conversion-identity",
                "wrong operator (and -> or)",
                "src/cantools/database/conversion.py",
                "if choices is None:",
                "            if scale == 1 and offset == 0:",
                "            if scale == 1 or offset == 0:",
            ),
        ),
        needs=("bitstruct", "can", "textparser", "diskcache", "argparse_addons", "crccheck"),
    ),
    Project(
        name="littlefs-python",
        requirement="littlefs-python==0.19.0",
        why=(
            "littlefs (a flash file system for microcontrollers, 6,558-line lfs.c) compiled with"
            " a Cython wrapper into a Python extension; 109 tests; builds in ~25 s"
        ),
        ini="[pytest]\ntestpaths = test\npythonpath = src\n",
        seeds=(
            Seed(
                "file-seek-noop",
                "inverted condition",
                "littlefs/lfs.c",
                "static lfs_soff_t lfs_file_seek_(lfs_t *lfs, lfs_file_t *file,",
                "    if (file->pos == npos) {",
                "    if (file->pos != npos) {",
            ),
            Seed(
                "dir-read-count",
                "off-by-one",
                "littlefs/lfs.c",
                "static int lfs_dir_read_(lfs_t *lfs, lfs_dir_t *dir, struct lfs_info *info) {",
                "        if (dir->id == dir->m.count) {",
                "        if (dir->id == dir->m.count - 1) {",
            ),
            Seed(
                "disk-version-major",
                "wrong constant",
                "littlefs/lfs.c",
                "static uint16_t lfs_fs_disk_version_major(lfs_t *lfs) {",
                "    return 0xffff & (lfs_fs_disk_version(lfs) >> 16);",
                "    return 0xffff & (lfs_fs_disk_version(lfs) >> 17);",
            ),
        ),
        needs=("Cython", "setuptools_scm"),
        build=("setup.py", "-q", "build_ext", "--inplace"),
    ),
)

PIP_DOWNLOAD = (
    *(sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-build-isolation"),
    *("--no-binary", ":all:"),
)
PYTEST_CONFIG = (
    ("pytest.ini", "[pytest]"),
    ("tox.ini", "[pytest]"),
    ("setup.cfg", "[tool:pytest]"),
    ("pyproject.toml", "[tool.pytest.ini_options]"),
)


def download(project: Project, scratch: Path) -> Path:
    """The sdist unpacked under `scratch`; its top folder."""
    sdists = scratch / "sdists"
    subprocess.run(
        [*PIP_DOWNLOAD, project.requirement, "-d", str(sdists)],
        check=True,
    )
    stem = re.sub(r"[-_.]+", "_", project.requirement.split("==")[0]).lower()
    [archive] = [p for p in sdists.glob("*.tar.gz") if p.name.lower().startswith(stem)]
    target = scratch / project.name
    shutil.rmtree(target, ignore_errors=True)
    with tarfile.open(archive) as tar:
        tar.extractall(target, filter="data")
    [top] = list(target.iterdir())
    return top


def configure(project: Project, tree: Path) -> str:
    """Write pytest.ini only when the project configures pytest nowhere; say what was done."""
    for name, section in PYTEST_CONFIG:
        path = tree / name
        if path.exists() and section in path.read_text(errors="replace"):
            return f"kept its own {name} {section}"
    (tree / "pytest.ini").write_text(project.ini)
    return "wrote pytest.ini (the sdist configures pytest nowhere)"


@dataclass
class Seeded:
    seed: Seed
    line: int  # 1-based line of the seed in its file
    bug: Bug


def plant(tree: Path, seed: Seed) -> Seeded:
    """Replace the seed's line; the bug the stand-in knows is its inverse with CONTEXT lines."""
    path = tree / seed.path
    lines = path.read_text().split("\n")
    start = next(i for i, line in enumerate(lines) if seed.anchor in line)
    at = next(i for i in range(start, len(lines)) if lines[i] == seed.old)
    lines[at] = seed.new
    path.write_text("\n".join(lines))
    before = lines[max(at - CONTEXT, 0) : at]
    after = lines[at + 1 : at + 1 + CONTEXT]
    bug = Bug(seed.name, (*before, seed.new, *after), (*before, seed.old, *after))
    # The stand-in must be able to fix the seed when shown its file: else 0/3 would mean nothing.
    if find(bug, [{"path": seed.path, "start_line": 1, "text": "\n".join(lines)}]) is None:
        raise SystemExit(f"released_suites: the stand-in could not see seed {seed.name}; fix it")
    return Seeded(seed, at + 1, bug)


def enclosing(tree: Path, seeded: Seeded) -> str:
    """The definition line above the seed: the function a reader would name."""
    lines = (tree / seeded.seed.path).read_text().split("\n")[: seeded.line - 1]
    python = re.compile(r"^\s*(async\s+)?def \w+|^\s*class \w+")
    c_function = re.compile(r"^[A-Za-z_][\w\s\*]*\b\w+\(.*[^;]$")
    pattern = python if seeded.seed.path.endswith(".py") else c_function
    return next((line.strip() for line in reversed(lines) if pattern.match(line)), "?")


@dataclass
class Outcome:
    project: str
    tree: Path
    config: str
    seeded: list[Seeded]
    reached: set[str] = field(default_factory=set)
    outcome: str = "?"
    iterations: int = 0
    coder_calls: int = 0
    largest: int = 0
    loc_times: list[float] = field(default_factory=list)
    loc_lines: list[str] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
    #: Per seed: where its function stood in the full ranking of the first request, re-made.
    standing: dict[str, str] = field(default_factory=dict)
    parsing: list[str] = field(default_factory=list)
    coverage: list[str] = field(default_factory=list)
    seconds: float = 0.0
    build_seconds: float = 0.0
    exit_code: int = 0
    tail: str = ""


def run(project: Project, scratch: Path, mode: str = "plain", form: str = "exact") -> Outcome:
    tree = download(project, scratch)
    config = configure(project, tree)
    seeded = [plant(tree, seed) for seed in project.seeds]
    result = Outcome(project.name, tree, config, seeded)
    env = {k: v for k, v in os.environ.items() if not k.startswith("FWLOOP_")}
    env["CI"] = "true"
    args = [
        sys.executable,
        "-m",
        "pytest",
        "--fwloop",
        f"--max-iter={MAX_ITER}",
        "-p",
        "no:randomly",
    ]
    if project.build:
        started = time.perf_counter()
        subprocess.run(
            [sys.executable, *project.build], cwd=tree, env=env, check=True, capture_output=True
        )
        result.build_seconds = time.perf_counter() - started
        args.append("--fwloop-build=" + shlex.join([sys.executable, *project.build]))
    with StandinModel([s.bug for s in seeded], mode=mode, form=form) as model:
        started = time.perf_counter()
        done = subprocess.run(
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
    result.exit_code = done.returncode
    result.tail = "\n".join(done.stdout.splitlines()[-6:])
    result.reached = {name for s in seen for name in s.visible}
    result.largest = max((s.request_bytes for s in seen), default=0)
    [run_dir] = sorted((tree / ".fwloop" / "runs").iterdir())[-1:]
    summary = json.loads((run_dir / "summary.json").read_text())
    result.outcome = str(summary.get("outcome"))
    result.iterations = int(summary["iterations"])
    result.coder_calls = int(summary["coder_calls"])
    for line in (run_dir / "task-events.jsonl").read_text().splitlines():
        event = json.loads(line)
        if event.get("event") == "LOCALIZATION":
            text = str(event.get("reason", ""))
            result.loc_lines.append(text)
            if timed := re.search(r"in ([0-9.]+)s\b", text):
                result.loc_times.append(float(timed.group(1)))
    result.requests = [
        json.loads(p.read_text()) for p in sorted(run_dir.glob("rounds/*/coder-*.request.json"))
    ]
    result.standing = rerank(tree, run_dir, seeded)
    result.parsing = parse_health(tree, seeded)
    result.coverage = spectrum(tree, seeded)
    return result


def rerank(tree: Path, run_dir: Path, seeded: list[Seeded]) -> dict[str, str]:
    """The first request's localization made again on the tree the run left (the seeded one,
    restored), this time keeping the whole ranking (the request holds only what fit): where
    each seed's function stood in it, and with which score and reasons."""
    results = json.loads((run_dir / "rounds" / "01" / "results.json").read_text())["tests"]
    failing = [TestRecord.model_validate(t) for t in results if t["outcome"] in ("failed", "error")]
    captured: list[list[Ranked]] = []

    def keep(*args: Any, **kwargs: Any) -> Ranking:
        ranks = ranking(*args, **kwargs)
        captured.append(ranks.ranked)
        return ranks

    workspace = Workspace(tree)
    workspace.take_baseline("released-suites-rerank")
    policy = PatchPolicy(protected=DEFAULT_PROTECTED)
    # The spectra the first request could read: the baseline's round and the spectrum run
    # made before that request (in round 2, before its test run).
    first_round = Path(tempfile.mkdtemp(prefix="fwloop-rerank-")) / "rounds"
    shutil.copytree(run_dir / "rounds" / "01", first_round / "01")
    (first_round / "02").mkdir()
    for path in (run_dir / "rounds" / "02").glob("spectrum-run-*"):
        shutil.copy2(path, first_round / "02" / path.name)
    passed = sum(t["outcome"] == "passed" for t in results)
    localizer = localization.Localizer(
        workspace, SOURCE_BYTES, lambda text: text, lambda: policy, first_round
    )
    request = AgentRequest(role="coder", iteration=2, goal="g", workspace=str(tree), failures=[])
    try:
        with mock.patch.object(localization, "ranking", side_effect=keep):
            localizer.coder_request(request, failing, [], passed_in_suite=passed)
    finally:
        workspace.close(keep_tree=True)
        shutil.rmtree(first_round.parent)
    [ranked] = captured
    standing: dict[str, str] = {}
    for s in seeded:
        key = (
            localizer.tree.enclosing(s.seed.path, s.line)
            if s.seed.path in localizer.tree.files
            else None
        )
        if key is None:
            standing[s.seed.name] = "its line is in no indexed symbol"
            continue
        symbol = localizer.tree.symbol(key)
        place = next(((i, r) for i, r in enumerate(ranked) if (r.path, r.index) == key), None)
        if place is None:
            standing[s.seed.name] = (
                f"{symbol.name} not ranked (no evidence reached it) of {len(ranked)}"
            )
            continue
        at, found = place
        standing[s.seed.name] = (
            f"{symbol.name} ranked #{at + 1} of {len(ranked)}, score {found.score:.2f}"
            f" (#1 scores {ranked[0].score:.2f}): {'; '.join(found.reasons)}"
        )
    return standing


COVERAGE_RUN = (sys.executable, "-m", "coverage", "run")
SUITE = ("-m", "pytest", "-q", "-p", "no:randomly", "-p", "no:fwloop", "-rfE")
_DIRECTIVE = re.compile(r"\s*#\s*(if|ifdef|ifndef|elif|else|endif)\b")


def first_branches(text: str) -> str:
    """C text with every `#elif`/`#else` branch and the conditional directives blanked, line
    numbers kept: one configuration of the code, which a C grammar can read whole."""
    kept: list[str] = []
    skipping: list[bool] = []
    for line in text.split("\n"):
        match = _DIRECTIVE.match(line)
        if match is None:
            kept.append("" if any(skipping) else line)
            continue
        kept.append("")
        if match.group(1).startswith("if"):
            skipping.append(False)
        elif match.group(1) == "endif":
            if skipping:
                skipping.pop()
        elif skipping:
            skipping[-1] = True
    return "\n".join(kept)


def parse_health(tree: Path, seeded: list[Seeded]) -> list[str]:
    """Per seeded C file: the lines tree-sitter could not read (inside ERROR nodes) and whether
    the seed's function is an indexed symbol, as the file is and with `first_branches`."""
    lines: list[str] = []
    for path in dict.fromkeys(s.seed.path for s in seeded):
        if language_of(path) not in ("c", "cpp"):
            continue
        text = (tree / path).read_text()
        for label, version in (("as is", text), ("#else branches blanked", first_branches(text))):
            found = parse_source(path, version.encode())
            symbols = found.symbols if found is not None else []
            unread = error_lines(path, version)
            held = [
                s.seed.name
                for s in seeded
                if s.seed.path == path
                and any(x.start_line <= s.line <= x.end_line and x.kind != "lines" for x in symbols)
            ]
            lines.append(
                f"{path} {label}: {unread:,} of {version.count(chr(10)) + 1:,} lines in"
                f" tree-sitter ERROR nodes, {len(symbols)} symbols; seeds inside a symbol:"
                f" {', '.join(held) or 'none'}"
            )
    return lines


def error_lines(path: str, text: str) -> int:
    import tree_sitter

    grammar = importlib.import_module(
        "tree_sitter_c" if path.endswith((".c", ".h")) else "tree_sitter_cpp"
    )
    root = (
        tree_sitter.Parser(tree_sitter.Language(grammar.language())).parse(text.encode()).root_node
    )
    unread: set[int] = set()
    stack = [root]
    while stack:
        node = stack.pop()
        if node.type == "ERROR":
            unread.update(range(node.start_point[0], node.end_point[0] + 1))
        else:
            stack.extend(node.children)
    return len(unread)


def spectrum(tree: Path, seeded: list[Seeded]) -> list[str]:
    """Where per-test coverage (coverage.py's test contexts) would put each Python seed's line by
    Ochiai: over all failing tests, and over the one failing test that ranks it best (the other
    failures left out: their cause may be another bug)."""
    python = [s for s in seeded if s.seed.path.endswith(".py")]
    if not python or importlib.util.find_spec("coverage") is None:
        return []
    import coverage

    rc = tree / ".released-suites-coveragerc"
    rc.write_text("[run]\ndynamic_context = test_function\nbranch = false\n")
    data_file = tree / ".released-suites-coverage"
    package = python[0].seed.path.split("/", 1)[0]  # the library's folder: its tests are not ranked
    done = subprocess.run(
        [
            *COVERAGE_RUN,
            f"--rcfile={rc}",
            f"--data-file={data_file}",
            f"--source={package}",
            *SUITE,
        ],
        cwd=tree,
        capture_output=True,
        text=True,
        check=False,
    )
    failed = {
        line.split(" ")[1].rsplit("::", 1)[-1]
        for line in done.stdout.splitlines()
        if line.startswith(("FAILED ", "ERROR "))
    }
    data = coverage.CoverageData(str(data_file))
    data.read()
    covered: dict[tuple[str, int], set[str]] = {}
    for measured in data.measured_files():
        relative = str(Path(measured).relative_to(tree.resolve()))
        for number, contexts in data.contexts_by_lineno(measured).items():
            covered[(relative, number)] = {c.rsplit(".", 1)[-1] for c in contexts if c}
    total = len(failed)
    lines = [f"per-test coverage: {len(covered):,} lines run, {total} failing tests"]
    for s in python:
        tests = covered.get((s.seed.path, s.line), set())
        overall = {k: ochiai(v, failed, total) for k, v in covered.items()}
        place = standing_of(overall, (s.seed.path, s.line))
        best = min(
            (
                (
                    standing_of(
                        {
                            k: ochiai(v - failed | {test}, {test}, 1)
                            for k, v in covered.items()
                            if test in v
                        },
                        (s.seed.path, s.line),
                    ),
                    test,
                )
                for test in tests & failed
            ),
            default=None,
        )
        lines.append(
            f"{s.seed.name}: run by {len(tests & failed)} failing and {len(tests - failed)}"
            f" passing tests; Ochiai over all failures: {place}"
            + (f"; over {best[1]} alone: {best[0]}" if best else "")
        )
    return lines


def ochiai(tests: set[str], failed: set[str], total: int) -> float:
    hit = len(tests & failed)
    return hit / math.sqrt(total * len(tests)) if hit and total else 0.0


def standing_of(scores: dict[tuple[str, int], float], key: tuple[str, int]) -> str:
    mine = scores.get(key, 0.0)
    above = sum(1 for v in scores.values() if v > mine)
    ties = sum(1 for v in scores.values() if v == mine) - 1
    return f"line #{above + 1} of {len(scores):,} (tied with {ties})"


def top(sources: list[dict[str, Any]]) -> list[str]:
    """The five best-ranked chunks of a request, each with why it was chosen."""
    return [
        f"{c.get('path')}:{c.get('start_line')}-{c.get('end_line')} {c.get('symbol') or ''}"
        f" <- {' '.join(str(c.get('reason')).split())[:150]}"
        for c in sources[:5]
    ]


def whereabouts(result: Outcome, s: Seeded) -> list[str]:
    """Where a missed bug was, and how close each request came to it."""
    function = enclosing(result.tree, s)
    name = m.group(1) if (m := re.search(r"(\w+)\s*\(", function)) else function
    lines = [f"in: {function}", f"offline re-rank: {result.standing.get(s.seed.name, '?')}"]
    for number, request in enumerate(result.requests, 1):
        sources = request.get("sources") or []
        same = [f"{c['start_line']}-{c['end_line']}" for c in sources if c["path"] == s.seed.path]
        mapped = [m["path"] for m in request.get("repo_map") or []]
        failures = json.dumps(request.get("failures", ""))
        rank = f"#{mapped.index(s.seed.path) + 1}" if s.seed.path in mapped else "no"
        lines.append(
            f"request {number}: file in sources {', '.join(same) or 'no'};"
            f" in repo_map {rank}"
            f" of {len(mapped)} (+{request.get('repo_map_more', 0)} unlisted);"
            f" failures name the file {failures.count(Path(s.seed.path).name)}x,"
            f" the function {failures.count(name)}x"
        )
    return lines


def report(result: Outcome) -> None:
    seeded = result.seeded
    times = sorted(result.loc_times)
    spread = (
        f"{times[0]:.2f}/{times[len(times) // 2]:.2f}/{times[-1]:.2f} s (min/median/max)"
        if times
        else "none traced"
    )
    print(f"\n== {result.project}: {result.config}")
    print(f"  bugs reached the model: {len(result.reached)}/{len(seeded)}")
    print(
        f"  outcome: {result.outcome} (exit {result.exit_code}), iterations {result.iterations},"
        f" coder calls {result.coder_calls}, wall {result.seconds:.0f} s"
        + (f" (+ first build {result.build_seconds:.0f} s)" if result.build_seconds else "")
    )
    recorded = max((len(json.dumps(r).encode()) for r in result.requests), default=0)
    print(
        f"  largest coder request: {result.largest:,} bytes on the wire (HTTP body: instructions,"
        f" schema, the request JSON-quoted), {recorded:,} bytes as the run's request.json"
    )
    print(f"  localization per request ({len(times)}): {spread}")
    for line in result.loc_lines:
        print(f"    {line}")
    for number, request in enumerate(result.requests, 1):
        sources = request.get("sources") or []
        earlier = result.requests[number - 2].get("sources") if number > 1 else None
        if earlier is not None and top(earlier) == top(sources):
            print(f"  request {number}: the same top 5 as request {number - 1}")
            continue
        print(f"  request {number}: {len(sources)} chunk(s), top 5:")
        for line in top(sources):
            print(f"    {line}")
    for s in seeded:
        state = "reached" if s.seed.name in result.reached else "MISSED"
        print(f"  [{state}] {s.seed.name} ({s.seed.kind}) {s.seed.path}:{s.line}")
        if state == "MISSED":
            for line in whereabouts(result, s):
                print(f"    {line}")
    for line in [*result.parsing, *result.coverage]:
        print(f"  {line}")
    if result.exit_code not in (0, 1):
        print("  pytest said:\n" + result.tail)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", choices=[p.name for p in PROJECTS])
    parser.add_argument("--workdir", type=Path, help="scratch folder (default: a new temp dir)")
    parser.add_argument(
        "--mode",
        choices=["plain", "tools"],
        default="plain",
        help="tools: the stand-in reads the files it suspects through the read-only tools "
        "before it answers, when its request does not show every bug",
    )
    parser.add_argument(
        "--form",
        choices=["exact", "sloppy", "edits"],
        default="exact",
        help="how the stand-in writes its fixes: exact diffs, sloppy ones (hunk numbers off by"
        " three, no a/ b/ prefixes), or search/replace edits",
    )
    args = parser.parse_args()
    chosen = [p for p in PROJECTS if args.only in (None, p.name)]
    missing = sorted({m for p in chosen for m in p.needs if importlib.util.find_spec(m) is None})
    if missing:
        sys.exit(
            f"released_suites: {', '.join(missing)} not importable; install the requirements"
            " named in this script's docstring into this venv"
        )
    scratch = args.workdir or Path(tempfile.mkdtemp(prefix="fwloop-released-"))
    scratch.mkdir(parents=True, exist_ok=True)
    print(f"scratch: {scratch}; the stand-in answers {args.mode}, {args.form}")
    for project in chosen:
        result = run(project, scratch, args.mode, args.form)
        report(result)


if __name__ == "__main__":
    main()
