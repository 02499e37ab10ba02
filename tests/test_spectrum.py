"""Which lines each test ran, and what localization makes of it (DESIGN.md §16): the child's
recorder (real pytest processes), the Ochiai counts, the reader of a run's attempts, and the
ranking that weighs them."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from pytest_fwloop.codemap.parse import parse_source
from pytest_fwloop.core.records.nodeids import COMMAND_NODEID_PREFIX
from pytest_fwloop.core.request.code_symbols import FileSymbols
from pytest_fwloop.core.request.failure_evidence import FailureText, gather_evidence
from pytest_fwloop.core.request.ochiai import Spectrum, overlaid, read_spectrum, suspicious_lines
from pytest_fwloop.core.request.ranking import TreeMap, _wraps, rank
from pytest_fwloop.core.request.spectrum_sample import (
    MAX_FAILING,
    MAX_PASSING,
    passing_sample,
    spectrum_selection,
)
from pytest_fwloop.loop.request.spectrum_files import (
    SpectrumReader,
    measured_on_tree,
    recorded_in,
)

CALC = """\
def double(x):
    return 2 * x


def halve(x):
    return x // 2


def twice_then_halve(x):
    return halve(double(x))
"""
TEST_CALC = """\
from calc import double, halve, twice_then_halve


def test_nothing_of_the_tree():
    assert len("calc") == 4


def test_double():
    assert double(3) == 6


def test_halve():
    assert halve(6) == 3


def test_round_trip():
    assert twice_then_halve(5) == 4
"""


def spectrum_of(tests: list[str], lines: dict[str, dict[int, list[str]]]) -> Spectrum:
    """A spectrum from lines → the tests that ran them, as a child's file holds it."""
    sets: dict[tuple[int, ...], int] = {}
    files = {
        path: {
            str(line): sets.setdefault(tuple(sorted(tests.index(t) for t in ran)), len(sets))
            for line, ran in at.items()
        }
        for path, at in lines.items()
    }
    return read_spectrum({"tests": tests, "sets": [list(s) for s in sets], "files": files})


def child_run(pytester: pytest.Pytester, *args: str) -> tuple[pytest.RunResult, Path]:
    pytester.makepyfile(calc=CALC, test_calc=TEST_CALC)
    out = pytester.path / "round"
    result = pytester.runpytest_subprocess(
        f"--fwloop-child-report={out / 'results-1.json'}",
        f"--fwloop-child-spectrum={out / 'spectrum-1.json'}",
        "-p",
        "no:randomly",
        *args,
    )
    return result, out


def test_the_child_records_which_lines_each_test_ran(pytester: pytest.Pytester) -> None:
    result, out = child_run(pytester)
    result.assert_outcomes(passed=3, failed=1)  # 5 doubled and halved is 5, not 4
    spectrum = read_spectrum(json.loads((out / "spectrum-1.json").read_text()))
    # Every test measured is listed, one that ran no line of the tree too: run again later,
    # it counts with that run.
    assert sorted(spectrum.tests) == [
        "test_calc.py::test_double",
        "test_calc.py::test_halve",
        "test_calc.py::test_nothing_of_the_tree",
        "test_calc.py::test_round_trip",
    ]
    # The tests' own file is not measured: it is never the code a patch may change.
    assert list(spectrum.files) == ["calc.py"]

    def ran(line: int) -> set[str]:
        return {spectrum.tests[i] for i in spectrum.sets[spectrum.files["calc.py"][line]]}

    assert ran(2) == {"test_calc.py::test_double", "test_calc.py::test_round_trip"}
    assert ran(6) == {"test_calc.py::test_halve", "test_calc.py::test_round_trip"}
    assert ran(10) == {"test_calc.py::test_round_trip"}
    # Lines run at import, by no test, are no test's.
    assert 1 not in spectrum.files["calc.py"]


