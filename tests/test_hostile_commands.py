"""Hostile tester commands against the allowlist runner, with real make, pytest and ctest.

Each attack is refused with a reason naming what it would have done; the ones marked real are
also run directly, without the runner, to show the attack works against the real tool (so the
corpus proves something). The commands the grammar lets through are run for real, and nothing
changes outside the tree, in `.fwloop`, or in the firmware sources.
"""

from __future__ import annotations

import json
import shlex
import shutil
import stat
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

import pytest

from loopkit import LoopProject, calc_fix_patches, coder_answer
from pytest_fwloop.procs.allowlist_runner import AllowlistRunner, CommandBlocked, CommandResult

pytestmark = pytest.mark.slow

BIN = Path(sys.executable).parent
SHOW = (sys.executable, "tools/show.py")
PREFIXES = [
    ("make", "test"),
    ("make", "check"),
    ("ctest",),
    ("pytest",),
    ("python", "-m", "pytest"),
    ("python3", "-m", "pytest"),
    SHOW,
]


@dataclass(frozen=True)
class Attack:
    argv: tuple[str, ...]  # `{out}` is the directory outside the tree
    why: str  # what the refusal must say
    real: bool = True  # run without the runner, it changes what is watched


def attack(*argv: str, why: str, real: bool = True) -> Attack:
    return Attack(argv, why, real)


ATTACKS = [
    # make: another makefile, another directory, make code, variables, goals outside.
    attack("make", "test", "-f", "{out}/evil.mk", why="`-f` reads another makefile"),
    attack("make", "test", "-f{out}/evil.mk", why="`-f` reads another makefile"),
    attack("make", "test", "--file={out}/evil.mk", why="`--file` reads another makefile"),
    attack("make", "test", "--makefile", "{out}/evil.mk", why="`--makefile` reads another"),
    attack("make", "test", "--fil={out}/evil.mk", why="`--fil={out}/evil.mk` is not among"),
    attack("make", "test", "-kf", "{out}/evil.mk", why="`-f` reads another makefile"),
    attack("make", "test", "-C", "{out}", why="`-C` runs the makefile of another directory"),
    attack("make", "test", "--directory={out}", why="`--directory` runs the makefile"),
    attack("make", "test", "--eval=$(shell touch {out}/eval.canary)", why="`--eval` evaluates"),
    attack("make", "test", "-E", "$(shell touch {out}/e.canary)", why="`-E` evaluates"),
    attack("make", "test", "SHELL={out}/evil.sh", why="`SHELL={out}/evil.sh` assigns"),
    attack("make", "test", "CC=$(shell touch {out}/cc.canary)", why="assigns a variable"),
    attack("make", "test", "X!=touch {out}/neq.canary", why="assigns a variable"),
    attack("make", "test", "MAKEFLAGS=--eval=$(shell touch {out}/mf.canary)", why="assigns"),
    attack("make", "test", "--", "CC=$(shell touch {out}/dd.canary)", why="assigns a variable"),
    attack("make", "test", "{out}/prog", why="`{out}/prog` is outside the tree"),
    attack("make", "test", "../out/prog", why="`../out/prog` is outside the tree"),
    attack("make", "test", "-I", "{out}", why="`-I` makes `include` read", real=False),
    attack("make", "test", "-e", why="`-e` lets the environment override", real=False),
    attack("make", "test", "--jobserver-auth=3,4", why="`--jobserver-auth`", real=False),
    attack("make", "test", "a\x00b", why="NUL byte", real=False),
    # pytest: code, configuration and files outside; deletion; response files.
    attack("pytest", "{out}/test_evil.py", why="`{out}/test_evil.py` is outside the tree"),
    attack("pytest", "../out/test_evil.py::test_x", why="is outside the tree"),
    attack("pytest", "link_out/test_evil.py", why="`link_out/test_evil.py` is outside"),
    attack("pytest", "-c", "{out}/evil.ini", why="`-c` reads another configuration file"),
    attack("pytest", "--config-file={out}/evil.ini", why="`--config-file` reads another"),
    attack("python", "-m", "pytest", "-p", "evilplug", why="`-p` loads or blocks a plugin"),
    attack("python", "-m", "pytest", "-pevilplug", why="`-p` loads or blocks a plugin"),
    attack("python3", "-m", "pytest", "-qp", "evilplug", why="`-p` loads or blocks a plugin"),
    attack("python", "-m", "pytest", "--", "-pevilplug", why="`-pevilplug` starts with `-`"),
    attack("python", "-m", "pytest", "tests", "--", "-pevilplug", why="starts with `-`"),
    attack("python", "-m", "pytest", "sub", why="pytest would read `sub/pytest.ini`"),
    attack("pytest", "--junitxml={out}/junit.canary", why="`--junitxml` writes a report"),
    attack("pytest", "--junit-xml", "{out}/junit.canary", why="`--junit-xml` writes"),
    attack("pytest", "--junit={out}/j.canary", why="is not among", real=False),
    attack("pytest", "--debug={out}/debug.canary", why="`--debug` writes a debug log"),
    attack("pytest", "-o", "cache_dir={out}/cache", why="`-o` overrides configuration"),
    attack("pytest", "--override-ini=cache_dir={out}/c2", why="`--override-ini` overrides"),
    attack("pytest", "--basetemp={out}/bt", why="`--basetemp` names a directory pytest"),
    attack("pytest", "--basetemp=.fwloop", why="`--basetemp` names a directory pytest"),
    attack("pytest", "--basetem={out}/bt", why="is not among", real=False),
    attack("pytest", "--rootdir={out}", why="`--rootdir` moves the rootdir"),
    attack("pytest", "tests", "@{out}/args.txt", why="would read arguments from a file"),
    attack("python", "-m", "pytest", "--doctest-modules", why="`--doctest-modules` imports"),
    attack("python", "-m", "pytest", "--pyargs", "evilplug", why="`--pyargs` imports"),
    attack("pytest", "--log-file={out}/log.canary", why="`--log-file` writes a log file"),
    attack(
        "python",
        "-m",
        "pytest",
        "-W",
        "error::evilplug.Warn",
        why="`-W` imports the warning category",
    ),
    attack("pytest", "--pdbcls=evilplug:Pdb", why="`--pdbcls` imports", real=False),
    attack("pytest", "--confcutdir={out}", why="`--confcutdir` changes which", real=False),
    attack("pytest", ".fwloop", why="`.fwloop` points into .fwloop", real=False),
    attack("pytest", "--fwloop", why="nested fwloop run", real=False),
    # ctest: scripts, other test directories, files written outside.
    attack("ctest", "-S", "{out}/evil.cmake", why="`-S` runs a CTest script"),
    attack("ctest", "--test-dir", "{out}", why="`--test-dir` runs the tests"),
    attack("ctest", "-O", "{out}/log.canary", why="`-O` writes a file"),
    attack("ctest", "--output-junit", "{out}/junit.canary", why="`--output-junit` writes"),
    attack("ctest", "-D", "Experimental", why="`-D` runs a dashboard", real=False),
    # a program with no grammar of ours: nothing but plain words and paths inside the tree.
    attack(*SHOW, "--out={out}/show.canary", why="fwloop knows no options of"),
    attack(*SHOW, "{out}/show2.canary", why="is outside the tree"),
    attack(*SHOW, "OUT=x", why="assigns a variable", real=False),
    # and what starts with no allowed prefix at all.
    attack("sh", "-c", "touch {out}/sh.canary", why="starts with no allowed prefix"),
    attack("make", "install", why="starts with no allowed prefix", real=False),
]

