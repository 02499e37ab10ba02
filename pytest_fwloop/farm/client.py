"""labgrid's coordinator as the loop uses it: through `labgrid-client`, one bounded call each.

The command line is labgrid's stable interface across its releases (the gRPC protocol changed in
25.0); each call is a process of ~0.3 s, a few per run. Every call carries the loop's own labgrid
identity (`LG_USERNAME`/`LG_HOSTNAME`): a lock belongs to that identity, so two loops can never
use each other's boards, and `release-from` can free exactly what one loop held.
"""

from __future__ import annotations

import os
import re
import select
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

#: One call's bound: the coordinator answers in well under a second when it is up.
CALL_TIMEOUT = 20.0
_TOKEN = re.compile(r"^export LG_TOKEN=(\S+)$", re.MULTILINE)
_ACQUIRED = re.compile(r"acquired place (\S+)")
_ACQUIRED_BY = re.compile(r"^\s+acquired: (\S+)", re.MULTILINE)

#: Asked while waiting for a place: True stops the wait (the operator aborted).
Abort = Callable[[], bool]


@dataclass(frozen=True)
class FarmSettings:
    """Where the loop's board comes from: a labgrid coordinator and the tags of its place."""

    tags: tuple[str, ...]
    coordinator: str
    #: Seconds to wait for a free place before the run ends `env_unavailable`.
    wait: float
    executable: str


class FarmError(Exception):
    """The farm could not give or keep a board; the message is the one line the user reads."""


class PlaceLost(FarmError):
    """The loop's lock was lost again after it had been taken back once: the run ends."""


@dataclass(frozen=True)
class Identity:
    """Who holds a lock, as labgrid sees it: `HOST/USER`."""

    host: str
    user: str

    def environ(self) -> dict[str, str]:
        return {"LG_HOSTNAME": self.host, "LG_USERNAME": self.user}

    def __str__(self) -> str:
        return f"{self.host}/{self.user}"


class LabgridClient:
    """`labgrid-client` against one coordinator, as one identity."""

    def __init__(self, executable: str, coordinator: str, identity: Identity) -> None:
        self.executable = executable
        self.coordinator = coordinator
        self.identity = identity

    def environ(self, token: str = "") -> dict[str, str]:
        """The variables a labgrid process of this loop needs (the children get them too)."""
        extra = {"LG_COORDINATOR": self.coordinator, **self.identity.environ()}
        if token:
            extra |= {"LG_TOKEN": token, "LG_PLACE": "+"}
        return extra

    def reserve(self, tags: Sequence[str], wait: float, abort: Abort | None = None) -> str:
        """A reservation by tags, allocated within `wait` seconds: its token. A wait that runs
        out cancels the reservation, so nothing is left queued at the coordinator."""
        process = self._start(["reserve", "--wait", "--shell", *tags])
        output, token, deadline = "", "", time.monotonic() + wait
        assert process.stdout is not None
        try:
            while process.poll() is None and time.monotonic() < deadline:
                if abort is not None and abort():
                    break
                ready, _, _ = select.select([process.stdout], [], [], 0.2)
                if ready:
                    output += os.read(process.stdout.fileno(), 4096).decode(errors="replace")
                    found = _TOKEN.search(output)
                    token = found.group(1) if found else token
        finally:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            output += process.stdout.read().decode(errors="replace")
            process.stdout.close()
        found = _TOKEN.search(output)
        token = found.group(1) if found else token
        if process.returncode == 0 and token:
            return token
        if token:
            self.call("cancel-reservation", token, check=False)
        if abort is not None and abort():
            raise FarmError(f"the wait for a place with {' '.join(tags)} was aborted")
        if process.returncode == -signal.SIGKILL:
            raise FarmError(
                f"no place with {' '.join(tags)} became free at the coordinator "
                f"{self.coordinator} within {wait:g}s (fwloop_labgrid_wait)"
            )
        raise FarmError(self._failure(["reserve", *tags], process.returncode, output))

    def lock(self, token: str) -> str:
        """Lock the place `token` was allocated: its name."""
        done = self.call("-p", "+", "lock", token=token)
        found = _ACQUIRED.search(done)
        if found is None:
            raise FarmError(f"labgrid-client lock said {done.strip()!r}, not 'acquired place'")
        return found.group(1)

    def holder(self, place: str) -> str | None:
        """`HOST/USER` holding `place`, None when nobody does."""
        shown = self.call("-p", place, "show")
        found = _ACQUIRED_BY.search(shown)
        holder = found.group(1) if found else "None"
        return None if holder == "None" else holder

    def release(self, place: str, token: str) -> list[str]:
        """Cancel the reservation, then unlock (in that order the next waiting job gets the
        place within a second, against seconds the other way round); what went wrong."""
        problems = []
        calls = [["cancel-reservation", token]] if token else []
        calls += [["-p", place, "release-from", str(self.identity)]] if place else []
        for args in calls:
            try:
                self.call(*args)
            except FarmError as exc:
                problems.append(str(exc))
        return problems

    def call(self, *args: str, token: str = "", check: bool = True) -> str:
        """One `labgrid-client` call's output; FarmError (one line) when it fails."""
        process = self._start(list(args), token)
        try:
            output, _ = process.communicate(timeout=CALL_TIMEOUT)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.communicate()
            raise FarmError(
                f"labgrid-client {' '.join(args)} got no answer from the coordinator "
                f"{self.coordinator} within {CALL_TIMEOUT:g}s"
            ) from None
        text = output.decode(errors="replace")
        if check and process.returncode != 0:
            raise FarmError(self._failure(list(args), process.returncode, text))
        return text

    def _start(self, args: list[str], token: str = "") -> subprocess.Popen[bytes]:
        try:
            return subprocess.Popen(
                [self.executable, "-x", self.coordinator, *args],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                env={**os.environ, **self.environ(token)},
                start_new_session=True,
            )
        except OSError as exc:
            raise FarmError(
                f"cannot run {self.executable} ({exc.strerror}); install labgrid "
                "(pip install 'pytest-fwloop[labgrid]') or set fwloop_labgrid_client"
            ) from None

    def _failure(self, args: Sequence[str], returncode: int | None, output: str) -> str:
        lines = [line for line in output.strip().splitlines() if line.strip()]
        said = lines[-1] if lines else "no output"
        return (
            f"labgrid-client {' '.join(args)} failed (exit {returncode}) at the coordinator "
            f"{self.coordinator}: {said}"
        )
