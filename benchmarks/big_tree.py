"""What the loop's own work costs on an RTOS-sized tree, beside the firmware's (issue 44).

    .venv/bin/python benchmarks/big_tree.py [--files 30000] [--built 150] [--workdir DIR]

Generates a git checkout of `--files` files in a Zephyr tree's proportions (C sources, headers,
devicetree, YAML, Kconfig, CMake, docs, scripts), of which a Makefile compiles `--built` C files
into a host `shell` program; a pytest suite drives the program, one test per built module, and
two one-line bugs are seeded in two built modules. Then it times the firmware's own work (a cold
`make -j2`, a one-line rebuild, plain `pytest` on the seeded tree) and runs `pytest --fwloop`
with an oracle coder that fixes one bug per call, and prints, from the run's own records:

- the baseline snapshot as the loop takes it, beside git's own `git add -A` (in-process,
  before the run),
- the first localization and the one after a patch (the LOCALIZATION sub-state's own figure),
- the controller's peak memory (VmHWM, read from /proc while it runs),
- from SUCCESS in task-events.jsonl to the process's exit,
- the size of `.fwloop/` after the run, beside the tree's own build output.

The oracle reads the tree (it stands in for a model that knows the answer): this measures the
loop's cost, not its localization's aim (benchmarks/localization.py and released_suites.py do).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime
from pathlib import Path

SEED = 20261202
#: Shares of a Zephyr 3.4 tree by kind of file (counted in sdk-zephyr 3.4.99: 28,866 files).
KINDS = (
    ("c", 0.30),
    ("h", 0.25),
    ("dtsi", 0.12),
    ("yaml", 0.13),
    ("Kconfig", 0.06),
    ("cmake", 0.05),
    ("rst", 0.04),
    ("py", 0.02),
    ("conf", 0.03),
)
FOLDERS = ("drivers", "subsys", "lib", "kernel", "arch", "boards", "soc", "dts", "samples", "tests")
BUGS = (17, 93)

MAKEFILE = """\
SRCS := $(shell cat build.list)
OBJS := $(patsubst %.c,build/obj/%.o,$(SRCS))
build/shell: $(OBJS)
\t@$(CC) -o $@ $^
build/obj/%.o: %.c
\t@mkdir -p $(dir $@)
\t@$(CC) -O1 -MMD -Iinclude -c -o $@ $<
-include $(OBJS:.o=.d)
"""

TESTS = """\
import subprocess
from pathlib import Path

import pytest

SHELL = Path(__file__).resolve().parent.parent / "build" / "shell"


@pytest.mark.parametrize("module", range({built}))
def test_module_answers(module):
    out = subprocess.run([str(SHELL), str(module), "5"], capture_output=True, text=True).stdout
    assert out.strip() == str(5 + module * 3)
"""

#: Fixes one seeded bug a call, as a diff: the first module whose `- ` is still there.
CODER = """\
import json, sys, difflib
from pathlib import Path
json.load(sys.stdin)
for number in {bugs}:
    path = Path("subsys/shell/modules") / f"mod{{number}}.c"
    text = path.read_text()
    if "x - " in text:
        break
fixed = text.replace("x - ", "x + ")
name = str(path)
diff = f"diff --git a/{{name}} b/{{name}}\\n" + "".join(difflib.unified_diff(
    text.splitlines(keepends=True), fixed.splitlines(keepends=True),
    fromfile=f"a/{{name}}", tofile=f"b/{{name}}"))
print(json.dumps({{"analysis": {{"root_cause": name, "hypotheses": [name], "confidence": 0.9}},
                  "patch": diff, "summary": f"fix {{name}}"}}))
