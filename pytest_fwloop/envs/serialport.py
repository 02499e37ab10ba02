"""A console on any pyserial URL: `/dev/ttyUSB0`, `socket://host:port`, `rfc2217://…`, `loop://`.

pyserial empties its input buffer when it opens a port (and a board's banner is usually long gone
by then), so the health check pokes the board with a newline and waits for the prompt instead.
"""

from __future__ import annotations

import contextlib
import fcntl
import struct
import termios
from types import ModuleType
from typing import TYPE_CHECKING

from pytest_fwloop.envs.console import POLL_SECONDS, READ_CHUNK, Console
from pytest_fwloop.envs.errors import ConsoleTimeout, EnvironmentFailure

if TYPE_CHECKING:
    import serial


def pyserial() -> ModuleType:
    """pyserial's `serial` package: an extra (`pytest-fwloop[serial]`), or labgrid's fork of it
    (pyserial-labgrid), so that installing this plugin never overwrites labgrid's."""
    try:
        import serial
    except ModuleNotFoundError:
        raise EnvironmentFailure(
            "fwloop: the serial console needs pyserial, which is not installed: "
            "pip install 'pytest-fwloop[serial]' (labgrid users: labgrid's pyserial-labgrid "
            "provides it)"
        ) from None
    return serial


class PySerialTransport:
    """Bytes through one open pyserial port."""

    def __init__(self, port: serial.Serial, url: str) -> None:
        self._port = port
        self._url = url

    @classmethod
    def open(cls, url: str, baudrate: int = 115200) -> PySerialTransport:
        """Open `url`; a port that cannot be opened is an EnvironmentFailure."""
        module = pyserial()
        try:
            port = module.serial_for_url(url, baudrate=baudrate, timeout=POLL_SECONDS)
        except (module.SerialException, ValueError) as exc:
            raise EnvironmentFailure(
                f"fwloop: serial port {url}: cannot open ({exc}); "
                "check that the board is connected and fwloop_serial_url is right"
            ) from exc
        return cls(port, url)

    @property
    def name(self) -> str:
        return self._url

    def read(self) -> bytes:
        data = self._port.read(1)
        if data:
            data += self._port.read(min(self._pending(), READ_CHUNK))
        return bytes(data)

    def _pending(self) -> int:
        # A socket:// port's in_waiting only says "at least one"; ask the kernel for the count.
        try:
            fileno = self._port.fileno()
        except (AttributeError, OSError, ValueError):  # loop://, rfc2217:// have no fd
            return int(self._port.in_waiting)
        raw = fcntl.ioctl(fileno, termios.FIONREAD, struct.pack("i", 0))
        return int(struct.unpack("i", raw)[0])

    def write(self, data: bytes) -> None:
        # No flush(): waiting for the UART to drain (tcdrain) adds latency and buys nothing.
        self._port.write(data)

    def close(self) -> None:
        # The device may already be gone (board reset, USB unplugged).
        with contextlib.suppress(OSError, pyserial().SerialException):
            self._port.close()


class SerialConsole(Console):
    """The console of a board on a pyserial URL; `reopen()` after the board resets."""

    def __init__(
        self,
        url: str,
        *,
        baudrate: int = 115200,
        timeout: float = 10.0,
        newline: str = "\n",
    ) -> None:
        super().__init__(name=url, timeout=timeout, newline=newline)
        self.url = url
        self.baudrate = baudrate

    def open(self, ready: str | None = None) -> SerialConsole:
        """Open the port and, given a `ready` regex, poke with a newline and wait for it.

        On any failure the port is released again before the EnvironmentFailure propagates.
        """
        self.attach(PySerialTransport.open(self.url, self.baudrate))
        if ready is None:
            return self
        try:
            self.sendline()
            self.expect(ready)
        except ConsoleTimeout as exc:
            self.close()
            raise EnvironmentFailure(
                f"fwloop: serial port {self.url}: no answer matching {ready!r} within "
                f"{self.timeout:g} s after a newline; last output: {self._tail()!r}; "
                "check fwloop_console_ready, the baud rate and that the board is powered"
            ) from exc
        except EnvironmentFailure:
            self.close()
            raise
        return self

    def reopen(self, ready: str | None = None) -> SerialConsole:
        """Close and open the port again, e.g. after a board reset brought its USB device back."""
        self.close()
        return self.open(ready)
