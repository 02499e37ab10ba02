"""The one labgrid place a loop holds for its whole run (DESIGN.md §14).

Reserved by tags and locked once, before the baseline, so no other job can take the board
between iterations (a board-to-board difference would read as the patch's effect). The children
find it through `LG_PLACE=+` and `LG_TOKEN`, as labgrid's `RemotePlace` does, under the loop's
own identity. While a place is held, the commands that give it back are kept with the reaper,
so a SIGKILLed controller's watchdog, or the next start, releases it.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable, MutableMapping

from pytest_fwloop.core.records.run_records import HeldPlace, LabgridRecord
from pytest_fwloop.farm.client import FarmSettings, Identity, LabgridClient, PlaceLost


class FarmHold:
    """Reserve, lock, check, swap and release the loop's place; the record of what it held."""

    def __init__(
        self,
        settings: FarmSettings,
        run_id: str,
        keep_exit_commands: Callable[[list[dict[str, object]]], None],
        environ: MutableMapping[str, str] = os.environ,
    ) -> None:
        host = environ.get("LG_HOSTNAME") or socket.gethostname() or "localhost"
        self.settings = settings
        self.client = LabgridClient(
            settings.executable, settings.coordinator, Identity(host, f"fwloop-{run_id}")
        )
        self._keep = keep_exit_commands
        self._environ = environ
        self.place = ""
        self.token = ""
        self.held: list[HeldPlace] = []
        self.relocked = False

    def acquire(
        self,
        iteration: int,
        abort: Callable[[], bool],
        name: str = "",
        wait: float | None = None,
    ) -> str:
        """Reserve by the tags (or `name=` one place, as `fwloop resume` asks first) and lock;
        what happened, for the trace. FarmError (one line) when no place can be had."""
        filters = [f"name={name}"] if name else list(self.settings.tags)
        self.token = self.client.reserve(filters, wait or self.settings.wait, abort)
        self._remember()  # from here an allocated reservation exists: give it back on any end
        self.place = self.client.lock(self.token)
        self._remember()
        if not self.held or self.held[-1].place != self.place:
            self.held.append(HeldPlace(place=self.place, from_iteration=iteration))
        self._environ.update(self.client.environ(self.token))
        return (
            f"locked labgrid place {self.place} ({' '.join(filters)}) at "
            f"{self.settings.coordinator} as {self.client.identity}"
        )

    def check(self, iteration: int, abort: Callable[[], bool]) -> str:
        """Before an environment rerun: the lock is still this loop's, or it is taken again,
        once per run (a coordinator restart drops every lock and reservation). What was done."""
        holder = self.client.holder(self.place)
        if holder == str(self.client.identity):
            return ""
        if self.relocked:
            raise PlaceLost(
                f"labgrid place {self.place} was lost again (held by {holder or 'nobody'}); "
                "it was taken back once already"
            )
        self.relocked = True
        lost = self.place
        self.release()
        done = self.acquire(iteration, abort, name=lost)
        return f"lock on {lost} lost (held by {holder or 'nobody'}); {done}"

    def swap(self, iteration: int, abort: Callable[[], bool]) -> str:
        """Another place with the same tags, for a board that stays sick (seed 001 §5.11): the
        sick one stays locked until the new one is, so the coordinator cannot hand it back."""
        sick, sick_token = self.place, self.token
        done = self.acquire(iteration, abort)
        problems = self.client.release(sick, sick_token)
        self._remember()
        note = f"; giving back {sick}: {'; '.join(problems)}" if problems else ""
        return f"labgrid place {sick} stayed sick; swapped: {done}{note}"

    def release(self) -> list[str]:
        """Cancel the reservation and unlock; what went wrong (the commands are then kept for
        the watchdog and the next start to try again)."""
        if not self.place and not self.token:
            return []
        problems = self.client.release(self.place, self.token)
        if not problems:  # else the kept commands stay: the watchdog, or the next start, retries
            self._keep([])
        self.place, self.token = "", ""
        return problems

    def record(self) -> LabgridRecord:
        """`summary.json["labgrid"]`."""
        return LabgridRecord(
            place=self.held[-1].place if self.held else None,
            tags=list(self.settings.tags),
            coordinator=self.settings.coordinator,
            identity=str(self.client.identity),
            held=list(self.held),
        )

    def _remember(self) -> None:
        """Keep the commands that give back what is held now (the exit commands of the run)."""
        base = [self.client.executable, "-x", self.client.coordinator]
        env: dict[str, object] = dict(self.client.identity.environ())
        commands: list[dict[str, object]] = []
        if self.token:
            commands.append({"argv": [*base, "cancel-reservation", self.token], "env": env})
        if self.place:
            release = ["-p", self.place, "release-from", str(self.client.identity)]
            commands.append({"argv": [*base, *release], "env": env})
        self._keep(commands)