# Let through by the grammar, run for real: nothing here reaches a shell or leaves the tree.
HARMLESS = [
    ("make", "test", "$(shell touch {out}/goal.canary)"),
    ("make", "test", "`touch {out}/tick.canary`"),
    ("make", "check", "-j2", "-k", "--no-print-directory"),
    ("make", "test", "--", "check"),
    ("pytest", "-k", 'test_ok or __import__("os").system("touch {out}/k.canary")', "tests"),
    ("python", "-m", "pytest", "-q", "-rA", "--tb=short", "tests/test_ok.py::test_ok[$(touch x)]"),
    ("python3", "-m", "pytest", "-m", "x; touch {out}/m.canary", "tests"),
    ("pytest", "-xq", "tests/test_ok.py::test_ok"),
    ("ctest", "-R", "$(touch {out}/r.canary)", "--output-on-failure"),
    (*SHOW, "; touch {out}/semi.canary"),
]

MAKEFILE = """\
test:
\t@echo make-test-ok $(CC)
check:
\t@echo make-check-ok
"""


def fill(argv: tuple[str, ...], out: Path) -> list[str]:
    return [token.replace("{out}", str(out)) for token in argv]


@pytest.fixture
def out(tmp_path: Path) -> Path:
    """The attacker's directory outside the tree, and the tree itself next to it."""
    out = tmp_path / "out"
    tree = tmp_path / "tree"
    for relpath, text in {
        "pytest.ini": "[pytest]\n",
        "tests/test_ok.py": "def test_ok(tmp_path):\n    assert tmp_path.is_dir()\n",
        "fw/main.c": "int main(void) { return 0; }\n",
        ".fwloop/journal.json": "{}\n",
        "Makefile": MAKEFILE,
        "CTestTestfile.cmake": "add_test(ok /bin/true)\n",
        # What a coder may add to the tree: a module that is harmless until imported.
        "evilplug.py": f"open({str(out / 'plugin.canary')!r}, 'w').close()\nWarn = Warning\n",
        "sub/pytest.ini": "[pytest]\naddopts = -p evilplug\n",
        "sub/test_sub.py": "def test_sub():\n    pass\n",
        "tools/show.py": (
            "import sys\nfor arg in sys.argv[1:]:\n"
            "    path = arg.removeprefix('--out=')\n"
            "    if path.endswith('.canary'):\n        open(path, 'w').close()\n"
        ),
    }.items():
        (tree / relpath).parent.mkdir(parents=True, exist_ok=True)
        (tree / relpath).write_text(text)
    for relpath, text in {
        "evil.mk": f"test:\n\ttouch {out}/mk.canary\n",
        "Makefile": f"test:\n\ttouch {out}/dir.canary\n",
        "evil.sh": f"#!/bin/sh\ntouch {out}/shell.canary\n",
        "prog.sh": "echo built from a built-in rule\n",
        "evil.ini": f"[pytest]\ncache_dir = {out}/ini-cache\n",
        "args.txt": f"--junitxml={out}/args.canary\n",
        "test_evil.py": f"def test_x():\n    open({str(out / 'test.canary')!r}, 'w').close()\n",
        "evil.cmake": f'file(WRITE "{out}/cmake.canary" "x")\n',
        "CTestTestfile.cmake": f"add_test(evil /usr/bin/touch {out}/ctest.canary)\n",
        "bt/keep": "",
    }.items():
        (out / relpath).parent.mkdir(parents=True, exist_ok=True)
        (out / relpath).write_text(text)
    (out / "evil.sh").chmod(0o755)
    (tree / "link_out").symlink_to(out)
    return out


