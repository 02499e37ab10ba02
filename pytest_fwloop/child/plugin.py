"""The child side of an iteration: record each test's outcome for the controller.

Registered only in a child run (`--fwloop-child-report=PATH`). Under pytest-xdist the environment
marking runs in the workers and the recording in the child's main process, where reports arrive.

It writes plain JSON in the shape of `results.TestRecord`, `IterationResults` and `ProgressLine`
(fields at their default left out) without importing pydantic: every child run and every xdist
worker would pay for the import. The controller validates what it reads with those models.
"""

from __future__ import annotations

import fnmatch
import json
import os
import time
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest

from pytest_fwloop.child.device_logs import REPORT_SECTION as DEVICE_LOG_SECTION
from pytest_fwloop.child.device_logs import BuiltinDeviceLogs, DeviceLogs
from pytest_fwloop.child.files import progress_path
from pytest_fwloop.child.metrics import COVERAGE, coverage_total, read_metrics
from pytest_fwloop.child.progress_stream import ProgressStream
from pytest_fwloop.core.suite.env_classify import ENVIRONMENT_FAILURE, environment_error_name

#: One test's record as `results.TestRecord` reads it.
Record = dict[str, Any]

#: Bounds on what one record keeps; the coder's context is packed from these later.
LONGREPR_HEAD = 1024
LONGREPR_TAIL = 3072
SECTIONS_TAIL = 2048
ENV_ATTRIBUTE = "fwloop_env_failure"
PATCH_AWARE_ATTRIBUTE = "fwloop_patch_aware"
#: Fixtures whose value changes with each patch: a test using one must run in every iteration.
PATCH_FIXTURES = frozenset({"fwloop_review", "fwloop_test_plan"})


def bounded(text: str, head: int, tail: int) -> str:
    """Keep the start and the (more telling) end of a long text."""
    if len(text) <= head + tail:
        return text
    return f"{text[:head]}\n… [{len(text) - head - tail} characters cut] …\n{text[-tail:]}"


class ReportTags:
    """Tags errors that are the environment's fault, not the firmware's (DESIGN.md §7), and
    tests that read the applied patch's review or test plan (focus reruns keep them in)."""

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        report = yield
        if not PATCH_FIXTURES.isdisjoint(getattr(item, "fixturenames", ())):
            setattr(report, PATCH_AWARE_ATTRIBUTE, True)
        if call.excinfo is not None and report.failed:
            name = environment_error_name(call.excinfo.value)
            # Known transport errors only mean "rig down" during setup; fwloop's own
            # EnvironmentFailure means it in any phase (a console whose transport died mid-test).
            if name is not None and (call.when == "setup" or name == ENVIRONMENT_FAILURE):
                message = str(call.excinfo.value).strip().splitlines()
                # A plain attribute survives pytest-xdist's report serialisation.
                setattr(report, ENV_ATTRIBUTE, f"{name}: {message[0] if message else ''}"[:300])
        return report


