"""The gateway firmware (`build/gateway`), one process per test module, one command a line."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

FIRMWARE = Path(__file__).resolve().parent.parent / "build" / "gateway"


class Gateway:
    """The firmware's console: a line in, its reply line out."""

    def __init__(self) -> None:
        if not FIRMWARE.is_file():
            raise FileNotFoundError(f"firmware not built; run `make` in {FIRMWARE.parents[1]}")
        self.process = subprocess.Popen(
            [str(FIRMWARE)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            bufsize=1,
        )
        assert self.ask_raw() == "GATEWAY ready"

    def ask_raw(self) -> str:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            raise ConnectionError("the firmware closed its console")
        return line.rstrip("\n")

    def __call__(self, line: str) -> str:
        print(f"> {line}")
        assert self.process.stdin is not None
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()
        answer = self.ask_raw()
        print(answer)
        return answer

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(timeout=5)


@pytest.fixture(scope="module")
def gateway() -> Iterator[Gateway]:
    """One firmware per test module: it lives across the module's tests."""
    console = Gateway()
    yield console
    console.close()
