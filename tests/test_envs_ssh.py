"""SshTarget against a private sshd on 127.0.0.1 (own config, keys and pid file)."""

from __future__ import annotations

import socket
from typing import TYPE_CHECKING

import pytest

from envs_support.sshd import PrivateSshd, generate_key
from envs_support.tools import INNER_ARGS, require
from pytest_fwloop.config.options import KNOWN_HOSTS_ACCEPT_NEW
from pytest_fwloop.envs.errors import ConsoleTimeout, EnvironmentFailure
from pytest_fwloop.envs.ssh import SshAddress, SshResult, SshTarget, parse_target

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

TIMEOUT = 10.0


def start_sshd(directory: Path, *, sftp: bool = True) -> PrivateSshd:
    sshd = require("sshd", "openssh-server")
    ssh_keygen = require("ssh-keygen", "openssh-client")
    return PrivateSshd(sshd, ssh_keygen, directory, sftp=sftp)


@pytest.fixture(scope="module")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrivateSshd]:
    server = start_sshd(tmp_path_factory.mktemp("sshd"))
    yield server
    server.stop()


@pytest.fixture
def known_hosts(sshd: PrivateSshd, tmp_path: Path) -> Path:
    return sshd.write_known_hosts(tmp_path / "known_hosts")


@pytest.fixture
def target(sshd: PrivateSshd, known_hosts: Path) -> Iterator[SshTarget]:
    with SshTarget(
        sshd.target, key=sshd.client_key, known_hosts=known_hosts, timeout=TIMEOUT
    ) as target:
        yield target


def test_run_returns_status_stdout_and_stderr(target: SshTarget) -> None:
    result = target.run("echo out; echo err >&2; exit 3")
    assert result == SshResult(exit_status=3, stdout="out\n", stderr="err\n")
    assert "$ echo out; echo err >&2; exit 3\nout\nerr\n[exit 3]" in target.transcript.since(0)


def test_each_packet_leaves_at_once(target: SshTarget) -> None:
    """Nagle's algorithm held a command's small channel requests for the target's delayed ACK:
    `run()` took ~44 ms against ~2 ms without it (benchmarks/env_latency.py)."""
    sock = target._transport().sock
    assert isinstance(sock, socket.socket)
    assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0


def test_large_stderr_does_not_stall(target: SshTarget) -> None:
    result = target.run("head -c 3000000 /dev/zero | tr '\\0' x >&2; echo done")
    assert (result.exit_status, result.stdout, len(result.stderr)) == (0, "done\n", 3000000)


def test_slow_command_is_console_timeout(target: SshTarget) -> None:
    # `read` ends as soon as the channel closes, so sshd has nothing left running afterwards.
    with pytest.raises(ConsoleTimeout, match=r"'read line' did not finish within 0\.2 s"):
        target.run("read line", timeout=0.2)
    assert target.run("echo still usable").stdout == "still usable\n"


def test_put_over_sftp(target: SshTarget, tmp_path: Path) -> None:
    source = tmp_path / "image.bin"
    source.write_bytes(bytes(range(256)) * 64)
    target.put(source, str(tmp_path / "copy.bin"))
    assert (tmp_path / "copy.bin").read_bytes() == source.read_bytes()
    with pytest.raises(EnvironmentFailure, match="cannot write /nonexistent/dir/x") as caught:
        target.put(source, "/nonexistent/dir/x")
    assert "\n" not in str(caught.value)


def test_put_without_sftp_streams_through_cat(tmp_path: Path) -> None:
    server = start_sshd(tmp_path / "sshd", sftp=False)
    try:
        known_hosts = server.write_known_hosts(tmp_path / "known_hosts")
        source = tmp_path / "name with 'quotes'.txt"
        source.write_text("payload\n")
        with SshTarget(server.target, key=server.client_key, known_hosts=known_hosts) as target:
            target.put(source, str(tmp_path / "copy of it.txt"))
            with pytest.raises(EnvironmentFailure, match="cannot write /nonexistent/x"):
                target.put(source, "/nonexistent/x")
            # More than the SSH window: the remote `cat` is gone long before it is all sent.
            large = tmp_path / "large.bin"
            large.write_bytes(b"\0" * (8 << 20))
            with pytest.raises(EnvironmentFailure, match="cannot write /nonexistent/y"):
                target.put(large, "/nonexistent/y")
        assert (tmp_path / "copy of it.txt").read_text() == "payload\n"
    finally:
        server.stop()


def test_console_over_a_shell_channel(target: SshTarget) -> None:
    console = target.open_console()
    console.sendline("echo hi-$((40+2))")
    assert console.expect(r"hi-(\d+)").group(1) == "42"
    console.sendline("exit")
    with pytest.raises(EnvironmentFailure, match="channel was closed"):
        console.expect("never")


