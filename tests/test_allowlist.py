"""The allowlist runner: prefixes and per-tool grammars (pure), and real commands run through it."""

from __future__ import annotations

import sys
import threading
from collections.abc import Sequence
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_fwloop.config.options import OPTIONS
from pytest_fwloop.core.gate.allowlist import Argv, blocked_reason, check_commands, parse_prefixes
from pytest_fwloop.core.gate.tool_grammars import GRAMMARS
from pytest_fwloop.procs.allowlist_runner import (
    OUTPUT_TAIL_BYTES,
    AllowlistRunner,
    CommandBlocked,
    command_environment,
    output_tail,
)

DEFAULTS = parse_prefixes(next(o for o in OPTIONS if o.name == "allowed_commands").default)


def test_defaults_are_seed_004s_shape_for_firmware_projects() -> None:
    assert DEFAULTS == (
        ("make", "test"),
        ("make", "check"),
        ("ctest",),
        ("pytest",),
        ("python", "-m", "pytest"),
    )


def test_lines_split_like_a_shell_and_blank_lines_are_skipped() -> None:
    assert parse_prefixes(["", "tools/run 'unit tests'", "  "]) == (("tools/run", "unit tests"),)
    with pytest.raises(ValueError, match="No closing quotation"):
        parse_prefixes(["make 'test"])


ROOT = Path("/nonexistent/fw-project")  # a plain value: nothing under it exists


def reason(argv: list[str], prefixes: Sequence[Argv] = DEFAULTS, root: Path = ROOT) -> str:
    why = blocked_reason(argv, prefixes, root)
    assert why is not None, f"{argv} was allowed"
    assert "\n" not in why
    return why


@pytest.mark.parametrize(
    "argv",
    [
        ["make", "test"],
        ["make", "check", "-j4"],
        ["make", "check", "-j", "4", "-k", "--no-print-directory"],
        ["make", "check", "--jobs=4", "-kj4", "-Oline", "--output-sync=target", "-l", "2.5"],
        ["make", "check", "fw/uart.o", "all", "--", "docs"],
        ["ctest", "--output-on-failure"],
        ["ctest", "-R", "uart|spi", "-E", "slow", "-j", "4", "-C", "Debug", "--timeout", "30"],
        ["ctest", "--repeat", "until-fail:3", "-LE", "hil", "--no-tests=error", "-VV"],
        ["python", "-m", "pytest", "tests/test_uart.py"],
        ["python", "-m", "pytest", "-xq", "-rA", "tests/test_uart.py::test_baud[115200]"],
        ["pytest", "-k", "uart and not slow", "-m", "not hil", "--tb=short", "--maxfail", "2"],
        ["pytest", "-k=uart", "--lf", "--durations=5", "--deselect", "tests/test_a.py::test_b"],
        ["pytest", "--ignore=tests/hil", "--", "tests"],
        ["pytest", "/nonexistent/fw-project/tests"],  # absolute, but inside the tree
        ["pytest", "tests/../fw/tests"],
    ],
)
def test_allowed_argv_fits_its_tools_grammar(argv: list[str]) -> None:
    assert blocked_reason(argv, DEFAULTS, ROOT) is None


@pytest.mark.parametrize(
    ("argv", "why"),
    [
        (["make", "install"], "starts with no allowed prefix"),
        (["make"], "starts with no allowed prefix"),
        (["make", "test-all"], "starts with no allowed prefix"),  # tokens, not characters
        (["make test"], "starts with no allowed prefix"),  # one token with a space
        (["sh", "-c", "make test"], "starts with no allowed prefix"),
        (["python", "-c", "import os"], "starts with no allowed prefix"),
        (["pytest", "--fwloop"], "nested fwloop run"),
        (["pytest", "--fwloop-coder=rules"], "nested fwloop run"),
        # No shell ever sees `&&`, but make reads `-rf` as -r and -f.
        (["make", "test", "&&", "rm", "-rf", "/"], "`-f` reads another makefile"),
    ],
)
def test_blocked_argv_says_why(argv: list[str], why: str) -> None:
    assert why in reason(argv)


