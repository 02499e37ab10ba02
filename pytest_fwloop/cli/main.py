"""The `fwloop` command: act on the loop's runs from another terminal or a CI step.

`fwloop cancel` stops a running loop as SIGTERM would: the controller restores the tree and
writes its records before it exits, and the command waits for that, so when it returns the
workspace is settled. `fwloop replay RUN` checks a recorded run's decisions (replay.py);
`fwloop report RUN` writes its report.html again (html_report.py); `fwloop kb` searches, lists
and prunes the knowledge base of fixes (knowledge.py).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from pathlib import Path

from tabulate import tabulate

from pytest_fwloop.cli.operator import add_parsers, operator_command
from pytest_fwloop.cli.runs import list_runs, replay_run, report_run, show_run
from pytest_fwloop.cli.why import why_sent
from pytest_fwloop.config.ini_lookup import IniError, option_value
from pytest_fwloop.config.tree_rules import knowledge_path
from pytest_fwloop.knowledge.store import KnowledgeBase, KnowledgeError
from pytest_fwloop.workspace import Journal, WorkspaceError

#: How long `cancel` waits for the controller to restore the tree and exit.
WAIT_SECONDS = 120.0


def cancel(root: Path, run: str | None, wait: float) -> int:
    """Stop the loop running in `root`; with `run` (an id, a prefix of one, or `last`), only
    if that is the run going on there (DESIGN.md §11's `fwloop cancel [RUN]`)."""
    try:
        record = Journal(root / ".fwloop").active()
    except WorkspaceError as exc:
        print(exc, file=sys.stderr)
        return 1
    if record is None:
        print(f"fwloop: no loop is running in {root}", file=sys.stderr)
        return 1
    if run not in (None, "last") and not record.run_id.startswith(run):
        print(
            f"fwloop: run {run} is not running in {root} (run {record.run_id} is); nothing "
            "was stopped",
            file=sys.stderr,
        )
        return 1
    os.kill(record.pid, signal.SIGTERM)
    print(f"fwloop: asked run {record.run_id} (pid {record.pid}) to stop")
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        if Journal(root / ".fwloop").active() is None:
            print(f"fwloop: run {record.run_id} stopped; the tree is restored")
            return 0
        time.sleep(0.1)
    print(
        f"fwloop: run {record.run_id} (pid {record.pid}) is still running after {wait:g}s; "
        f"kill it and rerun pytest --fwloop to recover the tree",
        file=sys.stderr,
    )
    return 1


def knowledge_command(args: argparse.Namespace) -> int:
    """`fwloop kb search|list|verdicts|forget`: look into the knowledge base, or take a fix or
    a verdict out of it."""
    base = KnowledgeBase(args.knowledge)
    try:
        if args.action == "forget":
            what = "verdict" if args.verdict else "fix"
            if not (base.forget_verdict(args.id) if args.verdict else base.forget(args.id)):
                print(f"fwloop: no {what} #{args.id} in {args.knowledge}", file=sys.stderr)
                return 1
            print(f"fwloop: {what} #{args.id} forgotten")
            return 0
        if args.action == "verdicts":
            verdicts = base.recent_verdicts(args.limit)
            table = [
                [v.id, v.created[:16], v.run_id, v.status, v.nodeid, v.reason[:50]]
                for v in verdicts
            ]
            headers = ["id", "stored", "run", "status", "test", "reason"]
            print(tabulate(table, headers) if table else "no verdict")
            return 0
        found = (
            base.search(args.text, args.limit)
            if args.action == "search"
            else base.recent(args.limit)
        )
    except KnowledgeError as exc:
        print(f"fwloop: {exc}", file=sys.stderr)
        return 2
    rows = [
        [f.id, f.created[:16], f"{f.run_id}#{f.iteration}", f.summary[:50], len(f.signatures)]
        for f in found
    ]
    print(tabulate(rows, ["id", "stored", "run", "summary", "signatures"]) if rows else "no fix")
    return 0


def _configured(args: argparse.Namespace) -> None:
    """Fill `--run-dir` and `--knowledge` left out with what `pytest --fwloop` would use."""
    if getattr(args, "rootdir", None) is not None and getattr(args, "run_dir", "") is None:
        args.run_dir = Path(option_value(args.rootdir.resolve(), "run_dir"))
    if args.command == "kb" and args.knowledge is None:
        here = Path.cwd()
        args.knowledge = knowledge_path(here, option_value(here, "knowledge"))


def main(argv: list[str] | None = None) -> int:
    """The `fwloop` console script; the exit status is returned, not raised, for tests."""
    parser = _parser()
    args, extra = parser.parse_known_args(argv)
    if len(extra) == 1 and not extra[0].startswith("-") and _chat_without_text(args):
        # `fwloop chat RUN --role R TEXT`: argparse before Python 3.12 leaves an optional
        # positional empty when options stand between it and the one before (bpo-15112).
        args.text, extra = extra[0], []
    if extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    try:
        _configured(args)
    except IniError as exc:
        print(exc, file=sys.stderr)
        return 2
    return _dispatch(args)


def _chat_without_text(args: argparse.Namespace) -> bool:
    return args.command == "chat" and args.text is None


def _parser() -> argparse.ArgumentParser:
    """Every subcommand; those reading recorded runs share --rootdir and --run-dir."""
    parser = argparse.ArgumentParser(prog="fwloop", description="Control pytest-fwloop runs.")
    commands = parser.add_subparsers(dest="command", required=True)
    stop = commands.add_parser("cancel", help="stop the loop running in a rootdir")
    stop.add_argument(
        "target",
        nargs="?",
        help="the run to stop (id, prefix, `last`), or the rootdir it runs in (default: the "
        "loop running in --rootdir)",
    )
    stop.add_argument("--rootdir", default=".", type=Path, help="default: .")
    stop.add_argument("--wait", type=float, default=WAIT_SECONDS, help="seconds to wait")
    check = commands.add_parser(
        "replay", help="check that a recorded run's decisions follow from its records"
    )
    check.add_argument("run", help="run id, unique prefix of one, `last`, or a run directory")
    listing = commands.add_parser("list", help="the runs under the rootdir")
    show = commands.add_parser("show", help="one run: outcome, reason, iterations, records")
    show.add_argument("run", help="run id, unique prefix of one, `last`, or a run directory")
    for command in (listing, show):
        command.add_argument("--json", action="store_true", help="JSON instead of a table")
    show.add_argument(
        "--known-failures",
        action="store_true",
        help="print the run's declined and unresolved tests as a file for --fwloop-known-failures",
    )
    show.add_argument(
        "--why",
        metavar="PATH[:SYMBOL]",
        help="why the coder was sent that file's (or symbol's) code, or was not: its rank, score "
        "by signal, and fate in each coder request of the run",
    )
    report = commands.add_parser("report", help="write a run's report.html again")
    report.add_argument("run", help="run id, unique prefix of one, `last`, or a run directory")
    report.add_argument("-o", "--output", type=Path, help="default: the run's report.html")
    operator = add_parsers(commands)
    for command in (check, report, listing, show, *operator):
        command.add_argument("--rootdir", default=".", type=Path, help="default: .")
        command.add_argument(
            "--run-dir",
            type=Path,
            help="where the runs are, relative to the rootdir (default: $FWLOOP_RUN_DIR, the "
            "ini's fwloop_run_dir, or .fwloop/runs)",
        )
    _add_knowledge_parser(commands)
    return parser


def _add_knowledge_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """`fwloop kb`: its actions read the knowledge base file, not a run, so no --rootdir."""
    kb = commands.add_parser(
        "kb", help="the knowledge base: fixes that worked, verdicts on failures left unfixed"
    )
    actions = kb.add_subparsers(dest="action", required=True)
    search = actions.add_parser("search", help="fixes whose failures match the words of TEXT")
    search.add_argument("text")
    actions.add_parser("list", help="the latest fixes")
    actions.add_parser(
        "verdicts",
        help="the latest verdicts: failures a coder declined (not a code defect) or could not "
        "analyse, which later runs' coders are told of",
    )
    forget = actions.add_parser("forget", help="take one fix (or, with --verdict, a verdict) out")
    forget.add_argument("id", type=int)
    forget.add_argument("--verdict", action="store_true", help="ID is a verdict's, not a fix's")
    for action in (search, actions.choices["list"], actions.choices["verdicts"], forget):
        action.add_argument(
            "--knowledge",
            type=Path,
            help="the knowledge base file (default: $FWLOOP_KNOWLEDGE, the ini's "
            "fwloop_knowledge in the current directory, or .fwloop/knowledge.sqlite)",
        )
        action.add_argument("--limit", type=int, default=20, help="rows to show (default 20)")


def _dispatch(args: argparse.Namespace) -> int:
    """Run the chosen subcommand; its exit status is the command's."""
    if args.command == "kb":
        if args.knowledge is None:
            print(
                "fwloop: the knowledge base is off (fwloop_knowledge = off); name a file with "
                "--knowledge",
                file=sys.stderr,
            )
            return 2
        return knowledge_command(args)
    if args.command == "replay":
        return replay_run(args.rootdir.resolve(), args.run_dir, args.run)
    if args.command == "list":
        return list_runs(args.rootdir.resolve(), args.run_dir, args.json)
    if args.command == "show" and args.why:
        return why_sent(args.rootdir.resolve(), args.run_dir, args.run, args.why)
    if args.command == "show":
        return show_run(
            args.rootdir.resolve(), args.run_dir, args.run, args.json, args.known_failures
        )
    if args.command == "report":
        return report_run(args.rootdir.resolve(), args.run_dir, args.run, args.output)
    if args.command in ("confirm", "followup", "resume", "rerun", "chat", "apply"):
        return operator_command(args)
    if args.target is not None and Path(args.target).is_dir():
        return cancel(Path(args.target).resolve(), None, args.wait)  # `fwloop cancel ROOTDIR`
    return cancel(args.rootdir.resolve(), args.target, args.wait)
