"""How long the rigs take: QEMU boot-to-banner and round trip, serial and SSH, against a baseline.

    python benchmarks/env_latency.py [--runs N]

Every figure is the median of N runs (default 10; round trips 20 × N) and is printed with its
ratio to a baseline measured in the same run: one line echoed back by a `cat` child over pipes,
the cheapest round trip through another process, on the same Console (reader thread and all)
that the rigs use. Shared machines are noisy: compare the ratios,
not the milliseconds, between machines. Needs what the environment tests need (dev.sh installs
it): arm-none-eabi-gcc, qemu-system-arm, gcc, make, sshd and ssh-keygen. Nothing is left running.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from envs_support.examples import ConsoleServer, copy_example  # noqa: E402
from envs_support.sshd import PrivateSshd  # noqa: E402
from pytest_fwloop.envs.console import Console, ProcessTransport  # noqa: E402
from pytest_fwloop.envs.qemu import QemuMachine  # noqa: E402
from pytest_fwloop.envs.serialport import SerialConsole  # noqa: E402
from pytest_fwloop.envs.ssh import SshTarget  # noqa: E402

QEMU_COMMAND = (
    "qemu-system-arm -M mps2-an385 -display none -monitor none -serial stdio -kernel {firmware}"
)
QEMU_BANNER = r"CM3FW \S+ ready\n> "


def program(name: str) -> str:
    path = shutil.which(name, path=f"{os.environ.get('PATH', '')}:/usr/sbin:/sbin")
    if path is None:
        raise SystemExit(f"env_latency: {name} not found; run ./dev.sh test once to install it")
    return path


def median_ms(action: Callable[[], object], runs: int) -> float:
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        action()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples) * 1000


def pipe_echo(runs: int) -> float:
    """The baseline: a line through a `cat` child and back, on the same Console as the rigs."""
    cat = subprocess.Popen(["cat"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        with Console(ProcessTransport(cat, "cat")) as console:
            return console_round_trip(console, runs, "echo ping\n")
    finally:
        cat.wait()


def console_round_trip(console: Console, runs: int, reply: str = "ping\n> ") -> float:
    """`echo ping` answered by a firmware (its reply and prompt), or by `cat` (the line)."""

    def ask() -> None:
        console.sendline("echo ping")
        console.expect(reply)

    return median_ms(ask, runs)


def build(example: str, scratch: Path) -> Path:
    root = copy_example(example, scratch / example)
    subprocess.run(["make", "-s"], cwd=root, check=True)
    return root


def qemu(scratch: Path, runs: int) -> dict[str, float]:
    firmware = build("qemu-cortex-m", scratch) / "build" / "firmware.elf"
    machine = QemuMachine(QEMU_COMMAND, firmware, ready=QEMU_BANNER)
    try:
        boot = median_ms(machine.restart, runs)
        return {
            "QEMU mps2-an385 boot to banner": boot,
            "QEMU console round trip (stdio)": console_round_trip(machine.console, 20 * runs),
        }
    finally:
        machine.stop()


def serial(scratch: Path, runs: int) -> dict[str, float]:
    server = ConsoleServer(build("uart-console", scratch))
    console = SerialConsole(server.url)
    opened = []
    try:
        for _ in range(runs):
            # Timed without the close: pyserial sleeps 0.3 s closing a socket:// port.
            console.close()
            opened.append(median_ms(lambda: console.open(ready=">[ ]"), 1))
        return {
            "serial socket:// open + prompt": statistics.median(opened),
            "serial socket:// round trip": console_round_trip(console, 20 * runs),
        }
    finally:
        console.close()
        server.stop()


def ssh(scratch: Path, runs: int) -> dict[str, float]:
    sshd = PrivateSshd(program("sshd"), program("ssh-keygen"), scratch / "sshd")
    target = SshTarget(
        sshd.target, key=sshd.client_key, known_hosts=sshd.write_known_hosts(scratch / "hosts")
    )
    try:
        login = median_ms(target.connect, runs)
        run = median_ms(lambda: target.run("true"), 2 * runs)
        echoed = console_round_trip(target.open_console("cat"), 20 * runs, "echo ping\n")
        return {
            "SSH connect + key login + `true`": login,
            "SSH run(command), one channel each": run,
            "SSH console round trip (open channel)": echoed,
        }
    finally:
        target.close()
        sshd.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    runs = parser.parse_args().runs
    with tempfile.TemporaryDirectory(prefix="fwloop-bench-") as directory:
        scratch = Path(directory)
        baseline = pipe_echo(20 * runs)
        figures = {"baseline: Console over pipes to `cat`": baseline}
        for rig in (qemu, serial, ssh):
            figures.update(rig(scratch, runs))
    width = max(map(len, figures))
    print(f"{'rig':<{width}}  {'median':>10}  {'× baseline':>10}")
    for name, milliseconds in figures.items():
        print(f"{name:<{width}}  {milliseconds:>7.3f} ms  {milliseconds / baseline:>10.0f}")


if __name__ == "__main__":
    main()
