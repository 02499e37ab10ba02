"""The one console over real serial transports: a pty board, socat pty pairs, `loop://`."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from typing import TYPE_CHECKING

import pytest
import serial

from envs_support.board import Board
from envs_support.tools import INNER_ARGS, require
from pytest_fwloop.core.records.child_env import log_file_name
from pytest_fwloop.envs.console import Console, ProcessTransport
from pytest_fwloop.envs.errors import ConsoleTimeout, EnvironmentFailure
from pytest_fwloop.envs.pool import PoolError, pick_for_worker, worker_index
from pytest_fwloop.envs.serialport import PySerialTransport, SerialConsole

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

TIMEOUT = 10.0


@pytest.fixture(autouse=True)
def not_an_xdist_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    """The in-process pytester runs must not see this run's own xdist worker variables."""
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    monkeypatch.delenv("PYTEST_XDIST_WORKER_COUNT", raising=False)


@pytest.fixture
def board(tmp_path: Path) -> Iterator[Board]:
    board = Board(tmp_path / "ttyBOARD0")
    yield board
    board.stop()


@pytest.fixture
def board_console(board: Board) -> Iterator[SerialConsole]:
    console = SerialConsole(board.url, timeout=TIMEOUT).open(ready="> ")
    yield console
    console.close()


@pytest.fixture
def loop() -> Iterator[Console]:
    console = Console(PySerialTransport.open("loop://"), timeout=TIMEOUT)
    yield console
    console.close()


def open_fds_to(path: Path) -> int:
    target = os.path.realpath(path)
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            count += os.readlink(f"/proc/self/fd/{fd}") == target
        except OSError:
            continue
    return count


def test_pty_board_round_trip(board_console: SerialConsole) -> None:
    board_console.sendline("ping")
    assert board_console.expect(r"pong\n").group(0) == "pong\n"
    board_console.sendline("echo hello board")
    board_console.expect(re.compile(r"hello (\w+)\n"))
    assert "pong" not in board_console.before


def test_before_is_the_text_between_matches(loop: Console) -> None:
    loop.sendline("one two three")
    assert loop.expect("two").group(0) == "two"
    assert loop.before == "one "
    match = loop.expect(re.compile(r"th(r)ee"))
    assert match.group(1) == "r"
    assert loop.before == " "


def test_timeout_is_console_timeout_and_keeps_the_buffer(loop: Console) -> None:
    loop.sendline("abc")
    with pytest.raises(ConsoleTimeout) as caught:
        loop.expect("xyz", timeout=0.1)
    message = str(caught.value)
    assert "'xyz'" in message
    assert "0.1 s" in message
    assert "abc" in message
    assert "\n" not in message
    assert isinstance(caught.value, AssertionError)  # an ordinary test failure
    assert loop.expect("abc").group(0) == "abc"


def test_peer_hanging_up_is_environment_failure(board_console: SerialConsole) -> None:
    board_console.sendline("echo last words")
    board_console.expect("last words")
    board_console.sendline("die")
    with pytest.raises(EnvironmentFailure) as caught:
        board_console.expect("never", timeout=TIMEOUT)
    assert board_console.url in str(caught.value)
    assert "\n" not in str(caught.value)
    assert not board_console.alive
    with pytest.raises(EnvironmentFailure):
        board_console.sendline("ping")


