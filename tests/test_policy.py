"""The patch policy: diff parsing, path rules and limits (DESIGN.md §6), on plain values."""

from __future__ import annotations

import difflib
import re

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from pytest_fwloop.core.change.posix_paths import glob_match, matching_glob, normalize_path
from pytest_fwloop.core.change.unified_diff import (
    FileChange,
    PatchParseError,
    parse_patch,
    touched_paths,
)
from pytest_fwloop.core.gate.policy import PatchPolicy, check_patch

# No example database: property tests must not leave a .hypothesis/ directory in the checkout.
property_test = settings(database=None, deadline=None)


def modify(path: str) -> str:
    """A one-line edit of `path`, as `git diff` would print it."""
    return f"diff --git a/{path} b/{path}\n--- a/{path}\n+++ b/{path}\n@@ -1 +1 @@\n-old\n+new\n"


def rules(text: str, policy: PatchPolicy | None = None) -> list[str]:
    return [v.rule for v in check_patch(text, policy or PatchPolicy())]


EDIT = """\
diff --git a/src/uart.c b/src/uart.c
index 3b18e51..a0e7c2f 100644
--- a/src/uart.c
+++ b/src/uart.c
@@ -1,4 +1,5 @@
 int uart_init(void)
 {
-    return 0;
+    uart_enable();
+    return 1;
 }
@@ -10,2 +11,1 @@ static int other(void)
-    int unused;
     return 0;
"""


def test_parse_git_edit_counts_lines_and_reads_index_mode() -> None:
    assert parse_patch(EDIT) == [
        FileChange(
            old_path="src/uart.c",
            new_path="src/uart.c",
            added_lines=2,
            removed_lines=2,
            new_mode="100644",
            old_mode="100644",
        )
    ]


def test_parse_plain_diff_without_git_line_and_with_timestamps() -> None:
    text = (
        "--- a/src/gpio.c\t2024-05-01 10:00:00.000000000 +0200\n"
        "+++ b/src/gpio.c\t2024-05-01 10:05:00.000000000 +0200\n"
        "@@ -1 +1,2 @@\n"
        "-int gpio;\n"
        "+int gpio = 1;\n"
        "+int gpio2;\n"
        "--- a/src/adc.c\n"
        "+++ b/src/adc.c\n"
        "@@ -3 +3 @@\n"
        "-a\n"
        "+b\n"
    )
    changes = parse_patch(text)
    assert [(c.old_path, c.new_path, c.added_lines, c.removed_lines) for c in changes] == [
        ("src/gpio.c", "src/gpio.c", 2, 1),
        ("src/adc.c", "src/adc.c", 1, 1),
    ]


def test_parse_new_and_deleted_files_use_none_for_dev_null() -> None:
    text = (
        "diff --git a/src/new.c b/src/new.c\n"
        "new file mode 100644\n"
        "index 0000000..e69de29\n"
        "--- /dev/null\n"
        "+++ b/src/new.c\n"
        "@@ -0,0 +1,2 @@\n"
        "+a\n"
        "+b\n"
        "diff --git a/src/old.c b/src/old.c\n"
        "deleted file mode 100755\n"
        "--- a/src/old.c\n"
        "+++ /dev/null\n"
        "@@ -1 +0,0 @@\n"
        "-gone\n"
        "\\ No newline at end of file\n"
        "diff --git a/empty.txt b/empty.txt\n"
        "new file mode 100644\n"
    )
    new, old, empty = parse_patch(text)
    assert (new.old_path, new.new_path, new.new_mode, new.added_lines) == (
        None,
        "src/new.c",
        "100644",
        2,
    )
    assert (old.old_path, old.new_path, old.old_mode, old.removed_lines) == (
        "src/old.c",
        None,
        "100755",
        1,
    )
    assert (empty.old_path, empty.new_path) == (None, "empty.txt")
    assert rules(text) == []


