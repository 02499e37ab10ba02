"""A real labgrid farm on 127.0.0.1 for the farm tests: coordinator, exporters, places, consoles.

    with Farm(labgrid_bin(), tmp_path, boards=2, tag="uartcon") as farm:
        me = Farm.identity("fwloop-A", "h1")
        token = farm.reserve("board=uartcon", env=me)        # reserve --wait --shell
        farm.client("-p", "+", "lock", env={**me, "LG_TOKEN": token}, check=True)
        assert farm.who()[0].user == "fwloop-A"

Nothing is mocked. Each board K (1-based) is a console server (by default this file's own prompt
server, `python farmkit.py console benchK`, a separate process) exported by `labgrid-exporter -n
benchK` as a `NetworkSerialPort`, and a place `board-K` matching `benchK/*/*` with the tag
`board=TAG`. The coordinator runs in its own working directory (it keeps `places.yaml` there),
listening on 127.0.0.1 only, on a port the kernel picked. Every process is the leader of its own
process group, and `stop()` ends the groups, so nothing is left running. No threads are started:
a test process with extra threads could not fork its pytest children.

Readiness is read from each process's log file (stdout and stderr together): `Coordinator ready`,
`connected to coordinator`, then the exporter's resources as `labgrid-client resources` lists
them. A process that exits or stays silent fails the start with a `FarmError` quoting its log.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType, TracebackType

COORDINATOR_READY = "Coordinator ready"
EXPORTER_READY = "connected to coordinator"
#: What a console server prints once it listens (examples/uart-console/via-serial too).
CONSOLE_READY = re.compile(r"socket://127\.0\.0\.1:(\d+)")
LISTENING = re.compile(r"listening on 127\.0\.0\.1:(\d+)")
#: The prompt of the built-in console server.
PROMPT = "> "

#: `##` comments: the exporter's YAML is a Jinja2 template, where `#` starts a statement.
EXPORTER_YAML = """\
## farmkit board {index}: a console server on 127.0.0.1 (a ser2net stand-in)
{group}:
  location: farmkit
  NetworkSerialPort:
    host: 127.0.0.1
    port: {port}
    protocol: raw
    speed: 115200
"""

#: A labgrid environment for `pytest --lg-env`: the place in $LG_PLACE (`+`: the one $LG_TOKEN
#: reserved), its console through a SerialDriver.
REMOTE_YAML = """\
targets:
  main:
    resources:
      RemotePlace:
        name: !template '$LG_PLACE'
    drivers:
      SerialDriver: {{}}
options:
  coordinator_address: '{address}'
"""


class FarmError(RuntimeError):
    """The farm could not be started or a checked call failed; the message quotes the output."""


LABGRID_VENV = Path(__file__).resolve().parents[1] / ".tools" / "labgrid-venv"


def labgrid_bin() -> Path | None:
    """The folder holding `labgrid-coordinator`: $FWLOOP_LABGRID_BIN, else the venv `./dev.sh
    test` makes (`.tools/labgrid-venv`: labgrid and this checkout, apart from the project's own
    venv, so labgrid's pytest plugin and serial fork stay out of every other test), else beside
    this interpreter, else on PATH; None when labgrid is not installed."""
    candidates = [
        os.environ.get("FWLOOP_LABGRID_BIN", ""),
        str(LABGRID_VENV / "bin"),
        str(Path(sys.executable).parent),
    ]
    for folder in candidates:
        if folder and (Path(folder) / "labgrid-coordinator").is_file():
            return Path(folder)
    found = shutil.which("labgrid-coordinator")
    return Path(found).parent if found else None


def clean_environ(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """This process's environment without any LG_* variable (so an outer LG_PLACE, LG_TOKEN or
    LG_COORDINATOR cannot leak into the farm), unbuffered, with `extra` on top."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LG_")}
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra or {})
    return env


