"""The core decides without side effects: it works with processes and sockets blocked.

The core is the loop's decisions as data and pure functions (DESIGN.md §3-§6, STYLE.md): the
transition table, recovery, convergence, the patch policy, context packing, repeats, budget,
outcomes, history, flaky and focus rules, and the run records (state.json among them). It is
one folder of domains, `pytest_fwloop/core/`, imported here whole, so a new module cannot be
left out. Side effects live at the edges, behind small interfaces.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

CORE = Path(__file__).resolve().parents[1] / "pytest_fwloop" / "core"

# Imported by nothing in the core: the loop's edges (pytest itself, transports, processes).
NOT_IMPORTED = ("pytest", "_pytest", "pexpect", "paramiko", "serial", "http.client")

PROBE = """
import os, pkgutil, socket, subprocess, sys

def refuse(*args, **kwargs):
    raise RuntimeError("side effect in the core")

socket.socket.__init__ = refuse
socket.create_connection = refuse
subprocess.Popen.__init__ = refuse
os.system = os.fork = os.execv = os.execve = os.posix_spawn = refuse
for name in {not_imported!r}:
    sys.modules[name] = None  # any import of it now raises ImportError

import importlib
import pytest_fwloop.core
core = [
    m.name
    for m in pkgutil.walk_packages(pytest_fwloop.core.__path__, "pytest_fwloop.core.")
    if not m.ispkg
]
for module in core:
    importlib.import_module(module)

from pytest_fwloop.core.verdict.convergence import PRESETS, ConvergenceChecker
from pytest_fwloop.core.gate.policy import PatchPolicy, check_patch

checker = ConvergenceChecker(PRESETS["standard"])
for passed in (60, 80, 95, 100, 100):
    checker.add_iteration_result(passed, 100)
print(checker.check_convergence(5, 10)[1].value)
diff = "--- a/conftest.py\\n+++ b/conftest.py\\n@@ -1 +1 @@\\n-a\\n+b\\n"
print(check_patch(diff, PatchPolicy())[0].rule)
print(len(core), " ".join(sorted(m for m in sys.modules if m.startswith("pytest_fwloop"))))
"""


def test_the_core_imports_with_side_effects_blocked() -> None:
    probe = PROBE.format(not_imported=NOT_IMPORTED)
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    verdict, rule, loaded = done.stdout.splitlines()
    assert (verdict, rule) == ("success", "protected")
    count, *modules = loaded.split()
    # The whole folder was imported, every domain walked, and nothing outside it came along.
    assert int(count) == len(list(CORE.glob("*/*.py"))) - len(list(CORE.glob("*/__init__.py")))
    assert {m for m in modules if not m.startswith("pytest_fwloop.core")} == {"pytest_fwloop"}, (
        loaded
    )