def test_parse_rename_and_copy_with_spaces_in_names() -> None:
    text = (
        "diff --git a/drv/old name.c b/drv/new name.c\n"
        "similarity index 90%\n"
        "rename from drv/old name.c\n"
        "rename to drv/new name.c\n"
        "--- a/drv/old name.c\n"
        "+++ b/drv/new name.c\n"
        "@@ -1 +1 @@\n"
        "-a\n"
        "+b\n"
        "diff --git a/src/a.c b/src/b.c\n"
        "similarity index 100%\n"
        "copy from src/a.c\n"
        "copy to src/b.c\n"
    )
    rename, copy = parse_patch(text)
    assert (rename.old_path, rename.new_path, rename.is_rename, rename.added_lines) == (
        "drv/old name.c",
        "drv/new name.c",
        True,
        1,
    )
    assert (copy.old_path, copy.new_path, copy.is_copy, copy.is_rename) == (
        "src/a.c",
        "src/b.c",
        True,
        False,
    )


def test_parse_mode_change_and_binary_forms() -> None:
    text = (
        "diff --git a/tools/flash.sh b/tools/flash.sh\n"
        "old mode 100644\n"
        "new mode 100755\n"
        "diff --git a/fw.bin b/fw.bin\n"
        "index 1111111..2222222 100644\n"
        "GIT binary patch\n"
        "literal 4\n"
        "LcmZQzWMT#Y01f~L\n"
        "\n"
        "literal 0\n"
        "HcmV?d00001\n"
        "\n"
        "diff --git a/img.png b/img.png\n"
        "index 3333333..4444444 100644\n"
        "Binary files a/img.png and b/img.png differ\n"
        "Binary files a/logo.bmp and /dev/null differ\n"
    )
    mode, git_binary, binary, plain_binary = parse_patch(text)
    assert (mode.old_mode, mode.new_mode, mode.is_binary) == ("100644", "100755", False)
    assert (git_binary.is_binary, git_binary.new_path) == (True, "fw.bin")
    assert (binary.is_binary, binary.new_path) == (True, "img.png")
    assert (plain_binary.is_binary, plain_binary.old_path, plain_binary.new_path) == (
        True,
        "logo.bmp",
        None,
    )


def test_a_section_hidden_after_binary_data_is_still_seen() -> None:
    text = (
        "diff --git a/fw.bin b/fw.bin\nGIT binary patch\nliteral 1\nIcmZQz0RR91\n\n"
        "--- a/tests/test_x.py\n+++ b/tests/test_x.py\n@@ -1 +1 @@\n-a\n+b\n"
    )
    assert rules(text) == ["parse"]
    assert "inconsistent" in check_patch(text, PatchPolicy())[0].message


def test_parse_quoted_paths_decode_c_escapes() -> None:
    text = (
        'diff --git "a/src/caf\\303\\251 \\"x\\".c" "b/src/caf\\303\\251 \\"x\\".c"\n'
        '--- "a/src/caf\\303\\251 \\"x\\".c"\n'
        '+++ "b/src/caf\\303\\251 \\"x\\".c"\n'
        "@@ -1 +1 @@\n"
        "-a\n"
        "+b\n"
    )
    assert parse_patch(text)[0].new_path == 'src/café "x".c'


def test_parse_counts_lines_that_look_like_headers_inside_a_hunk() -> None:
    # A removed "-- a/x" line prints as "--- a/x": only the hunk's counts tell it from a header.
    text = "--- a/x\n+++ b/x\n@@ -1,2 +1,2 @@\n--- a/x\n+++ b/x\n-keep\n+kept\n"
    assert parse_patch(text) == [FileChange("x", "x", added_lines=2, removed_lines=2)]


