"""Nothing the loop starts outlives it (docs/security.md), even when the controller is SIGKILLed.

Every process the loop starts (the build, each child pytest and what its tests start, agent CLIs,
tester commands) inherits `FWLOOP_RUN_OWNER=<token>` from the controller's environment, so the
loop can find all of them, however deep or detached, in /proc. Two things stop them:

- a **watchdog**, one small process per run (`python -m pytest_fwloop.procs.watchdog TOKEN`) holding
  the read end of a pipe from the controller: when the pipe closes, which the kernel does when
  the controller exits or dies however it dies, it stops every process that carries the token;
- a **registry**, `.fwloop/children.json`, naming the token: the next start in the same tree stops
  whatever carries it, in case the watchdog was killed too.

What the run holds outside this machine (a labgrid place's lock) is given back the same two ways:
the run keeps the commands that give it back in `.fwloop/on-exit.json` while it holds it, and the
watchdog, else the next start, runs them.

Only processes whose environment holds this run's token are ever signalled.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

OWNER_ENV = "FWLOOP_RUN_OWNER"
REGISTRY_NAME = "children.json"
EXIT_COMMANDS_NAME = "on-exit.json"
#: Bound on each exit command: the watchdog must end even if the other side never answers.
EXIT_COMMAND_TIMEOUT = 30.0
GRACE_SECONDS = 2.0


class Guard:
    """This run's token in the environment, its watchdog, and the registry naming the token."""

    def __init__(self, state_dir: Path) -> None:
        self.token = uuid.uuid4().hex
        self.registry = state_dir / REGISTRY_NAME
        temporary = self.registry.with_name(f".{REGISTRY_NAME}.tmp")
        temporary.write_text(json.dumps({"owner": self.token}))
        os.replace(temporary, self.registry)
        os.environ[OWNER_ENV] = self.token
        # `-S`: no site-packages scan (a third of its start-up); it needs only the standard
        # library and this package, found where this process found it. It starts as the
        # baseline's tests do, on the same cores.
        package_parent = str(Path(__file__).resolve().parents[2])
        search = os.pathsep.join(filter(None, [package_parent, os.environ.get("PYTHONPATH")]))
        self._watchdog = subprocess.Popen(
            [
                sys.executable,
                "-S",
                "-m",
                "pytest_fwloop.procs.watchdog",
                self.token,
                str(state_dir),
            ],
            env={**os.environ, "PYTHONPATH": search},
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # the terminal's Ctrl-C must not stop it before it acts
        )

    def release(self) -> None:
        """The run started its last child: the watchdog stops whatever is left now, while the
        run writes its records. Processes started from here on (the end's git calls) do not
        carry the token, so they are not stopped with the rest."""
        os.environ.pop(OWNER_ENV, None)
        with contextlib.suppress(OSError):
            if self._watchdog.stdin is not None:
                self._watchdog.stdin.close()

    def close(self) -> None:
        """End of the run: the watchdog has stopped whatever was left; the token is forgotten."""
        self.release()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._watchdog.wait(timeout=GRACE_SECONDS * 3)
        self.registry.unlink(missing_ok=True)


_active: Guard | None = None


def install(state_dir: Path) -> Guard:
    """Mark every process started from now on, and start the watchdog."""
    global _active
    _active = Guard(state_dir)
    return _active


def release() -> None:
    """See `Guard.release`: call once the run will start no more children."""
    if _active is not None:
        _active.release()


def uninstall() -> None:
    global _active
    if _active is not None:
        _active.close()
        _active = None


def reap_leftovers(state_dir: Path) -> int:
    """Stop what a dead run's registry names; how many processes. Call under the run lock."""
    registry = state_dir / REGISTRY_NAME
    try:
        owner = str(json.loads(registry.read_text())["owner"])
    except (OSError, ValueError, KeyError, TypeError):
        owner = ""  # none, or unreadable: nothing can be matched against it
    stopped = stop_owned(owner) if owner else 0
    registry.unlink(missing_ok=True)
    run_exit_commands(state_dir)  # also when the run ended but could not give everything back
    return stopped


def keep_exit_commands(state_dir: Path, commands: list[dict[str, object]]) -> None:
    """Commands that must run however the run ends, each `{"argv": [...], "env": {...}}`; an
    empty list forgets them (the run gave back what they would)."""
    path = state_dir / EXIT_COMMANDS_NAME
    if not commands:
        path.unlink(missing_ok=True)
        return
    temporary = path.with_name(f".{EXIT_COMMANDS_NAME}.tmp")
    temporary.write_text(json.dumps(commands))
    os.replace(temporary, path)


def run_exit_commands(state_dir: Path) -> int:
    """Run the commands a dead run kept (each bounded, never through a shell), then forget
    them; how many ran."""
    path = state_dir / EXIT_COMMANDS_NAME
    try:
        commands = json.loads(path.read_text())
    except FileNotFoundError:
        return 0
    except (OSError, ValueError):
        commands = []
    ran = 0
    for command in commands if isinstance(commands, list) else []:
        try:
            subprocess.run(
                [str(arg) for arg in command["argv"]],
                env={**os.environ, **{str(k): str(v) for k, v in command["env"].items()}},
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                timeout=EXIT_COMMAND_TIMEOUT,
                check=False,
            )
            ran += 1
        except (OSError, KeyError, TypeError, AttributeError, subprocess.TimeoutExpired):
            continue
    path.unlink(missing_ok=True)
    return ran


def stop_owned(token: str) -> int:
    """SIGTERM every process carrying `token`, SIGKILL what is left after a grace period;
    the number of processes found. Rescans, since a dying process may have forked."""
    found: set[int] = set()
    deadline = time.monotonic() + GRACE_SECONDS
    sig = signal.SIGTERM
    while owned := carrying(token):
        found.update(owned)
        for pid in owned:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)
        if time.monotonic() > deadline:
            sig = signal.SIGKILL
        time.sleep(0.05)
    return len(found)


def carrying(token: str) -> list[int]:
    """Live processes (not this one) whose environment holds `OWNER_ENV=token`."""
    needle = f"{OWNER_ENV}={token}".encode()
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes()
            state = (entry / "stat").read_bytes().rpartition(b")")[2].split()[0]
        except (OSError, IndexError):
            continue
        if state not in (b"Z", b"X") and needle in environ.split(b"\0"):
            pids.append(int(entry.name))
    return pids


def process_start(pid: int) -> int | None:
    stat = proc_stat(pid)
    return None if stat is None else stat[1]


def proc_stat(pid: int) -> tuple[str, int] | None:
    """State letter and start time of `pid` from /proc; None if it is gone or /proc is not."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    # The command name may hold spaces and parentheses: fields start after the last ")".
    fields = text.rpartition(")")[2].split()
    try:
        return fields[0], int(fields[19])
    except (IndexError, ValueError):
        return None
