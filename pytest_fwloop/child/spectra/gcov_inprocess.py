"""The counts of C compiled into the tests' own process (a Python extension built with
`--coverage`, as littlefs-python wraps lfs.c), written at each test's end (DESIGN.md §18).

libgcov writes a shared object's counts when the process exits, and exports nothing to ask for
them sooner: `__gcov_dump` and `__gcov_reset` are linked into an object only when its own code
calls them, and hidden even then. What every gcov-built object does hold is the routine its
exit handler calls, `__gcov_dump_one(&__gcov_root)`, in its symbol table (a local symbol:
present unless the object is stripped). It is called here through ctypes, at the address the
object was loaded at, after clearing the root's "dumped" flag that makes it run once. Nothing
is reset, so each dump holds the counts since the object was loaded; `child/spectra/gcov.py` takes a
test's lines as those whose counts grew since the dump before. After the last dump the flag is
left set, so the exit writes nothing more.

The layout relied on, `struct gcov_root { struct gcov_info *list; unsigned dumped : 1; ... }`,
is libgcov's since GCC 5; an object that another compiler built, or a GCC before 5 (its
`.comment` says which), is left alone. Needs pyelftools (the `elf` extra).
"""

from __future__ import annotations

import ctypes
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

#: GCC's mark in an object's `.comment` section, and the first release with `gcov_root`.
_GCC = re.compile(rb"GCC: \([^)]*\) (\d+)\.")
_FIRST_GCC = 5


@dataclass
class InProcessCounts:
    """The gcov-built shared objects under `root` this process has loaded, dumped on request."""

    root: Path
    #: Each object seen (its path) → its dump, or None when it cannot be dumped.
    _dumps: dict[str, Callable[[], None] | None] = field(default_factory=dict)

    def unseen(self) -> bool:
        """Whether an object under the root was loaded since the last look."""
        return any(path not in self._dumps for path, _ in _loaded(self.root))

    def dump(self) -> int:
        """Write each loaded object's counts under the `GCOV_PREFIX` of now; how many."""
        done = 0
        for path, base in _loaded(self.root):
            if path not in self._dumps:
                self._dumps[path] = _dumper(path, base)
            dump = self._dumps[path]
            if dump is not None:
                dump()
                done += 1
        return done


def _loaded(root: Path) -> list[tuple[str, int]]:
    """(path, load address) of the shared objects under `root` mapped into this process."""
    prefix = f"{root}/"
    found: dict[str, int] = {}
    try:
        maps = Path("/proc/self/maps").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    for line in maps.splitlines():
        fields = line.split(maxsplit=5)
        if len(fields) < 6 or int(fields[2], 16) != 0:
            continue
        path = fields[5]
        if path.startswith(prefix) and ".so" in path.rsplit("/", 1)[-1] and path not in found:
            found[path] = int(fields[0].split("-", 1)[0], 16)
    return list(found.items())


def _dumper(path: str, base: int) -> Callable[[], None] | None:
    """The dump of one loaded object, or None: not gcov-built, stripped, not GCC 5 or later,
    or pyelftools missing."""
    try:
        from elftools.elf.elffile import ELFFile
        from elftools.elf.sections import SymbolTableSection
    except ImportError:
        return None
    try:
        with open(path, "rb") as stream:
            elf = ELFFile(stream)
            comment = elf.get_section_by_name(".comment")
            version = _GCC.search(comment.data()) if comment is not None else None
            if version is None or int(version.group(1)) < _FIRST_GCC:
                return None
            loads = [s for s in elf.iter_segments() if s["p_type"] == "PT_LOAD"]
            if elf["e_type"] != "ET_DYN" or not loads or loads[0]["p_vaddr"] != 0:
                return None
            table = elf.get_section_by_name(".symtab")
            if not isinstance(table, SymbolTableSection):
                return None
            dump_one = _address(table, "__gcov_dump_one", "STT_FUNC")
            gcov_root = _address(table, "__gcov_root", "STT_OBJECT")
    except (OSError, ValueError, KeyError):
        return None
    if dump_one is None or gcov_root is None:
        return None
    call = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(base + dump_one)
    root_at = base + gcov_root
    # `list` is a pointer; the bit-fields `dumped` and `run_counted` share the word after it.
    flags = ctypes.c_uint32.from_address(root_at + ctypes.sizeof(ctypes.c_void_p))

    def dump() -> None:
        flags.value = 0
        call(root_at)

    return dump


def _address(table: object, name: str, kind: str) -> int | None:
    """The value of symbol `name` of type `kind` in an ELF symbol table."""
    for symbol in table.get_symbol_by_name(name) or ():  # type: ignore[attr-defined]
        if symbol["st_info"]["type"] == kind and symbol["st_value"]:
            return int(symbol["st_value"])
    return None