class Selection:
    """Narrows a run to the listed node ids (focus reruns, env retries, tester selections).

    A focus names a few tests of a large suite: test files that hold none of them are not
    collected, nor the functions and classes no wanted id lies under (creating each test item
    costs more than running a trivial test). What gets through is narrowed to the exact ids at
    the end of collection, as before; a wanted id whose parts are named otherwise than its node
    id is only not collected, which the controller sees (`no longer collected`) and the next
    whole-suite run mends.
    """

    def __init__(self, wanted: set[str]) -> None:
        self.wanted = wanted
        self.files = {nodeid.split("::", 1)[0] for nodeid in wanted}
        #: Every node id a wanted test lies under: its classes, its function (without params).
        self.under: set[str] = set()
        for nodeid in wanted:
            parts = nodeid.split("[", 1)[0].split("::")
            self.under.update("::".join(parts[:end]) for end in range(2, len(parts) + 1))

    def pytest_ignore_collect(self, collection_path: Path, config: pytest.Config) -> bool | None:
        if collection_path.suffix != ".py" or collection_path.name in (
            "conftest.py",
            "__init__.py",
        ):
            return None  # conftests, and packages (pytest 7 collects one from its __init__.py)
        try:
            relative = collection_path.relative_to(config.rootpath).as_posix()
        except ValueError:
            return None  # outside the rootdir: its node ids are not simple paths
        patterns = config.getini("python_files")
        if not any(fnmatch.fnmatch(collection_path.name, pattern) for pattern in patterns):
            return None
        return relative not in self.files or None

    @pytest.hookimpl(tryfirst=True)
    def pytest_pycollect_makeitem(
        self, collector: pytest.Module | pytest.Class, name: str, obj: object
    ) -> list[pytest.Item] | None:
        if f"{collector.nodeid}::{name}" in self.under:
            return None  # pytest makes it as usual
        return []

    def pytest_collection_modifyitems(
        self, config: pytest.Config, items: list[pytest.Item]
    ) -> None:
        keep = [item for item in items if item.nodeid in self.wanted]
        dropped = [item for item in items if item.nodeid not in self.wanted]
        if dropped:
            config.hook.pytest_deselected(items=dropped)
            items[:] = keep


