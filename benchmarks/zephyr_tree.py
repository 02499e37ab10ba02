"""The loop on a real Zephyr tree with one of Zephyr's own pytest-harness samples (issue 44).

    python benchmarks/zephyr_tree.py --zephyr PATH [--board native_sim_64|qemu_cortex_m3] \
        [--sample samples/subsys/testsuite/pytest/shell] [--python PYTHON] [--only oracle,standin] \
        [--coverage] [--boot-test] [--modules PATH;...]

It installs nothing. PATH is a Zephyr tree that is a git checkout with its sources committed,
`ZEPHYR_BASE` pointing at it, `ZEPHYR_TOOLCHAIN_VARIANT=host` for native_sim (or `gnuarmemb` with
`GNUARMEMB_TOOLCHAIN_PATH` for a `qemu_*` board, which also needs the tree in a west workspace and
its modules, CMSIS for Cortex-M, as `--modules`), and PYTHON an interpreter holding
pytest-fwloop, Zephyr's pytest-twister-harness and `scripts/requirements-base.txt`
(benchmarks/README.md says how this machine's was made). It
configures `build/` for the sample once (CMake, ninja), times the firmware's own build and the
sample's plain pytest, writes a `pytest.ini` at the tree's top, seeds three bugs in Zephyr's
shell subsystem (none in the sample) and runs `pytest --fwloop` twice, each time on the seeded
tree: with an oracle coder that knows the three fixes (a `command:` script), and through
`openai:` with the stand-in model of `tests/standin_model.py`, which never opens a file and can
fix a bug only when a request's `sources` show it. Each run's figures come from its own records
(`big_tree.loop_run`); its run directory is copied to `PATH/../zephyr-runs/<way>`. The tree is
left as it was found (`git checkout` of the seeded files). With `--coverage` the build is
configured with `CONFIG_COVERAGE=y` (native_sim's host gcov) and the loop runs with
`fwloop_c_coverage = gcov`: each test's firmware writes its counts when the harness stops it, and
the C spectrum ranks what the failing tests ran. The sample has two tests and the command lookup's
seed breaks both, so no test passes and no line of C stands above another; `--boot-test` adds a
third test of the sample's kind (the shell boots to its prompt, no command run), which the seeds
leave passing, and the records go to `<way>-gcov-boot`.
"""

from __future__ import annotations

import argparse
import difflib
import json
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from big_tree import du_mb, loop_run, show, snapshots, timed

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from standin_model import StandinModel, bugs_of_patch


@dataclass(frozen=True)
class Seed:
    name: str
    path: str
    right: str
    wrong: str

    def fix(self, root: Path) -> str:
        """The seeded file's fix as a git diff."""
        text = (root / self.path).read_text()
        fixed = text.replace(self.wrong, self.right, 1)
        return f"diff --git a/{self.path} b/{self.path}\n" + "".join(
            difflib.unified_diff(
                text.splitlines(keepends=True),
                fixed.splitlines(keepends=True),
                fromfile=f"a/{self.path}",
                tofile=f"b/{self.path}",
            )
        )


#: One-line bugs in Zephyr's shell subsystem: the command lookup, the help list, a command table.
SEEDS = (
    Seed(
        "find-cmd",
        "subsys/shell/shell_utils.c",
        "\t\tif (strcmp(cmd_str, entry->syntax) == 0) {",
        "\t\tif (strcmp(cmd_str, entry->syntax) != 0) {",
    ),
    Seed(
        "help-longest",
        "subsys/shell/shell_help.c",
        "\tif (longest == 0) {\n\t\treturn;",
        "\tif (longest != 0) {\n\t\treturn;",
    ),
    Seed(
        "version-entry",
        "subsys/shell/modules/kernel_service.c",
        '\tSHELL_CMD(version, NULL, "Kernel version.", cmd_kernel_version),',
        '\tSHELL_CMD(verison, NULL, "Kernel version.", cmd_kernel_version),',
    ),
)

INI = """\
[pytest]
testpaths = {sample}/pytest
addopts = --twister-harness --device-type={device_type} --build-dir=build -p no:cacheprovider
fwloop_build = ninja -C build
fwloop_goal = make the shell sample's tests pass
{extra}"""

#: A test a Zephyr team would have beside the sample's: the firmware boots to its prompt.
BOOT_TEST = """\
from twister_harness import DeviceAdapter, Shell


def test_shell_boots_to_its_prompt(dut: DeviceAdapter) -> None:
    assert Shell(dut, timeout=20.0).wait_for_prompt()
"""

#: Applies the first seeded bug still in the tree's fix: one a call, in the seeds' order.
ORACLE = """\
import json, sys
json.load(sys.stdin)
fixes = json.loads({fixes!r})
from pathlib import Path
for path, wrong, patch in fixes:
    if wrong in Path(path).read_text():
        print(json.dumps({{"analysis": {{"root_cause": path, "hypotheses": [path],
                                        "confidence": 0.9}}, "patch": patch, "summary": path}}))
        break
"""


def seed(root: Path) -> list[tuple[Seed, str]]:
    """Plant every bug; each with its fix."""
    planted = []
    for s in SEEDS:
        path = root / s.path
        text = path.read_text()
        if s.right not in text:
            sys.exit(f"{s.path}: {s.right!r} not found; is this Zephyr 3.4?")
        path.write_text(text.replace(s.right, s.wrong, 1))
        planted.append((s, s.fix(root)))
    return planted


