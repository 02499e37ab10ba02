"""Which C each test ran on a host build (DESIGN.md §18): the child gives each test's
processes their own GCOV_PREFIX and asks a firmware living across tests for its counts
(real gcc, real gcov, real pytest processes); the reader joins the C to the Python; the ranking
says the C spectrum chose a chunk."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from envs_support.examples import copy_example, require_example_tools
from loopkit import LoopProject
from pytest_fwloop.codemap.parse import parse_source
from pytest_fwloop.core.execution.c_coverage import build_variables
from pytest_fwloop.core.execution.gcov_counts import Executed, add_document, encode, gcov_documents
from pytest_fwloop.core.request.failure_evidence import FailureText, gather_evidence
from pytest_fwloop.core.request.ochiai import joined, read_spectrum, suspicious_lines
from pytest_fwloop.core.request.ranking import TreeMap, rank
from pytest_fwloop.loop.request.spectrum_files import SpectrumReader
from standin_model import Bug, StandinModel

pytestmark = pytest.mark.skipif(
    shutil.which("gcc") is None or shutil.which("gcov") is None, reason="needs gcc and gcov"
)

#: A console firmware: one command a line, or one command from its arguments and out.
FIRMWARE_C = """\
#define _POSIX_C_SOURCE 200809L
#include <signal.h>
#include <stdio.h>
#include <string.h>

extern void __gcov_dump(void);
extern void __gcov_reset(void);

static void dump_counts(int signo)
{
    (void)signo;
    __gcov_dump();
    __gcov_reset();
}

static int scale(int x)
{
    return x * 3;
}

static int offset(int x)
{
    return x + 7;
}

static void run(const char *line)
{
    int x = 0;
    if (sscanf(line, "scale %d", &x) == 1) {
        printf("%d\\n", scale(x));
    } else if (sscanf(line, "offset %d", &x) == 1) {
        printf("%d\\n", offset(x));
    } else {
        printf("ERR\\n");
    }
    fflush(stdout);
}

int main(int argc, char **argv)
{
    char line[64];
    struct sigaction action = {0};
    action.sa_handler = dump_counts;
    action.sa_flags = SA_RESTART;
    sigaction(SIGUSR1, &action, NULL);
    if (argc > 1) {
        run(argv[1]);
        return 0;
    }
    while (fgets(line, sizeof line, stdin) != NULL) {
        run(line);
    }
    return 0;
}
"""
TESTS = """\
import subprocess
from pathlib import Path

import pytest

FW = str(Path(__file__).parent / "build" / "fw")


@pytest.fixture(scope="module")
def living():
    process = subprocess.Popen(
        [FW], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1
    )
    yield process
    process.stdin.close()
    process.wait()


def ask(process, line):
    process.stdin.write(line + "\\n")
    process.stdin.flush()
    return process.stdout.readline().strip()


def test_scale_once():
    assert subprocess.run([FW, "scale 2"], capture_output=True, text=True).stdout == "6\\n"


def test_offset_once():
    assert subprocess.run([FW, "offset 2"], capture_output=True, text=True).stdout == "9\\n"


def test_living_scale(living):
    assert ask(living, "scale 3") == "9"


def test_living_offset(living):
    assert ask(living, "offset 3") == "10"


def test_no_c():
    assert True