class ResultsRecorder:
    """Folds the per-phase reports into one record per test and writes the results file.

    As tests run it also appends progress lines to `progress_path(path)` (`ProgressStream`: in
    the file once written): the controller shows them live, and rebuilds the results from them
    when the child dies before its end (pytest-timeout's thread method exits the process).
    """

    def __init__(self, path: Path, junit: Path | None = None, whole_suite: bool = True) -> None:
        self.path = path
        self.junit = junit
        #: Only a run of the whole suite has a coverage total comparable across iterations.
        self.whole_suite = whole_suite
        self.records: dict[str, Record] = {}
        self.reruns: dict[str, int] = {}
        #: For `junit`: what pytest's writer would say of each test that did not pass.
        self.notes: dict[str, tuple[str, str]] = {}
        #: Each finished test's record as JSON: written to the stream, reused in the results.
        self.encoded: dict[str, str] = {}
        self.started = time.time()
        path.parent.mkdir(parents=True, exist_ok=True)
        self.progress = ProgressStream(progress_path(path))

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        if session.items:  # empty in pytest-xdist's controller, whose workers collect
            collected = [item.nodeid for item in session.items]
            self.progress.write(f"{json.dumps({'collected': collected})}\n".encode())

    def pytest_runtest_logstart(self, nodeid: str) -> None:
        self.progress.write(f'{{"started": {_json_string(nodeid)}}}\n'.encode())

    def pytest_runtest_logfinish(self, nodeid: str) -> None:
        record = self.records.get(nodeid)
        if record is not None:
            encoded = _encoded(record)
            self.encoded[nodeid] = encoded
            self.progress.write(b'{"finished": ' + encoded.encode() + b"}\n")

    def pytest_sessionstart(self) -> None:
        self.started = time.time()

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:
            self.notes[report.nodeid] = ("collection failure", "")
            self.records[report.nodeid] = _record(
                nodeid=report.nodeid,
                outcome="error",
                phase="collect",
                longrepr=bounded(report.longreprtext, LONGREPR_HEAD, LONGREPR_TAIL),
                crash=_crash(report),
            )

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.encoded.pop(report.nodeid, None)  # a report after its test finished: encoded anew
        self._fold(report)
        if report.user_properties:  # each report carries all the test recorded so far
            record = self.records.get(report.nodeid)
            metrics = read_metrics(report.user_properties)
            if record is not None and metrics:
                record["metrics"] = metrics

    def _fold(self, report: pytest.TestReport) -> None:
        """One phase's report into the test's record."""
        nodeid = report.nodeid
        if report.outcome == "rerun":  # type: ignore[comparison-overlap]
            # pytest-rerunfailures runs the test again: only the last attempt's outcome counts.
            self.records.pop(nodeid, None)
            self.reruns[nodeid] = self.reruns.get(nodeid, 0) + 1
            return
        previous = self.records.get(nodeid)
        if previous is not None and (
            previous["outcome"] in ("failed", "error")
            or (report.when == "teardown" and report.passed)
        ):
            # A failure stands, with the device's logs its teardown brings; a passing teardown
            # adds only its time.
            previous["duration"] += report.duration
            if previous["outcome"] in ("failed", "error"):
                previous.update(_device_output(previous, report))
            return
        duration = report.duration + (previous["duration"] if previous is not None else 0.0)
        if report.passed and not hasattr(report, "wasxfail"):
            # What nearly every phase is: a record of the fields at their default left out.
            record: Record = {
                "nodeid": nodeid,
                "outcome": "passed",
                "phase": report.when,
                "duration": duration,
            }
            if nodeid in self.reruns:
                record["reruns"] = self.reruns[nodeid]
            if getattr(report, PATCH_AWARE_ATTRIBUTE, False):
                record["patch_aware"] = True
            self.records[nodeid] = record
            return
        outcome = _outcome(report)
        if report.when == "teardown" and report.failed:
            outcome = "error"
        if outcome not in ("passed", "xpassed") or report.failed:
            self.notes[nodeid] = _junit_note(report, outcome)
        self.records[nodeid] = _record(
            nodeid=nodeid,
            outcome=outcome,
            phase=report.when,
            duration=duration,
            strict_xpass=outcome == "xpassed" and report.failed,
            longrepr=bounded(report.longreprtext, LONGREPR_HEAD, LONGREPR_TAIL)
            if report.failed
            else "",
            crash=_crash(report),
            sections=_sections(report) if report.failed else "",
            env_failure=getattr(report, ENV_ATTRIBUTE, None),
            reruns=self.reruns.get(nodeid, 0),
            patch_aware=bool(getattr(report, PATCH_AWARE_ATTRIBUTE, False)),
        )

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        self.progress.close()
        # Each finished test's record as its progress line encoded it (not indented: only then
        # does `json` use its C encoder, ~5x faster on 1,000 tests).
        tests = ", ".join(
            self.encoded.get(nodeid) or json.dumps(record)
            for nodeid, record in self.records.items()
        )
        results = f'{{"exitstatus": {int(exitstatus)}, "tests": [{tests}]'
        coverage = coverage_total(session.config) if self.whole_suite else None
        if coverage is not None:
            metrics = {COVERAGE: {"value": coverage, "better": "higher"}}
            results += f', "metrics": {json.dumps(metrics)}'
        self.path.parent.mkdir(parents=True, exist_ok=True)
        partial = self.path.with_suffix(".partial")
        partial.write_text(results + "}", encoding="utf-8")
        os.replace(partial, self.path)
        if self.junit is not None:
            from pytest_fwloop.child.junit_writer import render

            document = render(
                self.records.values(),
                self.notes,
                started=self.started,
                duration=time.time() - self.started,
            )
            self.junit.parent.mkdir(parents=True, exist_ok=True)
            self.junit.write_text(document, encoding="utf-8")


#: A string as `json.dumps` writes it (`json`'s own C function, without `dumps`' set-up).
_json_string = json.encoder.encode_basestring_ascii


def _encoded(record: Record) -> str:
    """`json.dumps(record)`, at a quarter of its cost for what nearly every record is: a
    test that passed, its four fields (`_fold`; an outcome and a phase need no escaping)."""
    if len(record) != 4:
        return json.dumps(record)
    return (
        f'{{"nodeid": {_json_string(record["nodeid"])}, "outcome": "{record["outcome"]}", '
        f'"phase": "{record["phase"]}", "duration": {float(record["duration"])!r}}}'
    )


def _record(*, nodeid: str, outcome: str, phase: str, duration: float = 0.0, **more: Any) -> Record:
    """A record with the fields at their default (`""`, `False`, `0`, `None`) left out."""
    record: Record = {"nodeid": nodeid, "outcome": outcome, "phase": phase, "duration": duration}
    record.update({name: value for name, value in more.items() if value})
    return record


