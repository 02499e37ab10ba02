"""What of the tree the loop may write and what it snapshots, from the options.

The patch policy protects the defaults (tests, their configuration, CI, version control), the
configuration file in use, the files the ini's `python_files` names in the collection roots and
the files the loop's own options name (the controller adds the modules the baseline collected
tests from: `loop/state.suite_policy`); the snapshots leave out
build output (`fwloop_snapshot_exclude`, a build command's output directory) and the loop's own
records where they lie inside the tree.
"""

from __future__ import annotations

import itertools
import os
import re
import shlex
from pathlib import Path

import pytest

from pytest_fwloop.config.loop_options import LoopOptions
from pytest_fwloop.core.verdict.convergence import PRESETS
from pytest_fwloop.workspace import DEFAULT_PROTECTED, PatchPolicy


def patch_policy(config: pytest.Config, options: LoopOptions) -> PatchPolicy:
    """What a patch may touch: the defaults, the configuration file in use, the suite's test
    files by its `python_files`, the files the loop's options name, and fwloop_protect."""
    return PatchPolicy(
        protected=(
            DEFAULT_PROTECTED
            + _inifile(config)
            + _test_file_patterns(config)
            + _named_by_options(options, config.rootpath)
            + options.protect
        ),
        allow_paths=options.allow_paths,
        max_files=options.max_patch_files,
        max_changed_lines=options.max_patch_lines,
    )


def _inifile(config: pytest.Config) -> tuple[str, ...]:
    """The configuration file in use is test configuration too, whatever its name (`-c x.ini`)."""
    inipath = config.inipath
    if inipath is None or not inipath.is_relative_to(config.rootpath):
        return ()
    return (inipath.relative_to(config.rootpath).as_posix(),)


def _test_file_patterns(config: pytest.Config) -> tuple[str, ...]:
    """Every file the suite would take tests from, whatever its name: the ini's `python_files`
    (ESP-IDF's `pytest_*.py`, beside the firmware) under each collection root (the arguments,
    else `testpaths`, else the invocation directory), and a file named as an argument. Roots
    outside the rootdir are left out: no patch reaches them."""
    base = (
        config.invocation_params.dir
        if config.args_source is pytest.Config.ArgsSource.ARGS
        else config.rootpath
    )
    names = [str(name) for name in config.getini("python_files")]
    found: list[str] = []
    for arg in config.args:
        path = Path(os.path.normpath(base / arg.split("::", 1)[0]))
        if path == config.rootpath:
            found += [f"**/{name}" for name in names]
        elif path.is_relative_to(config.rootpath):
            relative = path.relative_to(config.rootpath).as_posix()
            found += [f"{relative}/**/{name}" for name in names] if path.is_dir() else [relative]
    return tuple(dict.fromkeys(found))


def knowledge_path(rootdir: Path, value: str) -> Path | None:
    """`fwloop_knowledge` as a path (relative to the rootdir, `~` expanded), None for `off`."""
    if value.strip().lower() == "off":
        return None
    return rootdir / Path(value).expanduser()


def _named_by_options(options: LoopOptions, rootdir: Path) -> tuple[str, ...]:
    """The files and folders inside the tree that decide how a run is judged or keep what it
    did: the run records (`fwloop_run_dir`), the known-failures, criteria and evidence files, the
    knowledge base. A patch that rewrote one (a failing test added to the known failures, a lower
    target) would pass its own gate in the next run."""
    runs, knowledge = _loop_writes(options, rootdir)
    files = [options.known_failures, options.evidence]
    if options.criteria not in PRESETS:
        files.append(options.criteria)
    named = [_inside(rootdir, name) for name in files if name]
    return (
        *((f"{runs}/**",) if runs else ()),
        *((knowledge,) if knowledge else ()),
        *(name for name in named if name),
    )


