"""`fwloop chat RUN …` (DESIGN.md §11, seed 004's chat mode), as the command line takes it.

`--role coder,reviewer TEXT` asks several roles at once (loop/operator/chat.py answers); `--list`
shows the run's threads without starting anything; `--start TASK` hands a task to the loop: the run
goes on as `fwloop followup RUN TASK` would, and the coder is told the thread's conversation with
it.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import get_args

from tabulate import tabulate

from pytest_fwloop.core.records.agent_protocol import Role
from pytest_fwloop.loop.operator.threads import list_threads

ROLES: tuple[str, ...] = get_args(Role)


def roles_argument(text: str) -> list[str]:
    """`--role`: one role or several, comma-separated, each once."""
    roles = [part.strip() for part in text.split(",")]
    unknown = [role for role in roles if role not in ROLES]
    if unknown or len(set(roles)) != len(roles):
        raise argparse.ArgumentTypeError(
            f"{text!r}: name each of {', '.join(ROLES)} at most once, comma-separated"
        )
    return roles


def add_chat_parser(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
) -> argparse.ArgumentParser:
    chat = commands.add_parser(
        "chat", help="ask roles about a run in free text, list its threads, or hand it a task"
    )
    chat.add_argument(
        "--role",
        type=roles_argument,
        help="who answers: coder, reviewer, tester, or several comma-separated (asked at once)",
    )
    chat.add_argument("--thread", help="the thread to go on (default: chat-ROLE[-ROLE…])")
    chat.add_argument(
        "--list", action="store_true", help="the run's threads: id, title, role, created"
    )
    chat.add_argument(
        "--start",
        metavar="TASK",
        help="hand TASK to the loop: the run goes on as `fwloop followup RUN TASK`, the coder "
        "told the thread's conversation",
    )
    chat.add_argument(
        "--max-iter",
        type=int,
        help="with --start: iterations the run may add, as for `fwloop followup`",
    )
    chat.add_argument("run", help="run id, unique prefix of one, `last`, or a run directory")
    chat.add_argument("text", nargs="?", help="the question")
    return chat


def chat_usage(args: argparse.Namespace) -> str | None:
    """Why the chat's arguments do not go together (one line), or None."""
    if args.list:
        if args.text or args.start or args.role:
            return "fwloop: chat --list takes only RUN (no TEXT, --role or --start)"
        return None
    if args.max_iter is not None and not args.start:
        return "fwloop: chat --max-iter goes with --start TASK (a chat adds no iteration)"
    if not args.role:
        return f"fwloop: chat needs --role ROLE[,ROLE…] ({', '.join(ROLES)})"
    if bool(args.text) == bool(args.start):
        return "fwloop: chat takes a question as TEXT, or a task for the loop as --start TASK"
    return None


class ThreadChoice(ValueError):
    """`--start` cannot tell which chat to hand over; the message is one line naming the fix."""


def chat_thread(args: argparse.Namespace, run_dir: Path) -> tuple[str, str]:
    """The thread a chat goes on, and a line to print about it ('' when there is nothing to
    say): `--thread`, else one per set of roles. `--start` with no such thread yet hands over
    the one chat the roles took part in (a chat held with `--role coder,reviewer` for `--start
    --role coder`), saying so; with several, ThreadChoice asks for `--thread`."""
    default = "chat-" + "-".join(args.role)
    if args.thread or not args.start or (run_dir / "threads" / default / "meta.json").is_file():
        return str(args.thread or default), ""
    held = [
        row.id
        for row in list_threads(run_dir)
        if row.id.startswith("chat-") and set(args.role) <= set(row.role.split(","))
    ]
    if not held:
        return default, ""
    if len(held) > 1:
        raise ThreadChoice(
            f"fwloop: run {run_dir.name} has no thread {default}; the {', '.join(args.role)} "
            f"took part in {', '.join(held)}: name the one to hand over with --thread"
        )
    return held[0], (
        f"fwloop: run {run_dir.name} has no thread {default}; handing over {held[0]}, the chat "
        f"the {', '.join(args.role)} took part in (--thread names another)"
    )


def show_threads(run_dir: Path) -> int:
    """`fwloop chat RUN --list`: the run's threads, oldest first."""
    rows = [
        [row.id, row.title, row.role, row.created_at[:19].replace("T", " "), row.messages]
        for row in list_threads(run_dir)
    ]
    if not rows:
        print(f"fwloop: run {run_dir.name} has no threads yet")
        return 0
    print(tabulate(rows, ["id", "title", "role", "created", "messages"]))
    return 0