def _outcome(report: pytest.TestReport) -> str:
    wasxfail = hasattr(report, "wasxfail")
    if report.when == "setup" and report.failed:
        return "error"
    if report.skipped:
        return "xfailed" if wasxfail else "skipped"
    if report.passed:
        return "xpassed" if wasxfail else "passed"
    if str(report.longrepr).startswith("[XPASS(strict)]"):  # xdist prefixes longreprtext
        return "xpassed"
    return "failed"


def _junit_note(report: pytest.TestReport, outcome: str) -> tuple[str, str]:
    """What pytest's JUnit writer says of a report that did not pass (`junit_writer.note`)."""
    from pytest_fwloop.child.junit_writer import note

    longrepr = report.longrepr
    location = ""
    if outcome == "xfailed":
        reason = str(getattr(report, "wasxfail", "")).removeprefix("reason: ")
    elif isinstance(longrepr, tuple):  # a skip: (path, line, reason)
        location = f"{longrepr[0]}:{longrepr[1]}"
        reason = str(longrepr[2]).removeprefix("Skipped: ")
    else:
        crash = getattr(longrepr, "reprcrash", None)
        reason = crash.message if crash is not None else str(longrepr)
    return note(outcome, report.when or "call", reason, location)


def _crash(report: pytest.TestReport | pytest.CollectReport) -> str:
    crash = getattr(report.longrepr, "reprcrash", None)
    if crash is None:
        return ""
    return f"{crash.path}:{crash.lineno}: {crash.message}"[:500]


def _device_output(previous: Record, report: pytest.TestReport) -> Record:
    """A failed test's `sections` with the device's logs its teardown report brings
    (`child/device_logs.py`) at their end, bounded as before; nothing when it brings none."""
    logs = [
        f"--- {title} ---\n{text}" for title, text in report.sections if title == DEVICE_LOG_SECTION
    ]
    if not logs:
        return {}
    text = "\n".join([previous.get("sections", ""), *logs]).lstrip("\n")
    return {"sections": bounded(text, 0, SECTIONS_TAIL)}


def _sections(report: pytest.TestReport) -> str:
    text = "\n".join(f"--- {title} ---\n{content}" for title, content in report.sections)
    return bounded(text, 0, SECTIONS_TAIL)


def register_child_plugins(
    config: pytest.Config,
    report_path: str,
    select_path: str,
    junit_path: str,
    spectrum_path: str,
    gcov_path: str = "",
    qemu_path: str = "",
) -> None:
    """Called from the main plugin's pytest_configure when this process is a loop child."""
    manager = config.pluginmanager
    manager.register(ReportTags(), "fwloop-report-tags")
    manager.register(DeviceLogs(), "fwloop-device-logs")
    manager.register(BuiltinDeviceLogs(), "fwloop-builtin-device-logs")
    if select_path:
        wanted = set(Path(select_path).read_text(encoding="utf-8").split("\n")) - {""}
        manager.register(Selection(wanted), "fwloop-selection")
    if spectrum_path:
        from pytest_fwloop.child.spectra.python_lines import SpectrumRecorder

        manager.register(SpectrumRecorder(Path(spectrum_path), config), "fwloop-spectrum")
        if gcov_path:
            from pytest_fwloop.child.spectra.gcov import GcovRecorder

            gcov = GcovRecorder(Path(gcov_path), Path(spectrum_path), config)
            manager.register(gcov, "fwloop-gcov")
        if qemu_path:
            from pytest_fwloop.child.spectra.qemu_blocks import QemuRecorder

            qemu = QemuRecorder(Path(qemu_path), Path(spectrum_path), config)
            manager.register(qemu, "fwloop-qemu-spectrum")
    if report_path and not hasattr(config, "workerinput"):
        junit = Path(junit_path) if junit_path else None
        recorder = ResultsRecorder(Path(report_path), junit, whole_suite=not select_path)
        manager.register(recorder, "fwloop-results")