def test_output_before_the_end_still_matches() -> None:
    # A pipe, unlike a pty hanging up, keeps what was written before the writer exited.
    process = subprocess.Popen(
        [sys.executable, "-c", "print('last words')"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    with Console(ProcessTransport(process, "printer"), timeout=TIMEOUT) as console:
        assert console.expect("last words").group(0) == "last words"
        with pytest.raises(EnvironmentFailure, match="printer exited with status 0"):
            console.expect("more")
    process.wait()


def test_64k_each_way_without_deadlock(board_console: SerialConsole) -> None:
    board_console.sendline("big 65536")
    board_console.expect(r"END\n")
    assert len(board_console.before) >= 65536
    payload = "x" * 65536
    board_console.sendline(f"echo {payload}")
    assert board_console.expect(r"x{65536}\n").group(0) == payload + "\n"


def test_reopen_after_a_board_reset(board: Board, board_console: SerialConsole) -> None:
    board_console.sendline("reset")
    with pytest.raises(EnvironmentFailure):
        board_console.expect("never")
    board_console.reopen(ready="> ")
    board_console.sendline("ping")
    board_console.expect(r"pong\n")
    assert board_console.transcript.since(0).count("BOARD 1.0 ready") == 2


def test_failed_health_check_releases_the_port(board: Board) -> None:
    console = SerialConsole(board.url, timeout=0.3)
    with pytest.raises(EnvironmentFailure, match="no answer matching 'NEVER'") as caught:
        console.open(ready="NEVER")
    assert "\n" not in str(caught.value)
    assert open_fds_to(board.link) == 0
    assert not console.alive


def test_missing_port_is_environment_failure(tmp_path: Path) -> None:
    missing = tmp_path / "ttyUSB9"
    with pytest.raises(EnvironmentFailure, match=f"serial port {missing}: cannot open") as caught:
        SerialConsole(str(missing)).open()
    assert "\n" not in str(caught.value)


def test_transcript_has_both_directions_and_segments(loop: Console, tmp_path: Path) -> None:
    loop.sendline("first")
    loop.expect("first\n")
    start = loop.transcript.end
    loop.sendline("second")
    loop.expect("second\n")
    assert loop.transcript.since(0) == "first\nfirst\nsecond\nsecond\n"
    assert loop.transcript.since(start).startswith("second\n")
    loop.transcript.write(tmp_path / "logs" / "console.log", since=start)
    assert (tmp_path / "logs" / "console.log").read_text().startswith("second\n")


def test_socat_pty_pair_and_port_gone(tmp_path: Path) -> None:
    socat = require("socat", "socat")
    ours, theirs = tmp_path / "ttyA", tmp_path / "ttyB"
    process = subprocess.Popen(
        [socat, f"pty,raw,echo=0,link={ours}", f"pty,raw,echo=0,link={theirs}"],
        stderr=subprocess.DEVNULL,
    )
    try:
        while not (ours.exists() and theirs.exists()):
            assert process.poll() is None, "socat exited"
            time.sleep(0.005)
        with serial.serial_for_url(str(theirs), timeout=TIMEOUT) as peer:
            console = SerialConsole(str(ours), timeout=TIMEOUT).open()
            console.sendline("hello")
            assert peer.read_until(b"\n") == b"hello\n"
            peer.write(b"answer 42\n")
            assert console.expect(r"answer (\d+)").group(1) == "42"
            process.terminate()
            process.wait()
            with pytest.raises(EnvironmentFailure, match=str(ours)):
                console.expect("never")
            console.close()
    finally:
        process.kill()
        process.wait()


@pytest.mark.parametrize(
    ("worker_id", "expected"), [("master", "a"), ("", "a"), ("gw0", "a"), ("gw2", "c")]
)
def test_pick_for_worker(worker_id: str, expected: str) -> None:
    assert pick_for_worker(["a", "b", "c"], worker_id) == expected


def test_pool_shorter_than_the_workers_is_an_error() -> None:
    with pytest.raises(PoolError, match="2 entries for 3 pytest-xdist workers"):
        pick_for_worker(["a", "b"], "gw2")
    with pytest.raises(PoolError, match="2 entries for 4 pytest-xdist workers"):
        pick_for_worker(["a", "b"], "gw0", worker_count=4)
    with pytest.raises(PoolError, match="0 entries"):
        pick_for_worker([], "master")
    with pytest.raises(PoolError, match="worker id 'node7'"):
        worker_index("node7")


def test_log_file_names_are_safe() -> None:
    assert log_file_name("tests/test_a.py::test_b[x-1]") == "tests_test_a.py_test_b_x-1.log"
    long_name = log_file_name("t.py::test_" + "x" * 500)
    assert len(long_name) <= 204
    assert long_name != log_file_name("t.py::test_" + "x" * 499)


def _serial_project(pytester: pytest.Pytester, pool: list[str], **ini: str) -> None:
    lines = [f"{key} = {value}" for key, value in ini.items()]
    if pool:
        lines.append("fwloop_serial_pool =\n    " + "\n    ".join(pool))
    pytester.makeini("[pytest]\n" + "\n".join(lines) + "\n")


def test_fwloop_serial_fixture_logs_and_reports(
    pytester: pytest.Pytester, board: Board, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _serial_project(
        pytester,
        [],
        fwloop_serial_url=board.url,
        fwloop_console_ready="> ",
        fwloop_console_timeout="0.5",
    )
    pytester.makepyfile(
        """
        def test_ping(fwloop_serial):
            fwloop_serial.sendline("ping")
            fwloop_serial.expect("pong")

        def test_silent_firmware(fwloop_serial):
            fwloop_serial.sendline("echo marker-for-the-report")
            fwloop_serial.expect("an answer that never comes")

        def test_without_fixtures():
            pass
        """
    )
    logs = tmp_path / "console-logs"
    monkeypatch.setenv("FWLOOP_CONSOLE_LOG_DIR", str(logs))
    result = pytester.runpytest(*INNER_ARGS)
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(
        ["*ConsoleTimeout: fwloop: console*", "*- fwloop console -*", "*marker-for-the-report*"]
    )
    written = sorted(path.name for path in logs.iterdir())
    assert written == [
        "test_fwloop_serial_fixture_logs_and_reports.py_test_ping.log",
        "test_fwloop_serial_fixture_logs_and_reports.py_test_silent_firmware.log",
    ]
    ping_log = (logs / written[0]).read_text()
    assert ping_log.startswith(f"=== {board.url} ===\n")
    assert "ping\n" in ping_log
    assert "pong\n" in ping_log
    assert "marker" not in ping_log


def test_fwloop_serial_without_url_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_it(fwloop_serial): pass")
    result = pytester.runpytest(*INNER_ARGS)
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        ["*UsageError: fwloop: the fwloop_serial fixture needs ini fwloop_serial_url*e.g.*"]
    )


def test_pool_entry_per_worker(
    pytester: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    boards = [Board(tmp_path / f"ttyPOOL{index}") for index in range(2)]
    try:
        _serial_project(pytester, [board.url for board in boards])
        pytester.makepyfile(
            f"""
            import os

            def test_own_board(fwloop_serial):
                worker = os.environ.get("PYTEST_XDIST_WORKER", "master")
                expected = {{"gw0": {boards[0].url!r}, "gw1": {boards[1].url!r}}}[worker]
                assert fwloop_serial.url == expected
                fwloop_serial.sendline("ping")
                fwloop_serial.expect("pong")
            """
        )
        for worker in ("gw0", "gw1"):
            monkeypatch.setenv("PYTEST_XDIST_WORKER", worker)
            monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "2")
            pytester.runpytest(*INNER_ARGS).assert_outcomes(passed=1)
        monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "3")
        result = pytester.runpytest(*INNER_ARGS)
        result.assert_outcomes(errors=1)
        result.stdout.fnmatch_lines(
            ["*UsageError: fwloop: ini fwloop_serial_pool: 2 entries for 3 pytest-xdist workers*"]
        )
    finally:
        for board in boards:
            board.stop()


def test_pool_under_real_xdist(pytester: pytest.Pytester, tmp_path: Path) -> None:
    boards = [Board(tmp_path / f"ttyX{index}") for index in range(2)]
    try:
        _serial_project(pytester, [board.url for board in boards])
        pytester.makepyfile(
            f"""
            import os
            import pytest

            @pytest.mark.parametrize("n", range(4))
            def test_own_board(fwloop_serial, n):
                index = int(os.environ["PYTEST_XDIST_WORKER"].removeprefix("gw"))
                assert fwloop_serial.url == {[board.url for board in boards]!r}[index]
                fwloop_serial.sendline("echo " + str(n))
                fwloop_serial.expect(str(n))
            """
        )
        result = pytester.runpytest_subprocess(*INNER_ARGS, "-n", "2")
        result.assert_outcomes(passed=4)
    finally:
        for board in boards:
            board.stop()
