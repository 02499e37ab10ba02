"""The coder's failure context: clusters, excerpts, scrubbing and the hard cap (DESIGN.md §5)."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_fwloop.core.records.agent_protocol import Failure
from pytest_fwloop.core.request.failure_pack import (
    EXCERPT_FLOOR,
    MIN_EXCERPT,
    MIN_NODEID_BYTES,
    MIN_SIGNATURE_BYTES,
    guaranteed_signatures,
    pack_failures,
    packed_size,
)
from pytest_fwloop.core.suite.results import Phase, TestRecord
from pytest_fwloop.core.suite.signature import SIGNATURE_CHARS, excerpt, scrub, signature

ROOT = "/work/board-fw"
CAP = 32768
COUNT_NOTE = re.compile(r"this test and (\d+) more fail with this signature")
OMITTED_NOTE = re.compile(r"(\d+) distinct signatures \((\d+) tests\), this one first")
SHORTENED = re.compile(r"(?P<head>.*)…(?P<tail>.*) #[0-9a-f]{6}", re.DOTALL)


def failing(
    nodeid: str,
    crash: str = "",
    longrepr: str = "",
    sections: str = "",
    phase: Phase = "call",
    env_failure: str | None = None,
) -> TestRecord:
    return TestRecord(
        nodeid=nodeid,
        outcome="error" if phase == "setup" else "failed",
        phase=phase,
        crash=crash,
        longrepr=longrepr,
        sections=sections,
        env_failure=env_failure,
    )


def wire_bytes(text: str) -> int:
    return len(json.dumps(text, ensure_ascii=False).encode()) - 2


def stands_for(packed: str, original: str) -> bool:
    """`packed` is `original`, or its shortened form (start…end #digest)."""
    shortened = SHORTENED.fullmatch(packed)
    return packed == original or (
        shortened is not None
        and original.startswith(shortened["head"])
        and original.endswith(shortened["tail"])
    )


def accounted_tests(failures: list[Failure]) -> int:
    """Tests named or counted by a pack whose member lists collapsed at most."""
    return sum(
        int(note[1]) + 1 if (note := COUNT_NOTE.match(failure.excerpt)) else 1
        for failure in failures
    )


# --- signature ----------------------------------------------------------------------------------


def test_signature_names_phase_test_line_and_normalised_message() -> None:
    record = failing(
        "tests/test_uart.py::test_echo[9600]",
        crash=f"{ROOT}/tests/test_uart.py:42: AssertionError: assert 'OK' == 'ERR'\n- ERR\n+ OK",
    )
    assert (
        signature(record, ROOT)
        == "call tests/test_uart.py::test_echo:42: AssertionError: assert '…' == '…'"
    )


def test_signature_names_the_test_line_from_the_traceback_and_where_it_was_raised() -> None:
    """A firmware module raised it: the test's own frame gives the line, the crash the file."""
    record = failing(
        "tests/test_calc.py::test_div",
        crash=f"{ROOT}/fw/calc.py:5: ZeroDivisionError: integer division or modulo by zero",
        longrepr=(
            "def test_div():\n>       calc.div(1, 0)\n\ntests/test_calc.py:12: \n"
            "fw/calc.py:2: in div\n    return helper(a, b)\n"
            "E   ZeroDivisionError: integer division or modulo by zero\n\n"
            "fw/calc.py:5: ZeroDivisionError"
        ),
    )
    assert signature(record, ROOT) == (
        "call tests/test_calc.py::test_div:12: ZeroDivisionError: integer division or modulo "
        "by zero (raised in fw/calc.py)"
    )


_TRACE_LINES = st.lists(
    st.sampled_from(
        [
            "tests/test_calc.py:12: ",
            "tests/test_calc.py:7: in helper",
            "/abs/tests/test_calc.py:30: AssertionError",
            "xtests/test_calc.py:99: ",
            "fw/calc.py:5: ZeroDivisionError",
            "E   tests/test_calc.py:3: quoted",
            "a:b tests/test_calc.py:4: after a colon",
            " tests/test_calc.py:8: indented",
            "tests/test_calc.py:x: no number",
            "tests/test_calc.py:11: and tests/test_calc.py:13: twice",
            "",
            ">       calc.div(1, 0)",
        ]
    ),
    max_size=12,
)


@given(longrepr=_TRACE_LINES, crash=_TRACE_LINES)
def test_the_test_line_is_the_first_frame_of_the_tests_file_as_an_every_line_scan_finds(
    longrepr: list[str], crash: list[str]
) -> None:
    """The signature finds the test's line by searching for its file's name (a log can be
    megabytes); it must name the line a scan of every location line would."""
    location = re.compile(r"^(?P<path>[^\s:][^:\n]*):(?P<line>\d+):", re.MULTILINE)
    texts = ("\n".join(longrepr), "\n".join(crash))
    expected = next(
        (
            found["line"]
            for text in texts
            for found in location.finditer(text)
            if found["path"] == "tests/test_calc.py"
            or found["path"].endswith("/tests/test_calc.py")
        ),
        "",
    )
    record = failing("tests/test_calc.py::test_div", crash=texts[1], longrepr=texts[0])
    assert (f"test_div:{expected}:" if expected else "test_div: ") in signature(record, ROOT)


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("t.py:12: assert 3 == 4", "t.py:12: assert 17 == 250"),
        ("t.py:1: HardFault at 0x0800A1B2", "t.py:1: HardFault at 0x20001FF0"),
        ("t.py:1: PC=0800a1b2 LR=ff00ee01", "t.py:1: PC=08001c3d LR=0000abcd"),
        ("t.py:1: assert 'abc' == 'abd'", 't.py:1: assert "x" == "yz"'),
        ("t.py:1: TimeoutError: no prompt after 0.23s", "t.py:1: TimeoutError: no prompt after 5s"),
        ("t.py:1: <Board object at 0x7f3a2c1d>", "t.py:1: <Board object at 0x7f99aa00>"),
        (
            "t.py:1: OSError: /tmp/pytest-of-root/pytest-12/test_flash0/image.bin",
            "t.py:1: OSError: /tmp/pytest-of-ci/pytest-345/test_flash0/image.bin",
        ),
        (
            "t.py:1: run 1b4e28ba-2fa1-11d2-883f-0016d3cca427 failed",
            "t.py:1: run 6fa459ea-ee8a-3ca4-894e-db77e160355e failed",
        ),
        ("t.py:1: at 2024-05-01T12:00:01.123Z", "t.py:1: at 2026-11-30 23:59:59,999"),
    ],
)
def test_signature_is_the_same_for_the_same_failure_in_another_iteration(
    first: str, second: str
) -> None:
    assert signature(failing("t.py::a", crash=first)) == signature(failing("t.py::a", crash=second))


