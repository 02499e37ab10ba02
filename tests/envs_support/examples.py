"""The bundled examples, copied somewhere the loop may edit them, and their helper processes."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from envs_support.tools import require

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
#: Build products, run records and caches, never part of an example.
_NOT_COPIED = shutil.ignore_patterns(
    "build", ".bmc", ".fwloop", ".pytest_cache", ".mypy_cache", ".benchmarks", "__pycache__"
)


#: (program, Debian package) each example needs on the host.
EXAMPLE_TOOLS = {
    "uart-console": [("gcc", "gcc"), ("make", "make")],
    "host-gateway": [("gcc", "gcc"), ("make", "make"), ("gcov", "gcc")],
    "qemu-cortex-m": [
        ("arm-none-eabi-gcc", "gcc-arm-none-eabi"),
        ("qemu-system-arm", "qemu-system-arm"),
        ("make", "make"),
    ],
    "ssh-bmc": [
        ("gcc", "gcc"),
        ("make", "make"),
        ("sshd", "openssh-server"),
        ("ssh-keygen", "openssh-client"),
    ],
    "pytest-embedded": [("gcc", "gcc"), ("make", "make")],
}


def require_example_tools(name: str) -> None:
    """Skip (or, under CI, fail) unless the host has what examples/NAME builds and runs with."""
    for program, package in EXAMPLE_TOOLS[name]:
        require(program, package)


def copy_example(name: str, destination: Path) -> Path:
    """examples/NAME copied into `destination` (which may exist), without build products."""
    shutil.copytree(EXAMPLES / name, destination, ignore=_NOT_COPIED, dirs_exist_ok=True)
    return destination


def recorded_answers(example: Path, role: str = "coder") -> list[dict[str, Any]]:
    """The example's recorded answers for `role`, in the order the scripted provider uses."""
    paths = sorted((example / "fwloop-answers" / role).glob("*.json"))
    return [json.loads(path.read_text(encoding="utf-8")) for path in paths]


class ConsoleServer:
    """uart-console's via-serial/console_server.py on a free port of 127.0.0.1."""

    def __init__(self, example: Path) -> None:
        script = example / "via-serial" / "console_server.py"
        self.process = subprocess.Popen(
            [sys.executable, str(script), "--port", "0", str(example / "build" / "uartcon")],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.process.stdout is not None
        self.url = self.process.stdout.readline().strip()
        if not self.url.startswith("socket://"):
            self.stop()
            raise RuntimeError(f"{script} did not start: {self.url!r}")

    def stop(self) -> None:
        """SIGTERM (it stops its firmware processes too) and reap; safe to call twice."""
        if self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=10)
        if self.process.stdout is not None:
            self.process.stdout.close()