def _loop_state(options: LoopOptions, rootdir: Path) -> tuple[str, ...]:
    """The run records and the knowledge base where they lie inside the tree, as anchored
    gitignore patterns: the loop writes them while agents, builds and commands run, so a
    snapshot that held them would take the loop's own writes for theirs (and a restore would
    undo them). Under `.fwloop/`, where they are by default, no snapshot looks anyway."""
    runs, knowledge = _loop_writes(options, rootdir)
    patterns = [f"/{_literal(runs)}/"] if runs else []
    if knowledge:
        # SQLite's write-ahead log and shared memory, and a rollback journal, lie beside it.
        suffixes = ("", "-wal", "-shm", "-journal")
        patterns += [f"/{_literal(knowledge)}{suffix}" for suffix in suffixes]
    return tuple(patterns)


def _loop_writes(options: LoopOptions, rootdir: Path) -> tuple[str | None, str | None]:
    """The run records' folder and the knowledge base, relative to the rootdir where they lie
    inside the tree (each None where not), found as the loop finds them."""
    knowledge = knowledge_path(rootdir, options.knowledge)
    return (
        _inside(rootdir, options.run_dir),
        _inside(rootdir, str(knowledge)) if knowledge else None,
    )


def harness_build_dir(rootdir: Path, invoked_in: Path, value: object) -> str | None:
    """The Zephyr harness's `--build-dir` (relative to where pytest was started) as a path
    under the rootdir, or None: not given, or outside the tree."""
    if not isinstance(value, str) or not value:
        return None
    return _inside(rootdir, str(invoked_in / value))


def _inside(rootdir: Path, name: str) -> str | None:
    """`name` (relative to the rootdir, or absolute) as a path relative to the rootdir, or None
    when it lies outside it or is the rootdir itself."""
    path = Path(os.path.normpath(rootdir / name))
    if not path.is_relative_to(rootdir) or path == rootdir:
        return None
    return path.relative_to(rootdir).as_posix()


def _literal(path: str) -> str:
    """`path` as a gitignore pattern that matches only itself: wildcards and backslashes, a
    leading `!` or `#` and trailing blanks (which git would drop) escaped."""
    escaped = re.sub(r"([\\*?\[\]])", r"\\\1", path)
    escaped = re.sub(r" +$", lambda blanks: "\\ " * len(blanks.group()), escaped)
    return "\\" + escaped if escaped.startswith(("!", "#")) else escaped


#: Build tools and the option that names their output directory.
_BUILD_DIR_OPTIONS = {
    "cmake": ("--build", "-B"),
    "ninja": ("-C",),
    "meson": ("-C",),
    "west": ("-d", "--build-dir"),
}


def build_directories(build: list[str] | str | None, *named: str | None) -> list[str]:
    """The output directories a build command names (`cmake --build out`, `ninja -C out`,
    `west build -d out`, whose default is `build`) and those `named` otherwise (the Zephyr
    harness's `--build-dir`), as gitignore patterns anchored at the rootdir; none for other
    tools (`make -C DIR` names a source directory)."""
    argv = shlex.split(build) if isinstance(build, str) else list(build or [])
    tool = Path(argv[0]).name if argv else ""
    options = _BUILD_DIR_OPTIONS.get(tool, ())
    found = [
        value
        for flag, value in itertools.pairwise(argv)
        if flag in options and not value.startswith("-")
    ]
    found += [arg.split("=", 1)[1] for arg in argv if "=" in arg and arg.split("=")[0] in options]
    if tool == "west" and "build" in argv[1:2] and not found:
        found.append("build")
    found += [name for name in named if name]
    patterns = [
        f"/{_literal(Path(d).as_posix().strip('/'))}/" for d in found if not Path(d).is_absolute()
    ]
    return list(dict.fromkeys(patterns))


def snapshot_exclude(
    options: LoopOptions, rootdir: Path, build: list[str] | str | None, *named: str | None
) -> tuple[str, ...]:
    """What no snapshot holds: the user's patterns, the build's output directories (and those
    `named`: the Zephyr harness's `--build-dir`), the loop's own records and knowledge base
    inside the tree."""
    return (
        *options.snapshot_exclude,
        *build_directories(build, *named),
        *_loop_state(options, rootdir),
    )
