"""The spectrum run: one bounded child run, right before a coder call, that records which lines
the failing tests ran (DESIGN.md §16; docs/providers.md, the spectrum).

No run where nothing failed records a spectrum (a green baseline, a gate, a confirmation): it
would slow every green run for a localization that never comes. A patch's own test run (the
focus run) records the tests it runs, which are the ones still failing, so after a patch that
left failures there is usually nothing to add. This run covers the rest: the baseline's
failures, and a gate's regressions, which no recording run has measured on the tree as it
stands. Which tests it runs is `core/request/spectrum_sample.py`'s choice.
"""

from __future__ import annotations

import time

from pytest_fwloop.config.option_table import CHILD_REPORT_FLAG
from pytest_fwloop.core.machine.substates import SubState
from pytest_fwloop.core.request.spectrum_sample import spectrum_selection
from pytest_fwloop.core.suite.results import COMMAND_NODEID_PREFIX
from pytest_fwloop.loop.child_runner import ChildRunner, read_results
from pytest_fwloop.loop.request.spectrum_files import SPECTRUM_RUN, measured_on_tree
from pytest_fwloop.loop.services import Services
from pytest_fwloop.loop.state import LoopState


def record_spectrum(
    services: Services, loop: LoopState, child: ChildRunner, timeout: float
) -> None:
    """Run the spectrum run when a failing test the coder will hear of has no lines recorded on
    this tree; traced as SPECTRUM_RUN. Whatever becomes of it, the coder is asked after."""
    settings, recorder = services.settings, services.recorder
    latest = loop.latest_results()
    failing = [t.nodeid for t in loop.open_failures(str(settings.rootdir))]
    if latest is None or not failing or settings.options.source_bytes <= 0:
        return
    number = loop.current.number
    passing = [
        t.nodeid
        for t in latest.tests
        if t.outcome == "passed" and not t.nodeid.startswith(COMMAND_NODEID_PREFIX)
    ]
    failing = [n for n in failing if not n.startswith(COMMAND_NODEID_PREFIX)]
    selection = spectrum_selection(
        failing, passing, measured_on_tree(recorder.path / "rounds", number)
    )
    if not selection:
        return
    folder = recorder.round_path(number)
    stem = f"{SPECTRUM_RUN}-{len(list(folder.glob(f'{SPECTRUM_RUN}-*-select.txt'))) + 1}"
    chosen = recorder.write_text(
        f"{recorder.relative(folder)}/{stem}-select.txt", "\n".join(selection) + "\n"
    )
    results, log = folder / f"{stem}-results.json", folder / f"{stem}.log"
    args = [
        f"{CHILD_REPORT_FLAG}={results}",
        *child.spectrum_args(folder / f"{stem}.json"),
        *child.selection_args(chosen),
    ]
    started = time.monotonic()
    evidence = (recorder.relative(chosen), recorder.relative(log))
    try:
        ran = child.run(number, args, log, None, None, max(timeout, 1.0))
    except OSError as exc:  # no child could start: the coder is asked without the lines
        why = f"the spectrum run did not start: {exc}"[:300]
        services.substate(number, SubState.SPECTRUM_RUN, why, evidence[:1])
        return
    for path in (log, results):
        recorder.scrub(path)
    seconds = time.monotonic() - started
    failed = len(set(selection) & set(failing))
    note = (
        f"{failed} of {len(failing)} failing and {len(selection) - failed} of {len(passing)} "
        f"passing test(s) run to record the lines each ran, in {seconds:.1f}s"
    )
    if ran.timed_out:
        note += f" (stopped after {timeout:.0f}s: the coder is asked with what was recorded)"
    else:
        try:
            note += f"; {read_results(results).pass_count} passed"
        except (OSError, ValueError):
            note += "; it wrote no results"
    services.substate(number, SubState.SPECTRUM_RUN, note, evidence)