def watched(out: Path) -> dict[str, bytes]:
    """What no tester command may change: outside the tree, `.fwloop`, the firmware."""
    tree = out.parent / "tree"
    return {
        str(path): path.read_bytes() if path.is_file() else b"<dir>"
        for root in (out, tree / ".fwloop", tree / "fw")
        for path in sorted(root.rglob("*"))
    }


def environ(out: Path) -> dict[str, str]:
    return {
        "PATH": f"{BIN}:/usr/bin:/bin",
        "HOME": str(out.parent),
        "LANG": "C.UTF-8",
        "SHELL": "/bin/sh",
    }


def runner(out: Path) -> AllowlistRunner:
    return AllowlistRunner(
        PREFIXES, cwd=out.parent / "tree", timeout=60, abort=threading.Event(), environ=environ(out)
    )


def require(argv: list[str]) -> None:
    if shutil.which(argv[0], path=f"{BIN}:/usr/bin:/bin") is None:
        pytest.skip(f"{argv[0]} is not installed on this machine")


@pytest.mark.parametrize("case", ATTACKS, ids=[shlex.join(a.argv) for a in ATTACKS])
def test_an_attack_is_refused_with_its_reason_and_changes_nothing(
    case: Attack, out: Path, tmp_path: Path
) -> None:
    argv = fill(case.argv, out)
    require(argv)
    before = watched(out)
    with pytest.raises(CommandBlocked) as refused:
        runner(out).run(argv, tmp_path / "command.log")
    reason = str(refused.value)
    assert case.why.replace("{out}", str(out)) in reason
    assert "\n" not in reason
    assert watched(out) == before
    assert not (tmp_path / "command.log").exists()


REAL = [a for a in ATTACKS if a.real]


