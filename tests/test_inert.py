"""Without --fwloop the plugin only adds options: plain pytest behaves as with -p no:fwloop."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from dependency_plugins import dependency_plugins, required_distributions
from pytest_fwloop.core.suite.results import IterationResults

SUITE = """
import pytest

from pytest_fwloop.core.suite.results import IterationResults

def test_pass():
    assert 1 + 1 == 2

def test_fail():
    assert "0x12" == "0xF4"

@pytest.mark.xfail(strict=True)
def test_xfail():
    assert 0

@pytest.fixture
def board():
    raise ConnectionRefusedError("board at 127.0.0.1:1 refused")

def test_env(board):
    pass
"""


def _normalise(lines: list[str]) -> list[str]:
    """Drop what legitimately differs: timings, and the header line listing the plugins."""
    return [
        re.sub(r"\d+\.\d+s", "N.NNs", line)
        for line in lines
        if not line.startswith(("plugins:", "rootdir:"))
    ]


def test_plain_run_is_identical_with_and_without_the_plugin(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_suite=SUITE)
    with_plugin = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    without = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:fwloop")
    assert with_plugin.ret == without.ret == pytest.ExitCode.TESTS_FAILED
    with_plugin.assert_outcomes(passed=1, failed=1, xfailed=1, errors=1)
    without.assert_outcomes(passed=1, failed=1, xfailed=1, errors=1)
    assert _normalise(with_plugin.outlines) == _normalise(without.outlines)
    assert not (pytester.path / ".fwloop").exists()


def test_plugin_is_registered_under_the_name_fwloop(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_subprocess("--help")
    result.stdout.fnmatch_lines(["*closed-loop firmware repair (pytest-fwloop)*", "*--fwloop *"])
    disabled = pytester.runpytest_subprocess("-p", "no:fwloop", "--fwloop")
    assert disabled.ret == pytest.ExitCode.USAGE_ERROR
    disabled.stderr.fnmatch_lines(["*unrecognized arguments: --fwloop*"])


def test_ini_options_are_known_so_strict_config_accepts_them(pytester: pytest.Pytester) -> None:
    pytester.makeini(
        """
        [pytest]
        fwloop_coder = rules
        fwloop_max_iter = 3
        fwloop_protect = firmware/boot/**
        """
    )
    pytester.makepyfile(test_ok="def test_ok():\n    pass\n")
    result = pytester.runpytest_subprocess("--strict-config")
    assert result.ret == pytest.ExitCode.OK


def test_a_plain_run_imports_none_of_the_loop(pytester: pytest.Pytester) -> None:
    """Without --fwloop only the option table (read as data, no parsers) and the fixture
    declarations load: no models, no agents."""
    pytester.makeconftest(
        "import sys\n\n"
        "def pytest_sessionfinish(session):\n"
        "    loaded = sorted(m for m in sys.modules if m.startswith('pytest_fwloop'))\n"
        "    print('LOADED', ' '.join(loaded))\n"
    )
    pytester.makepyfile(test_ok="def test_ok():\n    pass\n")
    result = pytester.runpytest_subprocess("-s")
    [line] = [line for line in result.outlines if "LOADED " in line]
    loaded = set(line.split("LOADED ", 1)[1].split())
    assert loaded == {
        "pytest_fwloop",
        "pytest_fwloop.child",
        "pytest_fwloop.child.pristine",
        "pytest_fwloop.config",
        "pytest_fwloop.config.option_table",
        "pytest_fwloop.fixtures",
        "pytest_fwloop.hookspecs",
        "pytest_fwloop.plugin",
    }, loaded


def test_a_test_runs_no_hook_of_the_plugin_until_it_uses_an_environment(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The console report hook is registered by the first test that uses an environment: a
    suite that uses none pays no per-test call of ours."""
    # One serial port serves one worker: the inner run is not one of this run's xdist workers.
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    monkeypatch.delenv("PYTEST_XDIST_WORKER_COUNT", raising=False)
    pytester.makeconftest(
        "import pytest\n\n"
        "@pytest.fixture\n"
        "def ours(request):\n"
        "    impls = request.config.pluginmanager.hook.pytest_runtest_makereport.get_hookimpls()\n"
        "    return sorted(i.plugin_name for i in impls if 'fwloop' in i.plugin_name)\n"
    )
    pytester.makepyfile(
        test_hooks="def test_plain(ours):\n    print('HOOKS', ours)\n\n"
        "def test_serial(fwloop_serial, ours):\n    print('HOOKS', ours)\n"
    )
    pytester.makeini("[pytest]\nfwloop_serial_url = loop://\n")
    result = pytester.runpytest_subprocess("-s", "-p", "no:randomly")
    result.assert_outcomes(passed=2)
    hooks = [line.split("HOOKS ", 1)[1] for line in result.outlines if "HOOKS " in line]
    assert hooks == ["[]", "['fwloop-console-report']"]


def test_a_loop_without_an_openai_provider_never_loads_the_http_client() -> None:
    """Loading the loop and building its providers: only what the specs name is imported."""
    probe = (
        "import sys\n"
        "from pathlib import Path\n"
        "import pytest_fwloop.loop.entry\n"
        "from pytest_fwloop.agents.registry import parse_role_specs\n"
        "parse_role_specs('rules,command:agent.py,claude,codex', 'coder', Path('.'))\n"
        "print(sorted(m for m in ('urllib.request', 'http.client') if m in sys.modules))\n"
        "parse_role_specs('openai:m@http://127.0.0.1:1/v1', 'coder', Path('.'))\n"
        "print('urllib.request' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.split("\n")[:2] == ["[]", "True"]


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["child", "child-xdist"])
def test_a_loop_child_and_its_workers_do_not_load_pydantic(
    pytester: pytest.Pytester, workers: list[str]
) -> None:
    """Every iteration starts a child pytest (and its xdist workers): none of them pays for the
    models; the child writes plain JSON that the controller validates."""
    pytester.makeconftest(
        "import pathlib, sys\n\n"
        "def pytest_sessionfinish(session):\n"
        "    heavy = sorted(m for m in ('pydantic', 'jsonschema', 'httpx') if m in sys.modules)\n"
        "    worker = getattr(session.config, 'workerinput', None)\n"
        "    name = worker['workerid'] if worker else 'main'\n"
        "    pathlib.Path(f'heavy-{name}.txt').write_text(' '.join(heavy))\n"
    )
    pytester.makepyfile(test_ok="def test_ok():\n    pass\n\ndef test_bad():\n    assert 0\n")
    report = pytester.path / "results.json"
    pytester.runpytest_subprocess(f"--fwloop-child-report={report}", *workers)
    seen = {p.stem: p.read_text() for p in pytester.path.glob("heavy-*.txt")}
    assert seen == dict.fromkeys(
        ["heavy-main", *(["heavy-gw0", "heavy-gw1"] if workers else [])], ""
    )
    results = IterationResults.model_validate_json(report.read_text(encoding="utf-8"))
    assert {t.nodeid: t.outcome for t in results.tests} == {
        "test_ok.py::test_ok": "passed",
        "test_ok.py::test_bad": "failed",
    }


def test_installing_the_plugin_adds_no_other_pytest_plugin() -> None:
    """Every pytest run of the environment, with or without --fwloop, would load it, and
    `-p no:fwloop` would not remove it (anyio's, through httpx, cost ~90 ms of imports a run,
    and put its fixtures and marker in the user's suite)."""
    assert required_distributions() >= {"pytest", "pydantic"}  # the walk reads real metadata
    assert dependency_plugins() == {}