def restore(root: Path) -> None:
    subprocess.run(["git", "checkout", "--", *(s.path for s in SEEDS)], cwd=root, check=True)
    shutil.rmtree(root / ".fwloop", ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--zephyr", type=Path, required=True)
    parser.add_argument("--board", default="native_sim_64")
    parser.add_argument("--sample", default="samples/subsys/testsuite/pytest/shell")
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--only", default="oracle,standin")
    parser.add_argument("--coverage", action="store_true", help="CONFIG_COVERAGE=y, gcov spectra")
    parser.add_argument("--boot-test", action="store_true", help="a third test, left passing")
    parser.add_argument("--modules", default="", help="ZEPHYR_MODULES, `;`-separated (CMSIS)")
    args = parser.parse_args()
    root = args.zephyr.resolve()
    files = subprocess.run(
        ["git", "ls-files"], cwd=root, capture_output=True, text=True, check=True
    ).stdout.count("\n")
    print(f"tree: {root}, {files} files; board {args.board}; sample {args.sample}")
    # Configured every time: `CONFIG_COVERAGE` is cached, and each run says which it wants.
    coverage = "y" if args.coverage else "n"
    qemu = args.board.startswith("qemu_")
    configure = [
        "cmake", "-S", args.sample, "-B", "build", "-GNinja", f"-DBOARD={args.board}",
        f"-DCONFIG_COVERAGE={coverage}",
    ]  # fmt: skip
    configure += [f"-DZEPHYR_MODULES={args.modules}"] if args.modules else []
    if qemu:
        # As twister configures a QEMU build for its pytest harness: the console on the FIFO
        # pair `build/qemu-fifo.{in,out}` the harness's QEMU adapter opens (read at configure
        # time only). The adapter starts `west build -t run`: a west workspace must hold the tree.
        configure += [f"-DQEMU_PIPE={root / 'build' / 'qemu-fifo'}"]
        if subprocess.run(["west", "topdir"], cwd=root, capture_output=True).returncode != 0:
            sys.exit(f"{root}: not in a west workspace; `west init -l {root.name}` in its parent")
    else:
        configure += ["-DCONFIG_NATIVE_UART_0_ON_STDINOUT=y"]
    print(f"configure: {timed(configure, root):.1f} s")
    shutil.rmtree(root / "build" / "zephyr", ignore_errors=True)
    subprocess.run(["ninja", "-C", "build", "-t", "clean"], cwd=root, capture_output=True)
    cold = timed(["ninja", "-j2", "-C", "build"], root)
    module = root / SEEDS[0].path
    module.write_text(module.read_text() + "\n")
    one_file = timed(["ninja", "-j2", "-C", "build"], root)
    restore(root)
    timed(["ninja", "-j2", "-C", "build"], root)
    extra = "fwloop_c_coverage = gcov\n" if args.coverage else ""
    device_type = "qemu" if qemu else "native"
    ini = INI.format(sample=args.sample, device_type=device_type, extra=extra)
    (root / "pytest.ini").write_text(ini)
    boot = root / args.sample / "pytest" / "test_boot.py"
    if args.boot_test:
        boot.write_text(BOOT_TEST)
    try:
        plain = timed([args.python, "-m", "pytest", "-q"], root)
        print(
            f"firmware: cold build {cold:.1f} s, one-file rebuild {one_file:.2f} s, the sample's "
            f"plain pytest {plain:.1f} s (green); build output {du_mb(root / 'build'):.1f} MB"
        )
        print(snapshots(root))
        for way in args.only.split(","):
            planted = seed(root)
            timed(["ninja", "-j2", "-C", "build"], root)
            started = time.perf_counter()
            if way == "oracle":
                oracle = root.parent / "zephyr-oracle.py"
                fixes = [(s.path, s.wrong, patch) for s, patch in planted]
                oracle.write_text(f"#!{args.python}\n" + ORACLE.format(fixes=json.dumps(fixes)))
                oracle.chmod(0o755)
                figures = loop_run(root, f"command:{oracle}", args.python)
            else:
                bugs = [b for s, patch in planted for b in bugs_of_patch(patch, s.name)]
                with StandinModel(bugs) as model:
                    figures = loop_run(root, model.spec, args.python)
                    figures["bugs seen by the model"] = sorted(
                        {b for s in model.seen for b in s.visible}
                    )
            print(f"== {way} ({time.perf_counter() - started:.0f} s)")
            show(figures)
            final = sorted((root / ".fwloop" / "runs").iterdir())[-1] / "final.patch"
            if final.exists():
                text = final.read_text()
                exact = all(
                    f"-{s.wrong.splitlines()[0]}\n" in text
                    and f"+{s.right.splitlines()[0]}\n" in text
                    for s, _ in planted
                )
                print(f"final.patch: {'the three fixes' if exact else 'not the three fixes'}")
                after = subprocess.run([args.python, "-m", "pytest", "-q"], cwd=root, check=False)
                print(f"plain pytest after the run: exit {after.returncode}")
            kept = (
                root.parent
                / "zephyr-runs"
                / "-".join(
                    [
                        way,
                        *(["gcov"] if args.coverage else []),
                        *(["boot"] if args.boot_test else []),
                    ]
                )
            )
            shutil.rmtree(kept, ignore_errors=True)
            shutil.copytree(root / ".fwloop" / "runs", kept)
            print(f"records kept in {kept}")
            restore(root)
            timed(["ninja", "-j2", "-C", "build"], root)
    finally:
        restore(root)
        (root / "pytest.ini").unlink(missing_ok=True)
        boot.unlink(missing_ok=True)


if __name__ == "__main__":
    main()
