"""The allowlist runner: token-prefix matching (pure) and real commands run through it."""

from __future__ import annotations

import sys
import threading
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_fwloop.allowlist import (
    OUTPUT_TAIL_BYTES,
    AllowlistRunner,
    CommandBlocked,
    blocked_reason,
    check_commands,
    command_environment,
    output_tail,
    parse_prefixes,
)
from pytest_fwloop.options import OPTIONS

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


@pytest.mark.parametrize(
    "argv",
    [
        ["make", "test"],
        ["make", "check", "-j4"],
        ["ctest", "--output-on-failure"],
        ["python", "-m", "pytest", "tests/test_uart.py"],
        # No shell ever sees it: `&&` is only an argument make will reject.
        ["make", "test", "&&", "rm", "-rf", "/"],
    ],
)
def test_allowed_argv_starts_with_a_whole_prefix(argv: list[str]) -> None:
    assert blocked_reason(argv, DEFAULTS) is None


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
    ],
)
def test_blocked_argv_says_why(argv: list[str], why: str) -> None:
    reason = blocked_reason(argv, DEFAULTS)
    assert reason is not None
    assert why in reason
    assert "\n" not in reason


def test_blocked_reason_names_the_allowlist() -> None:
    reason = blocked_reason(["rm", "-rf", "/"], DEFAULTS)
    assert reason == (
        "rm -rf / starts with no allowed prefix (fwloop_allowed_commands: make test, "
        "make check, ctest, pytest, python -m pytest)"
    )
    assert "empty allowlist" in (blocked_reason(["make", "test"], ()) or "")


@given(
    argv=st.lists(st.sampled_from(["make", "test", "check", "pytest", "-q", "x"]), min_size=1),
    prefixes=st.lists(
        st.lists(st.sampled_from(["make", "test", "check", "pytest", "-q"]), min_size=1).map(tuple),
        max_size=4,
    ),
)
def test_allowed_exactly_when_some_prefix_is_the_argvs_head(
    argv: list[str], prefixes: list[tuple[str, ...]]
) -> None:
    allowed = blocked_reason(argv, prefixes) is None
    assert allowed == any(tuple(argv[: len(p)]) == p for p in prefixes)


def test_check_commands_keeps_order_and_flags_only_blocked() -> None:
    check = check_commands([["make", "check"], ["rm", "x"], ["ctest"]], DEFAULTS)
    assert check.runnable == (("make", "check"), ("ctest",))
    assert [b.argv for b in check.blocked] == [("rm", "x")]
    assert not check.only_blocked
    assert check_commands([["rm", "x"]], DEFAULTS).only_blocked
    assert not check_commands([], DEFAULTS).only_blocked  # nothing proposed is not "blocked"


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


def test_the_runner_refuses_what_the_allowlist_does_not_allow(
    runner: AllowlistRunner, tmp_path: Path
) -> None:
    with pytest.raises(CommandBlocked, match="starts with no allowed prefix"):
        runner.run(["rm", "-rf", str(tmp_path)], tmp_path / "1.log")
    assert not (tmp_path / "1.log").exists()
