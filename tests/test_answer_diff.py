"""Edits and repaired diffs become one `git apply` diff (DESIGN.md §16), on plain values.

The oracle `apply_strictly` applies a diff by its header numbers alone, as `patch` does without
fuzz: a built diff must say exactly where each change goes. A few diffs go to real `git apply`.
"""

from __future__ import annotations

import difflib
import re
import subprocess
from pathlib import Path

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from pytest_fwloop.core.change.answer_diff import (
    MAX_EDITS,
    Built,
    Unmatched,
    build_from_diff,
    build_from_edits,
    render_diff,
)
from pytest_fwloop.core.change.lines import split_lines
from pytest_fwloop.core.change.loose_diff import read_loose_diff
from pytest_fwloop.core.change.quote_places import Miss, Place, find_place
from pytest_fwloop.core.change.unified_diff import parse_patch
from pytest_fwloop.core.records.agent_protocol import FileEdit

property_test = settings(database=None, deadline=None, max_examples=150)

UART = """\
#include "uart.h"

int uart_init(void)
{
    uart_clock(1);
    return 0;
}

int uart_send(char c)
{
    return 0;
}
"""

_HEADER = re.compile(r"@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


def apply_strictly(text: str, diff: str) -> str:
    """The one file a diff changes, applied at its header's line numbers; AssertionError when a
    removed or context line is not where the header says."""
    lines = split_lines(text)
    out: list[str] = []
    at = 0
    body = diff.split("\n")
    index = 0
    while index < len(body):
        match = _HEADER.match(body[index])
        index += 1
        if match is None:
            continue
        start = int(match[1]) - (0 if match[2] == "0" else 1)
        out += lines[at:start]
        at = start
        while index < len(body) and body[index][:1] in (" ", "-", "+", "\\"):
            tag, line = body[index][:1], body[index][1:] + "\n"
            if index + 1 < len(body) and body[index + 1].startswith("\\"):
                line = line[:-1]
            if tag in (" ", "-"):
                assert lines[at] == line, (at, lines[at], line)
                at += 1
            if tag in (" ", "+"):
                out.append(line)
            index += 1
    return "".join(out + lines[at:])


def git_diff(path: str, before: str, after: str) -> str:
    lines = difflib.unified_diff(
        split_lines(before), split_lines(after), f"a/{path}", f"b/{path}", lineterm="\n"
    )
    return f"diff --git a/{path} b/{path}\n" + "".join(lines)


def built(result: Built | Unmatched) -> Built:
    assert isinstance(result, Built), result
    return result


def unmatched(result: Built | Unmatched) -> Unmatched:
    assert isinstance(result, Unmatched), result
    return result


# -- finding a place -------------------------------------------------------------------------


def test_an_exact_quote_is_found_inside_a_line() -> None:
    place = find_place(UART, "uart_clock(1)")
    assert place == Place(UART.index("uart_clock(1)"), UART.index("uart_clock(1)") + 13, False)


def test_a_quote_with_other_whitespace_is_found_as_whole_lines() -> None:
    place = find_place(UART, "uart_clock(1);  \n  return   0;")
    assert isinstance(place, Place)
    assert place.loose
    assert UART[place.start : place.end] == "    uart_clock(1);\n    return 0;\n"


def test_a_quote_in_two_places_names_both_lines() -> None:
    miss = find_place(UART, "    return 0;\n")
    assert isinstance(miss, Miss)
    assert miss.places == (6, 11)
    assert "matches more than one place (lines 6, 11)" in miss.reason()
    assert miss.shown.splitlines() == ["6|     return 0;", "11|     return 0;"]


def test_a_quote_found_nowhere_names_the_nearest_lines_with_their_numbers() -> None:
    miss = find_place(UART, "uart_clock(2);\nreturn 0;")
    assert isinstance(miss, Miss)
    assert miss.places == ()
    assert miss.nearest_line == 5
    assert "matches no place" in miss.reason()
    assert miss.shown.splitlines()[1] == "5|     uart_clock(1);"


def test_a_whole_lines_quote_does_not_match_inside_a_line() -> None:
    assert isinstance(find_place("xab\nab\n", "ab\n", whole_lines=True), Place)
    assert find_place("xab\nab\n", "ab\n", whole_lines=True) == Place(4, 7, False)


def test_a_huge_quote_is_refused_by_linear_searches() -> None:
    # Megabytes of search against a file: str.find and one squeeze per line, nothing quadratic.
    miss = find_place(UART * 200, "x" * 2_000_000 + "\n" + "int uart_init(void)\n" * 50_000)
    assert isinstance(miss, Miss)
    assert len(miss.shown.splitlines()) <= 8


# -- edits -----------------------------------------------------------------------------------


def test_edits_apply_in_order_and_become_one_git_diff() -> None:
    edits = [
        FileEdit(path="src/uart.c", search="uart_clock(1);", replace="uart_clock(2);"),
        FileEdit(path="src/uart.c", search="uart_clock(2);\n    return 0;", replace="return 1;"),
    ]
    result = built(build_from_edits(edits, {"src/uart.c": UART}))
    after = UART.replace("    uart_clock(1);\n    return 0;", "    return 1;")
    assert result.diff == git_diff("src/uart.c", UART, after)
    assert apply_strictly(UART, result.diff) == after


def test_an_edit_found_with_whitespace_ignored_is_indented_as_the_file_is() -> None:
    edit = FileEdit(path="src/uart.c", search="uart_clock(1);\nreturn 0;", replace="return 2;")
    result = built(build_from_edits([edit], {"src/uart.c": UART}))
    assert "+    return 2;\n" in result.diff
    assert "src/uart.c) found with whitespace ignored" in result.notes[1]


def test_an_empty_search_creates_a_missing_file_and_is_refused_on_an_existing_one() -> None:
    create = FileEdit(path="src/new.h", search="", replace="#define X 1\n")
    result = built(build_from_edits([create], {"src/new.h": None}))
    assert result.diff.startswith("diff --git a/src/new.h b/src/new.h\nnew file mode 100644\n")
    assert parse_patch(result.diff)[0].old_path is None
    refused = unmatched(build_from_edits([create], {"src/new.h": "old\n"}))
    assert "an empty search creates a file, and this file exists" in refused.must_fix[0].issue


def test_edits_that_miss_say_which_with_the_nearest_lines_each() -> None:
    edits = [
        FileEdit(path="src/uart.c", search="    return 0;\n", replace="    return 1;\n"),
        FileEdit(path="src/uart.c", search="uart_clock(3);", replace="x"),
        FileEdit(path="src/gone.c", search="a", replace="b"),
    ]
    refused = unmatched(build_from_edits(edits, {"src/uart.c": UART, "src/gone.c": None}))
    issues = [item.issue for item in refused.must_fix]
    assert issues[0].startswith("edits[1] (src/uart.c): the search matches more than one place")
    assert issues[1].startswith("edits[2] (src/uart.c): the search matches no place")
    assert "5|     uart_clock(1);" in issues[1]
    assert refused.must_fix[1].line == 5
    assert refused.must_fix[1].file == "src/uart.c"
    assert issues[2].startswith("edits[3] (src/gone.c): no such file")


def test_edits_that_change_nothing_or_are_too_many_are_refused() -> None:
    same = FileEdit(path="src/uart.c", search="uart_clock", replace="uart_clock")
    refused = unmatched(build_from_edits([same], {"src/uart.c": UART}))
    assert "change nothing" in refused.must_fix[0].issue
    many = [same] * (MAX_EDITS + 1)
    assert "more than" in unmatched(build_from_edits(many, {"src/uart.c": UART})).must_fix[0].issue


# -- diffs a model wrote ---------------------------------------------------------------------


def model_diff(diff: str, shift: int) -> str:
    """What a plain model writes: no `diff --git` line, no a/ b/, line numbers off by `shift`."""
    diff = re.sub(r"^diff --git .*\n", "", diff, flags=re.M)
    diff = re.sub(r"^(---|\+\+\+) [ab]/", r"\1 ", diff, flags=re.M)
    return _HEADER.sub(
        lambda m: f"@@ -{int(m[1]) + shift},{m[2] or 1} +{int(m[3]) + shift},{m[4] or 1} @@", diff
    )


def test_a_diff_off_by_three_without_prefixes_is_rebuilt() -> None:
    after = UART.replace("return 0;\n}\n\nint uart_send", "return 1;\n}\n\nint uart_send")
    good = git_diff("src/uart.c", UART, after)
    sections = read_loose_diff(model_diff(good, 3))
    assert sections is not None
    assert sections[0].unprefixed
    result = built(build_from_diff(sections, {"src/uart.c": UART}))
    assert result.diff == good
    assert result.notes[0] == "paths given without a/ b/ prefixes"
    assert "found at line 3 (its header said line 6)" in result.notes[1]


def test_a_hunk_without_numbers_or_counts_is_placed_by_its_lines() -> None:
    diff = (
        "--- src/uart.c\n+++ src/uart.c\n@@ ... @@\n {\n-    uart_clock(1);\n+    uart_clock(9);\n"
    )
    result = built(build_from_diff(read_loose_diff(diff) or [], {"src/uart.c": UART}))
    assert apply_strictly(UART, result.diff) == UART.replace("clock(1)", "clock(9)")


def test_a_diff_whose_context_matches_nowhere_names_the_nearest_lines() -> None:
    diff = "--- a/src/uart.c\n+++ b/src/uart.c\n@@ -5,2 +5,2 @@\n-    uart_clk(1);\n+    x;\n"
    refused = unmatched(build_from_diff(read_loose_diff(diff) or [], {"src/uart.c": UART}))
    [item] = refused.must_fix
    assert item.issue.startswith("src/uart.c: hunk 1 `@@ -5,2 +5,2 @@`: its old side")
    assert "5|     uart_clock(1);" in item.issue
    assert item.line == 5


def test_two_hunks_on_the_same_lines_are_refused() -> None:
    hunk = "@@ -5 +5 @@\n-    uart_clock(1);\n+    x;\n"
    diff = f"--- a/src/uart.c\n+++ b/src/uart.c\n{hunk}{hunk}"
    refused = unmatched(build_from_diff(read_loose_diff(diff) or [], {"src/uart.c": UART}))
    assert "hunks 1 and 2 change the same lines" in refused.must_fix[0].issue


def test_blank_lines_after_the_last_hunk_are_the_answers_but_a_space_line_is_context() -> None:
    # A model's answer often ends with empty lines: they are not the file's.
    [section] = read_loose_diff("--- a/f.c\n+++ b/f.c\n@@ -1 +1 @@\n-a\n+b\n\n\n") or []
    assert section.hunks[0].ops == (("-", "a\n"), ("+", "b\n"))
    # git writes a blank context line as one space: it is context, as `git apply` reads it.
    [section] = read_loose_diff("--- f.c\n+++ f.c\n@@ -1,2 +1,3 @@\n+;\n \n \n") or []
    assert section.hunks[0].old == "\n\n"
    # Empty lines the header's counts take in are context whose space was trimmed.
    [section] = read_loose_diff("--- f.c\n+++ f.c\n@@ -1,2 +1,3 @@\n+;\n\n\n") or []
    assert section.hunks[0].old == "\n\n"
    built = build_from_diff([section], {"f.c": "\n\n"})
    assert not isinstance(built, Unmatched)
    assert apply_strictly("\n\n", built.diff) == ";\n\n\n"


@pytest.mark.parametrize(
    "diff",
    [
        "not a diff at all\n",
        "@@ -1 +1 @@\n-a\n+b\n",  # no file header
        "--- a/x.c\n+++ b/x.c\n",  # no hunk
        "--- a/x.c\n+++ /dev/null\n@@ -1 +0,0 @@\n-a\n",  # a deletion
        "--- a/x.c\n+++ b/y.c\n@@ -1 +1 @@\n-a\n+b\n",  # a rename
        "diff --git a/x b/x\nold mode 100644\nnew mode 100755\n",
        "diff --git a/x.bin b/x.bin\nGIT binary patch\nliteral 1\nIcmZpX0000\n",
        "diff --git a/e b/e\nnew file mode 100644\nindex 0000000..e69de29\n",  # empty new file
    ],
)
def test_what_is_not_text_changes_of_regular_files_is_left_to_git(diff: str) -> None:
    assert read_loose_diff(diff) is None


# -- properties ------------------------------------------------------------------------------

_lines = st.lists(
    st.text(alphabet="ab (){};=\t", min_size=0, max_size=8).map(lambda s: s + "\n"),
    min_size=1,
    max_size=30,
)


@property_test
@given(before=_lines, after=_lines, shift=st.integers(-5, 5), unique=st.booleans())
def test_any_diff_with_wrong_numbers_and_no_prefixes_rebuilds_the_same_change(
    before: list[str], after: list[str], shift: int, unique: bool
) -> None:
    if unique:  # every line distinct: every hunk's context matches one place
        before = [f"{i} {line}" for i, line in enumerate(before)]
        after = [f"{i + 100} {line}" if i % 3 == 0 else line for i, line in enumerate(before)]
    old, new = "".join(before), "".join(after)
    assume(old != new)
    sections = read_loose_diff(model_diff(git_diff("f.c", old, new), shift))
    assert sections is not None
    result = build_from_diff(sections, {"f.c": old})
    if isinstance(result, Unmatched):
        # Only a quote that is ambiguous in the file may be refused, and it says so.
        assert not unique
        assert all("matches more than one place" in item.issue for item in result.must_fix)
        return
    # Where a hunk matches one place it is that place: the change is the one meant, or (an
    # ambiguous hunk placed elsewhere being impossible) the diff says exactly where it goes.
    assert apply_strictly(old, result.diff) == new or not unique
    if unique:
        assert result.diff == git_diff("f.c", old, new)


@property_test
@given(
    lines=st.lists(st.integers(0, 10**6), min_size=1, max_size=40, unique=True),
    data=st.data(),
)
def test_an_edit_of_a_unique_block_changes_that_block_only(
    lines: list[int], data: st.DataObject
) -> None:
    text = "".join(f"    value_{n} = {n};\n" for n in lines)
    first = data.draw(st.integers(0, len(lines) - 1))
    stop = data.draw(st.integers(first + 1, len(lines)))
    block = "".join(split_lines(text)[first:stop])
    replace = data.draw(st.text(alphabet="xyz \n", max_size=20))
    mangle = data.draw(st.booleans())
    search = re.sub(r"[ ]+", "  ", block).strip() if mangle else block
    result = build_from_edits([FileEdit(path="f.c", search=search, replace=replace)], {"f.c": text})
    if isinstance(result, Unmatched):
        assert "change nothing" in result.must_fix[0].issue
        return
    after = apply_strictly(text, result.diff)
    assert after.startswith("".join(split_lines(text)[:first]))
    assert after.endswith("".join(split_lines(text)[stop:]))
    if not mangle:
        assert after == text.replace(block, replace, 1)


@property_test
@given(path=st.text(min_size=1, max_size=12).filter(lambda p: "\0" not in p and "/" not in p))
def test_a_built_diff_names_its_file_as_git_reads_it(path: str) -> None:
    path = f"src/{path}"
    diff = render_diff({path: "a\n"}, {path: "b\n"})
    assert parse_patch(diff)[0].new_path == path


# -- real git ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "before", "after"),
    [
        ("src/uart.c", UART, UART.replace("return 0;\n}\n\nint", "return 1;\n}\n\nint")),
        ("src/no newline.c", "a\nb", "a\nc"),
        ("src/ünï.c", "a\n", "a\nb"),
        ("src/new.h", None, "#define X 1\n"),
    ],
)
def test_git_applies_every_built_diff(
    tmp_path: Path, path: str, before: str | None, after: str
) -> None:
    target = tmp_path / path
    target.parent.mkdir(parents=True)
    if before is not None:
        target.write_text(before)
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    diff = render_diff({path: before}, {path: after})
    done = subprocess.run(
        ["git", "apply", "-"], cwd=tmp_path, input=diff.encode(), capture_output=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert target.read_text() == after
