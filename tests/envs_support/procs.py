"""What is running, read from /proc: so a test can tell that it left nothing behind."""

from __future__ import annotations

import os
from pathlib import Path


def _stat_fields(pid: str) -> list[str]:
    """The fields of /proc/PID/stat after the command name: state first, then the parent."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def process_state(pid: int) -> str:
    """R, S, D, Z…; OSError when there is no such process."""
    return _stat_fields(str(pid))[0]


def children_of(pid: int) -> list[int]:
    """Pids whose parent is `pid`, zombies included."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if int(_stat_fields(entry.name)[1]) == pid:
                found.append(int(entry.name))
        except (OSError, IndexError):  # it exited while we looked
            continue
    return found


def live_processes() -> list[tuple[int, list[str], str]]:
    """(pid, argv, working directory) of each live process other than this one that can be
    read: not a zombie, not one that exited while we looked, not another user's."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if _stat_fields(entry.name)[0] == "Z":
                continue
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            cwd = os.readlink(entry / "cwd")
        except (OSError, IndexError):  # it exited while we looked, or is not ours to read
            continue
        found.append((int(entry.name), [a.decode(errors="replace") for a in argv if a], cwd))
    return found


def running_under(root: Path) -> list[str]:
    """Live processes other than this one whose command line or working directory is under
    `root`, as "PID COMMAND LINE": a QEMU booting a firmware from there, an sshd with its
    config there, a firmware binary, a child pytest."""
    found = []
    for pid, argv, cwd in live_processes():
        command = " ".join(argv)
        if str(root) in command or Path(cwd).is_relative_to(root):
            found.append(f"{pid} {command}")
    return found


def uptime() -> float:
    """Seconds since boot, the clock process start times are measured on."""
    return float(Path("/proc/uptime").read_text().split()[0])


def orphaned_zombies(since: float, names: set[str]) -> list[str]:
    """Exited processes called one of `names`, started after `since` (see `uptime`), that
    nobody will reap: their parent died first and PID 1 on these machines reaps nothing."""
    ticks = os.sysconf("SC_CLK_TCK")
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        fields = stat.rsplit(")", 1)[1].split()
        # fields[0] is the state, [1] the parent, [19] the start time in clock ticks.
        orphaned = fields[0] == "Z" and fields[1] == "1" and name in names
        if orphaned and int(fields[19]) / ticks >= since:
            found.append(f"{entry.name} {name}")
    return found