def test_blocked_reason_names_the_allowlist() -> None:
    assert reason(["rm", "-rf", "/"]) == (
        "rm -rf / starts with no allowed prefix (fwloop_allowed_commands: make test, "
        "make check, ctest, pytest, python -m pytest)"
    )
    assert "empty allowlist" in reason(["make", "test"], ())


def test_a_refusal_names_the_command_and_the_argument() -> None:
    assert (
        reason(["pytest", "-q", "-p", "evil"]) == "pytest -q -p evil: `-p` loads or blocks a plugin"
    )
    assert reason(["make", "test", "CC=gcc"]) == (
        "make test CC=gcc: `CC=gcc` assigns a variable, which changes what the tool runs"
    )
    assert reason(["pytest", "../x.py"]) == "pytest ../x.py: `../x.py` is outside the tree"


@pytest.mark.parametrize(
    ("argv", "why"),
    [
        (["make", "test", "-f", "x.mk"], "`-f` reads another makefile"),
        (["make", "test", "-fx.mk"], "`-f` reads another makefile"),
        (["make", "test", "-kfx.mk"], "`-f` reads another makefile"),
        (["make", "test", "--makefile=x.mk"], "`--makefile` reads another makefile"),
        (["make", "test", "--file", "x.mk"], "`--file` reads another makefile"),
        (["make", "test", "--fi=x.mk"], "`--fi=x.mk` is not among the make options"),
        (["make", "test", "-C", "fw"], "`-C` runs the makefile of another directory"),
        (["make", "test", "--eval=x"], "`--eval` evaluates make code"),
        (["make", "test", "-E", "x"], "`-E` evaluates make code"),
        (["make", "test", "-I", "inc"], "`-I` makes `include` read makefiles"),
        (["make", "test", "-e"], "`-e` lets the environment override"),
        (["make", "test", "-t"], "`-t` is not among the make options"),
        (["make", "test", "--jobserver-auth=3,4"], "`--jobserver-auth` hands make"),
        (["make", "test", "-j=4"], "`-j` value `=4` is not an integer"),  # getopt keeps the `=`
        (["make", "test", "--jobs=four"], "`--jobs` value `four` is not an integer"),
        (
            ["make", "test", "--output-sync=all"],
            "value `all` is not one of line, none, recurse, target",
        ),
        (["make", "test", "--keep-going=yes"], "`--keep-going` takes no value"),
        (["make", "test", "SHELL=/bin/evil"], "assigns a variable"),
        (["make", "test", "X:=1"], "assigns a variable"),
        (["make", "test", "--", "CC=evil"], "assigns a variable"),
        (["make", "test", "--", "-f"], "`-f` starts with `-`"),
        (["make", "test", "/tmp/x"], "`/tmp/x` is outside the tree"),
        (["make", "test", ".git/hooks/pre-commit"], "points into .git"),
        (["make", "test", "fw/.fwloop/x"], "points into .fwloop"),
        (["pytest", "-c", "x.ini"], "`-c` reads another configuration file"),
        (["pytest", "-qc", "x.ini"], "`-c` reads another configuration file"),
        (["pytest", "-p", "x"], "`-p` loads or blocks a plugin"),
        (["pytest", "-pno:cacheprovider"], "`-p` loads or blocks a plugin"),
        (["pytest", "-p=x"], "`-p` loads or blocks a plugin"),
        (["pytest", "-xqp", "x"], "`-p` loads or blocks a plugin"),
        (["pytest", "-o", "addopts=-p x"], "`-o` overrides configuration"),
        (["pytest", "--override-ini=cache_dir=/tmp"], "`--override-ini` overrides"),
        (["pytest", "--rootdir=/tmp"], "`--rootdir` moves the rootdir"),
        (["pytest", "--basetemp=tmp"], "`--basetemp` names a directory pytest empties"),
        (["pytest", "--basetem=tmp"], "`--basetem=tmp` is not among the pytest options"),
        (["pytest", "--junitxml=r.xml"], "`--junitxml` writes a report file"),
        (["pytest", "--junit=r.xml"], "`--junit=r.xml` is not among the pytest options"),
        (["pytest", "--debug"], "`--debug` writes a debug log"),
        (["pytest", "-W", "error"], "`-W` imports the warning category"),
        (["pytest", "--co=1"], "`--co` takes no value"),
        (
            ["pytest", "--tb=evil"],
            "`--tb` value `evil` is not one of auto, line, long, native, no, short",
        ),
        (["pytest", "--maxfail=x"], "`--maxfail` value `x` is not an integer"),
        (["pytest", "-k", "-p x"], "`-k` value `-p x` starts with `-`"),
        (["pytest", "-xk=foo"], "`-xk=foo` is ambiguous"),  # argparse versions disagree
        (["pytest", "-k"], "`-k` needs a value"),
        (["pytest", "@args.txt"], "`@args.txt` would read arguments from a file"),
        (["pytest", "-k", "@args.txt"], "`@args.txt` would read arguments from a file"),
        (["pytest", "--", "-pevil"], "`-pevil` starts with `-`"),
        (["pytest", "/etc/passwd"], "`/etc/passwd` is outside the tree"),
        (["pytest", "../other/tests/test_x.py::test_y[1]"], "is outside the tree"),
        (["pytest", "..[/x::t"], "`..[/x::t` is outside the tree"),  # pytest's `[` reading
        (
            ["pytest", "--deselect=/etc/x.py::t"],
            "`--deselect` value `/etc/x.py::t` is outside the tree",
        ),
        (["pytest", ".fwloop/runs"], "points into .fwloop"),
        (["pytest", "sub/.git"], "points into .git"),
        (["pytest", ""], "an empty argument"),
        (["pytest", "-Z"], "`-Z` is not among the pytest options"),
        (["pytest", "tests\x00x"], "NUL byte"),
        (["python", "-m", "pytest", "--pyargs", "x"], "`--pyargs` imports"),
        (["python", "-m", "pytest", "--doctest-modules"], "`--doctest-modules` imports"),
        (["ctest", "-S", "x.cmake"], "`-S` runs a CTest script"),
        (["ctest", "-SP", "x.cmake"], "`-SP` runs a CTest script"),
        (["ctest", "-D", "Experimental"], "`-D` runs a dashboard"),
        (["ctest", "--test-dir", "build"], "`--test-dir` runs the tests"),
        (["ctest", "-O", "log"], "`-O` writes a file"),
        (["ctest", "--output-junit", "j.xml"], "`--output-junit` writes a file"),
        (["ctest", "--preset", "x"], "`--preset` reads"),
        (["ctest", "-Rfoo"], "`-Rfoo` is not among the ctest options"),  # ctest ignores it
        (["ctest", "--timeout=5"], "`--timeout=5` is not among the ctest options"),
        (["ctest", "-j", "-S"], "`-j` value `-S` starts with `-`"),
        (["ctest", "-R"], "`-R` needs a value"),
        (["ctest", "unit"], "`unit`: ctest takes no arguments but its options"),
    ],
)
def test_the_grammar_refuses_what_the_tool_would_read_dangerously(
    argv: list[str], why: str
) -> None:
    assert why in reason(argv)


