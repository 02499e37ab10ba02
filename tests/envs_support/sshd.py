"""A private sshd on 127.0.0.1 for the tests: own config, host key, client key and pid file.

The system sshd and its configuration are never touched. Stopping waits for sshd's connection
children to go first (close your clients before), because PID 1 on these machines reaps nothing.
"""

from __future__ import annotations

import getpass
import os
import subprocess
import time
from pathlib import Path

from envs_support.procs import children_of
from pytest_fwloop.envs.qemu import free_port

STARTUP_SECONDS = 10.0
SFTP_SERVERS = ("/usr/lib/openssh/sftp-server", "/usr/libexec/openssh/sftp-server")


def generate_key(ssh_keygen: str, path: Path) -> Path:
    """A new passphrase-less ed25519 key pair at `path` and `path`.pub."""
    subprocess.run(
        [ssh_keygen, "-q", "-t", "ed25519", "-N", "", "-C", "fwloop-test", "-f", str(path)],
        check=True,
    )
    return path


class PrivateSshd:
    """`sshd -D -e` with a config of its own in `directory`, logging to `directory`/sshd.log."""

    def __init__(self, sshd: str, ssh_keygen: str, directory: Path, *, sftp: bool = True) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.directory = directory
        self.user = getpass.getuser()
        self.port = free_port()
        host_key = generate_key(ssh_keygen, directory / "host_key")
        self.client_key = generate_key(ssh_keygen, directory / "client_key")
        (directory / "authorized_keys").write_text(
            Path(f"{self.client_key}.pub").read_text(encoding="utf-8"), encoding="utf-8"
        )
        self.host_key_line = Path(f"{host_key}.pub").read_text(encoding="utf-8").strip()
        sftp_server = next((path for path in SFTP_SERVERS if Path(path).exists()), None)
        config = directory / "sshd_config"
        config.write_text(
            "\n".join(
                [
                    "ListenAddress 127.0.0.1",
                    f"Port {self.port}",
                    f"HostKey {host_key}",
                    f"PidFile {directory / 'sshd.pid'}",
                    f"AuthorizedKeysFile {directory / 'authorized_keys'}",
                    "PasswordAuthentication no",
                    "KbdInteractiveAuthentication no",
                    "UsePAM no",
                    "StrictModes no",  # the keys live under a world-writable temp dir
                    "PermitRootLogin prohibit-password",
                    # Debian's bash reads ~/.bashrc for every command sshd runs (~250 ms with
                    # pyenv in it); started at level 1 it does not.
                    "SetEnv SHLVL=1",
                    *([f"Subsystem sftp {sftp_server}"] if sftp and sftp_server else []),
                ]
            )
            + "\n",
            encoding="utf-8",
        )
        if os.geteuid() == 0:
            Path("/run/sshd").mkdir(mode=0o755, parents=True, exist_ok=True)
        self.log = directory / "sshd.log"
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(
                [sshd, "-D", "-e", "-f", str(config)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
            )
        self._wait_listening()

    @property
    def target(self) -> str:
        return f"{self.user}@127.0.0.1:{self.port}"

    @property
    def known_hosts_line(self) -> str:
        return f"[127.0.0.1]:{self.port} {self.host_key_line}"

    def write_known_hosts(self, path: Path, line: str | None = None) -> Path:
        path.write_text((line or self.known_hosts_line) + "\n", encoding="utf-8")
        return path

    def children(self) -> list[int]:
        """Pids of sshd's connection processes."""
        return children_of(self.process.pid)

    def stop(self) -> None:
        """Wait (bounded) for connections to end, then SIGTERM sshd and reap it."""
        deadline = time.monotonic() + 5
        while self.children() and time.monotonic() < deadline:
            time.sleep(0.01)
        if self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=5)

    def _wait_listening(self) -> None:
        deadline = time.monotonic() + STARTUP_SECONDS
        while b"Server listening" not in self.log.read_bytes():
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"private sshd did not start: {self.log.read_text()}")
            time.sleep(0.005)