@pytest.mark.parametrize("case", REAL, ids=[shlex.join(a.argv) for a in REAL])
def test_each_attack_is_real_when_run_without_the_runner(case: Attack, out: Path) -> None:
    """Honesty of the corpus: the tool really does what the refusal says it would."""
    argv = fill(case.argv, out)
    require(argv)
    before = watched(out)
    subprocess.run(
        argv,
        cwd=out.parent / "tree",
        env=environ(out),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert watched(out) != before, "the attack did nothing; it proves nothing in the corpus"


@pytest.mark.parametrize("argv", HARMLESS, ids=[shlex.join(a) for a in HARMLESS])
def test_what_the_grammar_lets_through_runs_and_changes_nothing(
    argv: tuple[str, ...], out: Path, tmp_path: Path
) -> None:
    command = fill(argv, out)
    require(command)
    before = watched(out)
    result = runner(out).run(command, tmp_path / "command.log")
    assert isinstance(result, CommandResult)
    assert not result.start_error
    assert watched(out) == before
    assert not list(out.glob("*.canary"))


def test_the_corpus_is_large_enough() -> None:
    assert len(ATTACKS) >= 30
    assert len(REAL) >= 30


# -- through the loop ----------------------------------------------------------------------------


def plan_of(commands: list[list[str]]) -> dict[str, object]:
    return {
        "select": [],
        "commands": [{"argv": argv, "reason": "check the fix"} for argv in commands],
        "notes": "",
    }


@pytest.fixture
def allowlisted_project(project: LoopProject) -> LoopProject:
    """The calc suite allowing `make check` and `python -m pytest` (with a Makefile for the first),
    and a folder `outside` beside the project for the attacks to aim at."""
    project.calc_suite("fwloop_allowed_commands =\n    make check\n    python -m pytest\n")
    project.write("Makefile", "check:\n\t@echo make-check-ok\n")
    (project.pytester.path / "outside").mkdir()
    return project


def attacks_on(project: LoopProject) -> list[list[str]]:
    outside = project.pytester.path / "outside"
    return [
        ["make", "check", f"--eval=$(shell touch {outside}/eval.canary)"],
        ["make", "check", f"SHELL=$(shell touch {outside}/shell.canary)"],
        ["python", "-m", "pytest", f"--basetemp={outside}"],
        ["python", "-m", "pytest", "-p", "evilplug"],
    ]


def test_the_loop_records_an_attack_as_blocked_and_runs_the_rest(
    allowlisted_project: LoopProject,
) -> None:
    outside = allowlisted_project.pytester.path / "outside"
    (outside / "keep").write_text("pytest --basetemp would delete this\n")
    agent = allowlisted_project.agent(
        "agent",
        [coder_answer(p) for p in calc_fix_patches()],
        tester=[plan_of([*attacks_on(allowlisted_project), ["make", "check"]])],
    )
    result = allowlisted_project.run(
        f"--fwloop-coder={agent.spec}", f"--fwloop-tester={agent.spec}"
    )
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    [run_dir] = allowlisted_project.run_dirs()
    commands = json.loads((run_dir / "rounds" / "02" / "commands.json").read_text())["commands"]
    assert [(c["argv"][:3], c["status"]) for c in commands] == [
        (["make", "check", f"--eval=$(shell touch {outside}/eval.canary)"], "blocked"),
        (["make", "check", f"SHELL=$(shell touch {outside}/shell.canary)"], "blocked"),
        (["python", "-m", "pytest"], "blocked"),
        (["python", "-m", "pytest"], "blocked"),
        (["make", "check"], "passed"),
    ]
    because = [c.get("blocked_because", "") for c in commands]
    assert "`--eval` evaluates make code" in because[0]
    assert "assigns a variable" in because[1]
    assert "`--basetemp` names a directory pytest" in because[2]
    assert "`-p` loads or blocks a plugin" in because[3]
    assert sorted(p.name for p in outside.iterdir()) == ["keep"]


def test_a_plan_of_attacks_only_ends_as_tester_command_blocked(
    allowlisted_project: LoopProject,
) -> None:
    outside = allowlisted_project.pytester.path / "outside"
    agent = allowlisted_project.agent(
        "agent",
        [coder_answer(calc_fix_patches()[0])],
        tester=[plan_of(attacks_on(allowlisted_project))],
    )
    result = allowlisted_project.run(
        f"--fwloop-coder={agent.spec}", f"--fwloop-tester={agent.spec}"
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    summary = allowlisted_project.summary()
    assert summary["outcome"] == "tester_command_blocked"
    assert summary["reason"].startswith("all 4 command(s) the tester proposed are blocked: make ")
    assert "`--eval` evaluates make code" in summary["reason"]
    assert list(outside.iterdir()) == []


def test_a_program_in_the_tree_never_shadows_one_on_path(out: Path, tmp_path: Path) -> None:
    """A relative PATH entry would find a `make` the coder wrote in the tree."""
    tree = out.parent / "tree"
    (tree / "make").write_text(f"#!/bin/sh\ntouch {out}/path.canary\n")
    (tree / "make").chmod((tree / "make").stat().st_mode | stat.S_IXUSR)
    before = watched(out)
    shadowing = AllowlistRunner(
        PREFIXES,
        cwd=tree,
        timeout=60,
        abort=threading.Event(),
        environ={**environ(out), "PATH": f":.:{BIN}:/usr/bin:/bin"},
    )
    result = shadowing.run(["make", "check"], tmp_path / "command.log")
    assert result.passed, result.output
    assert "make-check-ok" in result.output
    assert watched(out) == before