@given(
    line=st.integers(1, 99_999),
    value=st.integers(-(10**12), 10**12),
    address=st.integers(0, 2**64 - 1),
    seconds=st.floats(0, 10_000, allow_nan=False),
    tmp=st.integers(0, 10_000),
    quoted=st.text(st.characters(exclude_characters="'\n\r"), max_size=30),
)
def test_signature_is_stable_across_numbers_addresses_and_paths(
    line: int, value: int, address: int, seconds: float, tmp: int, quoted: str
) -> None:
    def crash(line: int, value: int, address: int, seconds: float, tmp: int, quoted: str) -> str:
        return (
            f"{ROOT}/tests/test_mem.py:7: AssertionError: read {value} at {address:#x} "
            f"(reg {line}) from /tmp/pytest-of-root/pytest-{tmp}/test_mem0/dump "
            f"after {seconds:.2f}s for '{quoted}'"
        )

    reference = failing("tests/test_mem.py::test_read", crash=crash(7, 1, 0x20000000, 0.5, 1, ""))
    varied = failing(
        "tests/test_mem.py::test_read", crash=crash(line, value, address, seconds, tmp, quoted)
    )
    assert signature(varied, ROOT) == signature(reference, ROOT)


@pytest.mark.parametrize(
    ("first", "second"),
    [
        (failing("a", crash="t.py:1: AssertionError"), failing("a", crash="t.py:1: TimeoutError")),
        (
            failing("a", crash="t.py:1: AssertionError"),
            failing("a", crash="u.py:1: AssertionError"),
        ),
        (failing("a", crash="t.py:1: E"), failing("a", crash="t.py:1: E", phase="setup")),
        # Two assertions of one test, two test functions, two firmware modules raising.
        (failing("t.py::a", crash="t.py:1: E"), failing("t.py::a", crash="t.py:2: E")),
        (failing("t.py::a", crash="t.py:1: E"), failing("t.py::b", crash="t.py:1: E")),
        (
            failing("t.py::a", crash="fw/crc8.c:1: E", longrepr="t.py:3: "),
            failing("t.py::a", crash="fw/ring.c:1: E", longrepr="t.py:3: "),
        ),
    ],
)
def test_signature_tells_different_failures_apart(first: TestRecord, second: TestRecord) -> None:
    assert signature(first) != signature(second)


