"""The code a QEMU guest executed, per test (DESIGN.md §18): QEMU's own execution log read at
each test's end and mapped to lines through the firmware's DWARF (real QEMU, a real
Cortex-M3 build), and the log's reader on its own."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from envs_support.examples import copy_example, require_example_tools
from pytest_fwloop.core.execution.qemu_exec import ExecLog, LineTable, exec_log_args
from pytest_fwloop.core.request.ochiai import read_spectrum

LOG = """\
IN: main
0x00000100:  b580       push     {r7, lr}
0x00000102:  af00       add      r7, sp, #0

Trace 0: 0x7f00 [00000000/00000100/00000110/ff000200] main
IN: helper
0x00000200:  4770       bx       lr

Trace 0: 0x7f40 [00000000/00000200/00000110/ff000200] helper
Trace 0: 0x7f00 [00000000/000003"""


def test_the_log_gives_each_block_s_instructions_and_a_line_cut_short_waits() -> None:
    log = ExecLog()
    assert log.feed(LOG) == {0x100, 0x200}
    assert log.instructions({0x100}) == {0x100, 0x102}
    assert log.feed("00/00000110/ff000200] other\n") == {0x300}
    assert log.instructions({0x300}) == {0x300}  # never seen translated: its first address
    table = LineTable.of([(0x100, ("src/a.c", 3)), (0x102, ("src/a.c", 4)), (0x104, None)])
    assert table.lines({0x100, 0x103, 0x200}) == {"src/a.c": {3, 4}}
    assert exec_log_args("/x/q.log") == ["-d", "in_asm,exec,nochain", "-D", "/x/q.log"]


@pytest.mark.slow
def test_each_test_has_the_lines_its_guest_ran(tmp_path: Path) -> None:
    pytest.importorskip("elftools")
    require_example_tools("qemu-cortex-m")
    root = copy_example("qemu-cortex-m", tmp_path / "fw")
    subprocess.run(["make", "-s"], cwd=root, check=True, capture_output=True)
    out = tmp_path / "round"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:randomly",
            "-p",
            "no:cacheprovider",
            f"--fwloop-child-report={out / 'results-1.json'}",
            f"--fwloop-child-spectrum={out / 'spectrum-1.json'}",
            f"--fwloop-child-qemu={out / 'qemu-1'}",
        ],
        cwd=root,
        check=False,
        capture_output=True,
    )
    spectrum = read_spectrum(json.loads((out / "spectrum-1.qemu.json").read_text()))
    assert spectrum.measured["firmware/src/fletcher.c"] == "qemu"
    lines = spectrum.files["firmware/src/fletcher.c"]
    ran = {spectrum.tests[i].split("::")[1] for at in lines.values() for i in spectrum.sets[at]}
    assert ran == {"test_fletcher_check_value", "test_fletcher_longer_inputs"}
    assert not (out / "qemu-1").exists()