@dataclass(frozen=True)
class Call:
    """One finished labgrid-client call; `seconds` is its wall time."""

    args: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str
    seconds: float

    @property
    def output(self) -> str:
        return self.stdout + self.stderr

    def describe(self) -> str:
        return (
            f"$ {' '.join(self.args)}\nexit {self.returncode} after {self.seconds:.2f} s\n"
            f"--- stdout\n{self.stdout}--- stderr\n{self.stderr}"
        )


@dataclass(frozen=True)
class Lock:
    """A row of `labgrid-client who`: place `place` is acquired by `host/user`."""

    user: str
    host: str
    place: str


@dataclass(frozen=True)
class Reservation:
    """A block of `labgrid-client reservations`."""

    token: str
    owner: str
    state: str
    places: tuple[str, ...]


def parse_token(text: str) -> str | None:
    """The token of `reserve --shell`'s `export LG_TOKEN=TOKEN` line."""
    match = re.search(r"^export LG_TOKEN=(\S+)$", text, re.MULTILINE)
    return match.group(1) if match else None


def parse_who(text: str) -> list[Lock]:
    """The rows of `who` (its header is `User Host Place Changed`)."""
    locks = []
    for line in text.splitlines()[1:]:
        fields = line.split()
        if len(fields) >= 3:
            locks.append(Lock(user=fields[0], host=fields[1], place=fields[2]))
    return locks


def parse_reservations(text: str) -> list[Reservation]:
    """The blocks of `reservations`: `Reservation 'TOKEN':`, then indented `owner:`, `state:`,
    and under `allocations:` one `main: PLACE[, PLACE]` line."""
    found: list[Reservation] = []
    current: dict[str, str] = {}

    def flush() -> None:
        if current:
            places = tuple(p.strip() for p in current.get("main", "").split(",") if p.strip())
            found.append(
                Reservation(current["token"], current.get("owner", ""), current["state"], places)
            )

    for line in text.splitlines():
        start = re.fullmatch(r"Reservation '([^']+)':", line.strip())
        if start:
            flush()
            current = {"token": start.group(1), "state": ""}
            continue
        key, sep, value = line.strip().partition(": ")
        if current and sep and key in ("owner", "state", "main"):
            current[key] = value.strip()
    flush()
    return found


class Proc:
    """A process of the farm, leader of its own group, its output in a log file."""

    def __init__(self, name: str, argv: Sequence[str], log: Path, cwd: Path) -> None:
        self.name = name
        self.argv = list(argv)
        self.log = log
        with log.open("ab") as out:
            try:
                self.popen = subprocess.Popen(
                    self.argv,
                    cwd=cwd,
                    env=clean_environ(),
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            except OSError as error:
                raise FarmError(f"{name}: cannot start {self.argv[0]}: {error}") from error
        self.pid = self.popen.pid

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def alive(self) -> bool:
        return self.popen.poll() is None

    def failure(self, what: str) -> FarmError:
        return FarmError(
            f"{self.name}: {what}\n$ {' '.join(self.argv)}\n--- {self.log}\n{self.output()}"
        )

    def wait_for(self, pattern: str | re.Pattern[str], timeout: float) -> re.Match[str]:
        """The first match of `pattern` in the log; FarmError if the process exits first or
        the timeout passes."""
        regex = re.compile(re.escape(pattern)) if isinstance(pattern, str) else pattern
        what = pattern if isinstance(pattern, str) else pattern.pattern
        deadline = time.monotonic() + timeout
        while True:
            match = regex.search(self.output())
            if match:
                return match
            if not self.alive():
                raise self.failure(f"exited ({self.popen.returncode}) before {what!r}")
            if time.monotonic() > deadline:
                raise self.failure(f"no {what!r} within {timeout:.0f} s")
            time.sleep(0.05)

    def wait_exit(self, timeout: float) -> int | None:
        """The exit status, or None if it is still running after `timeout` seconds."""
        try:
            return self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def kill(self, grace: float = 5.0) -> None:
        """SIGTERM to the group, SIGKILL after `grace` seconds, then the rest of the group."""
        if self.alive():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.pid, signal.SIGTERM)
            if self.wait_exit(grace) is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.pid, signal.SIGKILL)
                self.popen.wait()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.pid, signal.SIGKILL)  # members that outlived their leader


