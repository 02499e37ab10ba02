"""A firmware running in QEMU, its console on stdio or on a TCP serial port.

The command is a template split like a shell line but never given to a shell: `{firmware}` and
`{port}` are substituted per token, so paths with spaces stay one argument. With
`-serial tcp:127.0.0.1:{port},server=on,wait=on,nodelay=on` QEMU holds the guest until the console
connects, so the banner is not lost.

QEMU's CMSDK UART (the mps2 boards) refuses input until the firmware enables receive, and tells
the console backend it accepts input again only when the firmware reads the data register. So a
firmware that enables RX and then sleeps gets its first input at QEMU's next idle poll, about a
second later, on stdio and TCP alike; one dummy read of the data register after enabling RX
removes the delay (as the test firmware in tests/envs_support/firmware/main.c does).
"""

from __future__ import annotations

import hashlib
import itertools
import os
import shlex
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING

from pytest_fwloop.core.execution.qemu_exec import QEMU_EXEC_LOG_ENV, exec_log_args
from pytest_fwloop.envs.console import (
    TAIL_CHARS,
    Console,
    ProcessTransport,
    Transport,
    stderr_tail,
)
from pytest_fwloop.envs.errors import ConsoleTimeout, EnvironmentFailure
from pytest_fwloop.envs.serialport import PySerialTransport

if TYPE_CHECKING:
    from types import TracebackType