def test_parse_accepts_an_empty_line_as_context_and_ignores_text_around_sections() -> None:
    email = "From: someone\nSubject: fix\n\n"
    signature = "-- \n2.39.5\n"
    text = email + "--- a/x\n+++ b/x\n@@ -1,3 +1,3 @@\n a\n\n-b\n+c\n" + signature
    assert parse_patch(text) == [FileChange("x", "x", added_lines=1, removed_lines=1)]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", "no file header"),
        ("just some words\n", "no file header"),
        ("@@ -1 +1 @@\n-a\n+b\n", "line 1: hunk before any ---/+++ file header"),
        ("diff --git a/x b/x\n@@ -1 +1 @@\n-a\n+b\n", "line 2: hunk before any"),
        ("--- a/x\n+++ b/x\n@@ -1,3 +1,3 @@\n a\n-b\n+c\n", "hunk ends early"),
        ("--- a/x\n+++ b/x\n@@ -1,2 +1 @@\n-a\n+b\n+c\n", "line 3: hunk body is longer"),
        ("--- a/x\n+++ b/x\n@@ -1,2 +1,2 @@\n-a\n*b\n", "line 5: unexpected line"),
        ("--- a/x\n+++ b/x\n@@ -one +1 @@\n", "line 3: malformed hunk header"),
        ("--- x.c\n+++ x.c\n@@ -1 +1 @@\n-a\n+b\n", "no a/ or b/ prefix"),
        ("diff --git a/x b/x\n--- a/y\n+++ b/y\n@@ -1 +1 @@\n-a\n+b\n", "inconsistent old"),
        ('--- "a/x\n+++ b/x\n', "unterminated quoted path"),
        ("--- a/x\n+++ b/x\n@@ -99999999999 +1 @@\n", "malformed hunk header"),
    ],
)
def test_parse_errors_are_one_line_and_say_where(text: str, expected: str) -> None:
    with pytest.raises(PatchParseError, match=re.escape(expected)) as caught:
        parse_patch(text)
    assert "\n" not in str(caught.value)


def test_touched_paths_lists_every_name_normalised_and_sorted() -> None:
    text = modify("src//b.c") + (
        "diff --git a/src/x.c b/drv/x.c\nrename from src/x.c\nrename to drv/x.c\n"
    )
    assert touched_paths(text) == ["drv/x.c", "src/b.c", "src/x.c"]


def test_clean_patch_has_no_violations() -> None:
    assert check_patch(EDIT, PatchPolicy()) == []


@pytest.mark.parametrize(
    "path",
    [
        "tests/test_uart.py",
        "tests/data/frames.bin.txt",
        "test/uart.c",
        "testing/harness.py",
        "test_top.py",
        "drivers/uart/test_uart.py",
        "drivers/uart_test.py",
        "conftest.py",
        "drivers/conftest.py",
        "pytest.ini",
        "tox.ini",
        "setup.cfg",
        "pyproject.toml",
        "noxfile.py",
        ".github/workflows/ci.yml",
        ".gitlab-ci.yml",
        ".ci/build.sh",
        "Jenkinsfile",
        ".git/config",
        "vendor/hal/.git/HEAD",
        ".fwloop/journal.json",
        "fw/.fwloop/runs/x/summary.json",
        ".gitmodules",
        "./tests//test_x.py",
        "src/../tests/test_x.py",
    ],
)
def test_default_policy_protects_tests_config_ci_and_vcs(path: str) -> None:
    assert rules(modify(path)) == ["protected"]


@pytest.mark.parametrize(
    "path", ["src/uart.c", "testsuite.c", "src/tests.c", "docs/pytest.ini.md", "src/contest.py"]
)
def test_default_policy_allows_code(path: str) -> None:
    assert rules(modify(path)) == []


def test_protected_message_names_path_glob_and_what_to_do() -> None:
    (violation,) = check_patch(modify("tests/test_uart.py"), PatchPolicy())
    assert violation.path == "tests/test_uart.py"
    assert violation.message == (
        "tests/test_uart.py: protected path (matches 'tests/**'); the coder may not edit tests, "
        "test or CI configuration, or other protected paths"
    )


def test_renames_are_checked_on_both_names() -> None:
    out_of_tests = (
        "diff --git a/tests/t.py b/src/t.py\nrename from tests/t.py\nrename to src/t.py\n"
    )
    into_tests = "diff --git a/src/t.py b/tests/t.py\nrename from src/t.py\nrename to tests/t.py\n"
    assert [v.path for v in check_patch(out_of_tests, PatchPolicy())] == ["tests/t.py"]
    assert [v.path for v in check_patch(into_tests, PatchPolicy())] == ["tests/t.py"]


