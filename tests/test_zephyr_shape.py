"""A Zephyr-shaped suite under a real `pytest --fwloop` (issue 44): a native_sim-like firmware
built by CMake and ninja into `build/`, driven through `dut` and `shell` fixtures shaped as
Zephyr's pytest-twister-harness makes them (a device adapter whose `_log_files` name the
`handler.log` it writes in the build folder), the harness's own options in `addopts`.

Zephyr itself cannot come to CI (benchmarks/README.md measures a real tree); what is checked
here is what the loop does with such a suite: the device's log reaches the coder, the build
folder is never snapshotted, and the harness's options reach every child.
"""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from loopkit import LoopProject, coder_answer, unified_diff

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        shutil.which("cmake") is None or shutil.which("ninja") is None, reason="cmake, ninja"
    ),
]

CMAKE = """\
cmake_minimum_required(VERSION 3.20)
project(shell_sample C)
set(CMAKE_EXPORT_COMPILE_COMMANDS ON)
add_executable(zephyr.exe src/main.c src/crc8.c)
set_target_properties(zephyr.exe PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/zephyr)
"""

CRC8_OK = """\
#include "crc8.h"

uint8_t crc8_ccitt(const uint8_t *data, size_t len)
{
    uint8_t crc = 0x00;
    for (size_t i = 0; i < len; i++) {
        crc ^= data[i];
        for (int bit = 0; bit < 8; bit++) {
            crc = (crc & 0x80) ? (uint8_t)((crc << 1) ^ CRC8_POLY) : (uint8_t)(crc << 1);
        }
    }
    return crc;
}
"""

#: The seeded bug: the polynomial of another CRC-8, which no failing assertion names.
HEADER_BUGGY = "#include <stddef.h>\n#include <stdint.h>\n#define CRC8_POLY 0x31\n"
HEADER_OK = HEADER_BUGGY.replace("0x31", "0x07")
HEADER = HEADER_BUGGY + "uint8_t crc8_ccitt(const uint8_t *data, size_t len);\n"

MAIN = """\
#include <stdio.h>
#include <string.h>
#include "crc8.h"

int main(void)
{
    char line[256];
    printf("*** Booting Zephyr OS build v3.4.99 ***\\n");
    uint8_t check = crc8_ccitt((const uint8_t *)"123456789", 9);
    if (check != 0xF4) {
        printf("[00:00:00.001,000] <err> crc8: self-test: check value 0x%02X, CRC8_POLY 0x%02X\\n",
               check, CRC8_POLY);
    }
    printf("uart:~$ \\n");
    fflush(stdout);
    while (fgets(line, sizeof line, stdin)) {
        line[strcspn(line, "\\n")] = 0;
        if (strncmp(line, "crc8 ", 5) == 0) {
            const char *text = line + 5;
            printf("crc8: 0x%02X\\n", crc8_ccitt((const uint8_t *)text, strlen(text)));
        } else {
            printf("%s: command not found\\n", line);
        }
        printf("uart:~$ \\n");
        fflush(stdout);
    }
    return 0;
}
"""

#: The harness's fixtures as pytest-twister-harness shapes them, without Zephyr's Python.
CONFTEST = """\
import subprocess
import threading
import time
from pathlib import Path

import pytest


def pytest_addoption(parser):
    group = parser.getgroup("Twister harness")
    group.addoption("--twister-harness", action="store_true")
    group.addoption("--device-type", choices=("native", "qemu", "hardware"))
    group.addoption("--build-dir", metavar="PATH")


class NativeSimulatorAdapter:
    def __init__(self, build_dir):
        self.handler_log_path = Path(build_dir) / "handler.log"
        self._log_files = [self.handler_log_path]
        self.lines = []
        self.process = subprocess.Popen(
            [str(Path(build_dir) / "zephyr" / "zephyr.exe")],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        with self.handler_log_path.open("a") as log:
            for line in self.process.stdout:
                log.write(line)
                log.flush()
                self.lines.append(line.rstrip("\\n"))

    def close(self):
        self.process.stdin.close()
        self.process.wait(timeout=10)
        self.reader.join(timeout=10)


class Shell:
    def __init__(self, device):
        self._device = device
        self._wait(0, "boot")

    def _wait(self, seen, what):
        for _ in range(500):
            new = self._device.lines[seen:]
            if new and new[-1].startswith("uart:~$"):
                return new[:-1]
            time.sleep(0.01)
        raise AssertionError(f"no prompt after {what}")

    def exec_command(self, command):
        seen = len(self._device.lines)
        self._device.process.stdin.write(command + "\\n")
        self._device.process.stdin.flush()
        return self._wait(seen, repr(command))


@pytest.fixture
def dut(request):
    assert request.config.getoption("twister_harness"), "run with --twister-harness"
    device = NativeSimulatorAdapter(request.config.getoption("build_dir"))
    yield device
    device.close()


@pytest.fixture
def shell(dut):
    return Shell(dut)
"""

TESTS = """\
def test_shell_answers(shell):
    assert shell.exec_command("kernel version") == ["kernel version: command not found"]


def test_crc8_check_value(shell):
    lines = shell.exec_command("crc8 123456789")
    assert "crc8: 0xF4" in lines
"""

INI = """\
[pytest]
testpaths = pytest
addopts = --twister-harness --device-type=native --build-dir=build
fwloop_build = ninja -C build
"""


def test_a_zephyr_harness_device_log_reaches_the_coder_and_build_is_never_snapshotted(
    project: LoopProject,
) -> None:
    for path, text in {
        "CMakeLists.txt": CMAKE,
        "src/crc8.c": CRC8_OK,
        "src/crc8.h": HEADER,
        "src/main.c": MAIN,
        "pytest/conftest.py": CONFTEST,
        "pytest/test_shell.py": TESTS,
        "pytest.ini": INI,
    }.items():
        project.write(path, text)
    subprocess.run(
        ["cmake", "-S", ".", "-B", "build", "-G", "Ninja"],
        cwd=project.root,
        check=True,
        capture_output=True,
    )
    fix = unified_diff("src/crc8.h", HEADER, HEADER.replace(HEADER_BUGGY, HEADER_OK))
    agent = project.agent("zephyr", coder=[coder_answer(fix, "the CRC-8 polynomial")])
    result = project.run(f"--fwloop-coder={agent.spec}", f"--fwloop-reviewer={agent.spec}")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    assert project.summary()["outcome"] == "success"
    [request] = agent.requests()
    failures = json.dumps(request["failures"])
    assert "<err> crc8: self-test: check value 0xA2, CRC8_POLY 0x31" in failures
    assert "handler.log" in failures  # named as the harness names its log
    [run_dir] = project.run_dirs()
    baseline = project.summary()["baseline_snapshot"]
    shadow = f"--git-dir={project.root / '.fwloop' / 'shadow.git'}"
    listed = subprocess.run(
        ["git", shadow, "ls-tree", "-r", "-z", "--name-only", baseline],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split("\0")
    assert "src/crc8.h" in listed
    assert not [p for p in listed if p.startswith("build/")]
    final = (run_dir / "final.patch").read_text()
    assert "-#define CRC8_POLY 0x31\n+#define CRC8_POLY 0x07\n" in final