def test_signature_of_an_environment_failure_ignores_where_it_was_noticed() -> None:
    records = [
        failing(
            f"tests/test_{name}.py::test_it",
            crash=f"{ROOT}/tests/test_{name}.py:{line}: ConnectionRefusedError",
            phase="setup",
            env_failure=f"EnvironmentFailure: board at 127.0.0.1:{port} refused",
        )
        for name, line, port in (("uart", 3, 5555), ("boot", 80, 6000))
    ]
    assert {signature(record, ROOT) for record in records} == {
        "setup: EnvironmentFailure: board at N:N refused"
    }


def test_signature_without_a_crash_line_uses_the_last_line_of_the_report() -> None:
    record = failing("t.py::test_x", longrepr="def test_x():\n>   go()\nE   KeyError: 'baud'\n\n")
    assert signature(record) == "call t.py::test_x: KeyError: '…'"


def test_signature_of_a_crash_outside_the_workspace_keeps_the_last_two_components() -> None:
    record = failing(
        "tests/test_uart.py::test_rx",
        crash="/usr/lib/python3.11/site-packages/serial/serialposix.py:575: SerialException: x",
    )
    assert signature(record, ROOT) == (
        "call tests/test_uart.py::test_rx: SerialException: x (raised in …/serial/serialposix.py)"
    )


def test_signature_is_bounded_and_keeps_both_ends() -> None:
    record = failing("t.py::t", crash="t.py:1: ValueError: start " + "word " * 200 + "end")
    found = signature(record)
    assert len(found) <= SIGNATURE_CHARS
    assert found.startswith("call t.py::t:1: ValueError: start")
    assert found.endswith("word end")
    assert "…" in found


# --- scrub --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "scrubbed"),
    [
        (f"{ROOT}/src/uart.c:12: error", "src/uart.c:12: error"),
        (f"rootdir: {ROOT}\n", "rootdir: .\n"),
        (f"{ROOT}-old/src/uart.c", "…/src/uart.c"),
        (
            "/usr/lib/python3.11/site-packages/_pytest/python.py:159: in call",
            "…/_pytest/python.py:159: in call",
        ),
        (
            'File "/opt/toolchain/bin/arm-none-eabi-gdb", line 3',
            'File "…/bin/arm-none-eabi-gdb", line 3',
        ),
        ("/dev/ttyUSB0 and /etc/hosts", "/dev/ttyUSB0 and /etc/hosts"),
        ("/tmp/pytest-of-root/pytest-12/test_flash0/image.bin", "<tmp>/test_flash0/image.bin"),
        (
            "see http://ci.example/job/42/log and src/a/b/c.c",
            "see http://ci.example/job/42/log and src/a/b/c.c",
        ),
        ("==== 3 failed, 1 passed in 1.52s ====", "==== 3 failed, 1 passed in ?s ===="),
        ("in 61.20s (0:01:01)", "in ?s"),
        (
            "no reply after 0.23s; 12ms; 5 seconds; 2 min",
            "no reply after ?s; ?ms; ? seconds; ? min",
        ),
        ("booted in 5 steps at 2 sensors", "booted in 5 steps at 2 sensors"),
        ("[2024-05-01 12:00:01,123] boot", "[<ts>] boot"),
        ("\x1b[31mFAILED\x1b[0m\r\nnext\rline\x00", "FAILED\nnext\nline"),
    ],
)
def test_scrub_strips_paths_timings_and_terminal_noise(text: str, scrubbed: str) -> None:
    assert scrub(text, ROOT) == scrubbed