def test_allow_paths_restrict_and_protection_still_wins() -> None:
    policy = PatchPolicy(allow_paths=("src/**", "tests/**"))
    assert rules(modify("src/uart.c"), policy) == []
    assert rules(modify("boot/start.s"), policy) == ["not_allowed"]
    assert rules(modify("tests/test_uart.py"), policy) == ["protected"]
    (violation,) = check_patch(modify("boot/start.s"), policy)
    assert violation.message.startswith("boot/start.s: not under the allowed paths ('src/**', ")


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        (modify("../outside.c"), "'..' climbs out of the root"),
        (modify("src/../../outside.c"), "'..' climbs out of the root"),
        (modify("/etc/passwd"), "absolute path"),
        ("--- /etc/passwd\n+++ /etc/passwd\n@@ -1 +1 @@\n-a\n+b\n", "absolute path"),
        (modify("src\\..\\..\\boot.c"), "contains a backslash"),
        (modify("src/.."), "names the root itself"),
    ],
)
def test_paths_outside_the_root_are_rejected(text: str, reason: str) -> None:
    violations = check_patch(text, PatchPolicy())
    assert "outside_root" in [v.rule for v in violations]
    assert any(reason in v.message and "\n" not in v.message for v in violations)


def test_nul_in_a_quoted_path_is_rejected() -> None:
    text = '--- "a/x\\000y"\n+++ "b/x\\000y"\n@@ -1 +1 @@\n-a\n+b\n'
    (violation,) = check_patch(text, PatchPolicy())
    assert violation.rule == "outside_root"
    assert violation.message.startswith("x\\x00y: path outside the workspace root (contains a NUL")


def section(path: str, *lines: str) -> str:
    """A `diff --git` section for `path` made of the given header and body lines."""
    return "\n".join([f"diff --git a/{path} b/{path}", *lines]) + "\n"


ADD_ONE_LINE = ("--- /dev/null", "+++ b/{path}", "@@ -0,0 +1 @@", "+x")


@pytest.mark.parametrize(
    ("text", "rule"),
    [
        (section("fw.bin", "Binary files a/fw.bin and b/fw.bin differ"), "binary"),
        (section("l", "new file mode 120000", *ADD_ONE_LINE).format(path="l"), "symlink"),
        (
            section(
                "l", "deleted file mode 120000", "--- a/l", "+++ /dev/null", "@@ -1 +0,0 @@", "-x"
            ),
            "symlink",
        ),
        (section("run.sh", "old mode 100644", "new mode 100755"), "mode_change"),
        (section("x.sh", "new file mode 100755", *ADD_ONE_LINE).format(path="x.sh"), "mode_change"),
        (
            section("hal", "index 1234567..89abcde 160000", "--- a/hal", "+++ b/hal", "@@ -1 +1 @@")
            + "-Subproject commit 1\n+Subproject commit 2\n",
            "submodule",
        ),
    ],
)
def test_binary_symlink_and_mode_rules(text: str, rule: str) -> None:
    assert rules(text) == [rule]


def test_deleting_an_executable_is_not_a_mode_change() -> None:
    text = "diff --git a/x.sh b/x.sh\ndeleted file mode 100755\n--- a/x.sh\n+++ /dev/null\n"
    assert rules(text + "@@ -1 +0,0 @@\n-x\n") == []


def test_limits_on_files_and_lines() -> None:
    three_files = modify("a.c") + modify("b.c") + modify("c.c")
    assert rules(three_files, PatchPolicy(max_files=2)) == ["too_many_files"]
    assert rules(three_files, PatchPolicy(max_changed_lines=5)) == ["too_many_lines"]
    assert rules(three_files, PatchPolicy(max_files=3, max_changed_lines=6)) == []
    (violation,) = check_patch(three_files, PatchPolicy(max_files=2))
    assert violation.path == ""
    assert violation.message == (
        "patch: changes 3 files, more than max_files=2; send a smaller patch"
    )


@pytest.mark.parametrize("text", ["", "  \n\t\n", "diff --git a/x.c b/x.c\n"])
def test_empty_patches(text: str) -> None:
    assert rules(text) == ["empty"]


def test_parse_violation_carries_the_parser_message() -> None:
    (violation,) = check_patch("hello\n", PatchPolicy())
    assert (violation.path, violation.rule) == ("", "parse")
    assert violation.message.startswith("patch: not a unified diff: no file header")


