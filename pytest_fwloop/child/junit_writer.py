"""A round's JUnit XML written by the child from its own records, when nobody asked for pytest's.

pytest's `--junitxml` writer costs about 50 µs a test (an element tree and a reporter object per
test), as much as a trivial test itself. The child already folds every report into one record
per test (`reporter.ResultsRecorder`), so it writes the same document from those records at the
end of its session. When the user passes `--junitxml` (their file is a copy of a round's), the
child runs pytest's own writer instead, with every `junit_*` option of theirs.

The shape is pytest's default (xunit2, `junit_logging = no`): a `testsuites` holding one
`testsuite` named pytest; per test a `testcase` with `classname` and `name` from its node id and
its time; `failure`, `error` and `skipped` children with pytest's messages, and the traceback as
`results.json` keeps it (bounded).
"""

from __future__ import annotations

import platform
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from datetime import datetime, timezone
from typing import Any

#: What XML 1.0 cannot hold; pytest writes such a character as `#xNN`, and so does this.
_ILLEGAL = re.compile("[^\x09\x0a\x0d\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
_ESCAPES = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;"})
#: In an attribute a parser turns a raw newline or tab into a space; these keep them.
_ATTRIBUTE_ESCAPES = str.maketrans({"\n": "&#10;", "\r": "&#13;", "\t": "&#09;"})
MESSAGE_LIMIT = 1024


def _text(value: str) -> str:
    return _ILLEGAL.sub(lambda m: f"#x{ord(m.group()):02X}", value).translate(_ESCAPES)


def _attribute(value: str) -> str:
    return _text(value).translate(_ATTRIBUTE_ESCAPES)


def classname_and_name(nodeid: str) -> tuple[str, str]:
    """`tests/test_uart.py::TestEcho::test_crlf[115200]` -> (`tests.test_uart.TestEcho`,
    `test_crlf[115200]`), as pytest names a test case."""
    path, bracket, params = nodeid.partition("[")
    names = path.split("::")
    names[0] = names[0].replace("/", ".").removesuffix(".py")
    names[-1] += bracket + params
    return ".".join(names[:-1]), names[-1]


def note(outcome: str, phase: str, reason: str, location: str) -> tuple[str, str]:
    """The `message` pytest gives the element of a test that did not pass, and its text when
    that is not the traceback: `reason` is the crash message (or the report's whole text), the
    skip or the xfail reason; `location` is where a skip was raised (`path:line`)."""
    if outcome == "error":
        return (
            "collection failure" if phase == "collect" else f'failed on {phase} with "{reason}"'
        ), ""
    if outcome == "skipped":
        return reason, f"{location}: {reason}"
    return reason, ""


def _element(record: Mapping[str, Any], noted: tuple[str, str]) -> tuple[str, str]:
    """What the suite counts the test as (`passed`, `failure`, `error`, `skipped`), and the
    element inside its test case."""
    outcome = record["outcome"]
    if outcome == "passed" or (outcome == "xpassed" and not record.get("strict_xpass")):
        return "passed", ""
    message = _attribute(noted[0][:MESSAGE_LIMIT])
    detail = _text(noted[1] or record.get("longrepr", ""))
    if outcome == "failed" or (outcome == "xpassed" and record.get("strict_xpass")):
        return "failure", f'<failure message="{message}">{detail}</failure>'
    if outcome == "error":
        return "error", f'<error message="{message}">{detail}</error>'
    if outcome == "skipped":
        return "skipped", f'<skipped type="pytest.skip" message="{message}">{detail}</skipped>'
    if outcome == "xfailed":
        return "skipped", f'<skipped type="pytest.xfail" message="{message}" />'
    return "passed", ""


def render(
    records: Iterable[Mapping[str, Any]],
    notes: Mapping[str, tuple[str, str]],
    *,
    started: float,
    duration: float,
) -> str:
    """The document for `records` (in the order the tests ran); `notes` by node id for those
    that did not pass (`note`)."""
    kinds: Counter[str] = Counter()
    cases = []
    classnames: dict[str, str] = {}  # escaped once: a file's tests share one
    for record in records:
        classname, name = classname_and_name(record["nodeid"])
        if classname not in classnames:
            classnames[classname] = _attribute(classname)
        kind, inner = _element(record, notes.get(record["nodeid"], ("", "")))
        kinds[kind] += 1
        head = (
            f'<testcase classname="{classnames[classname]}" name="{_attribute(name)}" '
            f'time="{record["duration"]:.3f}"'
        )
        cases.append(f"{head}>{inner}</testcase>" if inner else f"{head} />")
    timestamp = datetime.fromtimestamp(started, timezone.utc).astimezone().isoformat()
    suite = (
        f'<testsuite name="pytest" errors="{kinds["error"]}" failures="{kinds["failure"]}" '
        f'skipped="{kinds["skipped"]}" tests="{len(cases)}" time="{duration:.3f}" '
        f'timestamp="{timestamp}" hostname="{_attribute(platform.node())}">'
    )
    return (
        '<?xml version="1.0" encoding="utf-8"?><testsuites name="pytest tests">'
        f"{suite}{''.join(cases)}</testsuite></testsuites>"
    )
