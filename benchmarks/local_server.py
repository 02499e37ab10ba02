"""The `openai:` route against a real local model server: a script, not a test.

    .venv/bin/python benchmarks/local_server.py --url http://127.0.0.1:8080/v1 \
        [--model NAME] [--example uart-console] [--max-iter 2] [--agent-timeout 300] \
        [--cancel-after 20 [--window 8192]] [--server-log PATH] [-o fwloop_source_bytes=8192]

It installs and starts nothing: start the server yourself (docs/providers.md, "Local models"),
e.g. `python -m llama_cpp.server --model M.gguf --port 8080 --n_ctx 8192`. For each example it
copies the bundled example into a temporary folder, runs `pytest --fwloop` there with the
server as coder and reviewer, and prints the outcome, the reason, what `summary.json` says of
the server, and per call its seconds and tokens. With `--cancel-after S` it then measures what
an abandoned call costs the server: one call given S seconds (it times out, the connection
closes), then at once a one-token request, whose seconds say how long the server kept the
abandoned call's work; streamed, then not streamed (the baseline), then streamed again, so
load from others shows as a change between the two streamed rounds. `--server-log` prints the
server's log lines meanwhile. The seconds are this machine's; compare runs made on the same
machine only.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from pytest_fwloop.agents.errors import ProviderError
from pytest_fwloop.agents.openai import OpenAIProvider
from pytest_fwloop.core.records.agent_protocol import AgentRequest, load_schema

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def run_example(args: argparse.Namespace, name: str) -> None:
    spec = f"openai:{args.model}@{args.url}"
    with tempfile.TemporaryDirectory(prefix=f"fwloop-{name}-") as folder:
        root = Path(folder) / name
        shutil.copytree(EXAMPLES / name, root, ignore=shutil.ignore_patterns("build", ".fwloop"))
        subprocess.run(["git", "init", "-q"], cwd=root, check=True)
        subprocess.run(["git", "add", "-A"], cwd=root, check=True)
        subprocess.run(
            ["git", "-c", "user.name=b", "-c", "user.email=b@b", "commit", "-qm", "example"],
            cwd=root,
            check=True,
        )
        before = _tree(root)
        command = [
            sys.executable,
            "-m",
            "pytest",
            "--fwloop",
            f"--fwloop-coder={spec}",
            f"--fwloop-reviewer={spec}",
            f"--max-iter={args.max_iter}",
            "-o",
            f"fwloop_agent_timeout={args.agent_timeout}",
            *[part for option in args.option for part in ("-o", option)],
            "-q",
            "-p",
            "no:randomly",
        ]
        started = time.monotonic()
        done = subprocess.run(command, cwd=root, capture_output=True, text=True, check=False)
        seconds = time.monotonic() - started
        [run_dir] = sorted((root / ".fwloop" / "runs").iterdir())
        summary = json.loads((run_dir / "summary.json").read_text())
        print(f"## {name}: exit {done.returncode} in {seconds:.0f} s")
        print(f"outcome: {summary['outcome']}")
        print(f"reason: {summary['reason']}")
        print(f"tree and git state as before: {_tree(root) == before}")
        for server in summary["model_servers"]:
            print("server:", json.dumps(server))
        for meta in sorted(run_dir.glob("rounds/*/*.meta.json")):
            call = json.loads(meta.read_text())
            usage = call["usage"]
            tools = meta.with_name(meta.name.replace(".meta.json", ".tools.json"))
            print(
                f"call {meta.parent.name}/{meta.name.removesuffix('.meta.json')}: "
                f"{call['duration_s']:.1f} s, error {call['error_kind']}, prompt tokens "
                f"{usage.get('input_tokens', '-')}, cached {usage.get('cached_input_tokens', '-')}"
                f", answer tokens {usage.get('output_tokens', '-')}"
                + (
                    f", tools.json {len(json.loads(tools.read_text()))} call(s)"
                    if tools.exists()
                    else ""
                )
            )
            for line in call["stderr_tail"].splitlines():
                print(f"    {line[:300]}")
            for turn in json.loads(tools.read_text()) if tools.exists() else []:
                print(
                    f"    tool {turn['name']}({turn['arguments'][:120]})"
                    f"{' refused' if turn.get('refused') else ''}: {str(turn['result'])[:160]!r}"
                )
        print()


def _tree(root: Path) -> str:
    """The tree's files and git state, to compare before and after a run."""
    status = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=all", "--", ".", ":!.fwloop"],
        cwd=root,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, check=True
    ).stdout
    return head + "".join(line for line in status.splitlines(True) if "build/" not in line)


def measure_cancel(args: argparse.Namespace, streamed: bool) -> None:
    """An abandoned call, then a small one at once: does the server start it? Streamed, and
    not (the baseline: the server computes the abandoned answer to its end first)."""
    log = Path(args.server_log) if args.server_log else None
    mark = log.stat().st_size if log else 0
    chat = OpenAIProvider(args.model, args.url, model_context=args.window or None)
    chat.preflight()
    chat.server.streaming = streamed
    how = "streamed" if streamed else "not streamed"
    request = AgentRequest.model_validate(
        {
            "role": "reviewer",
            "iteration": 1,
            "goal": "write a long review " * 200,
            "workspace": "/tmp",
            "schema": load_schema("reviewer"),
            "patch": "--- a/x.c\n+++ b/x.c\n@@ -1 +1 @@\n-a\n+b\n",
        }
    )
    started = time.monotonic()
    try:
        chat.call(request, args.cancel_after)
        print(f"cancel ({how}): the call answered within {args.cancel_after} s")
    except ProviderError as exc:
        print(
            f"cancel ({how}): abandoned after {time.monotonic() - started:.1f} s ({exc.kind.value})"
        )
    started = time.monotonic()
    one_token = {"model": args.model, "messages": [{"role": "user", "content": "hi"}]}
    post = urllib.request.Request(
        f"{args.url}/chat/completions",
        data=json.dumps({**one_token, "max_tokens": 1}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(post, timeout=900) as response:
        response.read()
    print(f"cancel ({how}): a one-token request then took {time.monotonic() - started:.1f} s")
    if log:
        with log.open("rb") as stream:
            stream.seek(mark)
            tail = stream.read().decode(errors="replace").splitlines()
        for line in tail:
            if any(w in line for w in ("isconnect", "POST", "prompt eval", "eval time")):
                print(f"    log: {line.strip()[:200]}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True, help="the API base, e.g. http://127.0.0.1:8080/v1")
    parser.add_argument("--model", default="local")
    parser.add_argument("--example", action="append", default=[], help="uart-console, …")
    parser.add_argument("--max-iter", type=int, default=2)
    parser.add_argument("--agent-timeout", type=float, default=300)
    parser.add_argument("--cancel-after", type=float, default=0)
    parser.add_argument("--server-log", default="")
    parser.add_argument("--window", type=int, default=0, help="fwloop_model_context for --cancel")
    parser.add_argument("-o", dest="option", action="append", default=[], help="NAME=VALUE")
    args = parser.parse_args()
    for name in args.example:
        run_example(args, name)
    if args.cancel_after:
        for streamed in (True, False, True):
            measure_cancel(args, streamed)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