@pytest.mark.parametrize(
    ("path", "pattern", "expected"),
    [
        ("tests/a/b.py", "tests/**", True),
        ("tests", "tests/**", False),
        ("conftest.py", "**/conftest.py", True),
        ("a/b/conftest.py", "**/conftest.py", True),
        ("a/b/xconftest.py", "**/conftest.py", False),
        ("src/x.c", "src/*.c", True),
        ("src/sub/x.c", "src/*.c", False),
        ("src/sub/x.c", "src/**/*.c", True),
        ("src/x.c", "src/**/*.c", True),
        ("src/x.h", "src/?.h", True),
        ("src/xy.h", "src/?.h", False),
        ("./src//x.c", "src/*.c", True),
        ("Src/x.c", "src/*.c", False),
        ("anything/at/all", "**", True),
        ("a+b(c).c", "a+b(c).c", True),
        ("a+bb(c).c", "a+b(c).c", False),
    ],
)
def test_glob_match(path: str, pattern: str, expected: bool) -> None:
    assert glob_match(path, pattern) is expected


def test_normalize_path_keeps_escapes_visible() -> None:
    assert normalize_path("./a//b/./c/../d") == "a/b/d"
    assert normalize_path("a/../../x") == "../x"
    assert normalize_path("/etc//passwd") == "/etc/passwd"


# --- properties -----------------------------------------------------------------------------

SEGMENT = st.text(alphabet="abcXYZ019_-.", min_size=1, max_size=8).filter(
    lambda s: s not in (".", "..")
)


@property_test
@given(
    before=st.lists(st.one_of(SEGMENT, st.just(".")), max_size=4),
    extra=st.integers(min_value=0, max_value=3),
    after=st.lists(SEGMENT, min_size=1, max_size=3),
)
def test_any_path_escaping_the_root_is_rejected(
    before: list[str], extra: int, after: list[str]
) -> None:
    depth = sum(1 for part in before if part != ".")
    path = "/".join([*before, *[".."] * (depth + 1 + extra), *after])
    assert "outside_root" in rules(modify(path))


@property_test
@given(parts=st.lists(SEGMENT, min_size=1, max_size=4), git_style=st.booleans())
def test_any_absolute_path_is_rejected(parts: list[str], git_style: bool) -> None:
    path = "/" + "/".join(parts)
    text = modify(path) if git_style else f"--- {path}\n+++ {path}\n@@ -1 +1 @@\n-a\n+b\n"
    assert "outside_root" in rules(text)


@property_test
@given(
    steps=st.lists(st.tuples(SEGMENT, st.booleans()), max_size=5),
    leaf=SEGMENT,
)
def test_paths_that_stay_inside_are_not_outside_root(
    steps: list[tuple[str, bool]], leaf: str
) -> None:
    # Every ".." directly follows the segment it cancels, so the path never leaves the root.
    parts = [part for segment, back in steps for part in ([segment, ".."] if back else [segment])]
    assert "outside_root" not in rules(modify("/".join([*parts, leaf])))


@property_test
@given(
    rest=st.lists(SEGMENT, min_size=1, max_size=4),
    spelling=st.sampled_from(["tests/{}", "./tests/{}", "tests//{}", "src/../tests/{}"]),
    kind=st.sampled_from(["modify", "new", "delete", "rename_in"]),
)
def test_any_path_under_tests_is_protected_by_default(
    rest: list[str], spelling: str, kind: str
) -> None:
    path = spelling.format("/".join(rest))
    texts = {
        "modify": modify(path),
        "new": f"--- /dev/null\n+++ b/{path}\n@@ -0,0 +1 @@\n+x\n",
        "delete": f"--- a/{path}\n+++ /dev/null\n@@ -1 +0,0 @@\n-x\n",
        "rename_in": f"diff --git a/src/x.c b/{path}\nrename from src/x.c\nrename to {path}\n",
    }
    assert "protected" in rules(texts[kind])


CONTENT_LINE = st.one_of(
    st.sampled_from(["", " ", "int x;", "return 0;", "-- a/x", "++ b/x", "@@ -1 +1 @@", "\\ no"]),
    st.text(st.characters(blacklist_characters="\n"), max_size=12),
)


@property_test
@given(
    files=st.lists(
        st.tuples(st.lists(CONTENT_LINE, max_size=25), st.lists(CONTENT_LINE, max_size=25)),
        min_size=1,
        max_size=3,
    )
)
def test_parse_counts_difflib_changes(files: list[tuple[list[str], list[str]]]) -> None:
    files = [(old, new) for old, new in files if old != new]
    assume(files)
    text = ""
    expected = []
    for number, (old, new) in enumerate(files):
        name = f"src/f{number}.c"
        text += "\n".join(difflib.unified_diff(old, new, f"a/{name}", f"b/{name}", lineterm=""))
        text += "\n"
        opcodes = difflib.SequenceMatcher(None, old, new).get_opcodes()
        removed = sum(i2 - i1 for tag, i1, i2, _, _ in opcodes if tag in ("replace", "delete"))
        added = sum(j2 - j1 for tag, _, _, j1, j2 in opcodes if tag in ("replace", "insert"))
        expected.append((name, added, removed))
    changes = parse_patch(text)
    assert [(c.new_path, c.added_lines, c.removed_lines) for c in changes] == expected


