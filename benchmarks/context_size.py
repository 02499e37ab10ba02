"""How big the coder's failure context gets, and what packing it costs: a script, not a test.

    .venv/bin/python benchmarks/context_size.py

Builds failing suites with large logs, packs them as the controller does (`pack_failures` at the
default `fwloop_context_bytes`) and prints sizes and ratios. Times are only given relative to a
baseline measured in the same run: `json.dumps` of the raw failures, i.e. sending every log whole.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable
from dataclasses import dataclass

from pytest_fwloop.core.request.failure_pack import (
    guaranteed_signatures,
    pack_failures,
    packed_size,
    signature,
)
from pytest_fwloop.core.suite.results import TestRecord

ROOT = "/work/board-fw"
CAP = 32768  # the fwloop_context_bytes default
SEED = 20260509
REPEATS = 5
KIB = 1024


@dataclass(frozen=True)
class Suite:
    """A failing suite: `tests` failures spread unevenly over `signatures` distinct causes."""

    tests: int
    signatures: int
    smallest_log: int
    largest_log: int


SUITES = (
    Suite(10, 5, 20 * KIB, 200 * KIB),
    Suite(100, 20, 20 * KIB, 200 * KIB),
    Suite(1000, 50, 20 * KIB, 200 * KIB),
    # Past the guarantee: more distinct signatures than 32 KiB can name (smaller logs, for memory).
    Suite(2000, 2000, 2 * KIB, 20 * KIB),
)

AREAS = ("uart", "boot", "flash", "i2c", "spi", "gpio", "dma", "rtc", "adc", "watchdog")
#: Failure kinds; `{n}` and `{addr}` vary from test to test, as they do between iterations.
KINDS = (
    "AssertionError: assert 'ERR {n}' == 'OK'",
    "TimeoutError: no prompt 'login:' after {n}.5s",
    "HardFault: PC=0x{addr:08x} LR=0x{n:08x} CFSR=0x00008200",
    "ValueError: register 0x{addr:x} reads {n}, expected 0",
    "pexpect.exceptions.EOF: End Of File (EOF). Exception style platform at 0x{addr:x}",
)


def console_line(rng: random.Random) -> str:
    stamp = rng.uniform(0, 999)
    choice = rng.randrange(4)
    if choice == 0:
        return f"[{stamp:12.6f}] uart0: rx {rng.randrange(4096)} at 0x{rng.getrandbits(32):08x}"
    if choice == 1:
        return f"2026-05-09T07:{rng.randrange(60):02d}:{stamp % 60:06.3f}Z dma: chan 1 done"
    if choice == 2:
        return f"{ROOT}/build/fw/src/uart.c:{rng.randrange(900)}: trace step in {stamp:.2f}s"
    return " ".join(f"{rng.getrandbits(8):02x}" for _ in range(24))


def log(rng: random.Random, size: int) -> str:
    lines: list[str] = []
    length = 0
    while length < size:
        lines.append(console_line(rng))
        length += len(lines[-1]) + 1
    return "\n".join(lines)


def record(rng: random.Random, index: int, kind: int, size: int) -> TestRecord:
    area = AREAS[kind % len(AREAS)]
    path = f"tests/test_{area}_{kind // len(AREAS)}.py"
    # Each kind fails in its own file: the file and the message make its signature.
    message = KINDS[kind % len(KINDS)].format(n=rng.randrange(10**6), addr=rng.getrandbits(32))
    line = rng.randrange(20, 400)
    traceback = (
        f"    def test_{area}(board):\n        board.run()\n>       board.expect_ok()\n\n"
        f"{ROOT}/{path}:{line}: \n"
        "/usr/lib/python3.11/site-packages/pexpect/spawnbase.py:354: in expect\n"
        f"    return self.expect_list(compiled_pattern_list, timeout, searchwindowsize)\n"
        f"/tmp/pytest-of-ci/pytest-{rng.randrange(99)}/test_{area}0/console.log: buffer\n"
        f"{log(rng, size // 4)}\n"
        f"E   {message}\n\n{ROOT}/{path}:{line}: {message.partition(':')[0]}"
    )
    return TestRecord(
        nodeid=f"{path}::test_{area}[case{index}]",
        outcome="failed",
        phase="call",
        duration=rng.uniform(0, 30),
        longrepr=traceback,
        crash=f"{ROOT}/{path}:{line}: {message}",
        sections=f"--- Captured stdout call ---\n{log(rng, size - size // 4)}",
    )


def build(suite: Suite, rng: random.Random) -> list[TestRecord]:
    # Every signature fails at least once; the rest cluster unevenly, as real failures do.
    kinds = list(range(suite.signatures))
    weights = [1 / (kind + 1) for kind in kinds]
    kinds += rng.choices(kinds, weights, k=suite.tests - suite.signatures)
    rng.shuffle(kinds)
    return [
        record(rng, index, kind, rng.randint(suite.smallest_log, suite.largest_log))
        for index, kind in enumerate(kinds)
    ]


def fastest(action: Callable[[], object]) -> float:
    """The best of a few runs: the least disturbed by whatever else the machine does."""
    times = []
    for _ in range(REPEATS):
        start = time.perf_counter()
        action()
        times.append(time.perf_counter() - start)
    return min(times)


def measure(suite: Suite, rng: random.Random) -> dict[str, str]:
    records = build(suite, rng)
    raw = [
        {"nodeid": r.nodeid, "signature": r.crash, "excerpt": f"{r.longrepr}\n{r.sections}"}
        for r in records
    ]
    raw_bytes = sum(len(f"{r.longrepr}\n{r.sections}".encode()) for r in records)
    clusters = {signature(r, ROOT) for r in records}
    packed = pack_failures(records, CAP, ROOT)
    packed_bytes = packed_size(packed)
    shown = {failure.signature for failure in packed}
    baseline = fastest(lambda: json.dumps(raw, ensure_ascii=False))
    packing = fastest(lambda: pack_failures(records, CAP, ROOT))
    return {
        "tests": f"{suite.tests}",
        "signatures": f"{suite.signatures}",
        "clusters": f"{len(clusters)}",
        "raw log bytes": f"{raw_bytes:,}",
        "packed bytes": f"{packed_bytes:,}",
        "cap": f"{CAP:,}",
        "packed/raw": f"{packed_bytes / raw_bytes:.4f}",
        "all kept": f"{'yes' if len(shown) == len(clusters) else 'no'} "
        f"({len(shown)}/{len(clusters)})",
        "pack/dumps time": f"{packing / baseline:.2f}",
    }


def main() -> None:
    rng = random.Random(SEED)
    print(
        f"cap {CAP:,} bytes (fwloop_context_bytes default): every distinct signature is kept "
        f"up to {guaranteed_signatures(CAP)} of them; best of {REPEATS} runs for each time"
    )
    rows = [measure(suite, rng) for suite in SUITES]
    widths = {key: max(len(key), *(len(row[key]) for row in rows)) for key in rows[0]}
    print("  ".join(key.rjust(width) for key, width in widths.items()))
    for row in rows:
        print("  ".join(row[key].rjust(width) for key, width in widths.items()))


if __name__ == "__main__":
    main()