"""


def _built(root: Path, name: str = "fw.c", text: str = FIRMWARE_C) -> None:
    (root / "src").mkdir(exist_ok=True)
    (root / "src" / name).write_text(text)
    (root / "build").mkdir(exist_ok=True)
    subprocess.run(
        ["gcc", "--coverage", "-O0", "-c", "-o", "build/fw.o", f"src/{name}"], cwd=root, check=True
    )
    subprocess.run(["gcc", "--coverage", "-o", "build/fw", "build/fw.o"], cwd=root, check=True)


def _child_run(pytester: pytest.Pytester, *args: str) -> tuple[pytest.RunResult, Path]:
    out = pytester.path / "round"
    result = pytester.runpytest_subprocess(
        "-p",
        "no:randomly",
        "-p",
        "no:cacheprovider",
        f"--fwloop-child-report={out / 'results-1.json'}",
        f"--fwloop-child-spectrum={out / 'spectrum-1.json'}",
        f"--fwloop-child-gcov={out / 'gcov-1'}",
        *args,
    )
    return result, out


def _line_of(text: str, needle: str) -> int:
    return next(n for n, line in enumerate(text.splitlines(), 1) if needle in line)


def test_each_test_s_processes_and_a_living_firmware_s_counts_are_that_test_s_own(
    pytester: pytest.Pytester,
) -> None:
    _built(pytester.path)
    pytester.makepyfile(test_fw=TESTS)
    result, out = _child_run(pytester)
    result.assert_outcomes(passed=5)
    spectrum = read_spectrum(json.loads((out / "spectrum-1.gcov.json").read_text()))
    assert spectrum.measured == {"src/fw.c": "gcov"}
    lines = spectrum.files["src/fw.c"]

    def ran(needle: str) -> set[str]:
        at = lines[_line_of(FIRMWARE_C, needle)]
        return {spectrum.tests[i].split("::")[1] for i in spectrum.sets[at]}

    assert ran("return x * 3;") == {"test_scale_once", "test_living_scale"}
    assert ran("return x + 7;") == {"test_offset_once", "test_living_offset"}
    assert "test_no_c" in {t.split("::")[1] for t in spectrum.tests}
    # The counts are read and cleared away; nothing is left in the build's folder either.
    assert not (out / "gcov-1").exists()
    assert not list((pytester.path / "build").glob("*.gcda"))


def test_a_firmware_living_on_without_a_handler_is_said_of_every_test_it_lived_through(
    pytester: pytest.Pytester,
) -> None:
    mute = FIRMWARE_C.replace("sigaction(SIGUSR1, &action, NULL);", "(void)action;")
    _built(pytester.path, text=mute)
    pytester.makepyfile(test_fw=TESTS)
    result, out = _child_run(pytester)
    result.assert_outcomes(passed=5)
    spectrum = read_spectrum(json.loads((out / "spectrum-1.gcov.json").read_text()))
    lines = spectrum.files["src/fw.c"]
    at = lines[_line_of(mute, "return x * 3;")]
    assert {spectrum.tests[i].split("::")[1] for i in spectrum.sets[at]} == {
        "test_scale_once",
        "test_living_scale",
        "test_living_offset",  # the module's firmware wrote its counts at its end
        "test_no_c",
    }


def test_the_reader_joins_an_attempt_s_c_and_python_and_the_c_spectrum_names_itself(
    tmp_path: Path,
) -> None:
    python = {
        "root": str(tmp_path),
        "tests": ["t.py::test_a", "t.py::test_b"],
        "sets": [[0], [0, 1]],
        "files": {"lib.py": {"1": 0, "2": 1}},
    }
    c_lines = {
        "root": str(tmp_path),
        "tests": ["t.py::test_a", "t.py::test_b"],
        "sets": [[0], [1]],
        "files": {"src/fw.c": {"3": 0, "7": 1}},
        "measured": {"src/fw.c": "gcov", "src/idle.c": "gcov"},
    }
    folder = tmp_path / "rounds" / "01"
    folder.mkdir(parents=True)
    (folder / "spectrum-1.json").write_text(json.dumps(python))
    (folder / "spectrum-1.gcov.json").write_text(json.dumps(c_lines))
    (folder / "results-1.json").write_text(
        json.dumps(
            {
                "tests": [
                    {"nodeid": "t.py::test_a", "outcome": "failed"},
                    {"nodeid": "t.py::test_b", "outcome": "passed"},
                ]
            }
        )
    )
    recorded = SpectrumReader(tmp_path / "rounds", tmp_path).newest()
    assert recorded is not None
    spectrum = recorded.spectrum
    assert set(spectrum.files) == {"lib.py", "src/fw.c"}
    assert spectrum.measured == {"src/fw.c": "gcov", "src/idle.c": "gcov"}
    assert sorted(spectrum.tests) == ["t.py::test_a", "t.py::test_b"]

    fw = "int good(int x)\n{\n    return x;\n}\n\nint bad(int x)\n{\n    return x - 1;\n}\n"
    idle = "int idle(int x)\n{\n    return x;\n}\n"
    tree = TreeMap()
    tree.update(
        {
            p: s
            for p, t in {"src/fw.c": fw, "src/idle.c": idle}.items()
            if (s := parse_source(p, t.encode()))
        }
    )
    suspicions = suspicious_lines(spectrum, ["t.py::test_a"], recorded.passed)
    evidence = gather_evidence(
        [FailureText("t.py::test_a", "AssertionError: good idle")], [], "", "", tree.files, {}, {}
    )
    ranked = rank(tree, evidence, list(tree.files), suspicions)
    first = ranked[0]
    assert tree.symbol((first.path, first.index)).name == "good"
    assert first.reasons[0].startswith("C spectrum (gcov): line 3 run by 1 failing and 0 passing")
    # idle.c was measured and no failing test ran it: its name in the failure counts a tenth.
    scores = {tree.symbol((r.path, r.index)).name: r.score for r in ranked}
    assert scores.get("idle", 0.0) < 0.2 * scores["good"]


def test_gcov_documents_are_read_one_after_another_and_encoded_by_test() -> None:
    one = {
        "current_working_directory": "/t/build",
        "data_file": "a.gcda",
        "files": [
            {
                "file": "../src/a.c",
                "lines": [{"line_number": 3, "count": 2}, {"line_number": 4, "count": 0}],
            },
            {"file": "/usr/include/x.h", "lines": [{"line_number": 1, "count": 1}]},
        ],
    }
    text = json.dumps(one) + "\n\n" + json.dumps({**one, "data_file": "b.gcda"}) + "\n{cut"
    documents = list(gcov_documents(text))
    assert [d["data_file"] for d in documents] == ["a.gcda", "b.gcda"]
    executed = Executed()
    add_document(executed, documents[0], "/t")
    assert executed.ran == {"src/a.c": {3}}
    assert executed.measured == {"src/a.c"}
    payload = encode(
        [(["x::t1"], executed), (["x::t2", "x::t3"], executed), (["x::t4"], Executed())],
        "/t",
        "gcov",
    )
    spectrum = read_spectrum(payload)
    assert spectrum.tests == ("x::t1", "x::t2", "x::t3", "x::t4")
    assert {spectrum.tests[i] for i in spectrum.sets[spectrum.files["src/a.c"][3]]} == {
        "x::t1",
        "x::t2",
        "x::t3",
    }
    assert joined([]) is None


EXTENSION_C = """\
#define PY_SSIZE_T_CLEAN
#include <Python.h>