def test_a_conftest_fixture_s_calls_into_the_library_count_for_the_tests_using_it(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeconftest(
        "import pytest\nfrom calc import halve\n\n\n"
        "@pytest.fixture\ndef half_ten():\n    return halve(10)\n"
    )
    pytester.makepyfile(
        test_fixture="def test_uses_it(half_ten):\n    assert half_ten == 5\n\n\n"
        "def test_plain():\n    assert True\n"
    )
    result, out = child_run(pytester, "test_fixture.py")
    result.assert_outcomes(passed=2)
    spectrum = read_spectrum(json.loads((out / "spectrum-1.json").read_text()))
    [ran] = [spectrum.sets[spectrum.files["calc.py"][6]]]
    assert {spectrum.tests[i] for i in ran} == {"test_fixture.py::test_uses_it"}
    assert "conftest.py" not in spectrum.files


def test_each_xdist_worker_writes_its_own_file_and_the_reader_joins_them(
    pytester: pytest.Pytester,
) -> None:
    pytest.importorskip("xdist")
    result, out = child_run(pytester, "-n", "2")
    result.assert_outcomes(passed=3, failed=1)
    written = sorted(p.name for p in out.glob("spectrum-1*.json"))
    assert written
    assert all(name.startswith("spectrum-1.gw") for name in written)
    recorded = SpectrumReader(out.parent, pytester.path).newest()
    assert recorded is not None
    assert len(recorded.spectrum.tests) == 4
    assert recorded.passed == {
        "test_calc.py::test_double",
        "test_calc.py::test_halve",
        "test_calc.py::test_nothing_of_the_tree",
    }


def test_a_run_measured_by_pytest_cov_records_no_spectrum_and_keeps_its_coverage(
    pytester: pytest.Pytester,
) -> None:
    pytest.importorskip("pytest_cov")
    result, out = child_run(pytester, "-p", "pytest_cov", "--cov=calc", "--cov-report=term")
    result.assert_outcomes(passed=3, failed=1)
    assert not list(out.glob("spectrum-*"))
    assert "calc.py" in result.stdout.str()  # pytest-cov's own report, unharmed


def test_a_line_only_the_failing_test_ran_is_the_most_suspicious() -> None:
    tests = ["t::fail", "t::pass_a", "t::pass_b"]
    spectrum = spectrum_of(
        tests,
        {"calc.py": {2: tests, 6: ["t::fail", "t::pass_a"], 10: ["t::fail"], 14: ["t::pass_b"]}},
    )
    found = suspicious_lines(spectrum, {"t::fail"}, {"t::pass_a", "t::pass_b"}).lines
    assert found[("calc.py", 10)].ochiai == 1.0
    assert found[("calc.py", 6)].ochiai == pytest.approx(1 / math.sqrt(2))
    assert found[("calc.py", 2)].ochiai == pytest.approx(1 / math.sqrt(3))
    assert ("calc.py", 14) not in found  # no failing test ran it
    assert found[("calc.py", 10)].score > found[("calc.py", 6)].score > found[("calc.py", 2)].score
    assert "run by 1 failing and 0 passing" in found[("calc.py", 10)].reason(10)


def test_when_nearly_every_test_fails_the_lines_they_share_say_little() -> None:
    failing = [f"t::f{i}" for i in range(9)]
    spectrum = spectrum_of([*failing, "t::p"], {"a.py": {1: failing}})
    [nearly_all] = suspicious_lines(spectrum, set(failing), {"t::p"}).lines.values()
    spectrum = spectrum_of([failing[0], "t::p", "t::q"], {"a.py": {1: [failing[0]]}})
    [one_of_three] = suspicious_lines(spectrum, {failing[0]}, {"t::p", "t::q"}).lines.values()
    assert nearly_all.ochiai == one_of_three.ochiai == 1.0
    assert nearly_all.score == pytest.approx(math.sqrt(1 / 10))
    assert one_of_three.score == pytest.approx(math.sqrt(2 / 3))


def test_a_test_counts_with_the_lines_of_its_last_run() -> None:
    old = spectrum_of(["t::a", "t::b"], {"x.py": {1: ["t::a", "t::b"], 2: ["t::a"]}})
    new = spectrum_of(["t::a"], {"x.py": {3: ["t::a"]}})
    joined = overlaid([old, new])
    assert joined is not None
    lines = {
        line: {joined.tests[i] for i in joined.sets[at]}
        for line, at in joined.files["x.py"].items()
    }
    assert lines == {1: {"t::b"}, 3: {"t::a"}}


def test_the_reader_takes_every_attempt_oldest_first(tmp_path: Path) -> None:
    def write(
        round_: str, attempt: int, spectrum: dict[str, object], outcomes: dict[str, str]
    ) -> None:
        folder = tmp_path / "rounds" / round_
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"spectrum-{attempt}.json").write_text(json.dumps(spectrum))
        tests = [{"nodeid": n, "outcome": o} for n, o in outcomes.items()]
        (folder / f"results-{attempt}.json").write_text(json.dumps({"tests": tests}))

    root = str(tmp_path / "tree")
    write(
        "01",
        1,
        {"root": root, "tests": ["t::a", "t::b"], "sets": [[0, 1]], "files": {"x.py": {"1": 0}}},
        {"t::a": "failed", "t::b": "failed"},
    )
    # After a patch, a focus run of t::a alone: it passes now, through other lines.
    write(
        "02",
        1,
        {"root": root, "tests": ["t::a"], "sets": [[0]], "files": {"x.py": {"5": 0}}},
        {"t::a": "passed"},
    )
    # A rootdir outside the tree: none of its lines may be patched.
    write("02", 2, {"root": "/elsewhere", "tests": [], "sets": [], "files": {}}, {})
    (tmp_path / "rounds" / "02" / "spectrum-3.json").write_text("{cut short")
    reader = SpectrumReader(tmp_path / "rounds", tmp_path / "tree")
    recorded = reader.newest()
    assert recorded is not None
    assert recorded.passed == {"t::a"}
    assert set(recorded.spectrum.files["x.py"]) == {1, 5}
    assert reader.newest() is recorded  # read once while no file changes