DIFF_FRAGMENT = st.sampled_from(
    [
        "diff --git a/x b/x",
        'diff --git "a/q" "b/q"',
        'diff --git "a/q',
        "--- a/x",
        "+++ b/x",
        "--- /dev/null",
        '--- "a/\\',
        "@@ -1 +1 @@",
        "@@ -1,2 +1,3 @@",
        "@@ -0,0 +1 @@",
        "-a",
        "+b",
        " c",
        "",
        "\\ No newline at end of file",
        "index 1..2 100644",
        "new file mode 100644",
        "deleted file mode 100755",
        "old mode 100644",
        "new mode 120000",
        "rename from x",
        "rename to ../y",
        "copy from z",
        "GIT binary patch",
        "Binary files a/x and /dev/null differ",
    ]
)


@property_test
@given(
    text=st.one_of(
        st.text(),
        st.lists(st.one_of(DIFF_FRAGMENT, st.text(max_size=10)), max_size=30).map("\n".join),
    )
)
def test_check_patch_never_raises(text: str) -> None:
    violations = check_patch(text, PatchPolicy())
    assert all("\n" not in v.message for v in violations)
    try:
        parse_patch(text)
    except PatchParseError:
        expected = "empty" if not text.strip() else "parse"
        rules = [v.rule for v in violations]
        assert rules[0] == expected
        # A mode line that no regular file has is named too, parsed or not (issue 39).
        assert set(rules[1:]) <= {"symlink", "submodule", "file_type"}
        assert not rules[1:] or "mode " in text


@property_test
@given(path=st.lists(SEGMENT, min_size=1, max_size=5).map("/".join))
def test_a_literal_path_matches_itself_and_double_star(path: str) -> None:
    assert glob_match(path, path)
    assert glob_match(path, "**")
    assert glob_match("./" + path.replace("/", "//"), path)


@property_test
@given(
    path=st.lists(st.sampled_from(["a", "b", "..", ".", "", "x.c", "te*st"]), max_size=5).map(
        "/".join
    ),
    patterns=st.lists(
        st.lists(
            st.sampled_from(["a", "b", "*", "**", "?", "*.c", "x.?", "te*st"]), min_size=1
        ).map("/".join),
        max_size=6,
    ),
)
def test_the_first_matching_glob_is_the_one_glob_match_finds_first(
    path: str, patterns: list[str]
) -> None:
    """All the globs at once (`matching_glob`) say what each one alone would, in order."""
    one_by_one = next((g for g in patterns if glob_match(path, g)), None)
    assert matching_glob(path, tuple(patterns)) == one_by_one


def test_the_files_the_loops_options_name_are_protected(pytester: pytest.Pytester) -> None:
    """A coder that adds its failing test to the known failures, or lowers the target in the
    criteria file, would pass its own gate in the next run; records are the audit trail."""
    from pytest_fwloop.config.loop_options import read_options
    from pytest_fwloop.config.tree_rules import patch_policy
    from pytest_fwloop.core.gate.policy import path_violations

    pytester.makeini("[pytest]\nfwloop_run_dir = records/loop\nfwloop_knowledge = kb.sqlite\n")
    config = pytester.parseconfig(
        "--fwloop-known-failures=ci/known.txt",
        "--fwloop-criteria=ci/criteria.toml",
        "--fwloop-evidence=../outside.log",
    )
    policy = patch_policy(config, read_options(config))
    for path in (
        "ci/known.txt",
        "ci/criteria.toml",
        "kb.sqlite",
        "records/loop/20261127-010101-abcd/summary.json",
    ):
        assert [v.rule for v in path_violations(path, policy)] == ["protected"], path
    assert path_violations("ci/build.sh", policy) == []
    assert path_violations("records/notes.txt", policy) == []


