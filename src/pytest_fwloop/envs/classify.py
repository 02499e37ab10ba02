"""Is an exception raised during fixture setup the environment's fault? (DESIGN.md §7)

Matched by qualified class name across the MRO so the transports' libraries need not be imported
(or even installed) for the check to work.
"""

from __future__ import annotations

#: Qualified names of exception classes that mean "the rig is down", not "the firmware is wrong".
ENVIRONMENT_EXCEPTIONS: frozenset[str] = frozenset(
    {
        "pytest_fwloop.envs.errors.EnvironmentFailure",
        "pexpect.exceptions.EOF",
        "pexpect.exceptions.TIMEOUT",
        "serial.serialutil.SerialException",
        "builtins.ConnectionError",
        "builtins.TimeoutError",  # socket.timeout is an alias since Python 3.10
        "builtins.FileNotFoundError",
        "paramiko.ssh_exception.SSHException",
        "paramiko.ssh_exception.NoValidConnectionsError",
    }
)


def _qualname(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def environment_error_name(exc: BaseException) -> str | None:
    """The matching class name when `exc` is a known transport error, else None."""
    for cls in type(exc).__mro__:
        name = _qualname(cls)
        if name in ENVIRONMENT_EXCEPTIONS:
            return name
    return None