def test_an_even_sample_of_passing_tests_ranks_lines_as_the_whole_suite_does() -> None:
    """Line 1 runs in every test, line 2 in the failing one and a tenth of the passing ones:
    measured over every tenth passing test, scaled back to the 1,000 that passed, each line's
    Ochiai is what the whole suite gives."""
    passing = [f"t::p{i}" for i in range(1_000)]
    tests = ["t::f", *passing]
    every = {"x.py": {1: tests, 2: ["t::f", *passing[::10]]}}
    whole = suspicious_lines(spectrum_of(tests, every), {"t::f"}, set(passing)).lines
    sample = passing[::10]
    sampled_runs = {"x.py": {1: ["t::f", *sample], 2: ["t::f", *sample[::10]]}}
    sampled = spectrum_of(["t::f", *sample], sampled_runs)
    scaled = suspicious_lines(sampled, {"t::f"}, set(sample), passed_in_suite=1_000).lines
    unscaled = suspicious_lines(sampled, {"t::f"}, set(sample)).lines
    for line in (1, 2):
        assert scaled[("x.py", line)].ochiai == pytest.approx(whole[("x.py", line)].ochiai)
        assert scaled[("x.py", line)].score == pytest.approx(whole[("x.py", line)].score)
    assert unscaled[("x.py", 2)].ochiai > whole[("x.py", 2)].ochiai  # a sample alone overrates


def test_the_spectrum_run_measures_failures_and_an_even_sample_only_when_due() -> None:
    passing = [f"tests/test_{i // 50}.py::test_{i}" for i in range(1_000)]
    failing = ["tests/test_3.py::test_bad", "tests/test_7.py::test_worse"]
    chosen = spectrum_selection(failing, passing, measured=set())
    assert chosen[:2] == failing
    assert len(chosen) == 2 + MAX_PASSING
    # Spread over the whole suite, so over its files: every file gives its share.
    assert len({n.split("::")[0] for n in chosen[2:]}) == 20
    # Every failing test already measured on this tree (a focus run after the patch): none.
    assert spectrum_selection(failing, passing, measured={*failing}) == []
    # A small suite runs whole; many failures are bounded.
    assert spectrum_selection(failing, passing[:10], measured={failing[0]}) == [
        *failing,
        *passing[:10],
    ]
    many = [f"t.py::f{i}" for i in range(500)]
    assert spectrum_selection(many, [], set()) == many[:MAX_FAILING]
    # A flaky rerun runs every failure; its sample leaves them and the tester's commands out.
    command = f"{COMMAND_NODEID_PREFIX}make check"
    assert passing_sample(many, [*many[:3], command, *passing[:2]]) == passing[:2]
    assert len(passing_sample(many, passing)) == MAX_PASSING


