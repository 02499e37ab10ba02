"""A target reached over SSH (a BMC, a Linux board): run commands, copy files, open a console.

Host keys are checked strictly by default: against `~/.ssh/known_hosts`, or against the file named
by `known_hosts`. `accept_new=True` (ini: `fwloop_ssh_known_hosts = insecure-accept-new`) accepts
a host whose key is not known yet, as OpenSSH's `StrictHostKeyChecking=accept-new` does, but still
rejects a key that differs from a known one; use it only on a network you trust.
"""

from __future__ import annotations

import base64
import hashlib
import re
import select
import shlex
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import paramiko

from pytest_fwloop.envs.console import (
    POLL_SECONDS,
    READ_CHUNK,
    TAIL_CHARS,
    Console,
    Transcript,
    poll_read,
)
from pytest_fwloop.envs.errors import ConsoleTimeout, EnvironmentFailure

if TYPE_CHECKING:
    from types import TracebackType

DEFAULT_PORT = 22
_TARGET = re.compile(r"(?P<user>[^@\s]+)@(?P<host>\[[^\]\s]+\]|[^:@\s\[\]]+)(?::(?P<port>\d+))?")


@dataclass(frozen=True)
class SshAddress:
    user: str
    host: str
    port: int = DEFAULT_PORT

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.user}@{host}:{self.port}"


def parse_target(spec: str) -> SshAddress:
    """`user@host[:port]` (IPv6 hosts in brackets) → SshAddress; ValueError naming the syntax."""
    match = _TARGET.fullmatch(spec.strip())
    port = int(match["port"]) if match and match["port"] else DEFAULT_PORT
    if match is None or not 0 < port < 65536:
        raise ValueError(
            f"fwloop_ssh_target {spec!r} is not user@host:port; e.g. root@192.168.0.20:22"
        )
    return SshAddress(match["user"], match["host"].strip("[]"), port)


@dataclass(frozen=True)
class SshResult:
    exit_status: int
    stdout: str
    stderr: str


class _UnknownHostKey(paramiko.SSHException):
    def __init__(self, hostname: str, key: paramiko.PKey) -> None:
        digest = base64.b64encode(hashlib.sha256(key.asbytes()).digest()).decode().rstrip("=")
        super().__init__(f"{key.get_name()} SHA256:{digest}")
        self.hostname = hostname


class _RejectUnknownHost(paramiko.MissingHostKeyPolicy):
    """paramiko's RejectPolicy, raising an exception we can tell apart from other SSH errors."""

    def missing_host_key(
        self, client: paramiko.SSHClient, hostname: str, key: paramiko.PKey
    ) -> None:
        raise _UnknownHostKey(hostname, key)


class _ChannelTransport:
    """A console over one SSH session channel (stderr merged into the stream)."""

    def __init__(self, channel: paramiko.Channel, name: str) -> None:
        self._channel = channel
        self._name = name

    @property
    def name(self) -> str:
        return self._name

    def read(self) -> bytes:
        return poll_read(self._channel, self._channel.recv, lambda: "the SSH channel was closed")

    def write(self, data: bytes) -> None:
        self._channel.sendall(data)

    def close(self) -> None:
        self._channel.close()


