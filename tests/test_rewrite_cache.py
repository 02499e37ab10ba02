"""Test files rewritten once per loop: what a fork takes from the controller's memory, and
what the report it sends back says."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from loopkit import APPROVE, LoopProject, coder_answer, unified_diff
from pytest_fwloop.child.fork_pipe import LIMIT_BYTES, decode, encode
from pytest_fwloop.child.rewrite_cache import RewriteCache, serve

#: Runs in its own interpreter (`serve` patches pytest's rewriting for the whole process): the
#: controller's side rewrites test_uart.py, then two sessions run with the forks' side served.
PROBE = """
import json, sys
from pathlib import Path

import pytest
from _pytest.config import _prepareconfig

from pytest_fwloop.child.start import installed_roots
from pytest_fwloop.child.rewrite_cache import RewriteCache, serve

ARGS = ["-q", "-p", "no:randomly", "-p", "no:cacheprovider"]
test = Path("test_uart.py").resolve()
cache = RewriteCache(_prepareconfig(ARGS))
cache.learn([str(test)])
cache.fill()
seen = {"held": sorted(cache.codes)}
rewritten = []
serve(cache.codes, rewritten, installed_roots())
for run in ("unchanged", "changed"):
    if run == "changed":
        test.write_text(test.read_text().replace("b'OK'", "b'ERR'"))
    sys.modules.pop("test_uart", None)
    before = len(rewritten)
    pytest.main([*ARGS, f"--fwloop-child-report={run}.json"])
    [record] = json.loads(Path(f"{run}.json").read_text())["tests"]
    seen[run] = {
        "rewritten": rewritten[before:],
        "outcome": record["outcome"],
        "longrepr": record.get("longrepr", ""),
    }
print(json.dumps(seen))
"""


def test_a_fork_runs_the_held_code_of_an_unchanged_file_and_rewrites_a_changed_one(
    tmp_path: Path,
) -> None:
    (tmp_path / "test_uart.py").write_text(
        "def reply():\n    return b'OK'\n\n\ndef test_reply():\n    assert reply() == b'ERR'\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=tmp_path, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.splitlines()[-1])
    assert seen["held"] == [str(tmp_path / "test_uart.py")]
    # Served from memory: not rewritten again, and the rewritten asserts still explain.
    assert seen["unchanged"]["rewritten"] == []
    assert seen["unchanged"]["outcome"] == "failed"
    assert "assert b'OK' == b'ERR'" in seen["unchanged"]["longrepr"]
    # Its bytes changed: rewritten by the child from the file, and that code ran.
    assert seen["changed"]["rewritten"] == [str(tmp_path / "test_uart.py")]
    assert seen["changed"]["outcome"] == "passed"


def test_what_a_child_sends_fits_the_pipe_and_a_cut_message_is_nothing() -> None:
    modules = [f"package_{n}.module_{n}" for n in range(10_000)]
    files = [f"/work/tests/test_{n}.py" for n in range(5_000)]
    data = encode({"modules": modules, "rewritten": files})
    assert len(data) <= LIMIT_BYTES
    kept = decode(data)
    assert kept["modules"] == modules[: len(kept["modules"])]
    assert kept["rewritten"] == files[: len(kept["rewritten"])]
    assert len(kept["modules"]) > 1000
    assert decode(data[:-5]) == {}
    assert decode(b'["not", "an object"]') == {}
    assert decode(json.dumps({"modules": ["a", 3, "b"], "x": 7}).encode()) == {
        "modules": ["a", "b"]
    }


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["auto", "spawn"])
def test_the_loop_converges_when_a_rewritten_helper_is_patched(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    """A helper registered for assert rewriting is firmware-side code the coder may patch: the
    fork after the patch must run the patched file, not the code held from before."""
    project = LoopProject(pytester, monkeypatch)
    project.write("fw/__init__.py", "")
    checks = "def expected_sum():\n    return 6\n\n\ndef check(total):\n"
    checks += "    assert total == expected_sum()\n"
    project.write("fw/checks.py", checks)
    project.write(
        "tests/conftest.py", "import pytest\n\npytest.register_assert_rewrite('fw.checks')\n"
    )
    project.write(
        "tests/test_sum.py",
        "from fw import checks\n\n\n"
        + "".join(f"def test_sum_{n}():\n    checks.check(2 + 3)\n\n\n" for n in range(3)),
    )
    project.write("pytest.ini", "[pytest]\naddopts = -p no:randomly\npythonpath = .\n")
    fix = unified_diff("fw/checks.py", checks, checks.replace("return 6", "return 5"))
    coder = project.agent("coder", [coder_answer(fix)], [APPROVE])
    monkeypatch.setenv("FWLOOP_CHILD_START", mode)
    result = project.run(f"--fwloop-coder={coder.spec}", "--fwloop-confirm-runs=1")
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(["*outcome: success*"])


def test_a_pytest_without_the_private_functions_rewrites_as_it_always_did(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pytestconfig: pytest.Config
) -> None:
    """The cache leans on pytest's private `_read_pyc` and `_rewrite_test`: should a pytest
    rename them, nothing is held and nothing is patched, instead of a child that cannot start."""
    from _pytest.assertion import rewrite

    test = tmp_path / "test_uart.py"
    test.write_text("def test_reply():\n    assert 1\n")
    read_pyc = rewrite._read_pyc
    monkeypatch.delattr(rewrite, "_rewrite_test")
    cache = RewriteCache(pytestconfig)
    cache.learn([str(test)])
    cache.fill()
    assert cache.codes == {}
    serve({}, [], ())
    assert rewrite._read_pyc is read_pyc


def test_the_controller_stops_rewriting_when_the_child_it_overlaps_ends(
    tmp_path: Path, pytestconfig: pytest.Config
) -> None:
    """Rewriting overlaps a child run; once that child has ended, what is left waits for the
    next one instead of holding up the loop."""
    files = [tmp_path / f"test_{n}.py" for n in range(3)]
    for path in files:
        path.write_text("def test_ok():\n    assert 1\n")
    cache = RewriteCache(pytestconfig)
    cache.learn(str(path) for path in files)
    checks = iter([False, True])
    cache.fill(stop=lambda: next(checks, True))
    assert sorted(cache.codes) == [str(files[0])]
    cache.fill()
    assert sorted(cache.codes) == sorted(str(path) for path in files)