def test_only_the_trees_own_recordings_count_as_measured(tmp_path: Path) -> None:
    """Iteration 3 starts from the tree iteration 2's patch made: iteration 2's focus run
    measured it, its spectrum run (before the patch) and the baseline's round did not."""
    rounds = tmp_path / "rounds"

    def spectrum(name: str, tests: list[str]) -> None:
        path = rounds / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"root": "/t", "tests": tests, "sets": [], "files": {}}))

    for folder in ("01", "02"):
        (rounds / folder).mkdir(parents=True)
        (rounds / folder / "pytest.log").write_text("")
    spectrum("02/spectrum-run-1.json", ["t::old"])
    spectrum("02/spectrum-1.json", ["t::a"])
    spectrum("02/spectrum-1.gw0.json", ["t::b"])
    assert measured_on_tree(rounds, 2) == {"t::old"}
    assert measured_on_tree(rounds, 3) == {"t::a", "t::b"}
    spectrum("03/spectrum-run-1.json", ["t::c"])
    assert measured_on_tree(rounds, 3) == {"t::a", "t::b", "t::c"}
    # The baseline's last flaky rerun measured its failures on the tree iteration 2 starts from.
    spectrum("01/spectrum-flaky-2.json", ["t::f"])
    assert measured_on_tree(rounds, 2) == {"t::old", "t::f"}


def test_a_traced_flaky_rerun_is_read_after_the_run_it_reruns(tmp_path: Path) -> None:
    """A focus run that recorded, then the gate (recording none) whose last flaky rerun did:
    the reader takes them in that order, each with its own outcomes."""
    folder = tmp_path / "02"
    folder.mkdir()
    for name in (
        "spectrum-flaky-2-2.json",
        "spectrum-flaky-2-2.gw0.json",
        "spectrum-1.json",
        "spectrum-run-1.json",
    ):
        (folder / name).write_text("{}")
    assert [(r.name, [f.name for f in files]) for r, files in recorded_in(folder)] == [
        ("results-1.json", ["spectrum-1.json"]),
        ("flaky-2-2-results.json", ["spectrum-flaky-2-2.gw0.json", "spectrum-flaky-2-2.json"]),
    ]
    (folder / "spectrum-flaky-2.json").write_text("{}")  # the focus run's own: read before
    assert [r.name for r, _ in recorded_in(folder)] == [
        "results-1.json",
        "flaky-2-results.json",
        "flaky-2-2-results.json",
    ]
    assert [r.name for r, _ in recorded_in(folder, spectrum_runs=True)] == [
        "spectrum-run-1-results.json"
    ]


def test_the_reader_puts_a_rounds_spectrum_run_before_its_test_run(tmp_path: Path) -> None:
    folder = tmp_path / "rounds" / "02"
    folder.mkdir(parents=True)
    root = str(tmp_path)
    before = {
        "root": root,
        "tests": ["t::a", "t::p"],
        "sets": [[0, 1]],
        "files": {"x.py": {"1": 0}},
    }
    after = {"root": root, "tests": ["t::a"], "sets": [[0]], "files": {"x.py": {"2": 0}}}
    (folder / "spectrum-run-1.json").write_text(json.dumps(before))
    (folder / "spectrum-run-1-results.json").write_text(
        json.dumps(
            {
                "tests": [
                    {"nodeid": "t::a", "outcome": "failed"},
                    {"nodeid": "t::p", "outcome": "passed"},
                ]
            }
        )
    )
    (folder / "spectrum-1.json").write_text(json.dumps(after))
    (folder / "results-1.json").write_text(
        json.dumps({"tests": [{"nodeid": "t::a", "outcome": "failed"}]})
    )
    recorded = SpectrumReader(tmp_path / "rounds", tmp_path).newest()
    assert recorded is not None
    assert recorded.passed == {"t::p"}
    ran = {
        line: {recorded.spectrum.tests[i] for i in recorded.spectrum.sets[at]}
        for line, at in recorded.spectrum.files["x.py"].items()
    }
    assert ran == {1: {"t::p"}, 2: {"t::a"}}  # t::a counts with its run after the patch