def test_scrub_accepts_a_root_with_a_trailing_slash_and_no_root() -> None:
    assert scrub(f"{ROOT}/src/a.c", ROOT + "/") == "src/a.c"
    assert scrub(f"{ROOT}/src/a.c") == "…/src/a.c"


@given(text=st.text(), root=st.sampled_from(["", ROOT, "/a"]))
def test_scrub_never_makes_a_text_longer_on_the_wire(text: str, root: str) -> None:
    assert wire_bytes(scrub(text, root)) <= wire_bytes(text)


@given(path=st.lists(st.from_regex(r"[a-z0-9_.é-]{1,12}", fullmatch=True), min_size=1, max_size=8))
def test_scrub_keeps_the_last_two_components_of_an_outside_absolute_path(path: list[str]) -> None:
    whole = "/" + "/".join(path)
    short = "…/" + "/".join(path[-2:])
    scrubbed = scrub(f"at {whole} now", ROOT)
    # Cut wherever that saves bytes: always from four components on.
    assert scrubbed == f"at {short if wire_bytes(short) < wire_bytes(whole) else whole} now"
    if len(path) >= 4:
        assert scrubbed == f"at {short} now"


# --- excerpt ------------------------------------------------------------------------------------


def test_excerpt_returns_a_text_that_fits_unchanged() -> None:
    assert excerpt("short traceback", 100) == "short traceback"


def test_excerpt_keeps_head_and_tail_with_the_tail_weighted_three_to_one() -> None:
    text = "H" * 5000 + "T" * 5000
    cut = excerpt(text, 1000)
    head, mark, tail = cut.partition("\n…\n")
    assert mark
    assert set(head) == {"H"}
    assert set(tail) == {"T"}
    assert wire_bytes(cut) <= 1000
    assert 2.9 <= len(tail) / len(head) <= 3.1
    assert len(head) + len(tail) >= 1000 - wire_bytes(mark) - 2


def test_excerpt_counts_bytes_on_the_wire_not_characters() -> None:
    text = "é\n" * 4000  # two bytes for é, two for the escaped newline
    cut = excerpt(text, 1000)
    assert 990 <= wire_bytes(cut) <= 1000
    assert len(cut) <= 500


def test_excerpt_is_empty_when_not_even_the_cut_mark_fits() -> None:
    assert excerpt("x" * 100, 5) == ""


@given(text=st.text(), budget=st.integers(0, 400))
def test_excerpt_never_exceeds_its_budget(text: str, budget: int) -> None:
    cut = excerpt(text, budget)
    assert wire_bytes(cut) <= budget
    if wire_bytes(text) <= budget:
        assert cut == text
    elif cut:
        head, _, tail = cut.partition("\n…\n")
        assert text.startswith(head)
        assert text.endswith(tail)


# --- pack_failures: clusters --------------------------------------------------------------------


def uart_suite() -> list[TestRecord]:
    echo = [
        failing(
            f"tests/test_uart.py::test_echo[{baud}]",
            crash=f"{ROOT}/tests/test_uart.py:21: AssertionError: assert '{baud}' == 'OK'",
            longrepr=f"traceback {baud}\nE   AssertionError",
        )
        for baud in (9600, 19200, 115200)
    ]
    boot = failing(
        "tests/test_boot.py::test_banner",
        crash=f"{ROOT}/tests/test_boot.py:8: TimeoutError: no banner after 3.0s",
        longrepr="boot traceback",
        sections="--- Captured stdout call ---\nU-Boot 2024.01",
    )
    return [echo[0], boot, echo[1], echo[2]]


