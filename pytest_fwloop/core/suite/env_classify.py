"""Is an exception raised during fixture setup the environment's fault? (DESIGN.md §7)

Matched by qualified class name across the MRO so the transports' libraries need not be imported
(or even installed) for the check to work. A class is listed only when it means "the rig is
down" and never "the firmware answered wrongly": labgrid's `ExecutionError` is left out because
it is also what `run_check` raises for a command that exits non-zero. pytest-embedded has no
exception classes of its own for a lost target; its serial and QEMU services surface pexpect's,
pyserial's and the OS's, listed here. docs/environments.md explains each entry.
"""

from __future__ import annotations

import re

#: fwloop's own class: the environment is down in any test phase, not only at setup.
ENVIRONMENT_FAILURE = "pytest_fwloop.envs.errors.EnvironmentFailure"

#: Qualified names of exception classes that mean "the rig is down", not "the firmware is wrong".
ENVIRONMENT_EXCEPTIONS: frozenset[str] = frozenset(
    {
        ENVIRONMENT_FAILURE,
        "pexpect.exceptions.EOF",
        "pexpect.exceptions.TIMEOUT",
        "serial.serialutil.SerialException",
        "builtins.ConnectionError",
        "builtins.TimeoutError",  # socket.timeout is an alias since Python 3.10
        "builtins.FileNotFoundError",
        "paramiko.ssh_exception.SSHException",
        "paramiko.ssh_exception.NoValidConnectionsError",
        # labgrid: a resource still unavailable after waiting for it (USB serial unplugged,
        # exporter offline) or missing from the environment file; a strategy that could not
        # bring the target up (power, boot, login), with the original error as its __cause__.
        "labgrid.exceptions.NoResourceFoundError",
        "labgrid.strategy.common.StrategyError",
        # labgrid's coordinator or an exporter is gone ("orphaned resource (exporter …
        # disconnected?)", "Could not connect to coordinator").
        "labgrid.remote.client.ServerError",
    }
)

#: The farm's own failures (a coordinator or an exporter gone): no patch can cause them, so they
#: are never taken for a patch that stopped the firmware booting; the board is swapped instead.
FARM_EXCEPTIONS = frozenset({"labgrid.remote.client.ServerError"})


def is_farm_failure(env_failure: str) -> bool:
    """Whether a test's recorded environment failure (`CLASS: message`) is the farm's."""
    return env_failure.split(":", 1)[0] in FARM_EXCEPTIONS


#: What labgrid's pytest plugin stops a whole session with, before any test, when the place is
#: not this identity's: never locked, or its lock lost; a coordinator restart drops every lock
#: and reservation, so the token no longer names a place.
_LABGRID_REFUSAL = re.compile(
    r"Error: (?:place \S+ is not acquired[^!\n]*|reservation token \S+ matches nothing)"
)


def labgrid_refusal(output: str) -> str | None:
    """labgrid's one line when a child pytest stopped because its place is not locked by it."""
    found = _LABGRID_REFUSAL.search(output)
    return found.group(0).strip() if found else None


def _qualname(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def environment_error_name(exc: BaseException) -> str | None:
    """The matching class name when `exc` is a known transport error, else None."""
    for cls in type(exc).__mro__:
        name = _qualname(cls)
        if name in ENVIRONMENT_EXCEPTIONS:
            return name
    return None