def test_unknown_host_key_is_rejected_by_default(sshd: PrivateSshd, tmp_path: Path) -> None:
    empty = tmp_path / "known_hosts"
    empty.touch()
    with pytest.raises(EnvironmentFailure) as caught:
        SshTarget(sshd.target, key=sshd.client_key, known_hosts=empty).connect()
    message = str(caught.value)
    assert "host key ssh-ed25519 SHA256:" in message
    assert f"is not in {empty}" in message
    assert KNOWN_HOSTS_ACCEPT_NEW in message
    assert "\n" not in message


def test_changed_host_key_is_rejected(sshd: PrivateSshd, tmp_path: Path) -> None:
    generate_key(require("ssh-keygen", "openssh-client"), tmp_path / "other")
    stale = f"[127.0.0.1]:{sshd.port} {(tmp_path / 'other.pub').read_text().strip()}"
    known_hosts = sshd.write_known_hosts(tmp_path / "known_hosts", stale)
    with pytest.raises(EnvironmentFailure, match="host key does not match") as caught:
        SshTarget(sshd.target, key=sshd.client_key, known_hosts=known_hosts).connect()
    assert "\n" not in str(caught.value)


def test_accept_new_is_an_explicit_opt_in(sshd: PrivateSshd) -> None:
    with SshTarget(sshd.target, key=sshd.client_key, accept_new=True) as target:
        assert target.run("echo ok").stdout == "ok\n"


def test_wrong_key_is_an_authentication_failure(
    sshd: PrivateSshd, known_hosts: Path, tmp_path: Path
) -> None:
    stranger = generate_key(require("ssh-keygen", "openssh-client"), tmp_path / "stranger")
    with pytest.raises(EnvironmentFailure, match=f"authentication with {stranger} failed"):
        SshTarget(sshd.target, key=stranger, known_hosts=known_hosts).connect()
    with pytest.raises(EnvironmentFailure, match=r"key file .* not found; fix fwloop_ssh_key"):
        SshTarget(sshd.target, key=tmp_path / "nope", known_hosts=known_hosts).connect()


def test_stopped_sshd_is_environment_failure(tmp_path: Path) -> None:
    server = start_sshd(tmp_path / "sshd")
    known_hosts = server.write_known_hosts(tmp_path / "known_hosts")
    target = SshTarget(server.target, key=server.client_key, known_hosts=known_hosts)
    target.connect().close()
    server.stop()
    with pytest.raises(EnvironmentFailure) as caught:
        target.connect()
    assert str(caught.value) == (
        f"fwloop: ssh {server.target}: connection refused; is sshd running there? "
        "check fwloop_ssh_target"
    )


@pytest.mark.parametrize(
    ("spec", "address"),
    [
        ("root@10.0.0.2:2222", SshAddress("root", "10.0.0.2", 2222)),
        ("admin@bmc", SshAddress("admin", "bmc", 22)),
        ("u@[::1]:2200", SshAddress("u", "::1", 2200)),
    ],
)
def test_parse_target(spec: str, address: SshAddress) -> None:
    assert parse_target(spec) == address


@pytest.mark.parametrize("spec", ["bmc", "root@", "root@host:99999", "root@host:x", "a b@c"])
def test_bad_target_syntax_is_one_line(spec: str) -> None:
    with pytest.raises(ValueError, match=r"is not user@host:port; e\.g\. root@") as caught:
        parse_target(spec)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("strict", [True, False], ids=["known-hosts-file", "accept-new"])
def test_fwloop_ssh_fixture(
    pytester: pytest.Pytester, sshd: PrivateSshd, known_hosts: Path, strict: bool
) -> None:
    pytester.makeini(
        f"""
        [pytest]
        fwloop_ssh_target = {sshd.target}
        fwloop_ssh_key = {sshd.client_key}
        fwloop_ssh_known_hosts = {known_hosts if strict else KNOWN_HOSTS_ACCEPT_NEW}
        """
    )
    pytester.makepyfile(
        """
        def test_run(fwloop_ssh):
            assert fwloop_ssh.run("echo hello").stdout == "hello\\n"

        def test_wrong_output(fwloop_ssh):
            assert fwloop_ssh.run("echo marker-output").stdout == "something else\\n"
        """
    )
    result = pytester.runpytest(*INNER_ARGS)
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*- fwloop console -*", "$ echo marker-output", "marker-output"])


@pytest.mark.parametrize(
    ("ini", "message"),
    [
        ("", "*the fwloop_ssh fixture needs ini fwloop_ssh_target (or fwloop_ssh_pool); e.g.*"),
        ("fwloop_ssh_target = nohost", "*ini fwloop_ssh_target 'nohost' is not user@host:port*"),
    ],
)
def test_fwloop_ssh_fixture_config_errors(
    pytester: pytest.Pytester, ini: str, message: str
) -> None:
    pytester.makeini(f"[pytest]\n{ini}\n")
    pytester.makepyfile("def test_it(fwloop_ssh): pass")
    result = pytester.runpytest(*INNER_ARGS)
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines([f"*UsageError: fwloop: {message.lstrip('*')}"])