def test_pack_clusters_by_signature_biggest_first_excerpt_on_the_first_test() -> None:
    packed = pack_failures(uart_suite(), CAP, ROOT)
    echo = "call tests/test_uart.py::test_echo:21: AssertionError: assert '…' == '…'"
    boot = "call tests/test_boot.py::test_banner:8: TimeoutError: no banner after ?s"
    assert [(f.nodeid, f.signature, f.excerpt) for f in packed] == [
        ("tests/test_uart.py::test_echo[9600]", echo, "traceback 9600\nE   AssertionError"),
        ("tests/test_uart.py::test_echo[19200]", echo, ""),
        ("tests/test_uart.py::test_echo[115200]", echo, ""),
        (
            "tests/test_boot.py::test_banner",
            boot,
            "boot traceback\n--- Captured stdout call ---\nU-Boot 2024.01",
        ),
    ]


def test_pack_of_no_failures_is_empty() -> None:
    assert pack_failures([], CAP, ROOT) == []


def test_pack_strips_absolute_paths_and_timings_from_excerpts() -> None:
    record = failing(
        "tests/test_flash.py::test_write",
        crash=f"{ROOT}/tests/test_flash.py:3: OSError",
        longrepr=(
            f"{ROOT}/tests/test_flash.py:3: in test_write\n"
            "/usr/lib/python3.11/site-packages/serial/serialposix.py:575: in read\n"
            "E   OSError: /tmp/pytest-of-root/pytest-7/test_write0/image.bin"
        ),
        sections="--- Captured log call ---\nflash took 0.23s\n= 1 failed in 1.52s =",
    )
    (packed,) = pack_failures([record], CAP, ROOT)
    assert packed.excerpt == (
        "tests/test_flash.py:3: in test_write\n"
        "…/serial/serialposix.py:575: in read\n"
        "E   OSError: <tmp>/test_write0/image.bin\n"
        "--- Captured log call ---\nflash took ?s\n= 1 failed in ?s ="
    )


def test_pack_is_deterministic() -> None:
    records = [*uart_suite(), *big_clusters(clusters=30, members=40)]
    assert pack_failures(records, 8000, ROOT) == pack_failures(records, 8000, ROOT)


# --- pack_failures: the cap ---------------------------------------------------------------------