class SshTarget:
    """One SSH connection; `run`, `put` and `open_console` share it.

    Every command and its output go into `transcript`, like a console's traffic.
    """

    def __init__(
        self,
        target: str | SshAddress,
        *,
        key: Path | str | None = None,
        known_hosts: Path | str | None = None,
        accept_new: bool = False,
        timeout: float = 10.0,
    ) -> None:
        self.address = parse_target(target) if isinstance(target, str) else target
        self.key = Path(key) if key is not None else None
        self.known_hosts = Path(known_hosts) if known_hosts is not None else None
        self.accept_new = accept_new
        self.timeout = timeout
        self.name = f"ssh {self.address}"
        self.transcript = Transcript()
        self._client: paramiko.SSHClient | None = None
        self._consoles: list[Console] = []

    def __enter__(self) -> SshTarget:
        return self.connect()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    @property
    def connected(self) -> bool:
        """True while the SSH connection is up (commands may still fail)."""
        transport = self._client.get_transport() if self._client is not None else None
        return transport is not None and transport.is_active()

    def connect(self) -> SshTarget:
        """Log in with the key and check the target with `true`; EnvironmentFailure if not.

        A previous connection, and the consoles opened on it, are closed first.
        """
        self.close()
        if self.key is not None and not self.key.is_file():
            raise EnvironmentFailure(
                f"fwloop: {self.name}: key file {self.key} not found; fix fwloop_ssh_key"
            )
        client = paramiko.SSHClient()
        try:
            self._load_host_keys(client)
            client.connect(
                self.address.host,
                port=self.address.port,
                username=self.address.user,
                key_filename=str(self.key) if self.key is not None else None,
                look_for_keys=self.key is None,
                allow_agent=self.key is None,
                timeout=self.timeout,
                banner_timeout=self.timeout,
                auth_timeout=self.timeout,
            )
        except (paramiko.SSHException, OSError) as exc:
            client.close()
            raise EnvironmentFailure(self._connect_failure(exc)) from exc
        _no_delay(client)
        self._client = client
        health = self.run("true")
        if health.exit_status != 0:
            self.close()
            raise EnvironmentFailure(
                f"fwloop: {self.name}: health check `true` exited with {health.exit_status} "
                f"({health.stderr.strip()}); check the account's login shell"
            )
        return self

    def close(self) -> None:
        for console in self._consoles:
            console.close()
        self._consoles.clear()
        client, self._client = self._client, None
        if client is not None:
            client.close()

    def run(self, command: str, timeout: float | None = None) -> SshResult:
        """Run `command` through the target's shell and wait for its exit status.

        ConsoleTimeout when it does not finish in time (the target did not answer);
        EnvironmentFailure when the connection is lost.
        """
        return self._exec(command, self.timeout if timeout is None else timeout)

    def put(self, local: Path | str, remote: str) -> None:
        """Copy a file by SFTP, or through `cat >` on targets without an SFTP server."""
        source = Path(local)
        if not source.is_file():
            raise EnvironmentFailure(
                f"fwloop: {self.name}: cannot copy {source}, no such file; build it first"
            )
        self.transcript.append(f"$ put {source} {remote}\n")
        client = self._connected()
        try:
            sftp = client.open_sftp()
        except paramiko.SSHException:
            # No SFTP subsystem, as on many BMCs; a dead connection fails in _exec instead.
            self._put_with_cat(source, remote)
            return
        try:
            with sftp:
                sftp.put(str(source), remote)
        except (paramiko.SSHException, OSError, EOFError) as exc:
            if not self.connected:
                raise self._lost(f"copying {source} ({exc})") from exc
            raise EnvironmentFailure(
                f"fwloop: {self.name}: cannot write {remote} ({exc}); "
                "check that the remote directory exists and is writable"
            ) from exc

    def open_console(self, command: str = "") -> Console:
        """A Console on a new channel: `command` (e.g. a BMC's serial-over-LAN client) or a shell.

        Closed with the target.
        """
        try:
            channel = self._transport().open_session(timeout=self.timeout)
            channel.set_combine_stderr(True)
            if command:
                channel.exec_command(command)
            else:
                channel.invoke_shell()
        except (paramiko.SSHException, OSError) as exc:
            raise self._lost(f"opening a console ({exc})") from exc
        console = Console(
            _ChannelTransport(channel, f"{self.name} {command or 'shell'}"), timeout=self.timeout
        )
        self._consoles.append(console)
        return console

    def _put_with_cat(self, source: Path, remote: str) -> None:
        result = self._exec(f"cat > {shlex.quote(remote)}", self.timeout, stdin=source)
        if result.exit_status != 0:
            raise EnvironmentFailure(
                f"fwloop: {self.name}: cannot write {remote} ({result.stderr.strip()}); "
                "check that the remote directory exists and is writable"
            )

    def _exec(self, command: str, timeout: float, stdin: Path | None = None) -> SshResult:
        self.transcript.append(f"$ {command}\n")
        stdout, stderr = bytearray(), bytearray()
        deadline = time.monotonic() + timeout
        try:
            transport = self._transport()
            channel = transport.open_session(timeout=timeout)
            channel.exec_command(command)
            if stdin is not None:
                try:
                    channel.sendall(stdin.read_bytes())
                    channel.shutdown_write()
                except (paramiko.SSHException, OSError):
                    # The command ended before reading all its input (a `cat` that cannot
                    # open its file): its status and stderr say why. Only a dead transport
                    # is a lost connection.
                    if not transport.is_active():
                        raise
            # sshd may send the exit status before the last output: done means EOF (or the
            # channel closing), the status, and nothing left to read. stderr is drained all
            # along, or a chatty command would stall on a full SSH window.
            while True:
                while channel.recv_ready():
                    stdout += channel.recv(READ_CHUNK)
                while channel.recv_stderr_ready():
                    stderr += channel.recv_stderr(READ_CHUNK)
                ended = bool(channel.eof_received or channel.closed)
                unread = channel.recv_ready() or channel.recv_stderr_ready()
                if ended and channel.status_event.is_set() and not unread:
                    break
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    channel.close()
                    self._record(stdout, stderr, "timed out")
                    raise ConsoleTimeout(
                        f"fwloop: {self.name}: {command!r} did not finish within {timeout:g} s; "
                        f"last output: {self.transcript.tail(TAIL_CHARS)!r}"
                    )
                if ended:
                    channel.status_event.wait(min(remaining, POLL_SECONDS))
                else:
                    # Readable on stdout data, EOF and close; stderr alone is polled.
                    select.select([channel], [], [], min(remaining, POLL_SECONDS))
            status = channel.recv_exit_status()
            channel.close()
        except (paramiko.SSHException, OSError, EOFError) as exc:
            raise self._lost(f"running {command!r} ({exc})") from exc
        if not transport.is_active():
            raise self._lost(f"running {command!r}")
        self._record(stdout, stderr, f"exit {status}")
        return SshResult(status, _text(stdout), _text(stderr))

    def _record(self, stdout: bytearray, stderr: bytearray, end: str) -> None:
        self.transcript.append(f"{_text(stdout)}{_text(stderr)}[{end}]\n")

    def _connected(self) -> paramiko.SSHClient:
        if self._client is None:
            raise EnvironmentFailure(f"fwloop: {self.name}: not connected; call connect() first")
        return self._client

    def _transport(self) -> paramiko.Transport:
        transport = self._connected().get_transport()
        if transport is None or not transport.is_active():
            raise self._lost("before the command")
        return transport

    def _lost(self, when: str) -> EnvironmentFailure:
        return EnvironmentFailure(
            f"fwloop: {self.name}: connection lost {when}; check that the target is up"
        )

    def _load_host_keys(self, client: paramiko.SSHClient) -> None:
        if self.known_hosts is None:
            client.load_system_host_keys()
        elif self.known_hosts.is_file():
            client.load_host_keys(str(self.known_hosts))
        policy = paramiko.AutoAddPolicy() if self.accept_new else _RejectUnknownHost()
        client.set_missing_host_key_policy(policy)

    def _connect_failure(self, exc: BaseException) -> str:
        where = f"fwloop: {self.name}"
        known_hosts = self.known_hosts or "~/.ssh/known_hosts"
        if isinstance(exc, paramiko.BadHostKeyException):
            return (
                f"{where}: host key does not match {known_hosts} (target reinstalled, or someone "
                "in between); verify it and replace the stale entry"
            )
        if isinstance(exc, _UnknownHostKey):
            return (
                f"{where}: host key {exc} of {exc.hostname} is not in {known_hosts}; verify it and "
                f"add it (ssh-keyscan -p {self.address.port} {self.address.host}), or set "
                "fwloop_ssh_known_hosts = insecure-accept-new on a trusted network"
            )
        if isinstance(exc, paramiko.AuthenticationException):
            key = self.key or "the default keys"
            return (
                f"{where}: authentication with {key} failed ({exc}); "
                "check fwloop_ssh_key and the target's authorized_keys"
            )
        if isinstance(exc, paramiko.ssh_exception.NoValidConnectionsError):
            return f"{where}: connection refused; is sshd running there? check fwloop_ssh_target"
        if isinstance(exc, TimeoutError):
            return f"{where}: timed out after {self.timeout:g} s; check the address and network"
        return f"{where}: cannot connect ({exc}); check fwloop_ssh_target and the network"


def _text(data: bytearray) -> str:
    return data.decode("utf-8", "replace")


def _no_delay(client: paramiko.SSHClient) -> None:
    """Send each SSH packet at once: with Nagle's algorithm a command's small channel requests
    wait for the target's delayed ACK (40 ms on Linux), most of what `run()` took."""
    transport = client.get_transport()
    sock = transport.sock if transport is not None else None
    if isinstance(sock, socket.socket):
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
