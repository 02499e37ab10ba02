"""A failure's signature, and the scrubbing it and the coder's excerpts share (pure).

A signature names "the same failure" across iterations and runs: it clusters the coder's
context (`context`), tells a failure seen before from a new one (flaky reruns, in the child
too), and keys the knowledge base. No pydantic here: a child pytest imports this module, and
every child would pay for pydantic's import.
"""

from __future__ import annotations

import json
import re
from typing import Protocol

#: Longest signature, in characters; a longer headline keeps its start and end.
SIGNATURE_CHARS = 200
#: Where an excerpt or a long log was cut. It gives no count: a long log is first cut to a window
#: at each end (`_window`), so a count taken from the excerpt's input would understate the cut.
CUT = "\n…\n"

_PATH_CHAR = r"[\w.+~@%=-]"
# Patterns that start with a literal are searched for quickly; the character before a match is
# checked afterwards, so "http://host/a/b" and "src/a/b" are left alone.
_ABSOLUTE_PATH = re.compile(rf"/{_PATH_CHAR}+(?:/{_PATH_CHAR}+)*")
_NOT_A_PATH_START = re.compile(r"[\w.~:/<>-]")
_PYTEST_TMP = re.compile(rf"/pytest-of-{_PATH_CHAR}+/pytest-(?:\d+|current)(?=/|$)")
_DURATION = re.compile(
    r"(?<![\w./-])\d+(?:\.\d+)?(?P<unit>\s?(?:ms|us|µs|ns|s|secs?|seconds?|mins?|minutes?))(?!\w)"
    r"(?: \(\d+:\d\d:\d\d\))?"
)
_DATETIME = re.compile(r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?")
_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
# Escaped as \u00XX these cost six bytes each and tell the coder nothing.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
_CRASH = re.compile(r"(?P<path>.+?):\d+: (?P<message>.*)", re.DOTALL)
_PYTEST_E = re.compile(r"^E\s+")
#: A traceback entry's location line as pytest prints it: `path:line: ...`.
_LOCATION = re.compile(r"^(?P<path>[^\s:][^:\n]*):(?P<line>\d+):", re.MULTILINE)
#: Values that change between iterations of the same failure, in the order they are replaced.
_VOLATILE = (
    (re.compile(r"(?<!\w)'[^'\n]*'(?!\w)|(?<!\w)\"[^\"\n]*\"(?!\w)"), "'…'"),
    (re.compile(r"\b[0-9a-fA-F]{8}(?:-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}\b"), "<uuid>"),
    (
        re.compile(
            r"\b0[xX][0-9a-fA-F]+\b|\b(?=[0-9a-fA-F]*[a-fA-F])(?=[0-9a-fA-F]*\d)[0-9a-fA-F]{6,}\b"
        ),
        "<hex>",
    ),
    # A minus sign only where it cannot be a hyphen or a range: "x=-1", not "3-5" or "uart-2".
    (re.compile(r"(?<![A-Za-z_])(?:(?<![\w.])-)?\d+(?:\.\d+)*"), "N"),
    (re.compile(r"\s+"), " "),
)


class FailureRecord(Protocol):
    """What a signature reads of a test's record: `results.TestRecord`, or a child's own."""

    @property
    def nodeid(self) -> str: ...
    @property
    def outcome(self) -> str: ...
    @property
    def phase(self) -> str: ...
    @property
    def longrepr(self) -> str: ...
    @property
    def crash(self) -> str: ...
    @property
    def env_failure(self) -> str | None: ...


def wire_bytes(text: str) -> int:
    """Bytes `text` takes inside a JSON string on the wire, quotes excluded. A lone surrogate (it
    cannot go on the wire; `scrub` replaces it) counts as the three bytes Python would need."""
    return len(json.dumps(text, ensure_ascii=False).encode("utf-8", "surrogatepass")) - 2


def excerpt(text: str, budget: int) -> str:
    """Head and tail of `text` within `budget` bytes, the tail weighted three to one: the end of a
    traceback says what failed, the start where it began. "" when not even the cut mark fits."""
    if wire_bytes(text) <= budget:
        return text
    room = budget - wire_bytes(CUT)
    if room <= 0:
        return ""
    return f"{head_within(text, room // 4)}{CUT}{tail_within(text, room - room // 4)}"


def head_within(text: str, budget: int) -> str:
    """The longest start of `text` within `budget` bytes; a character costs at least one."""
    low, high = 0, min(len(text), budget)
    while low < high:
        middle = (low + high + 1) // 2
        if wire_bytes(text[:middle]) <= budget:
            low = middle
        else:
            high = middle - 1
    return text[:low]


def tail_within(text: str, budget: int) -> str:
    return head_within(text[::-1], budget)[::-1]


def scrub(text: str, root: str = "") -> str:
    """`text` without what changes from run to run or says nothing: paths under `root` made
    relative, pytest tmp dirs as `<tmp>`, other absolute paths cut to their last two components,
    durations as `?s`, timestamps as `<ts>`, terminal colours and control characters.

    Never longer on the wire than `text`, so a log's raw size bounds its scrubbed size.
    """
    text = text.encode("utf-8", "replace").decode()  # lone surrogates cannot go on the wire
    text = _ANSI.sub("", text).replace("\r\n", "\n").replace("\r", "\n")
    text = _CONTROL.sub("", text)
    base = root.rstrip("/")
    if base:
        under_root = re.compile(rf"{re.escape(base)}(?:/|(?!{_PATH_CHAR}))")
        text = under_root.sub(_relative_to_root, text)
    text = _ABSOLUTE_PATH.sub(_outside_path, text)
    text = _DATETIME.sub("<ts>", text)
    return _DURATION.sub(r"?\g<unit>", text)


def _starts_a_path(match: re.Match[str]) -> bool:
    return match.start() == 0 or not _NOT_A_PATH_START.match(match.string, match.start() - 1)


def _relative_to_root(match: re.Match[str]) -> str:
    if not _starts_a_path(match):
        return match[0]
    return "" if match[0].endswith("/") else "."


def _outside_path(match: re.Match[str]) -> str:
    """A pytest tmp dir as `<tmp>`, any other path cut to its last two components."""
    path = match[0]
    if not _starts_a_path(match):
        return path
    tmp = _PYTEST_TMP.search(path)
    if tmp is not None:
        return "<tmp>" + path[tmp.end() :]
    short = "…/" + "/".join(path.split("/")[-2:])
    return short if wire_bytes(short) < wire_bytes(path) else path


def signature(record: FailureRecord, root: str = "") -> str:
    """A stable name for "the same failure", sharp enough to keep different bugs apart: the
    phase, the test function and the line of it that failed, the first line of what was raised
    (minus values that change between runs), and the file it was raised in when that is not the
    test's own (a firmware module, a driver). Firmware-side line numbers are left out, since a
    patch above them shifts them; the test's line stays, since patches change the firmware."""
    if record.env_failure:
        # The environment being down is one failure, wherever each test noticed it.
        return _bounded(f"{record.phase}: {_normalized(record.env_failure, root)}")
    test_file, _, function = record.nodeid.partition("::")
    crash = _CRASH.match(record.crash)
    if crash is not None:
        message = crash["message"]
    else:
        message = _PYTEST_E.sub("", _last_line(record.longrepr))
    message = _normalized(message, root) or record.outcome
    site = f"{test_file}::{function.partition('[')[0]}" if function else test_file
    line = _test_line(record, test_file)
    headline = f"{record.phase} {scrub(site, root)}{f':{line}' if line else ''}: {message}"
    raised_in = scrub(crash["path"], root) if crash is not None else ""
    if raised_in and not _same_file(raised_in, test_file):
        headline += f" (raised in {raised_in})"
    return _bounded(headline)


def _normalized(message: str, root: str) -> str:
    message = _first_line(scrub(message, root))
    for pattern, replacement in _VOLATILE:
        message = pattern.sub(replacement, message)
    return message.strip()


def _test_line(record: FailureRecord, test_file: str) -> str:
    """The line of the test's own file where it failed: its frame in the traceback (pytest's
    `path:line: ...` location lines), else the crash line when the crash is in that file."""
    if not test_file:
        return ""
    # Only a line holding `test_file:` can be one: find those (a log can be megabytes) and
    # match each from its start, as a scan of every line would, in the same order.
    needle = f"{test_file}:"
    for text in (record.longrepr, record.crash):
        at = text.find(needle)
        while at != -1:
            found = _LOCATION.match(text, text.rfind("\n", 0, at) + 1)
            if found is not None and _same_file(found["path"], test_file):
                return found["line"]
            end = text.find("\n", at)
            at = -1 if end == -1 else text.find(needle, end)
    return ""


def _same_file(path: str, test_file: str) -> bool:
    return path == test_file or path.endswith(f"/{test_file}")


def _bounded(headline: str) -> str:
    if len(headline) <= SIGNATURE_CHARS:
        return headline
    half = (SIGNATURE_CHARS - 1) // 2
    return f"{headline[:half]}…{headline[len(headline) - half :]}"


def _first_line(text: str) -> str:
    # Not splitlines(): it also splits at form feeds and other characters a value may hold.
    return next((line.strip() for line in text.split("\n") if line.strip()), "")


def _last_line(text: str) -> str:
    return text.rstrip().rpartition("\n")[2].strip()
