"""The core decides without side effects: it works with processes and sockets blocked.

The core is the loop's decisions as data and pure functions (DESIGN.md §3-§6, STYLE.md): the
transition table, recovery, convergence, the patch policy, context packing, repeats, budget,
outcomes and the run records (state.json among them). Side effects live at the edges, behind
small interfaces.
"""

from __future__ import annotations

import subprocess
import sys

CORE = (
    "pytest_fwloop.fsm",
    "pytest_fwloop.recovery",
    "pytest_fwloop.convergence",
    "pytest_fwloop.policy",
    "pytest_fwloop.context",
    "pytest_fwloop.repeats",
    "pytest_fwloop.budget",
    "pytest_fwloop.outcomes",
    "pytest_fwloop.records",
    "pytest_fwloop.run_state",
    "pytest_fwloop.results",
    "pytest_fwloop.agents.protocol",
    "pytest_fwloop.gate_rules",
    "pytest_fwloop.state_clock",
)
# Imported by nothing in the core: the loop's edges (pytest itself, transports, processes).
NOT_IMPORTED = ("pytest", "_pytest", "pexpect", "paramiko", "serial", "httpx")

PROBE = """
import os, socket, subprocess, sys

def refuse(*args, **kwargs):
    raise RuntimeError("side effect in the core")

socket.socket.__init__ = refuse
socket.create_connection = refuse
subprocess.Popen.__init__ = refuse
os.system = os.fork = os.execv = os.execve = os.posix_spawn = refuse
for name in {not_imported!r}:
    sys.modules[name] = None  # any import of it now raises ImportError

import importlib
for module in {core!r}:
    importlib.import_module(module)

from pytest_fwloop.convergence import PRESETS, ConvergenceChecker
from pytest_fwloop.policy import PatchPolicy, check_patch

checker = ConvergenceChecker(PRESETS["standard"])
for passed in (60, 80, 95, 100, 100):
    checker.add_iteration_result(passed, 100)
print(checker.check_convergence(5, 10)[1].value)
diff = "--- a/conftest.py\\n+++ b/conftest.py\\n@@ -1 +1 @@\\n-a\\n+b\\n"
print(check_patch(diff, PatchPolicy())[0].rule)
print(" ".join(sorted(m for m in sys.modules if m.startswith("pytest_fwloop"))))
"""


def test_the_core_imports_with_side_effects_blocked() -> None:
    probe = PROBE.format(not_imported=NOT_IMPORTED, core=CORE)
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    verdict, rule, loaded = done.stdout.splitlines()
    assert (verdict, rule) == ("success", "protected")
    # Nothing outside the core came along with it.
    assert set(loaded.split()) - set(CORE) <= {"pytest_fwloop", "pytest_fwloop.agents"}, loaded