PYTHON_M_PYTEST = ("python3", "-m", "pytest")


def test_python_dash_m_pytest_is_judged_as_pytest() -> None:
    assert "`-p` loads or blocks a plugin" in reason(
        ["python3", "-m", "pytest", "-p", "x"], [PYTHON_M_PYTEST]
    )
    assert blocked_reason(["python3", "-m", "pytest", "-q"], [PYTHON_M_PYTEST], ROOT) is None
    # Allowlisting the interpreter alone allows no options: `-m` is one.
    assert "fwloop knows no options of `python3`" in reason(
        ["python3", "-m", "pytest"], [("python3",)]
    )


TOOL = ("tools/check.sh",)


@pytest.mark.parametrize(
    ("argv", "why"),
    [
        (["tools/check.sh", "--fast"], "`--fast`: fwloop knows no options of `tools/check.sh`"),
        (["tools/check.sh", "-x"], "fwloop knows no options"),
        (["tools/check.sh", "--"], "fwloop knows no options"),
        (["tools/check.sh", "BOARD=x"], "assigns a variable"),
        (["tools/check.sh", "../x"], "outside the tree"),
        (["tools/check.sh", "@x"], "would read arguments from a file"),
    ],
)
def test_a_program_without_a_grammar_takes_only_plain_words(argv: list[str], why: str) -> None:
    assert why in reason(argv, [TOOL])


