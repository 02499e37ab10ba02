"""What a run owes outside this machine is given back however it ends (procs/reaper.py)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from pytest_fwloop.procs.reaper import keep_exit_commands, reap_leftovers, run_exit_commands


def _touch(path: Path) -> dict[str, object]:
    """A real command that leaves a trace, with a variable from its kept environment."""
    # Written aside then renamed, so whoever sees the file sees all of it.
    code = (
        "import os, pathlib; t = pathlib.Path(os.environ['TARGET']); "
        "t.with_suffix('.part').write_text('given back'); t.with_suffix('.part').replace(t)"
    )
    return {"argv": [sys.executable, "-c", code], "env": {"TARGET": str(path)}}


def test_the_next_start_runs_what_a_dead_run_kept_then_forgets_it(tmp_path: Path) -> None:
    trace = tmp_path / "released"
    keep_exit_commands(tmp_path, [_touch(trace)])
    assert reap_leftovers(tmp_path) == 0  # no registry: nothing to stop, the commands still run
    assert trace.read_text() == "given back"
    trace.unlink()
    assert run_exit_commands(tmp_path) == 0  # forgotten once run
    assert not trace.exists()


def test_an_empty_list_forgets_the_commands(tmp_path: Path) -> None:
    keep_exit_commands(tmp_path, [_touch(tmp_path / "released")])
    keep_exit_commands(tmp_path, [])
    assert run_exit_commands(tmp_path) == 0
    assert not (tmp_path / "released").exists()


def test_the_watchdog_runs_them_when_the_controller_dies(tmp_path: Path) -> None:
    trace = tmp_path / "released"
    keep_exit_commands(tmp_path, [_touch(trace)])
    # A controller stand-in that starts the real guard and is then SIGKILLed.
    controller = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from pathlib import Path; "
            "from pytest_fwloop.procs import reaper; reaper.install(Path(sys.argv[1])); "
            "print('ready', flush=True); time.sleep(60)",
            str(tmp_path),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert controller.stdout is not None
    assert controller.stdout.readline().strip() == "ready"
    controller.kill()
    controller.wait()
    controller.stdout.close()
    deadline = time.monotonic() + 20
    while not trace.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert trace.read_text() == "given back"
