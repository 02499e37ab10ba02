"""Which C each test ran in a QEMU guest (DESIGN.md §18; docs/providers.md, the C spectrum):
recorded in a loop child beside the Python spectrum, and only when it is, with
`fwloop_c_coverage = qemu`.

The child names a folder in `$FWLOOP_QEMU_EXEC_LOG`; every QEMU the `fwloop_qemu` fixture starts
then logs the blocks it translates and executes there (`qemu-N.log`, the firmware's path beside it
in `qemu-N.elf`; `core/execution/qemu_exec.py` reads them). At each test's end the logs' new lines
are that test's; at the session's end the instructions are mapped to source lines through each
firmware's DWARF line table (pyelftools, the `elf` extra), and the spectrum is written as
`spectrum-K.qemu.json`. A QEMU that another plugin starts is not logged.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Generator
from pathlib import Path

import pytest

from pytest_fwloop.child.spectra.python_lines import worker_path
from pytest_fwloop.core.execution.gcov_counts import Executed, encode
from pytest_fwloop.core.execution.qemu_exec import QEMU_EXEC_LOG_ENV, ExecLog, LineTable
from pytest_fwloop.core.request.build_files import inside


def qemu_spectrum_path(spectrum: Path) -> Path:
    return spectrum.with_name(f"{spectrum.stem}.qemu{spectrum.suffix}")


class QemuRecorder:
    """Marks each test's end in the logs of the QEMUs it ran, and maps them at the end."""

    def __init__(self, folder: Path, spectrum: Path, config: pytest.Config) -> None:
        worker = getattr(config, "workerinput", {}).get("workerid")
        self.folder = folder / worker if worker else folder
        self.path = qemu_spectrum_path(worker_path(spectrum, config))
        self.root = config.rootpath
        #: Per log file: its reader and how far it was read.
        self.logs: dict[Path, tuple[ExecLog, int]] = {}
        #: Per test: the instructions it executed, by log.
        self.tests: list[tuple[str, dict[Path, set[int]]]] = []
        self._saved: str | None = None

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionstart(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)
        self.folder.mkdir(parents=True)
        self._saved = os.environ.get(QEMU_EXEC_LOG_ENV)
        os.environ[QEMU_EXEC_LOG_ENV] = str(self.folder)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item) -> Generator[None, object, object]:
        try:
            return (yield)
        finally:
            self.tests.append((item.nodeid, self._read()))

    def _read(self) -> dict[Path, set[int]]:
        executed: dict[Path, set[int]] = {}
        for log in sorted(self.folder.glob("qemu-*.log")):
            reader, offset = self.logs.get(log, (ExecLog(), 0))
            try:
                with log.open("rb") as stream:
                    stream.seek(offset)
                    data = stream.read()
            except OSError:
                continue
            self.logs[log] = (reader, offset + len(data))
            started = reader.feed(data.decode("utf-8", "replace"))
            if started:
                executed[log] = reader.instructions(started)
        return executed

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self) -> None:
        if self._saved is None:
            os.environ.pop(QEMU_EXEC_LOG_ENV, None)
        else:
            os.environ[QEMU_EXEC_LOG_ENV] = self._saved
        if not self.logs or not self.tests:
            shutil.rmtree(self.folder, ignore_errors=True)
            return
        tables: dict[Path, LineTable | None] = {}
        measured = Executed()
        groups: list[tuple[list[str], Executed]] = []
        for nodeid, executed in self.tests:
            lines = Executed()
            for log, addresses in executed.items():
                if log not in tables:
                    tables[log] = self._table(log.with_suffix(".elf"))
                table = tables[log]
                if table is None:
                    continue
                for path, numbers in table.lines(addresses).items():
                    lines.ran.setdefault(path, set()).update(numbers)
            groups.append(([nodeid], lines))
        for table in tables.values():
            if table is not None:
                measured.measured |= table.files()
        groups.append(([], measured))
        payload = encode(groups, str(self.root), "qemu")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        partial = self.path.with_suffix(".partial")
        partial.write_text(json.dumps(payload, separators=(",", ":")), encoding="utf-8")
        os.replace(partial, self.path)
        shutil.rmtree(self.folder, ignore_errors=True)

    def _table(self, named: Path) -> LineTable | None:
        """The line table of the firmware `named` names, or None (no pyelftools, no DWARF)."""
        try:
            from elftools.elf.elffile import ELFFile
        except ImportError:
            return None
        try:
            firmware = named.read_text(encoding="utf-8").strip()
            with open(firmware, "rb") as stream:
                return LineTable.of(_rows(ELFFile(stream), str(self.root)))
        except (OSError, ValueError, KeyError, AttributeError):
            return None


def _rows(elf: object, root: str) -> list[tuple[int, tuple[str, int] | None]]:
    """Each line-program row's address and its place under `root` (None outside it: a library
    or the end of a sequence)."""
    dwarf = elf.get_dwarf_info()  # type: ignore[attr-defined]
    rows: list[tuple[int, tuple[str, int] | None]] = []
    for unit in dwarf.iter_CUs():
        program = dwarf.line_program_for_CU(unit)
        if program is None:
            continue
        top = unit.get_top_DIE().attributes.get("DW_AT_comp_dir")
        base = top.value.decode("utf-8", "replace") if top is not None else root
        version = program.header["version"]
        files = program.header["file_entry"]
        folders = program.header["include_directory"]
        for entry in program.get_entries():
            state = entry.state
            if state is None:
                continue
            if state.end_sequence:
                rows.append((state.address, None))
                continue
            index = state.file if version >= 5 else state.file - 1
            if not 0 <= index < len(files):
                continue
            file = files[index]
            name = file.name.decode("utf-8", "replace")
            folder_index = file.dir_index if version >= 5 else file.dir_index - 1
            folder = (
                folders[folder_index].decode("utf-8", "replace")
                if 0 <= folder_index < len(folders) and (version >= 5 or file.dir_index > 0)
                else base
            )
            path = inside(name, inside_base(folder, base), root)
            rows.append((state.address, (path, state.line) if path is not None else None))
    return rows


def inside_base(folder: str, base: str) -> str:
    """A line program's folder, absolute."""
    return folder if folder.startswith("/") else os.path.join(base, folder)