def tree_of(files: dict[str, str]) -> TreeMap:
    tree = TreeMap()
    parsed: dict[str, FileSymbols] = {}
    for path, text in files.items():
        symbols = parse_source(path, text.encode())
        assert symbols is not None
        parsed[path] = symbols
    tree.update(parsed)
    return tree


def test_the_spectrum_outranks_the_words_of_the_failure_and_skips_the_messenger() -> None:
    """A value comes out wrong: the traceback names only the test and the exception class the
    library raises; the failing test's words name a helper it never ran."""
    files = {
        "lib/errors.py": (
            "class CalcError(Exception):\n    def __str__(self):\n        return 'calc failed'\n"
        ),
        "lib/calc.py": CALC,
        "lib/report.py": "def round_trip_report(x):\n    return f'{x}'\n",
    }
    tree = tree_of(files)
    failure = FailureText(
        "tests/test_calc.py::test_round_trip",
        "tests/test_calc.py:12: in test_round_trip\n"
        "E   lib.errors.CalcError: calc failed round_trip_report\n",
    )
    evidence = gather_evidence([failure], [], "", "", tree.files, {})
    assert evidence.raised == {"CalcError"}
    spectrum = spectrum_of(
        ["tests/test_calc.py::test_round_trip", "tests/test_calc.py::test_double"],
        {
            "lib/calc.py": {
                2: ["tests/test_calc.py::test_round_trip", "tests/test_calc.py::test_double"],
                6: ["tests/test_calc.py::test_round_trip"],
                10: ["tests/test_calc.py::test_round_trip"],
            },
            "lib/errors.py": {3: ["tests/test_calc.py::test_round_trip"]},
        },
    )
    suspicions = suspicious_lines(
        spectrum, {"tests/test_calc.py::test_round_trip"}, {"tests/test_calc.py::test_double"}
    )
    ranked = rank(tree, evidence, files, suspicions)
    names = [tree.symbol((r.path, r.index)).name for r in ranked]
    assert names[:2] == ["halve", "twice_then_halve"]
    assert names.index("halve") < names.index("double")
    by_name = {tree.symbol((r.path, r.index)).name: r for r in ranked}
    assert by_name["halve"].line == 6
    # The exception's own code runs only when a test fails; it gets no spectrum points.
    assert "__str__" not in by_name or not any("Ochiai" in r for r in by_name["__str__"].reasons)
    # Named by the failure, never run by it: a tenth of what the words gave it.
    without = rank(tree, evidence, files)
    before = next(r.score for r in without if r.path == "lib/report.py")
    after = next(r.score for r in ranked if r.path == "lib/report.py")
    assert after == pytest.approx(before * 0.1)


def test_where_every_test_fails_the_code_they_ran_keeps_its_words_points() -> None:
    """A bug that breaks every test of a small suite (Zephyr's shell sample: both its tests):
    no line stands above another, so the spectrum adds nothing, yet what the failures ran is
    still where the defect is, and what they never ran keeps a tenth."""
    files = {"lib/calc.py": CALC}
    tree = tree_of(files)
    tests = ["t::round_trip", "t::double"]
    failure = FailureText(
        "t::round_trip", "E   AssertionError: double halve twice_then_halve went wrong\n"
    )
    evidence = gather_evidence([failure], [], "", "", tree.files, {})
    spectrum = spectrum_of(tests, {"lib/calc.py": {2: tests, 10: ["t::round_trip"]}})
    suspicions = suspicious_lines(spectrum, set(tests), set())
    assert all(s.score == 0 for s in suspicions.lines.values())
    scores = {tree.symbol((r.path, r.index)).name: r.score for r in rank(tree, evidence, files)}
    ranked = rank(tree, evidence, files, suspicions)
    by_name = {tree.symbol((r.path, r.index)).name: r for r in ranked}
    assert by_name["double"].score == pytest.approx(scores["double"])
    assert by_name["halve"].score == pytest.approx(scores["halve"] * 0.1)
    # Run by one of the two: between the two.
    assert by_name["twice_then_halve"].factor == pytest.approx(0.1 + 0.9 * math.sqrt(1 / 2))
    assert not any("Ochiai" in r for r in by_name["double"].reasons)