def test_a_program_without_a_grammar_takes_words_and_paths_inside_the_tree() -> None:
    assert blocked_reason(["tools/check.sh", "uart", "fw/uart.c"], [TOOL], ROOT) is None


@pytest.mark.parametrize(
    ("prefix", "tail", "why"),
    [
        # The user's own line is trusted as written, whatever it holds ...
        (("pytest", "-p", "myplugin"), [], None),
        (("pytest", "-p", "myplugin"), ["-q", "tests"], None),
        (("make", "-C", "build", "test"), ["-j4"], None),
        (("ctest", "--test-dir", "build"), ["-R", "uart"], None),
        (("pytest", "--runslow", "-q"), ["tests"], None),
        # ... but the command may not supply the value of an option the line ends with,
        (
            ("pytest", "-k"),
            ["smoke"],
            "ends with `-k`, which may take the command's next argument as its value",
        ),
        (("ctest", "--test-dir"), ["/tmp"], "ends with `--test-dir`, which may take"),
        (("pytest", "-qp"), ["evil"], "ends with `-qp`, which may take"),
        (("make", "test", "-j"), ["4"], "ends with `-j`, which may take"),
        # nor follow an option fwloop does not know, which may take it as its value,
        (("pytest", "--runslow"), ["tests"], "ends with `--runslow`, which may take"),
        (("pytest", "--runslow"), [], None),
    ],
)
def test_the_allowlisted_prefix_is_trusted_as_written(
    prefix: Argv, tail: list[str], why: str | None
) -> None:
    found = blocked_reason([*prefix, *tail], [prefix], ROOT)
    assert found is None if why is None else why in (found or "")


def test_any_matching_prefix_may_allow_the_command() -> None:
    prefixes = [("pytest",), ("pytest", "-p", "xdist")]
    assert blocked_reason(["pytest", "-p", "xdist", "tests"], prefixes, ROOT) is None
    # Refused by both: the reason is the longest prefix's.
    assert "`-o` overrides" in reason(["pytest", "-p", "xdist", "-o", "x=1"], prefixes)


@given(
    argv=st.lists(st.sampled_from(["make", "test", "check", "pytest", "-q", "x"]), min_size=1),
    prefixes=st.lists(
        st.lists(st.sampled_from(["make", "test", "check", "pytest", "-q"]), min_size=1).map(tuple),
        max_size=4,
    ),
)
def test_allowed_only_when_some_prefix_is_the_argvs_head(
    argv: list[str], prefixes: list[tuple[str, ...]]
) -> None:
    if blocked_reason(argv, prefixes, ROOT) is None:
        assert any(tuple(argv[: len(p)]) == p for p in prefixes)
    if tuple(argv) in prefixes and "--fwloop" not in argv:
        assert blocked_reason(argv, prefixes, ROOT) is None  # a whole line is always allowed


