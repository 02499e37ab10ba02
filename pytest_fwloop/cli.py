"""`fwloop cancel`: stop a running loop from another terminal, as SIGTERM would.

The controller restores the tree and writes its records before it exits; this command waits for
that, so when it returns the workspace is settled.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from pathlib import Path

from pytest_fwloop.workspace import Journal, WorkspaceError

#: How long `cancel` waits for the controller to restore the tree and exit.
WAIT_SECONDS = 120.0


def cancel(root: Path, wait: float) -> int:
    try:
        record = Journal(root / ".fwloop").active()
    except WorkspaceError as exc:
        print(exc, file=sys.stderr)
        return 1
    if record is None:
        print(f"fwloop: no loop is running in {root}", file=sys.stderr)
        return 1
    os.kill(record.pid, signal.SIGTERM)
    print(f"fwloop: asked run {record.run_id} (pid {record.pid}) to stop")
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        if Journal(root / ".fwloop").active() is None:
            print(f"fwloop: run {record.run_id} stopped; the tree is restored")
            return 0
        time.sleep(0.1)
    print(
        f"fwloop: run {record.run_id} (pid {record.pid}) is still running after {wait:g}s; "
        f"kill it and rerun pytest --fwloop to recover the tree",
        file=sys.stderr,
    )
    return 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="fwloop", description="Control pytest-fwloop runs.")
    commands = parser.add_subparsers(dest="command", required=True)
    stop = commands.add_parser("cancel", help="stop the loop running in a rootdir")
    stop.add_argument("rootdir", nargs="?", default=".", type=Path, help="default: .")
    stop.add_argument("--wait", type=float, default=WAIT_SECONDS, help="seconds to wait")
    args = parser.parse_args(argv)
    return cancel(args.rootdir.resolve(), args.wait)


if __name__ == "__main__":
    sys.exit(main())