@pytest.mark.parametrize("knowledge", ["Off", "~/team/knowledge.sqlite"])
def test_the_knowledge_base_is_found_as_the_loop_finds_it(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, knowledge: str
) -> None:
    """`off` in any case keeps none, `~` is the home directory: neither names a file here."""
    from pytest_fwloop.config.loop_options import read_options
    from pytest_fwloop.config.tree_rules import patch_policy, snapshot_exclude
    from pytest_fwloop.core.gate.policy import path_violations

    monkeypatch.setenv("HOME", str(pytester.path.parent / "home"))
    pytester.makeini(f"[pytest]\nfwloop_knowledge = {knowledge}\n")
    config = pytester.parseconfig()
    options = read_options(config)
    policy = patch_policy(config, options)
    named = knowledge.lstrip("~/")
    assert path_violations(named, policy) == []
    assert path_violations("Off", policy) == []
    excluded = snapshot_exclude(options, config.rootpath, None)
    assert excluded == ("/.fwloop/runs/",)  # the default run records only


def test_the_files_the_baseline_collected_tests_from_are_protected() -> None:
    """ESP-IDF keeps its `pytest_<name>.py` beside the firmware: no default glob names it, the
    baseline's node ids do (issue 33)."""
    from pytest_fwloop.core.gate.policy import path_violations, test_modules

    collected = test_modules(
        [
            "components/uart/pytest_uart.py::test_echo[esp32]",
            "components/uart/pytest_uart.py::TestBoot::test_banner",
            "checks/boot.yaml::boot",
            "broken/pytest_broken.py",  # a collection error's node id is its file
            "tester::make check",
            "../elsewhere/pytest_x.py::test_y",
        ]
    )
    assert collected == {
        "components/uart/pytest_uart.py",
        "checks/boot.yaml",
        "broken/pytest_broken.py",
    }
    policy = PatchPolicy().with_test_files(collected)
    assert rules(modify("components/uart/pytest_uart.py"), policy) == ["protected"]
    [violation] = path_violations("./components//uart/pytest_uart.py", policy)
    assert "the suite collects tests from it" in violation.message
    assert rules(modify("components/uart/uart.c"), policy) == []
    assert rules(modify("components/uart/pytest_uart.py")) == []  # no default glob names it


@pytest.mark.parametrize(
    ("args", "protected", "free"),
    [
        # ESP-IDF's shape: `python_files = pytest_*.py`, the scripts beside the firmware.
        ((), ["components/uart/pytest_uart.py", "pytest_top.py"], ["components/uart/uart.c"]),
        (
            ("components",),
            ["components/uart/pytest_uart.py"],
            ["pytest_top.py", "components/uart/uart.c"],
        ),
        (("components/uart/pytest_uart.py::test_echo",), ["components/uart/pytest_uart.py"], []),
    ],
)
def test_the_ini_python_files_are_protected_in_the_collection_roots(
    pytester: pytest.Pytester, args: tuple[str, ...], protected: list[str], free: list[str]
) -> None:
    from pytest_fwloop.config.loop_options import read_options
    from pytest_fwloop.config.tree_rules import patch_policy
    from pytest_fwloop.core.gate.policy import path_violations

    pytester.makeini("[pytest]\npython_files = pytest_*.py\n")
    pytester.mkdir("components")
    pytester.mkdir("components/uart")
    config = pytester.parseconfig(*args)
    policy = patch_policy(config, read_options(config))
    for path in protected:
        assert [v.rule for v in path_violations(path, policy)] == ["protected"], path
    for path in free:
        assert path_violations(path, policy) == [], path


def test_pytests_default_python_files_are_protected_under_testpaths(
    pytester: pytest.Pytester,
) -> None:
    from pytest_fwloop.config.loop_options import read_options
    from pytest_fwloop.config.tree_rules import patch_policy
    from pytest_fwloop.core.gate.policy import path_violations

    pytester.makeini("[pytest]\ntestpaths = checks\npython_files = check_*.py *_test.py\n")
    pytester.mkdir("checks")
    config = pytester.parseconfig()
    policy = patch_policy(config, read_options(config))
    assert [v.rule for v in path_violations("checks/uart/check_uart.py", policy)] == ["protected"]
    assert path_violations("src/check_sum.py", policy) == []  # outside the collection root