def test_the_pytest_grammar_matches_pytests_own_parser(pytestconfig: pytest.Config) -> None:
    """What our table says takes a value is what pytest's parser takes a value for; a test-only
    look at pytest's parser, so the table cannot drift from the pytest that is installed."""
    actions = pytestconfig._parser.optparser._option_string_actions
    pytest_grammar = GRAMMARS["pytest"]
    # Spellings newer pytests added; an older pytest refuses them itself, as a usage error.
    newer = {"--report-chars"} if pytest.version_tuple < (8,) else set()
    for name in set(pytest_grammar.flags) - newer:
        assert actions[name].nargs == 0, name
    for name in set(pytest_grammar.values) - newer:
        assert actions[name].nargs is None, name
    for name in set(pytest_grammar.refused) - newer:
        assert name in actions, name
    assert all(len(name) == 2 for name in actions if not name.startswith("--"))


# -- paths judged on disk, as the tool will open them --------------------------------------------


def test_a_symlink_out_of_the_tree_is_outside(tmp_path: Path) -> None:
    (tmp_path / "tree").mkdir()
    (tmp_path / "tree" / "out").symlink_to(tmp_path)
    argv = ["pytest", "out/tests/test_x.py"]
    assert "`out/tests/test_x.py` is outside the tree" in reason(argv, root=tmp_path / "tree")


def test_pytest_reading_another_configuration_is_refused(tmp_path: Path) -> None:
    for relpath in ("pytest.ini", "sub/pytest.ini", "sub/deep/test_x.py", "tests/test_y.py"):
        (tmp_path / relpath).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / relpath).write_text("[pytest]\n")
    assert "pytest would read `sub/pytest.ini` as its configuration" in reason(
        ["pytest", "sub/deep/test_x.py::test_x"], root=tmp_path
    )
    # Their common ancestor is the rootdir, whose configuration pytest reads.
    argv = ["pytest", "sub/deep/test_x.py", "tests/test_y.py"]
    assert blocked_reason(argv, DEFAULTS, tmp_path) is None
    assert blocked_reason(["pytest", "tests"], DEFAULTS, tmp_path) is None
    # The user may allowlist the subdirectory's suite as written.
    assert blocked_reason(["pytest", "sub", "-q"], [("pytest", "sub")], tmp_path) is None


def test_check_commands_keeps_order_and_flags_only_blocked() -> None:
    check = check_commands([["make", "check"], ["rm", "x"], ["ctest"]], DEFAULTS, ROOT)
    assert check.runnable == (("make", "check"), ("ctest",))
    assert [b.argv for b in check.blocked] == [("rm", "x")]
    assert not check.only_blocked
    assert check_commands([["rm", "x"]], DEFAULTS, ROOT).only_blocked
    assert not check_commands([], DEFAULTS, ROOT).only_blocked  # nothing proposed is not "blocked"


def test_the_runner_checks_against_its_own_rootdir(tmp_path: Path) -> None:
    runner = AllowlistRunner(DEFAULTS, cwd=tmp_path, timeout=5, abort=threading.Event(), environ={})
    check = runner.check([["pytest", str(tmp_path / "tests")], ["pytest", "/etc"]])
    assert check.runnable == (("pytest", str(tmp_path / "tests")),)
    assert check.blocked[0].reason == "pytest /etc: `/etc` is outside the tree"


def test_environment_drops_secret_names_and_the_loop_flag() -> None:
    env = command_environment(
        {
            "PATH": "/usr/bin",
            "OPENAI_API_KEY": "sk-1234567890",
            "MY_SERVICE_TOKEN": "t0k3n-abcdef",
            "DB_PASSWORD": "hunter22",
            "PYTEST_ADDOPTS": "-q --fwloop -x",
            "BOARD": "nucleo",
        }
    )
    assert env == {"PATH": "/usr/bin", "PYTEST_ADDOPTS": "-q -x", "BOARD": "nucleo"}


def test_environment_path_keeps_only_absolute_entries() -> None:
    """`''` and `.` would look programs up in the tree, where the coder writes."""
    env = command_environment({"PATH": ":/usr/local/bin:.:bin:/usr/bin:"})
    assert env["PATH"] == "/usr/local/bin:/usr/bin"


def test_output_tail_keeps_the_end_and_says_what_was_cut() -> None:
    assert output_tail(b"short") == "short"
    text = output_tail(b"a" * 100 + b"END", limit=10)
    assert text.endswith("aaaaaaaEND")
    assert text.startswith("[… 93 bytes cut …]")