def big_clusters(clusters: int, members: int, log_bytes: int = 20_000) -> list[TestRecord]:
    return [
        failing(
            f"tests/test_c{cluster}.py::test_case[{member}]",
            crash=f"{ROOT}/tests/test_c{cluster}.py:7: AssertionError: got {member}",
            longrepr=f"start of c{cluster}\n" + "x" * log_bytes + f"\nE   end of c{cluster}",
            sections="--- Captured stdout call ---\n" + "console\n" * (log_bytes // 8) + "last",
        )
        for cluster in range(clusters)
        for member in range(members)
    ]


def test_pack_shrinks_excerpts_before_collapsing_member_lists() -> None:
    records = big_clusters(clusters=3, members=10)
    packed = pack_failures(records, CAP, ROOT)
    assert len(packed) == 30  # every test named
    assert packed_size(packed) <= CAP
    excerpts = [f.excerpt for f in packed if f.excerpt]
    assert len(excerpts) == 3
    for text in excerpts:
        assert wire_bytes(text) >= CAP // 6  # half the cap, shared among three clusters
        assert text.startswith("start of c")
        assert "E   end of c" in text  # the traceback's end survives the captured output
        assert text.endswith("last")


def test_pack_collapses_member_lists_into_a_count_on_a_real_test() -> None:
    records = big_clusters(clusters=3, members=200)
    packed = pack_failures(records, CAP, ROOT)
    assert packed_size(packed) <= CAP
    assert accounted_tests(packed) == 600
    counts = [f for f in packed if COUNT_NOTE.match(f.excerpt)]
    assert len(counts) == 3
    nodeids = {record.nodeid for record in records}
    assert {f.nodeid for f in packed} <= nodeids
    assert len({f.nodeid for f in packed}) == len(packed)
    for text in (f.excerpt for f in packed if f.excerpt.startswith("start of c")):
        assert wire_bytes(text) >= max(EXCERPT_FLOOR, CAP // 6)


def test_pack_drops_excerpts_under_the_minimum_from_the_smallest_clusters_first() -> None:
    records = [
        failing(
            f"tests/test_{n}.py::test_it[{member}]",
            crash=f"{ROOT}/tests/test_{n}.py:1: AssertionError: case{n}",
            longrepr="x" * 5000,
        )
        for n in range(120)
        for member in range(1 + (n < 10))
    ]
    packed = pack_failures(records, CAP, ROOT)
    assert packed_size(packed) <= CAP
    assert accounted_tests(packed) == len(records)
    leads: dict[str, str] = {}
    for failure in packed:
        leads.setdefault(failure.signature, failure.excerpt)
    assert len(leads) == 120
    sizes = [wire_bytes(text) for text in leads.values()]
    assert sizes[0] == MIN_EXCERPT
    assert sizes[-1] == 0
    assert set(sizes) == {0, MIN_EXCERPT}
    assert sizes == sorted(sizes, reverse=True)


def worst_case_signatures(count: int) -> list[TestRecord]:
    """Signatures and node ids long and multi-byte: the most each headline can cost."""
    return [
        failing(
            f"tests/test_{'ü' * 100}_{n}.py::test_{'字' * 100}",
            crash=f"{ROOT}/tests/test_{n}.py:1: AssertionError: {'字' * 80} {n}",
        )
        for n in range(count)
    ]


def test_default_cap_keeps_256_signatures_in_the_worst_case() -> None:
    assert guaranteed_signatures(CAP) == 256
    records = worst_case_signatures(256)
    packed = pack_failures(records, CAP, ROOT)
    assert packed_size(packed) <= CAP
    assert len(packed) == 256
    assert len({f.signature for f in packed}) == 256
    for failure, record in zip(packed, records, strict=True):
        assert stands_for(failure.signature, signature(record, ROOT))
        assert wire_bytes(failure.signature) <= MIN_SIGNATURE_BYTES
        assert wire_bytes(failure.nodeid) <= MIN_NODEID_BYTES
        assert failure.excerpt == ""


def test_past_the_guarantee_the_last_entry_counts_what_is_left_out() -> None:
    records = worst_case_signatures(2000)
    packed = pack_failures(records, CAP, ROOT)
    assert packed_size(packed) <= CAP
    assert all(f.excerpt == "" for f in packed[:-1])
    omitted = OMITTED_NOTE.match(packed[-1].excerpt)
    assert omitted is not None
    assert int(omitted[1]) == 2000 - len(packed) + 1
    assert int(omitted[2]) == int(omitted[1])  # one test per signature here
    assert len({f.signature for f in packed}) == len(packed) > 200


def test_headlines_are_shortened_only_as_far_as_needed() -> None:
    records = [
        failing(f"tests/test_{n}.py::test_x", crash=f"t.py:1: AssertionError: {'v' * 120} {n}")
        for n in range(130)
    ]
    packed = pack_failures(records, CAP, ROOT)
    assert len(packed) == 130
    assert all(f.excerpt == "" for f in packed)
    assert all(f.nodeid.startswith("tests/test_") for f in packed)  # short: untouched
    assert MIN_SIGNATURE_BYTES < max(wire_bytes(f.signature) for f in packed) <= 160


def test_a_cap_too_small_for_the_closing_entry_keeps_the_headlines_that_fit() -> None:
    records = worst_case_signatures(5)
    packed = pack_failures(records, 200, ROOT)
    assert len(packed) == 1
    assert packed_size(packed) <= 200
    assert pack_failures(records, 40, ROOT) == []


# --- pack_failures: properties ------------------------------------------------------------------


@st.composite
def suites(draw: st.DrawFn) -> list[TestRecord]:
    """Up to 2000 failing tests over up to 2000 locations, with long, messy logs."""
    # Small and large, few signatures and many: every way the pack can give way.
    count = draw(st.one_of(st.integers(0, 60), st.integers(200, 2000), st.just(2000)))
    locations = draw(st.one_of(st.integers(1, 30), st.integers(200, 2000), st.just(2000)))
    messages = draw(st.lists(st.text(max_size=60), min_size=1, max_size=6))
    snippets = draw(st.lists(st.text(min_size=1, max_size=300), min_size=1, max_size=4))
    lengths = st.one_of(st.integers(0, 5000), st.sampled_from([20_000, 200_000]))
    logs = [
        (snippet * (length // len(snippet) + 1))[:length]
        for snippet, length in ((snippet, draw(lengths)) for snippet in snippets)
    ]
    name = draw(st.text(max_size=200))
    rng = draw(st.randoms(use_true_random=False))
    records = []
    for n in range(count):
        where = rng.randrange(locations)
        message = messages[rng.randrange(len(messages))]
        records.append(
            failing(
                f"tests/test_{where}.py::test_{name}[{n}]",
                crash=f"{ROOT}/tests/test_{where}.py:{rng.randrange(1, 999)}: {message}",
                longrepr=logs[rng.randrange(len(logs))],
                sections=logs[rng.randrange(len(logs))] if rng.random() < 0.5 else "",
                phase=rng.choice(("setup", "call", "teardown")),
            )
        )
    return records


@settings(
    max_examples=60,
    deadline=None,
    # Big generated suites are the point here; under load hypothesis calls them "too large".
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(records=suites(), cap=st.one_of(st.just(CAP), st.integers(2, 70_000)))
def test_pack_never_exceeds_the_cap_and_keeps_every_signature_it_promises(
    records: list[TestRecord], cap: int
) -> None:
    packed = pack_failures(records, cap, ROOT)
    assert packed_size(packed) <= cap
    distinct = {signature(record, ROOT) for record in records}
    if len(distinct) <= guaranteed_signatures(cap):
        assert len({f.signature for f in packed}) == len(distinct)
        for sig in distinct:
            assert any(stands_for(f.signature, sig) for f in packed)
    nodeids = {record.nodeid for record in records}
    for failure in packed:
        shortened = failure.nodeid.partition("…")
        assert failure.nodeid in nodeids or any(
            nodeid.startswith(shortened[0]) and nodeid.endswith(shortened[2]) for nodeid in nodeids
        )


def test_a_device_log_is_part_of_the_excerpt_scrubbed_and_within_the_cap() -> None:
    """A failing test's device log (the child's `fwloop device log` section, issue 33) comes
    after its traceback in the excerpt, its timestamps and paths normalised, its tail kept: the
    assert a board printed last is what the coder must see."""
    boot = "".join(
        f"[2026-11-27 14:0{n % 10}:00.{n:06d}] I ({n}) wifi: scan done in 12 ms\n"
        for n in range(400)
    )
    device = (
        f"--- fwloop device log ---\n[dut]\n{boot}"
        f"[2026-11-27 14:09:59.000001] E (9981) assert: assert failed: filter_push "
        f"{ROOT}/main/filter.c:17 (next < FILTER_WINDOW)\nsensor> "
    )
    record = failing(
        "pytest_sensor_hub.py::test_filter_window_slides[linux]",
        crash='…/pytest_embedded/dut.py:93: pexpect.exceptions.TIMEOUT: Not found "filt = 35"',
        longrepr='E   pexpect.exceptions.TIMEOUT: Not found "filt = 35"\n' * 20,
        sections=device,
    )
    cap = 4096
    [packed] = pack_failures([record], cap, ROOT)
    assert packed_size([packed]) <= cap
    assert packed.excerpt.rstrip().endswith(
        "<ts>] E (9981) assert: assert failed: filter_push main/filter.c:17 (next < FILTER_WINDOW)"
        "\nsensor>"
    )
    assert "2026-11-27" not in packed.excerpt
    assert 'Not found "filt = 35"' in packed.excerpt