"""


def c_source(rng: random.Random, name: str) -> str:
    body = "".join(
        f"int {name}_op{k}(int reg, int value)\n{{\n    int acc = reg * {rng.randrange(3, 99)};\n"
        f"    for (int i = 0; i < value; i++) {{\n        acc += i ^ {k};\n    }}\n"
        "    return acc;\n}\n\n"
        for k in range(rng.randrange(4, 30))
    )
    return f"#include <zephyr/kernel.h>\n\nstatic int {name}_state;\n\n{body}"


def other(rng: random.Random, kind: str, name: str) -> str:
    lines = rng.randrange(10, 60)
    if kind == "h":
        return "".join(f"int {name}_op{k}(int reg, int value);\n" for k in range(lines))
    if kind == "py":
        return "".join(f"def {name}_{k}(x):\n    return x + {k}\n\n" for k in range(lines // 3))
    return "".join(f"# {kind} {name} line {k}: {rng.getrandbits(48):012x}\n" for k in range(lines))


def generate(root: Path, files: int, built: int) -> None:
    rng = random.Random(SEED)
    made = 0
    for kind, share in KINDS:
        for index in range(int(files * share)):
            folder = root / rng.choice(FOLDERS) / f"{kind.lower()}{index % 97}"
            folder.mkdir(parents=True, exist_ok=True)
            name = f"{kind.lower()}_{index}"
            suffix = {"Kconfig": "", "cmake": ".cmake"}.get(kind, f".{kind}")
            text = c_source(rng, name) if kind == "c" else other(rng, kind, name)
            (folder / f"{name if kind != 'Kconfig' else 'Kconfig.' + name}{suffix}").write_text(
                text
            )
            made += 1
    modules = root / "subsys" / "shell" / "modules"
    modules.mkdir(parents=True)
    sources = []
    for number in range(built - 1):
        sign = "-" if number in BUGS else "+"
        (modules / f"mod{number}.c").write_text(
            f"int mod{number}_value(int x)\n{{\n    return x {sign} {number * 3};\n}}\n"
        )
        sources.append(f"subsys/shell/modules/mod{number}.c")
    table = "".join(f"    mod{n}_value,\n" for n in range(built - 1))
    decls = "".join(f"int mod{n}_value(int x);\n" for n in range(built - 1))
    (root / "subsys" / "shell" / "shell.c").write_text(
        f"#include <stdio.h>\n#include <stdlib.h>\n\n{decls}\n"
        f"static int (*const handlers[])(int) = {{\n{table}}};\n\n"
        "int main(int argc, char **argv)\n{\n    if (argc != 3) return 2;\n"
        '    printf("%d\\n", handlers[atoi(argv[1])](atoi(argv[2])));\n    return 0;\n}\n'
    )
    sources.append("subsys/shell/shell.c")
    (root / "include" / "zephyr").mkdir(parents=True)
    (root / "include" / "zephyr" / "kernel.h").write_text("#pragma once\n")
    (root / "build.list").write_text("\n".join(sources) + "\n")
    (root / "Makefile").write_text(MAKEFILE)
    (root / "harness").mkdir()
    (root / "harness" / "test_shell.py").write_text(TESTS.format(built=built - 1))
    (root / ".gitignore").write_text("build/\n.fwloop/\n")
    (root / "pytest.ini").write_text(
        "[pytest]\naddopts = -p no:cacheprovider -p no:randomly\ntestpaths = harness\n"
        "fwloop_build = make -j2 -s\n"
    )
    git = ["git", "-c", "user.name=bench", "-c", "user.email=bench@localhost"]
    subprocess.run([*git, "init", "-q"], cwd=root, check=True)
    subprocess.run([*git, "add", "-A"], cwd=root, check=True)
    subprocess.run([*git, "commit", "-q", "-m", "tree"], cwd=root, check=True)


def timed(argv: list[str], cwd: Path, ok: tuple[int, ...] = (0,)) -> float:
    started = time.perf_counter()
    done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, check=False)
    if done.returncode not in ok:
        sys.exit(f"{argv} exited {done.returncode}:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    return time.perf_counter() - started


def peak_rss(pid: int, stop: threading.Event, seen: list[int]) -> None:
    """The process's VmHWM (peak resident set) in KiB, read until it exits."""
    status = Path(f"/proc/{pid}/status")
    while not stop.is_set():
        try:
            match = re.search(r"VmHWM:\s+(\d+)", status.read_text())
        except OSError:
            return
        if match:
            seen.append(int(match.group(1)))
        time.sleep(0.1)


def du_mb(path: Path) -> float:
    done = subprocess.run(["du", "-sb", str(path)], capture_output=True, text=True, check=False)
    return int(done.stdout.split()[0]) / 1e6 if done.stdout else 0.0


def added_mb(root: Path, path: Path) -> float:
    """What `path` adds beside the checkout's own `.git`: a file hard-linked from it counts once
    (du counts each inode once over all its arguments)."""
    both = ["du", "-sbc", str(root / ".git"), str(path)]
    done = subprocess.run(both, capture_output=True, text=True, check=False)
    total = int(done.stdout.splitlines()[-1].split()[0]) / 1e6 if done.stdout else 0.0
    return total - du_mb(root / ".git")


def stamp(text: str) -> float:
    return datetime.fromisoformat(text).timestamp()


