"""`fwloop confirm|followup|resume|rerun|chat|apply`: the operator acts on a recorded run
(DESIGN.md §11, §15).

Each command reads the run's `state.json` and refuses, with one line and exit status 2, an action
the run cannot take, changing nothing. A follow-up that is a bare yes (`cli/confirm_words.py`)
to a pending proposal is a confirm with that note. Otherwise it starts pytest as the run was
started (its recorded arguments, in its invocation directory) with `--fwloop-operator=ORDER`:
the loop goes on in that process, on this terminal, and its exit status is the command's. That
process checks the order again under the run lock, so of two operators acting at once only one
gets through.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from pytest_fwloop.cli.chat import (
    ThreadChoice,
    add_chat_parser,
    chat_thread,
    chat_usage,
    show_threads,
)
from pytest_fwloop.cli.confirm_words import confirms
from pytest_fwloop.cli.replay import ReplayError
from pytest_fwloop.cli.runs import find_run
from pytest_fwloop.config.option_table import OPERATOR_FLAG
from pytest_fwloop.core.records.run_state import RunState, StateError, load_state
from pytest_fwloop.loop.operator.continuation import Action, Order, iteration_limit, refusal
from pytest_fwloop.workspace import Journal, WorkspaceError

#: Exit status of a refused command (argparse's, for a usage error).
REFUSED = 2


def operator_command(args: argparse.Namespace) -> int:
    """Run `fwloop ACTION RUN …` as parsed by cli.main."""
    root = args.rootdir.resolve()
    chat = args.command == "chat"
    usage = chat_usage(args) if chat else None
    if usage is not None:
        print(usage, file=sys.stderr)
        return REFUSED
    try:
        run_dir = find_run(root, args.run_dir, args.run)
        if chat and args.list:
            return show_threads(run_dir)
        state = load_state(run_dir)
        if not chat or args.start:  # a chat takes no lock and changes nothing: it may run alongside
            _not_running(state)
        thread, said_of_thread = chat_thread(args, run_dir) if chat else ("", "")
    except (ReplayError, StateError, WorkspaceError, ThreadChoice) as exc:
        print(exc, file=sys.stderr)
        return REFUSED
    if said_of_thread:
        print(said_of_thread)
    if args.command == "rerun":
        return _pytest(state, [])
    said = (
        (args.start, args.text)
        if chat
        else (getattr(args, "text", None), getattr(args, "note", None))
    )
    text = next((part for part in said if part), "")
    action = Action.FOLLOWUP if chat and args.start else Action(args.command)
    if action is Action.FOLLOWUP and confirms(text) and refusal(state, Action.CONFIRM) is None:
        # Seed 004: a follow-up that is a bare yes to the pending proposal confirms it.
        action = Action.CONFIRM
        print(
            f"fwloop: {text!r} confirms the proposal of run {state.run_id}: it goes to the "
            f"strict gate as `fwloop confirm {state.run_id} --note TEXT` would"
        )
    refused = refusal(state, action)
    if refused is not None:
        print(refused, file=sys.stderr)
        return REFUSED
    order = Order(
        action=action,
        run_id=state.run_id,
        revision=state.revision,
        text=text,
        roles=args.role if chat else [],
        thread=thread,
    )
    max_iter = iteration_limit(state, action, getattr(args, "max_iter", None))
    with tempfile.TemporaryDirectory(prefix="fwloop-order-") as folder:
        path = Path(folder) / "order.json"
        path.write_text(order.model_dump_json(), encoding="utf-8")
        return _pytest(state, [f"--max-iter={max_iter}", f"{OPERATOR_FLAG}={path}"])


def _not_running(state: RunState) -> None:
    """WorkspaceError while a controller holds the run's workspace."""
    active = Journal(Path(state.rootdir) / ".fwloop").active()
    if active is not None:
        raise WorkspaceError(
            f"fwloop: run {active.run_id} (pid {active.pid}) is running in {state.rootdir}; wait "
            "for it to end or stop it with `fwloop cancel`"
        )


def _pytest(state: RunState, extra: list[str]) -> int:
    """pytest as the run was started, plus `extra`; its exit status."""
    where = state.invocation.dir
    if not Path(where).is_dir():
        print(f"fwloop: run {state.run_id} was started in {where}, which is gone", file=sys.stderr)
        return REFUSED
    command = [sys.executable, "-m", "pytest", *state.invocation.args, *extra]
    return subprocess.run(command, cwd=where, env=os.environ.copy(), check=False).returncode


def add_parsers(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
) -> list[argparse.ArgumentParser]:
    """The operator's subcommands, for cli.main (each takes RUN, --rootdir and --run-dir)."""
    confirm = commands.add_parser(
        "confirm", help="apply a run's pending proposal through the strict gates and go on"
    )
    confirm.add_argument("--note", help="a word for the coder and the reviewer, kept in the run")
    followup = commands.add_parser(
        "followup",
        help="send the coder a message: a run awaiting confirmation gets a revised proposal, "
        "a finished run goes on with it",
    )
    resume = commands.add_parser(
        "resume", help="continue a run that stopped short of success from its saved state"
    )
    rerun = commands.add_parser("rerun", help="a new run with a run's recorded arguments")
    apply = commands.add_parser(
        "apply",
        help="put the best kept tree of a run that ended short of success back in place "
        "(through the journal and the patch policy)",
    )
    chat = add_chat_parser(commands)
    for parser in (resume, followup):
        parser.add_argument(
            "--max-iter",
            type=int,
            help="iterations it may add (default: as many as the run had; a killed run keeps "
            "its limit)",
        )
    for parser in (confirm, followup, resume, rerun, apply):
        parser.add_argument("run", help="run id, unique prefix of one, `last`, or a run directory")
    followup.add_argument("text", help="the message (a bare yes to a proposal confirms it)")
    return [confirm, followup, resume, rerun, chat, apply]
