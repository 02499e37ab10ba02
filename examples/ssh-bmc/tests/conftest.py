"""The BMC under test, reached over SSH through pytest-fwloop's `fwloop_ssh` fixture.

With a real BMC, pytest.ini names it (`fwloop_ssh_target = root@bmc-07.lab:22`) and the key and
known_hosts files that `fwloop_ssh_key` and `fwloop_ssh_known_hosts` point at are yours. Without
one, this conftest simulates the BMC: a private sshd on 127.0.0.1 (its own config, host key and
authorized key in a temporary directory; the system's sshd is never touched), whose client key
and host key it writes to the `.bmc/` files that pytest.ini names, and whose address it adds to
`fwloop_ssh_pool` with pytest's `config.addinivalue_line`.

Either way the suite deploys build/bmcctl with `fwloop_ssh.put` once per session and runs it with
`fwloop_ssh.run`.
"""

from __future__ import annotations

import getpass
import os
import shlex
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from pytest_fwloop.envs.errors import EnvironmentFailure

if TYPE_CHECKING:
    from collections.abc import Iterator

    from pytest_fwloop.envs.ssh import SshResult, SshTarget

LOCAL_BINARY = Path(__file__).resolve().parent.parent / "build" / "bmcctl"
#: Where bmcctl is installed on a real BMC; the simulated one uses a directory of its own.
REMOTE_DIR = "/tmp/fwloop-bmcctl"
#: sshd lives in sbin, which is not on every user's PATH.
SBIN = "/usr/sbin:/usr/local/sbin:/sbin"
SFTP_SERVERS = ("/usr/lib/openssh/sftp-server", "/usr/libexec/openssh/sftp-server")
STARTUP_SECONDS = 10.0