#: Between SIGTERM and SIGKILL when stopping QEMU.
STOP_GRACE_SECONDS = 5.0
CONNECT_RETRY_SECONDS = 0.01
_APT_PACKAGES = {
    "arm": "qemu-system-arm",
    "aarch64": "qemu-system-arm",
    "x86_64": "qemu-system-x86",
    "i386": "qemu-system-x86",
}


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nobody listens on right now (the kernel's pick, so xdist workers differ)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])


def command_argv(template: str, firmware: Path, port: int | None) -> list[str]:
    """Split `template` and fill `{firmware}` and `{port}` into each token; ValueError if bad."""
    try:
        tokens = shlex.split(template)
    except ValueError as exc:
        raise ValueError(f"fwloop_qemu_cmd: {exc}; quote it as you would in a shell") from exc
    if not tokens:
        raise ValueError("fwloop_qemu_cmd is empty; give the QEMU command line")
    if port is None and "{port}" in template:
        raise ValueError("fwloop_qemu_cmd uses {port} but no port was given")
    return [
        token.replace("{firmware}", str(firmware)).replace("{port}", str(port)) for token in tokens
    ]


def _console_address(argv: list[str]) -> tuple[str, int] | None:
    """(host, port) of a `-serial tcp:…,server=on` console, or None for a console on stdio."""
    for option, value in itertools.pairwise(argv):
        if option != "-serial":
            continue
        if not value.startswith("tcp:"):
            return None
        address, *flags = value.removeprefix("tcp:").split(",")
        if not any(flag in ("server", "server=on") for flag in flags):
            raise ValueError(
                f"fwloop_qemu_cmd: -serial {value} must have server=on to be connected to"
            )
        host, _, port = address.rpartition(":")
        return host or "127.0.0.1", int(port)
    return None


def _missing_program_message(program: str) -> str:
    arch = Path(program).name.removeprefix("qemu-system-")
    if arch == Path(program).name:
        return f"fwloop: {program} not found on PATH; install it or fix fwloop_qemu_cmd"
    package = _APT_PACKAGES.get(arch, "qemu-system")
    return (
        f"fwloop: {program} not found on PATH; install it (apt-get install {package}) "
        "or fix fwloop_qemu_cmd"
    )


@dataclass
class _Fingerprint:
    """What the firmware file looked like at boot; the hash settles a touched-but-same file."""

    size: int
    mtime_ns: int
    sha256: str

    @classmethod
    def of(cls, path: Path) -> _Fingerprint:
        stat = path.stat()
        return cls(stat.st_size, stat.st_mtime_ns, hashlib.sha256(path.read_bytes()).hexdigest())


class QemuMachine:
    """One QEMU process running `firmware`, with a console that survives `restart()`."""

    def __init__(
        self,
        command: str,
        firmware: Path | str,
        *,
        ready: str | None = None,
        timeout: float = 10.0,
        port: int | None = None,
        cwd: Path | None = None,
        newline: str = "\n",
    ) -> None:
        self.command = command
        self.firmware = Path(firmware)
        self.ready = ready
        self.timeout = timeout
        self.port = port
        self.cwd = cwd
        self.console = Console(name="qemu", timeout=timeout, newline=newline)
        self.process: subprocess.Popen[bytes] | None = None
        self._stderr: IO[bytes] | None = None
        self._fingerprint: _Fingerprint | None = None
        self._boot_failure: str | None = None

    def __enter__(self) -> QemuMachine:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def start(self) -> Console:
        """Boot the firmware (stopping a previous QEMU first) and wait for the `ready` regex.

        EnvironmentFailure when it can't, with nothing left running.
        """
        self.stop()
        if not self.firmware.is_file():
            raise EnvironmentFailure(
                f"fwloop: firmware {self.firmware} not found; build it first or fix fwloop_firmware"
            )
        port = self.port if self.port is not None or "{port}" not in self.command else free_port()
        argv = command_argv(self.command, self.firmware, port) + self._exec_log()
        if shutil.which(argv[0]) is None:
            raise EnvironmentFailure(_missing_program_message(argv[0]))
        address = _console_address(argv)
        if address is not None:
            _check_port_free(*address)
        self._fingerprint = _Fingerprint.of(self.firmware)
        # Open for the life of the process; stop() closes it.
        self._stderr = tempfile.TemporaryFile(prefix="fwloop-qemu-")  # noqa: SIM115
        on_stdio = address is None
        try:
            # Not a session of its own: when the loop kills a hung child pytest's process group,
            # QEMU goes with it.
            self.process = subprocess.Popen(
                argv,
                cwd=self.cwd,
                stdin=subprocess.PIPE if on_stdio else subprocess.DEVNULL,
                stdout=subprocess.PIPE if on_stdio else subprocess.DEVNULL,
                stderr=self._stderr,
            )
        except OSError as exc:
            self.stop()
            raise EnvironmentFailure(
                f"fwloop: cannot start {argv[0]} ({exc}); fix fwloop_qemu_cmd"
            ) from exc
        try:
            self.console.attach(self._connect(argv[0], address))
            if self.ready is not None:
                self.console.expect(self.ready)
        except (ConsoleTimeout, EnvironmentFailure) as exc:
            failure = self._startup_failure(exc, argv[0])
            self.stop()
            raise failure from exc
        return self.console

    def _exec_log(self) -> list[str]:
        """The arguments that log the code the guest runs, when a loop child recording the C
        spectrum asks (`child/spectra/qemu_blocks.py`): one log per boot, the firmware named
        beside."""
        folder = os.environ.get(QEMU_EXEC_LOG_ENV)
        if not folder:
            return []
        number = len(list(Path(folder).glob("qemu-*.log"))) + 1
        (Path(folder) / f"qemu-{number}.elf").write_text(str(self.firmware.resolve()))
        return exec_log_args(str(Path(folder) / f"qemu-{number}.log"))

    def stop(self) -> None:
        """SIGTERM, wait, SIGKILL and reap QEMU, then close the console; safe to call twice.

        QEMU goes first so that the console's reader wakes on EOF instead of at its next poll.
        """
        process, self.process = self.process, None
        if process is not None:
            _terminate(process)
        self.console.close()
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None

    def close(self) -> None:
        """`stop`, under the name the other environments release by (`contextlib.closing`)."""
        self.stop()

    def restart(self) -> Console:
        """Stop QEMU and boot it again; the console object stays the same."""
        return self.start()

    def firmware_changed(self) -> bool:
        """True when the firmware file differs from the one booted (size and mtime, then hash)."""
        if self._fingerprint is None:
            return True
        try:
            stat = self.firmware.stat()
        except OSError:
            return True
        if (stat.st_size, stat.st_mtime_ns) == (self._fingerprint.size, self._fingerprint.mtime_ns):
            return False
        current = _Fingerprint.of(self.firmware)
        if current.sha256 != self._fingerprint.sha256:
            return True
        self._fingerprint = current  # touched but identical: no need to hash it again
        return False

    def ensure_running(self) -> Console:
        """Boot unless the current firmware is up; a boot that failed is not retried until the
        firmware changes, so a suite does not wait out the banner timeout once per test."""
        changed = self.firmware_changed()
        if self.running and not changed:
            return self.console
        if self._boot_failure is not None and not changed:
            raise EnvironmentFailure(self._boot_failure)
        self._boot_failure = None
        try:
            return self.restart()
        except EnvironmentFailure as exc:
            self._boot_failure = str(exc)
            raise

    def _connect(self, program: str, address: tuple[str, int] | None) -> Transport:
        process = self.process
        assert process is not None
        if address is None:
            return ProcessTransport(process, f"{program} (pid {process.pid})", self._stderr)
        host, port = address
        deadline = time.monotonic() + self.timeout
        while True:
            if process.poll() is not None:
                raise EnvironmentFailure(f"fwloop: {program} never opened console port {port}")
            try:
                return PySerialTransport.open(f"socket://{host}:{port}")
            except EnvironmentFailure:
                if time.monotonic() > deadline:
                    raise
                time.sleep(CONNECT_RETRY_SECONDS)

    def _startup_failure(
        self, exc: ConsoleTimeout | EnvironmentFailure, program: str
    ) -> EnvironmentFailure:
        """The most telling one-line reason: QEMU's own complaint if it exited, else ours."""
        assert self.process is not None
        try:
            # After EOF the exit is imminent; after a timeout QEMU is most likely still up.
            status = self.process.wait(timeout=0.5 if isinstance(exc, EnvironmentFailure) else 0)
        except subprocess.TimeoutExpired:
            status = None
        if status is not None:
            detail = stderr_tail(self._stderr)
            hint = (
                "free the port or let fwloop pick one with {port} in fwloop_qemu_cmd"
                if "already in use" in detail
                else "check fwloop_qemu_cmd and the firmware"
            )
            return EnvironmentFailure(
                f"fwloop: {program} exited with status {status} during boot ({detail}); {hint}"
            )
        if isinstance(exc, ConsoleTimeout):
            return EnvironmentFailure(
                f"fwloop: no banner matching {self.ready!r} from {program} within "
                f"{self.timeout:g} s; last output: {self.console.transcript.tail(TAIL_CHARS)!r}; "
                "check fwloop_console_ready and that the firmware boots"
            )
        return exc


def _check_port_free(host: str, port: int) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        # As QEMU does, so a port in TIME_WAIT after the previous run does not count as taken.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            raise EnvironmentFailure(
                f"fwloop: console port {host}:{port} is already in use ({exc.strerror}); "
                "free it or let fwloop pick one with {port} in fwloop_qemu_cmd"
            ) from exc


def _terminate(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=STOP_GRACE_SECONDS)
            return
        except subprocess.TimeoutExpired:
            process.kill()
    process.wait()