def test_the_c_spectrum_says_nothing_of_tables_and_macros() -> None:
    """A command table's entry and a macro hold no line gcov counts: the failure's words about
    them keep their points, while a C function no failing test ran keeps a tenth."""
    files = {
        "src/cmds.c": (
            "#define CRC_INIT 0x00\n"
            "static int cmd_version(void) { return 1; }\n"
            'SHELL_CMD_REGISTER(version, NULL, "Kernel version.", cmd_version);\n'
        )
    }
    tree = tree_of(files)
    failure = FailureText(
        "t::test_version", "E   AssertionError: 'Kernel version.' CRC_INIT cmd_version\n"
    )
    evidence = gather_evidence([failure], [], "", "", tree.files, {})
    spectrum = Spectrum(("t::test_version", "t::boot"), (), {}, {"src/cmds.c": "gcov"})
    suspicions = suspicious_lines(spectrum, {"t::test_version"}, {"t::boot"})
    factors = {
        tree.symbol((r.path, r.index)).name: r.factor
        for r in rank(tree, evidence, files, suspicions)
    }
    assert factors == {"CRC_INIT": 1.0, "cmd_version": 0.1, "version": 1.0}


def test_a_binding_and_its_locking_shell_hand_the_failure_on_whole() -> None:
    """A Python frame ends in a Cython binding calling the C library's public function, which
    calls its implementation: neither shell is a hop."""
    pyx = (
        "def dir_read(LFSFilesystem fs, LFSDirectory dh):\n"
        "    cdef lfs_info info\n"
        "    return _raise_on_error(lfs_dir_read(&fs._impl, &dh._impl, &info))\n"
    )
    c = (
        "int lfs_dir_read(lfs_t *lfs, lfs_dir_t *dir, struct lfs_info *info) {\n"
        "    LFS_LOCK(lfs->cfg);\n"
        "    int err = lfs_dir_read_(lfs, dir, info);\n"
        "    return err;\n"
        "}\n"
        "static int lfs_dir_read_(lfs_t *lfs, lfs_dir_t *dir, struct lfs_info *info) {\n"
        "    return lfs_dir_fetch(lfs, dir);\n"
        "}\n"
        "static int lfs_dir_fetch(lfs_t *lfs, lfs_dir_t *dir) { return 0; }\n"
    )
    assert parse_source("lfs.pyi", b"def dir_read(fs, dh): ...\n") is None  # stubs never run
    tree = tree_of({"src/lfs.pyx": pyx, "lfs.c": c})
    assert [s.name for s in tree.files["src/lfs.pyx"].symbols] == ["dir_read"]
    failure = FailureText("t::test_listing", "src/lfs.pyx:3: in lfs.dir_read\n")
    evidence = gather_evidence([failure], [], "", "", tree.files, {}, {"src/lfs.pyx": pyx})
    ranked = rank(tree, evidence, ["src/lfs.pyx", "lfs.c"])
    by_name = {tree.symbol((r.path, r.index)).name: r for r in ranked}
    # A call is a hop (half the caller's score); a shell is not.
    assert by_name["lfs_dir_read_"].score > 0.75 * by_name["lfs_dir_read"].score
    assert by_name["lfs_dir_fetch"].score < 0.6 * by_name["lfs_dir_read_"].score
    assert "wrapped by lfs_dir_read" in by_name["lfs_dir_read_"].reasons