def _program(name: str, package: str) -> str:
    path = shutil.which(name, path=f"{os.environ.get('PATH', '')}:{SBIN}")
    if path is None:
        raise EnvironmentFailure(
            f"{name} not found, which the simulated BMC needs: apt-get install "
            f"--no-install-recommends {package}, or name a real BMC in fwloop_ssh_target"
        )
    return path


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class SimulatedBmc:
    """`sshd -D -e` on 127.0.0.1 with everything it needs in `directory`."""

    def __init__(self, directory: Path, client_key: Path, known_hosts: Path) -> None:
        sshd = _program("sshd", "openssh-server")
        keygen = _program("ssh-keygen", "openssh-client")
        self.port = _free_port()
        self.target = f"{getpass.getuser()}@127.0.0.1:{self.port}"
        self.remote_dir = directory / "rootfs"
        self.remote_dir.mkdir()
        host_key = directory / "host_key"
        client_key.parent.mkdir(exist_ok=True)
        for key in (host_key, client_key):
            key.unlink(missing_ok=True)
            subprocess.run(
                [keygen, "-q", "-t", "ed25519", "-N", "", "-C", "simulated-bmc", "-f", str(key)],
                check=True,
            )
        authorized = directory / "authorized_keys"
        shutil.copy(f"{client_key}.pub", authorized)
        host_public = Path(f"{host_key}.pub").read_text(encoding="utf-8").split()
        known_hosts.write_text(
            f"[127.0.0.1]:{self.port} {host_public[0]} {host_public[1]}\n", encoding="utf-8"
        )
        sftp = next((f"Subsystem sftp {path}" for path in SFTP_SERVERS if Path(path).exists()), "")
        config = directory / "sshd_config"
        config.write_text(
            f"""\
ListenAddress 127.0.0.1
Port {self.port}
HostKey {host_key}
PidFile {directory / "sshd.pid"}
AuthorizedKeysFile {authorized}
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
# The keys live under a world-writable temporary directory.
StrictModes no
PermitRootLogin prohibit-password
# Debian's bash reads ~/.bashrc for every command sshd runs (~250 ms with pyenv in it); started
# at level 1 it does not, as a BMC's shell would not.
SetEnv SHLVL=1
{sftp}
""",
            encoding="utf-8",
        )
        if os.geteuid() == 0:
            # sshd's privilege separation directory, missing where the system sshd never ran.
            Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
        self.log = directory / "sshd.log"
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(
                [sshd, "-D", "-e", "-f", str(config)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
            )
        deadline = time.monotonic() + STARTUP_SECONDS
        while b"Server listening" not in self.log.read_bytes():
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise EnvironmentFailure(
                    f"the simulated BMC's sshd did not start: {self.log.read_text().strip()}"
                )
            time.sleep(0.005)

    def stop(self) -> None:
        """Stop sshd once its connection processes are gone: it must reap them, as PID 1 on
        a container may not."""
        deadline = time.monotonic() + 5
        while self._connections() and time.monotonic() < deadline:
            time.sleep(0.01)
        self.process.terminate()
        self.process.wait()

    def _connections(self) -> list[int]:
        found = []
        for entry in Path("/proc").iterdir():
            try:
                parent = (entry / "stat").read_text().rsplit(")", 1)[1].split()[1]
            except (OSError, IndexError):
                continue
            if int(parent) == self.process.pid:
                found.append(int(entry.name))
        return found


@pytest.fixture(scope="session", autouse=True)
def simulated_bmc(
    pytestconfig: pytest.Config, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[SimulatedBmc | None]:
    """Started unless pytest.ini names a real BMC; autouse, so it is up before `fwloop_ssh`."""
    config = pytestconfig
    if config.getini("fwloop_ssh_target") or config.getini("fwloop_ssh_pool"):
        yield None
        return
    if int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")) > 1:
        # Its key files are the ones pytest.ini names, so two simulators would overwrite them.
        raise pytest.UsageError(
            "the simulated BMC serves one pytest process; to run with -n, list one real BMC "
            "per worker in fwloop_ssh_pool"
        )
    bmc = SimulatedBmc(
        tmp_path_factory.mktemp("simulated-bmc"),
        config.rootpath / config.getini("fwloop_ssh_key"),
        config.rootpath / config.getini("fwloop_ssh_known_hosts"),
    )
    config.addinivalue_line("fwloop_ssh_pool", bmc.target)
    yield bmc
    bmc.stop()


@dataclass
class Installation:
    remote_dir: str
    installed: bool = False


@pytest.fixture(scope="session")
def installation(simulated_bmc: SimulatedBmc | None) -> Installation:
    return Installation(str(simulated_bmc.remote_dir) if simulated_bmc else REMOTE_DIR)


class Bmc:
    """bmcctl on the BMC, with its state directory next to it."""

    def __init__(self, ssh: SshTarget, remote_dir: str) -> None:
        self.ssh = ssh
        self.binary = f"{remote_dir}/bmcctl"
        self.state = f"{remote_dir}/state"

    def ctl(self, *args: str) -> SshResult:
        return self.ssh.run(shlex.join([self.binary, "-s", self.state, *args]))

    def reply(self, *args: str) -> str:
        """The output of a bmcctl call that must succeed."""
        result = self.ctl(*args)
        assert result.exit_status == 0, result.stderr
        return result.stdout


@pytest.fixture
def local_build() -> Path:
    """build/bmcctl, what the suite installs on the BMC."""
    return LOCAL_BINARY


@pytest.fixture
def bmc(fwloop_ssh: SshTarget, installation: Installation) -> Bmc:
    """The BMC with this session's build/bmcctl installed (deployed on first use)."""
    bmc = Bmc(fwloop_ssh, installation.remote_dir)
    if not installation.installed:
        if not LOCAL_BINARY.is_file():
            raise FileNotFoundError(f"{LOCAL_BINARY} is not built; run `make` first")
        _on_the_bmc(fwloop_ssh, f"mkdir -p {shlex.quote(bmc.state)}")
        fwloop_ssh.put(LOCAL_BINARY, bmc.binary)
        _on_the_bmc(fwloop_ssh, f"chmod 755 {shlex.quote(bmc.binary)}")
        installation.installed = True
    return bmc


def _on_the_bmc(ssh: SshTarget, command: str) -> None:
    """An installation step; failing, the BMC is not usable: an environment failure."""
    result = ssh.run(command)
    if result.exit_status != 0:
        raise EnvironmentFailure(
            f"cannot install bmcctl on {ssh.name}: {command!r} exited {result.exit_status} "
            f"({result.stderr.strip()}); check that {REMOTE_DIR} is writable there"
        )