static long triple(long x)
{
    return x * 3;
}

static long negate(long x)
{
    return -x;
}

static PyObject *py_triple(PyObject *self, PyObject *args)
{
    long x;
    if (!PyArg_ParseTuple(args, "l", &x)) {
        return NULL;
    }
    return PyLong_FromLong(triple(x));
}

static PyObject *py_negate(PyObject *self, PyObject *args)
{
    long x;
    if (!PyArg_ParseTuple(args, "l", &x)) {
        return NULL;
    }
    return PyLong_FromLong(negate(x));
}

static PyMethodDef methods[] = {
    {"triple", py_triple, METH_VARARGS, ""},
    {"negate", py_negate, METH_VARARGS, ""},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "calc", NULL, -1, methods};

PyMODINIT_FUNC PyInit_calc(void)
{
    return PyModule_Create(&module);
}
"""
EXTENSION_TESTS = """\
import calc


def test_triple():
    assert calc.triple(2) == 6


def test_negate():
    assert calc.negate(2) == -2


def test_both():
    assert calc.triple(calc.negate(1)) == -3


def test_neither():
    assert True
"""


def test_c_compiled_into_the_tests_process_has_each_test_s_lines(
    pytester: pytest.Pytester,
) -> None:
    pytest.importorskip("elftools")
    import sysconfig

    (pytester.path / "src").mkdir()
    (pytester.path / "src" / "calc.c").write_text(EXTENSION_C)
    (pytester.path / "build").mkdir()
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    include = sysconfig.get_path("include")
    subprocess.run(
        [
            "gcc",
            "--coverage",
            "-O0",
            "-fPIC",
            f"-I{include}",
            "-c",
            "-o",
            "build/calc.o",
            "src/calc.c",
        ],
        cwd=pytester.path,
        check=True,
    )
    subprocess.run(
        ["gcc", "--coverage", "-shared", "-o", f"calc{suffix}", "build/calc.o"],
        cwd=pytester.path,
        check=True,
    )
    pytester.makepyfile(test_calc=EXTENSION_TESTS)
    result, out = _child_run(pytester)
    result.assert_outcomes(passed=4)
    spectrum = read_spectrum(json.loads((out / "spectrum-1.gcov.json").read_text()))
    lines = spectrum.files["src/calc.c"]

    def ran(needle: str) -> set[str]:
        at = lines[_line_of(EXTENSION_C, needle)]
        return {spectrum.tests[i].split("::")[1] for i in spectrum.sets[at]}

    assert ran("return x * 3;") == {"test_triple", "test_both"}
    assert ran("return -x;") == {"test_negate", "test_both"}
    # The module's set-up ran at import, in no test.
    assert _line_of(EXTENSION_C, "return PyModule_Create") not in lines
    # The exit writes nothing after the last test's counts.
    assert not list(pytester.path.rglob("*.gcda"))


@pytest.mark.slow
def test_a_c_defect_no_failure_names_reaches_the_model_through_the_c_the_tests_ran(
    project: LoopProject,
) -> None:
    """examples/host-gateway with `is_leap_year` losing its 400-year rule: the failing tests
    say `weekday`, `yday`, `epoch`, and the leap-year rule is three calls below what they name.
    With the C spectrum (gcov) and room for a few functions, the ranking puts it first of its
    file by the lines the failing tests ran, and a model that sees only its messages fixes it
    (benchmarks/c_spectrum.py measures the run without the C spectrum beside it)."""
    require_example_tools("host-gateway")
    root = copy_example("host-gateway", project.root)
    date_c = root / "firmware" / "src" / "date.c"
    right = "    return (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;"
    wrong = "    return year % 4 == 0 && year % 100 != 0;"
    text = date_c.read_text()
    date_c.write_text(text.replace(right, wrong))
    at = text.splitlines().index(right)
    lines = text.splitlines()
    bug = Bug(
        "leap-century",
        (*lines[at - 3 : at], wrong, *lines[at + 1 : at + 4]),
        tuple(lines[at - 3 : at + 4]),
    )
    budget = ("-o", "fwloop_source_bytes=8192", "--max-iter=4")
    subprocess.run(
        ["make", "-s"],
        cwd=root,
        check=True,
        env={**os.environ, **build_variables("gcov")},
    )
    with StandinModel([bug]) as model:
        result = project.run(
            f"--fwloop-coder={model.spec}", *budget, "-o", "fwloop_c_coverage=gcov"
        )
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    assert project.summary()["outcome"] == "success"
    assert model.seen[0].visible == ["leap-century"]
    [run_dir] = project.run_dirs()
    [request, *_] = [
        json.loads(p.read_text()) for p in sorted(run_dir.glob("rounds/*/coder-*.request.json"))
    ]
    assert any("C spectrum (gcov)" in c["reason"] for c in request["sources"])
    [ranking] = sorted(run_dir.glob("rounds/*/coder-1.ranking.json"))[:1]
    rows = json.loads(ranking.read_text())["candidates"]
    leap = next(r for r in rows if r["symbol"] == "is_leap_year")
    assert leap["sent"] == "source"
    assert "gcov_spectrum" in leap["signals"]
    assert leap["reasons"][0].startswith("C spectrum (gcov): line")
    assert list(run_dir.glob("rounds/*/spectrum-*.gcov.json"))
    events = (run_dir / "task-events.jsonl").read_text()
    # firmware/legacy/ is C the Makefile never builds.
    c_files = [p for p in (root / "firmware").rglob("*") if p.suffix in (".c", ".h")]
    built = [p for p in c_files if "legacy" not in p.parts]
    assert 0 < len(built) < len(c_files)
    assert f"the build uses {len(built)} of the tree's {len(c_files)} C/C++ file(s)" in events