def test_an_error_code_the_failure_names_points_at_the_condition_that_chose_it() -> None:
    c = (
        "static uint16_t disk_version_major(lfs_t *lfs) { return lfs->v >> 16; }\n"
        "static int mount_(lfs_t *lfs) {\n"
        "    if (major != disk_version_major(lfs)) {\n"
        "        err = LFS_ERR_INVAL;\n"
        "        goto cleanup;\n"
        "    }\n"
        "    while (busy(lfs)) {\n"
        "        return -EBUSY_WAIT;\n"
        "    }\n"
        "    return -EIO_UNUSED;\n"
        "}\n"
    )
    symbols = parse_source("lfs.c", c.encode())
    assert symbols is not None
    sites = {(lit.text, lit.line): lit.line_names for lit in symbols.literals}
    assert sites[("LFS_ERR_INVAL", 4)] == ("major", "disk_version_major", "lfs")
    assert sites[("EBUSY_WAIT", 8)] == ()  # a loop's condition did not choose the error
    assert sites[("EIO_UNUSED", 10)] == ()
    tree = tree_of({"lfs.c": c})
    failure = FailureText("t::test_mount", "E   LittleFSError: -22: LFS_ERR_INVAL\n")
    evidence = gather_evidence([failure], [], "", "", tree.files, {})
    ranked = rank(tree, evidence, ["lfs.c"])
    reasons = {tree.symbol((r.path, r.index)).name: r.reasons for r in ranked}
    assert any('named beside "lfs_err_inval" on line 4' in r for r in reasons["disk_version_major"])
    assert any('holds "lfs_err_inval" (line 4)' in r for r in reasons["mount_"])


def test_a_wrapper_is_named_with_whole_words_of_its_shell() -> None:
    assert _wraps("dir_read", "lfs_dir_read")
    assert _wraps("lfs_dir_read", "lfs_dir_read_")
    assert _wraps("mount", "lfs_mount")
    assert not _wraps("read", "thread_create")  # a word inside a word
    assert not _wraps("test_mount", "lfs_test_mount_impl")  # a test names what it tests
    assert not _wraps("get", "get_value")  # too short to say anything


SHELL_CORE = "".join(
    f"int shell_step{n}(int x)\n{{\n    return x + {n};\n}}\n\n" for n in range(12)
)
KERNEL_CMDS = """\
static int cmd_kernel_cycles(int argc) { return print("cycles"); }
static int cmd_kernel_version(int argc) { return print("Zephyr version"); }
static int cmd_kernel_uptime(int argc) { return print("uptime"); }

SHELL_STATIC_SUBCMD_SET_CREATE(sub_kernel,
    SHELL_CMD(cycles, NULL, "Kernel cycles.", cmd_kernel_cycles),
    SHELL_CMD(verison, NULL, "Kernel version.", cmd_kernel_version),
    SHELL_CMD(uptime, NULL, "Kernel uptime.", cmd_kernel_uptime),
    SHELL_SUBCMD_SET_END
);
"""


def test_what_the_spectrum_cannot_count_keeps_a_place_near_the_top() -> None:
    """A misspelt command in a table (Zephyr's `verison`): the failing test ran a dozen shell
    functions no passing test ran, each above the table on points, but no line of a table is
    counted; the output lists the table's entries, so the table takes the third place."""
    files = {"shell/core.c": SHELL_CORE, "shell/kernel_cmds.c": KERNEL_CMDS}
    tree = tree_of(files)
    failing, passing = "t::test_version", "t::test_boot"
    failure = FailureText(
        failing,
        "uart:~$ kernel version\nkernel - Kernel commands\nSubcommands:\n"
        "cycles   :Kernel cycles.\nverison  :Kernel version.\nuptime   :Kernel uptime.\n"
        "E   AssertionError: expected response not found\n",
    )
    evidence = gather_evidence([failure], [], "", "", tree.files, {})
    steps = {3 + 5 * n: [failing] for n in range(12)}
    spectrum = read_spectrum(
        {
            "tests": [failing, passing],
            "sets": [[0], [0, 1]],
            "files": {
                "shell/core.c": {str(line): 0 for line in steps},
                "shell/kernel_cmds.c": {"1": 1},
            },
            "measured": {"shell/core.c": "gcov", "shell/kernel_cmds.c": "gcov"},
        }
    )
    suspicions = suspicious_lines(spectrum, {failing}, {passing})
    ranked = rank(tree, evidence, files, suspicions)
    names = [tree.symbol((r.path, r.index)).name for r in ranked]
    by_score = sorted(ranked, key=lambda r: -r.score)
    table = next(r for r in ranked if tree.symbol((r.path, r.index)).name == "sub_kernel")
    assert by_score.index(table) >= 12  # every shell step has more points
    assert names.index("sub_kernel") <= 2
    # What the spectrum judged unrun keeps no place of its own: the handlers stay below.
    assert names.index("cmd_kernel_version") > names.index("sub_kernel")