@pytest.fixture
def runner(tmp_path: Path) -> AllowlistRunner:
    return AllowlistRunner(
        [(sys.executable, "tool.py")],
        cwd=tmp_path,
        timeout=30,
        abort=threading.Event(),
        environ={"PATH": "/usr/bin:/bin", "SERVICE_TOKEN": "s3cr3t-value", "HOME": "/nowhere"},
    )


def tool(tmp_path: Path, body: str) -> None:
    (tmp_path / "tool.py").write_text(f"import os, sys, time\n{body}\n")


def test_a_command_runs_in_the_rootdir_without_a_shell_or_secrets(
    runner: AllowlistRunner, tmp_path: Path
) -> None:
    tool(tmp_path, "print(os.getcwd()); print(sys.argv[1:]); print(sorted(os.environ))")
    result = runner.run([sys.executable, "tool.py", "$HOME", "*"], tmp_path / "1.log")
    assert result.passed
    assert result.returncode == 0
    lines = result.output.splitlines()
    assert lines[0] == str(tmp_path)
    assert lines[1] == "['$HOME', '*']"  # no shell expanded anything
    assert "SERVICE_TOKEN" not in lines[2]
    assert (tmp_path / "1.log").read_text() == result.output


def test_a_failing_command_keeps_its_exit_and_output(
    runner: AllowlistRunner, tmp_path: Path
) -> None:
    tool(tmp_path, "print('undefined reference to uart_init', file=sys.stderr); sys.exit(2)")
    result = runner.run([sys.executable, "tool.py"], tmp_path / "1.log")
    assert not result.passed
    assert result.describe(30) == "exit 2"
    assert "undefined reference to uart_init" in result.output


def test_only_the_tail_of_a_flood_is_kept(runner: AllowlistRunner, tmp_path: Path) -> None:
    tool(tmp_path, "sys.stdout.write('x' * 300000 + 'LAST LINE')")
    result = runner.run([sys.executable, "tool.py"], tmp_path / "1.log")
    assert result.output.endswith("LAST LINE")
    assert len(result.output.encode()) < OUTPUT_TAIL_BYTES + 100
    assert (tmp_path / "1.log").stat().st_size < OUTPUT_TAIL_BYTES + 100


def test_a_command_over_its_timeout_is_stopped(tmp_path: Path) -> None:
    tool(tmp_path, "time.sleep(60)")
    runner = AllowlistRunner(
        [(sys.executable,)], cwd=tmp_path, timeout=0.5, abort=threading.Event(), environ={}
    )
    result = runner.run([sys.executable, "tool.py"], tmp_path / "1.log")
    assert result.timed_out
    assert not result.passed
    assert result.describe(0.5) == "timed out after fwloop_command_timeout=0.5s"


def test_a_missing_program_is_a_failed_command_not_a_crash(tmp_path: Path) -> None:
    runner = AllowlistRunner(
        [("no-such-tool-xyz",)], cwd=tmp_path, timeout=5, abort=threading.Event(), environ={}
    )
    result = runner.run(["no-such-tool-xyz", "check"], tmp_path / "1.log")
    assert not result.passed
    assert result.describe(5).startswith("could not start:")
    assert "no-such-tool-xyz" in result.output


def test_a_nul_byte_is_refused_not_a_crash(runner: AllowlistRunner, tmp_path: Path) -> None:
    with pytest.raises(CommandBlocked, match="NUL byte"):
        runner.run([sys.executable, "tool.py", "a\x00b"], tmp_path / "1.log")


def test_the_runner_refuses_what_the_allowlist_does_not_allow(
    runner: AllowlistRunner, tmp_path: Path
) -> None:
    with pytest.raises(CommandBlocked, match="starts with no allowed prefix"):
        runner.run(["rm", "-rf", str(tmp_path)], tmp_path / "1.log")
    assert not (tmp_path / "1.log").exists()