def builtin_console(index: int) -> list[str]:
    """The argv of this file's console server for board `index`."""
    return [sys.executable, str(Path(__file__).resolve()), "console", f"bench{index}"]


class Farm:
    """Coordinator, `boards` exporters and places on 127.0.0.1; a context manager.

    `tag` is every place's `board=` tag, or one per board. `console(K)` is the argv of board K's
    console server, which must print `socket://127.0.0.1:PORT` once it listens.
    """

    def __init__(
        self,
        bin_dir: Path,
        scratch: Path,
        boards: int = 2,
        tag: str | Sequence[str] = "uartcon",
        *,
        console: Callable[[int], Sequence[str]] = builtin_console,
        timeout: float = 30.0,
    ) -> None:
        self.bin_dir = Path(bin_dir)
        self.scratch = Path(scratch)
        self.boards = boards
        self.tags = [tag] * boards if isinstance(tag, str) else list(tag)
        if len(self.tags) != boards:
            raise ValueError(f"{boards} boards but {len(self.tags)} tags")
        self.console = console
        self.timeout = timeout
        self.port = 0
        self.coordinator: Proc | None = None
        self.exporters: dict[int, Proc] = {}
        self.consoles: dict[int, Proc] = {}
        self.console_ports: dict[int, int] = {}
        self._starts = 0

    # names -------------------------------------------------------------------------------

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @staticmethod
    def exporter_name(index: int) -> str:
        return f"bench{index}"

    @staticmethod
    def place(index: int) -> str:
        return f"board-{index}"

    @staticmethod
    def identity(user: str, host: str) -> dict[str, str]:
        """The variables that make labgrid-client lock as `host/user`."""
        return {"LG_USERNAME": user, "LG_HOSTNAME": host}

    def environ(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        """A clean environment pointing labgrid (client, pytest plugin) at this farm."""
        return clean_environ({"LG_COORDINATOR": self.address, **(extra or {})})

    def remote_yaml(self, path: Path) -> Path:
        """Write the `--lg-env` file for a place in $LG_PLACE (with its coordinator address)."""
        path.write_text(REMOTE_YAML.format(address=self.address))
        return path

    # lifecycle ---------------------------------------------------------------------------

    def __enter__(self) -> Farm:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def start(self) -> None:
        """Consoles, coordinator, exporters, then the places with their matches and tags."""
        for sub in ("coordinator", "exporters", "logs"):
            (self.scratch / sub).mkdir(parents=True, exist_ok=True)
        for k in range(1, self.boards + 1):
            self._start_console(k)
        self.start_coordinator()
        for k in range(1, self.boards + 1):
            self.start_exporter(k)
        for k in range(1, self.boards + 1):
            place = self.place(k)
            self.client("-p", place, "create", check=True)
            self.client("-p", place, "add-match", f"{self.exporter_name(k)}/*/*", check=True)
            self.client("-p", place, "set-tags", f"board={self.tags[k - 1]}", check=True)

    def _log(self, name: str) -> Path:
        self._starts += 1
        return self.scratch / "logs" / f"{self._starts:02d}-{name}.log"

    def _start_console(self, index: int) -> None:
        proc = Proc(
            f"console {index}", self.console(index), self._log(f"console{index}"), self.scratch
        )
        self.consoles[index] = proc
        self.console_ports[index] = int(proc.wait_for(CONSOLE_READY, self.timeout).group(1))

    def start_coordinator(self) -> None:
        """Start the coordinator (again: on the same port, in the same working directory,
        so it reloads `places.yaml`)."""
        if self.coordinator is not None and self.coordinator.alive():
            raise FarmError("the coordinator is still running")
        argv = [str(self.bin_dir / "labgrid-coordinator"), "-l", f"127.0.0.1:{self.port}"]
        proc = Proc("coordinator", argv, self._log("coordinator"), self.scratch / "coordinator")
        self.coordinator = proc
        proc.wait_for(COORDINATOR_READY, self.timeout)
        self.port = int(proc.wait_for(LISTENING, self.timeout).group(1))

    def start_exporter(self, index: int) -> None:
        """Start (or restart) exporter `benchK`; returns once the coordinator lists its
        resource."""
        old = self.exporters.get(index)
        if old is not None and old.alive():
            raise FarmError(f"exporter {index} is still running")
        name = self.exporter_name(index)
        config = self.scratch / "exporters" / f"exporter-{index}.yaml"
        config.write_text(
            EXPORTER_YAML.format(
                index=index, group=self.place(index), port=self.console_ports[index]
            )
        )
        argv = [
            str(self.bin_dir / "labgrid-exporter"), "-c", self.address, "-n", name,
            "--hostname", "127.0.0.1", str(config),
        ]  # fmt: skip
        proc = Proc(f"exporter {index}", argv, self._log(f"exporter{index}"), self.scratch)
        self.exporters[index] = proc
        proc.wait_for(EXPORTER_READY, self.timeout)
        deadline = time.monotonic() + self.timeout
        while f"{name}/" not in self.client("resources").stdout:
            if not proc.alive() or time.monotonic() > deadline:
                raise proc.failure("its resource never showed in `labgrid-client resources`")
            time.sleep(0.1)

    def kill_exporter(self, index: int) -> None:
        """SIGKILL exporter `benchK`, as a crash or a pulled network cable would."""
        proc = self.exporters[index]
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.popen.wait()

    def stop_coordinator(self, *, hard: bool = False) -> None:
        """SIGTERM (it then takes ~5 s: gRPC's grace period for open streams) or, `hard`,
        SIGKILL. Exporters exit (status 100) when it goes away."""
        if self.coordinator is None:
            return
        if hard:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.coordinator.pid, signal.SIGKILL)
        self.coordinator.kill(grace=15.0)

    def wait_saved(self, timeout: float = 20.0) -> None:
        """Wait until the coordinator's `places.yaml` holds every place with its tag: it saves
        every 15 s, and a restart forgets what it had not saved."""
        saved = self.scratch / "coordinator" / "places.yaml"
        deadline = time.monotonic() + timeout
        while True:
            text = saved.read_text() if saved.exists() else ""
            places = re.findall(r"^(board-\d+):", text, re.MULTILINE)
            tags = [t.strip("'\"") for t in re.findall(r"^    board: (.*)$", text, re.MULTILINE)]
            if len(places) == self.boards and sorted(tags) == sorted(self.tags):
                return
            if time.monotonic() > deadline:
                raise FarmError(f"{saved} did not list the places within {timeout:.0f} s:\n{text}")
            time.sleep(0.2)

    def restart_coordinator(
        self, *, hard: bool = False, exporters: bool = True, timeout: float = 30.0
    ) -> None:
        """Stop the coordinator and start it again on the same port, in the same directory:
        places, matches and tags come back from `places.yaml` (waited for first), locks and
        reservations do not. Exporters exit when it goes away; with `exporters`, wait for that
        and start them again."""
        self.wait_saved()
        self.stop_coordinator(hard=hard)
        self.start_coordinator()
        if exporters:
            for k, proc in sorted(self.exporters.items()):
                if proc.wait_exit(timeout) is None:
                    raise proc.failure(f"still running {timeout:.0f} s after the coordinator")
                self.start_exporter(k)

    def stop(self) -> None:
        """End every process of the farm (exporters first), waiting for each."""
        for proc in self.exporters.values():
            proc.kill()
        self.stop_coordinator()
        for proc in self.consoles.values():
            proc.kill()

    def running(self) -> list[str]:
        """The farm's processes still alive, as `NAME PID`."""
        procs = [*self.exporters.values(), self.coordinator, *self.consoles.values()]
        return [f"{p.name} {p.pid}" for p in procs if p is not None and p.alive()]

    # client ------------------------------------------------------------------------------

    def client(
        self,
        *args: str,
        env: Mapping[str, str] | None = None,
        timeout: float = 60.0,
        check: bool = False,
    ) -> Call:
        """Run `labgrid-client -x ADDRESS ARGS…` with a clean environment plus `env`. On the
        timeout its process group gets SIGKILL and the call returns with the status -9."""
        argv = (str(self.bin_dir / "labgrid-client"), "-x", self.address, *args)
        started = time.monotonic()
        proc = subprocess.Popen(
            argv,
            env=clean_environ(env),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
        call = Call(argv, proc.returncode, out, err, time.monotonic() - started)
        if check and call.returncode != 0:
            raise FarmError(call.describe())
        return call

    def reserve(
        self, *filters: str, env: Mapping[str, str] | None = None, timeout: float = 60.0
    ) -> str:
        """`reserve --wait --shell FILTERS`: the token, once a place is allocated to it.
        FarmError if none is within `timeout` (the waiting reservation is then cancelled)."""
        call = self.client("reserve", "--wait", "--shell", *filters, env=env, timeout=timeout)
        token = parse_token(call.stdout)
        if call.returncode != 0 or token is None:
            if token is not None:
                self.client("cancel-reservation", token, env=env)
            raise FarmError(call.describe())
        return token

    def who(self) -> list[Lock]:
        """The places acquired now, by whom."""
        return parse_who(self.client("who", check=True).stdout)

    def reservations(self) -> list[Reservation]:
        """The reservations the coordinator holds (waiting, allocated, acquired, expired)."""
        return parse_reservations(self.client("reservations", check=True).stdout)

    def idle(self) -> bool:
        """No lock and no reservation is left."""
        return not self.who() and not self.reservations()


# the built-in console server ---------------------------------------------------------------


def _answer(name: str, line: str) -> str:
    if line == "ping":
        return "pong\n"
    if line == "whoami":
        return f"{name}\n"
    if line.startswith("echo "):
        return line[5:] + "\n"
    return f"unknown command: {line}\n"


def serve_console(name: str) -> None:
    """Listen on a free port of 127.0.0.1 and print `socket://127.0.0.1:PORT`. Every connection
    gets `NAME ready`, then a prompt after each answer: `ping` -> `pong`, `whoami` -> NAME,
    `echo TEXT` -> TEXT. Runs until SIGTERM."""

    def _stop(signum: int, frame: FrameType | None) -> None:
        sys.exit(0)

    signal.signal(signal.SIGTERM, _stop)
    selector = selectors.DefaultSelector()
    pending: dict[socket.socket, bytes] = {}
    with socket.create_server(("127.0.0.1", 0)) as listener:
        selector.register(listener, selectors.EVENT_READ)
        print(f"socket://127.0.0.1:{listener.getsockname()[1]}", flush=True)
        while True:
            for key, _ in selector.select():
                sock = key.fileobj
                assert isinstance(sock, socket.socket)
                if sock is listener:
                    conn, _ = listener.accept()
                    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                    conn.sendall(f"{name} ready\n{PROMPT}".encode())
                    pending[conn] = b""
                    selector.register(conn, selectors.EVENT_READ)
                    continue
                try:
                    data = sock.recv(4096)
                except OSError:
                    data = b""
                if not data:
                    selector.unregister(sock)
                    pending.pop(sock, None)
                    sock.close()
                    continue
                buffer = pending[sock] + data.replace(b"\r", b"")
                *lines, pending[sock] = buffer.split(b"\n")
                for raw in lines:
                    line = raw.decode(errors="replace").strip()
                    with contextlib.suppress(OSError):
                        sock.sendall((_answer(name, line) + PROMPT).encode())


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="farmkit's console server")
    sub = parser.add_subparsers(dest="command", required=True)
    console = sub.add_parser("console", help="serve a prompt console on 127.0.0.1")
    console.add_argument("name")
    args = parser.parse_args(argv)
    serve_console(args.name)


if __name__ == "__main__":
    main()
