"""How long the coder's `similar_fixes` lookup takes in a knowledge base of 10,000 fixes.

    python benchmarks/knowledge_lookup.py [--fixes N] [--queries Q]

A knowledge base of N stored fixes (default 10,000) is filled with seeded, realistic failure
signatures (test files and functions, assertion lines, exception types, firmware files), and
Q lookups (default 200), each with the signatures of a failing iteration (1 to 20 of them), are
timed, min / median / max. The same lookups in a base of 10 fixes, measured in the same run, are
the baseline, so the ratio shows what the size costs. The goal: a lookup under 1/100 of a coder
call's typical latency (2 s), i.e. under 20 ms at 10,000 fixes.
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from pathlib import Path

from pytest_fwloop.knowledge.store import KnowledgeBase, StoredFix

AREAS = ["uart", "crc8", "ringbuf", "adc", "gpio", "fan", "sensor", "flash", "boot", "dma", "i2c"]
ERRORS = ["AssertionError", "TimeoutError", "ValueError", "EnvironmentFailure", "KeyError"]
CODER_CALL_SECONDS = 2.0


def signature(rng: random.Random) -> str:
    area = rng.choice(AREAS)
    raised = f" (raised in src/{rng.choice(AREAS)}.c)" if rng.random() < 0.3 else ""
    return (
        f"call tests/test_{area}.py::test_{area}_{rng.randrange(200)}:{rng.randrange(9, 400)}: "
        f"{rng.choice(ERRORS)}: assert '…' == '…'{raised}"
    )


def filled(path: Path, fixes: int, rng: random.Random) -> KnowledgeBase:
    base = KnowledgeBase(path)
    for n in range(fixes):
        signatures = [signature(rng) for _ in range(rng.randrange(1, 6))]
        base.store(
            StoredFix(
                run_id=f"run-{n // 5}",
                iteration=2 + n % 5,
                outcome="pass count 10 -> 12",
                signatures=signatures,
                nodeids=[s.split(":")[0] for s in signatures],
                excerpts=[f"E   {s}" for s in signatures],
                analysis=f"the {rng.choice(AREAS)} driver mishandles {rng.choice(AREAS)}",
                summary=f"fix {rng.choice(AREAS)}",
                patch="diff --git a/src/x.c b/src/x.c\n" + "+ line\n" * rng.randrange(2, 80),
                files=[f"src/{rng.choice(AREAS)}.c"],
            )
        )
    return base


def timed(base: KnowledgeBase, queries: list[list[str]]) -> list[float]:
    seconds = []
    for signatures in queries:
        start = time.perf_counter()
        base.similar(signatures)
        seconds.append(time.perf_counter() - start)
    return seconds


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--fixes", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=200)
    options = parser.parse_args()
    rng = random.Random(11)
    queries = [
        [signature(rng) for _ in range(rng.randrange(1, 21))] for _ in range(options.queries)
    ]
    with tempfile.TemporaryDirectory() as scratch:
        small = filled(Path(scratch) / "small.sqlite", 10, rng)
        start = time.perf_counter()
        large = filled(Path(scratch) / "large.sqlite", options.fixes, rng)
        fill = time.perf_counter() - start
        # Interleaved, so both sides see the same machine.
        small_s, large_s = [], []
        for query in queries:
            small_s += timed(small, [query])
            large_s += timed(large, [query])
    ms = [s * 1000 for s in large_s]
    print(
        f"{options.fixes} fixes stored in {fill:.1f} s ({fill / options.fixes * 1000:.2f} ms each)"
    )
    print(f"lookup, 10 fixes:     {spread([s * 1000 for s in small_s])} ms")
    print(f"lookup, {options.fixes} fixes: {spread(ms)} ms")
    print(f"ratio of medians: {statistics.median(large_s) / statistics.median(small_s):.2f}")
    share = statistics.median(large_s) / CODER_CALL_SECONDS
    print(f"median lookup / a {CODER_CALL_SECONDS:g} s coder call: {share:.4f} (goal < 0.01)")
    return 0


def spread(values: list[float]) -> str:
    return f"{min(values):.2f} / {statistics.median(values):.2f} / {max(values):.2f}"


if __name__ == "__main__":
    raise SystemExit(main())
