"""What localization costs and what it sends (DESIGN.md §16, issue 31): a script, not a test.

    .venv/bin/python benchmarks/localization.py [--files 5000]

Builds a C firmware tree of `--files` source files (a command table, handlers, drivers, headers,
~6 KB a file), one seeded bug, and 1,000 failing console tests whose logs total ~10 MB. Then, as
the controller does before a coder request, it snapshots the tree, indexes it and localizes:

- cold: a new run on a tree never indexed (every file parsed);
- warm: the next request of the same run after a patch changed three files;
- new run: a fresh controller with the index on disk (nothing parsed);

and prints each one's time as a ratio of the snapshot alone (`git` staging the tree, which the
loop pays before every coder call anyway), the request's size per field against its budget, and
whether the bug's lines were sent.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from pytest_fwloop.core.gate.policy import PatchPolicy
from pytest_fwloop.core.records.agent_protocol import AgentRequest
from pytest_fwloop.core.request.failure_pack import pack_failures, packed_size
from pytest_fwloop.core.suite.results import TestRecord
from pytest_fwloop.loop.request.localization import Localizer
from pytest_fwloop.workspace import DEFAULT_PROTECTED, Workspace

SEED = 20261127
SOURCE_BYTES = 40960  # the fwloop_source_bytes default
CONTEXT_BYTES = 32768  # the fwloop_context_bytes default
BUG = "    crc ^= 0xA5u; /* seeded */\n"


def driver(index: int) -> str:
    body = "".join(
        f"int drv{index}_op{k}(int reg, int value)\n{{\n    int acc = reg * {k + 3};\n"
        f"    for (int i = 0; i < value; i++) {{\n        acc += helper{index}(i) ^ {k};\n"
        f"    }}\n    return acc;\n}}\n\n"
        for k in range(24)
    )
    return (
        f'#include "drv{index}.h"\n\nstatic int helper{index}(int x) {{ return x * 7; }}\n\n{body}'
    )


def build_tree(root: Path, files: int) -> None:
    src = root / "firmware" / "src"
    inc = root / "firmware" / "include"
    src.mkdir(parents=True)
    inc.mkdir(parents=True)
    for index in range(files - 3):
        (src / f"drv{index}.c").write_text(driver(index))
        if index % 10 == 0:
            (inc / f"drv{index}.h").write_text(f"int drv{index}_op0(int reg, int value);\n")
    (src / "crc8.c").write_text(
        '#include "crc8.h"\n\nuint8_t crc8_smbus(const uint8_t *data, size_t len)\n{\n'
        "    uint8_t crc = 0;\n    for (size_t i = 0; i < len; i++) {\n"
        f"        crc ^= data[i];\n{BUG}    }}\n    return crc;\n}}\n"
    )
    (src / "commands.c").write_text(
        '#include "crc8.h"\n\nstatic void cmd_crc8(char *args)\n{\n'
        '    uart_printf_line("0x%02X", crc8_smbus((uint8_t *)args, 1));\n}\n\n'
        'static const struct command table[] = {\n    {"crc8", cmd_crc8},\n};\n'
    )
    tests = root / "tests"
    tests.mkdir()
    (tests / "test_console.py").write_text(
        "".join(
            f'def test_crc8_{i}(console):\n    assert console.command("crc8 {i:02x}") == "0x00"\n\n'
            for i in range(1000)
        )
    )


def failures() -> list[TestRecord]:
    rng = random.Random(SEED)
    records = []
    for i in range(1000):
        log = "".join(f"[{k:06d}] uart rx {rng.getrandbits(64):016x}\n" for k in range(240))
        records.append(
            TestRecord(
                nodeid=f"tests/test_console.py::test_crc8_{i}",
                outcome="failed",
                phase="call",
                longrepr=f"AssertionError: assert '0x{i % 256:02X}' == '0x00'",
                sections=log,
            )
        )
    return records


def localize(
    localizer: Localizer, request: AgentRequest, failing: list[TestRecord]
) -> tuple[AgentRequest, float]:
    started = time.perf_counter()
    done, _ = localizer.coder_request(request, failing, [])
    return done, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=5000)
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="fwloop-localize-"))
    try:
        root = scratch / "fw"
        root.mkdir()
        build_tree(root, args.files)
        size = sum(p.stat().st_size for p in root.rglob("*") if p.is_file())
        workspace = Workspace(root)
        workspace.open("bench")
        policy = PatchPolicy(protected=DEFAULT_PROTECTED)
        failing = failures()
        log_bytes = sum(len(r.sections) for r in failing)
        packed = pack_failures(failing, CONTEXT_BYTES, root=str(root))
        request = AgentRequest(
            role="coder", iteration=2, goal="g", workspace=str(root), failures=packed
        )
        started = time.perf_counter()
        workspace.snapshot("baseline of the timing")
        snapshot = time.perf_counter() - started

        cold_localizer = Localizer(workspace, SOURCE_BYTES, lambda text: text, lambda: policy)
        cold_request, cold = localize(cold_localizer, request, failing)
        for index in range(3):  # a patch touches three files
            path = root / "firmware" / "src" / f"drv{index}.c"
            path.write_text(path.read_text().replace("* 7;", "* 9;"))
        _, warm = localize(cold_localizer, request, failing)
        fresh = Localizer(workspace, SOURCE_BYTES, lambda text: text, lambda: policy)
        _, new_run = localize(fresh, request, failing)

        sent = cold_request.to_wire()
        print(
            f"tree: {args.files} files, {size / 1e6:.1f} MB; failures: 1000 tests, "
            f"{log_bytes / 1e6:.1f} MB of logs"
        )
        print(f"snapshot alone: {snapshot:.2f} s (baseline)")
        for label, seconds in (
            ("cold (first run)", cold),
            ("warm (after a patch)", warm),
            ("new run, index on disk", new_run),
        ):
            print(f"{label:>24}: {seconds:6.2f} s  = {seconds / snapshot:5.2f} x snapshot")
        for field in ("failures", "sources", "test_sources", "repo_map"):
            print(
                f"{field:>24}: {len(json.dumps(sent[field], ensure_ascii=False).encode()):>7} bytes"
            )
        code = sum(
            len(json.dumps(sent[f], ensure_ascii=False).encode())
            for f in ("sources", "test_sources", "repo_map")
        )
        total = len(json.dumps(sent, ensure_ascii=False).encode())
        print(f"{'code fields':>24}: {code:>7} bytes (budget {SOURCE_BYTES})")
        print(f"{'failures':>24}: {packed_size(packed):>7} bytes (budget {CONTEXT_BYTES})")
        print(f"{'whole request':>24}: {total:>7} bytes (~{total // 4} tokens at 4 bytes/token)")
        seen = any(BUG.strip() in chunk["text"] for chunk in sent["sources"])
        print(f"the seeded bug's line sent: {seen}")
    finally:
        subprocess.run(["chmod", "-R", "u+w", str(scratch)], check=False)
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
