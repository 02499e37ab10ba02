"""Builds the tiny console firmware in `firmware/` for QEMU's mps2-an385."""

from __future__ import annotations

import subprocess
from pathlib import Path

SOURCES = Path(__file__).parent / "firmware"
#: The banner and the first prompt: what `fwloop_console_ready` should match.
BANNER = r"FWTEST (\S+) ready\n>[ ]"  # [ ]: ini values lose a trailing space
PROMPT = "> "
COMMAND_STDIO = (
    "qemu-system-arm -M mps2-an385 -display none -monitor none -serial stdio -kernel {firmware}"
)
COMMAND_TCP = (
    "qemu-system-arm -M mps2-an385 -display none -monitor none "
    "-serial tcp:127.0.0.1:{port},server=on,wait=on,nodelay=on -kernel {firmware}"
)


def build(gcc: str, output: Path, version: str) -> Path:
    """Compile and link the firmware answering `version` with `version`; returns the ELF."""
    subprocess.run(
        [
            gcc,
            "-mcpu=cortex-m3",
            "-mthumb",
            "-O2",
            "-ffreestanding",
            "-nostdlib",
            "-Wall",
            "-Wextra",
            "-Werror",
            f'-DFW_VERSION="{version}"',
            "-T",
            str(SOURCES / "mps2-an385.ld"),
            str(SOURCES / "startup.c"),
            str(SOURCES / "main.c"),
            "-o",
            str(output),
        ],
        check=True,
        capture_output=True,
    )
    return output