def snapshots(root: Path) -> str:
    """The baseline snapshot as the loop takes it (cold, then again with nothing changed),
    beside git's own `git add -A` of the same tree into a new repository."""
    from pytest_fwloop.workspace import Workspace

    workspace = Workspace(root)
    started = time.perf_counter()
    workspace.take_baseline("bench")
    cold = time.perf_counter() - started
    started = time.perf_counter()
    workspace.snapshot("again")
    warm = time.perf_counter() - started
    workspace.close(keep_tree=True)
    shutil.rmtree(root / ".fwloop")
    store = root.parent / "plain.git"
    subprocess.run(["git", "init", "-q", "--bare", str(store)], check=True)
    git = ["git", f"--git-dir={store}", f"--work-tree={root}"]
    add = timed([*git, "add", "-A"], root)
    again = timed([*git, "add", "-A"], root)
    shutil.rmtree(store)
    return (
        f"snapshot: the loop's baseline {cold:.2f} s, again {warm:.2f} s; "
        f"git add -A into a new repository {add:.2f} s, again {again:.2f} s"
    )


def loop_run(root: Path, coder: str, python: str = sys.executable) -> dict[str, object]:
    """`pytest --fwloop` in `root` with the coder `coder` (a provider spec), measured."""
    argv = [
        python,
        "-m",
        "pytest",
        "--fwloop",
        "--max-iter=8",
        f"--fwloop-coder={coder}",
        "--fwloop-reviewer=rules",
        "--fwloop-mode=ci",
    ]
    env = {**os.environ, "CI": "true", "PYTEST_ADDOPTS": ""}
    started = time.time()
    with subprocess.Popen(
        argv, cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    ) as proc:
        stop, seen = threading.Event(), [0]
        watcher = threading.Thread(target=peak_rss, args=(proc.pid, stop, seen), daemon=True)
        watcher.start()
        output = proc.communicate()[0]
        ended = time.time()
        stop.set()
    run = max((root / ".fwloop" / "runs").iterdir())
    summary = json.loads((run / "summary.json").read_text())
    events = [json.loads(line) for line in (run / "task-events.jsonl").read_text().splitlines()]
    moves = [e for e in events if e.get("kind") == "transition"]
    success = [stamp(e["time"]) for e in moves if e.get("to") == "SUCCESS"]
    localized = [
        float(m.group(1))
        for e in events
        if e.get("event") == "LOCALIZATION"
        and (m := re.search(r"fwloop_source_bytes=\d+ in ([\d.]+)s", e["reason"]))
    ]
    return {
        "outcome": summary["outcome"],
        "iterations": summary["iterations"],
        "coder calls": summary["coder_calls"],
        "wall": ended - started,
        "localizations": localized,
        "peak MB": max(seen) / 1024,
        "SUCCESS to exit": ended - success[-1] if success else None,
        ".fwloop MB": du_mb(root / ".fwloop"),
        ".fwloop MB beyond .git's": added_mb(root, root / ".fwloop"),
        "tail": output[-600:],
    }


def show(figures: dict[str, object]) -> None:
    """The loop's figures, a line each; its output's tail when it did not succeed."""
    tail = figures.pop("tail")
    for name, value in figures.items():
        if isinstance(value, list):
            value = ", ".join(f"{v:.2f}" if isinstance(v, float) else str(v) for v in value)
        print(
            f"loop: {name}: {value:.2f}" if isinstance(value, float) else f"loop: {name}: {value}"
        )
    if figures["outcome"] != "success":
        print(tail)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=30_000)
    parser.add_argument("--built", type=int, default=150)
    parser.add_argument("--workdir", type=Path)
    args = parser.parse_args()
    scratch = Path(args.workdir or tempfile.mkdtemp(prefix="fwloop-bigtree-"))
    root = scratch / "tree"
    try:
        shutil.rmtree(root, ignore_errors=True)
        root.mkdir(parents=True)
        started = time.perf_counter()
        generate(root, args.files, args.built)
        count = int(
            subprocess.run(
                ["git", "ls-files"], cwd=root, capture_output=True, text=True, check=True
            ).stdout.count("\n")
        )
        print(
            f"tree: {count} files, {du_mb(root) - du_mb(root / '.git'):.0f} MB "
            f"(generated in {time.perf_counter() - started:.0f} s)"
        )
        cold = timed(["make", "-j2", "-s"], root)
        module = root / "subsys" / "shell" / "modules" / "mod1.c"
        module.write_text(module.read_text() + "\n")
        one_line = timed(["make", "-j2", "-s"], root)
        plain = timed([sys.executable, "-m", "pytest", "-q", "-p", "no:fwloop"], root, ok=(1,))
        print(
            f"firmware: cold build {cold:.1f} s, one-file rebuild {one_line:.2f} s, "
            f"plain pytest {plain:.1f} s; build output {du_mb(root / 'build'):.1f} MB"
        )
        print(snapshots(root))
        coder = scratch / "coder.py"
        coder.write_text(f"#!{sys.executable}\n" + CODER.format(bugs=list(BUGS)))
        coder.chmod(0o755)
        figures = loop_run(root, f"command:{coder}")
        show(figures)
    finally:
        if not args.workdir:
            shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
