"""What each model-API failure becomes through the real agent CLIs, and how long a question takes.

    python benchmarks/agent_cli_failures.py

For the pinned Claude Code and Codex CLIs that `./dev.sh test` installs into `.tools/`, each
failure is served by a scripted model server on 127.0.0.1 (tests/model_servers.py) and one
question is asked through the provider and the role's retry policy, exactly as the loop asks it.
Printed per CLI and failure: the error kind, the HTTP requests the server saw, and the seconds
the question took, with its ratio to a successful answer measured in the same run (the baseline).
The retry pauses are the role policy's jittered backoff, so the seconds vary from run to run.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from model_servers import HttpError, ModelServer, Text, ToolCall  # noqa: E402
from pytest_fwloop.agents.claude import ClaudeProvider  # noqa: E402
from pytest_fwloop.agents.codex import CodexProvider  # noqa: E402
from pytest_fwloop.agents.errors import ProviderError  # noqa: E402
from pytest_fwloop.agents.role import RoleAgent  # noqa: E402
from pytest_fwloop.core.records.agent_protocol import AgentRequest, load_schema  # noqa: E402

CLIS = ROOT / ".tools" / "agent-clis" / "node_modules" / ".bin"
APPROVE = {"decision": "approve", "must_fix": [], "risk": 0.1, "summary": "ok"}
FAILURES: dict[str, HttpError] = {
    "HTTP 401": HttpError(
        401,
        {
            "type": "error",
            "error": {"type": "authentication_error", "message": "invalid x-api-key"},
        },
    ),
    "HTTP 429 rate limit": HttpError(
        429,
        {"type": "error", "error": {"type": "rate_limit_error", "message": "rate limit reached"}},
    ),
    "HTTP 429 insufficient_quota": HttpError(
        429,
        {
            "error": {
                "message": "You exceeded your current quota",
                "type": "insufficient_quota",
                "code": "insufficient_quota",
            }
        },
    ),
    "HTTP 500": HttpError(
        500, {"type": "error", "error": {"type": "api_error", "message": "Internal server error"}}
    ),
}


def ask(make: Callable[[], Any], workspace: Path) -> tuple[str, float]:
    agent = RoleAgent("reviewer", [make()], load_schema("reviewer"), lambda record: None)
    request = AgentRequest(role="reviewer", iteration=2, goal="review", workspace=str(workspace))
    started = time.monotonic()
    try:
        agent.ask(request)
        kind = "answer"
    except ProviderError as exc:
        kind = exc.kind.value
    return kind, time.monotonic() - started


def codex_home(parent: Path, url: str) -> None:
    (parent / "config.toml").write_text(
        'model_provider = "scripted"\nmodel = "gpt-5.5"\n[model_providers.scripted]\n'
        f'name = "scripted"\nbase_url = "{url}/v1"\nwire_api = "responses"\n'
        'env_key = "SCRIPTED_MODEL_KEY"\nrequest_max_retries = 0\nstream_max_retries = 0\n'
    )


def main() -> int:
    if not (CLIS / "claude").exists() or not (CLIS / "codex").exists():
        print(f"the agent CLIs are not in {CLIS}; run ./dev.sh test first", file=sys.stderr)
        return 2
    os.environ["PATH"] = f"{CLIS}{os.pathsep}{os.environ['PATH']}"
    os.environ.update(
        DISABLE_TELEMETRY="1",
        DISABLE_AUTOUPDATER="1",
        ANTHROPIC_API_KEY="sk-ant-scripted",
        SCRIPTED_MODEL_KEY="scripted",
    )
    (ROOT / ".tools").mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(dir=ROOT / ".tools") as scratch:
        root = Path(scratch)
        os.environ["HOME"] = str(root)
        os.environ["CODEX_HOME"] = str(root)
        clis: dict[str, tuple[Callable[[], Any], Any]] = {
            "claude 2.1.330": (ClaudeProvider, ToolCall("StructuredOutput", APPROVE)),
            "codex 0.169.0": (CodexProvider, Text(json.dumps(APPROVE))),
        }
        print(f"{'CLI':<16}{'failure':<30}{'becomes':<28}{'requests':>9}{'seconds':>9}{'ratio':>8}")
        for cli, (make, good) in clis.items():
            baseline = 0.0
            for name, turn in [("none (baseline)", good), *FAILURES.items()]:
                with ModelServer(lambda body, turn=turn: turn) as server:
                    os.environ["ANTHROPIC_BASE_URL"] = server.url
                    codex_home(root, server.url)
                    kind, seconds = ask(make, root)
                baseline = baseline or seconds
                print(
                    f"{cli:<16}{name:<30}{kind:<28}{len(server.requests):>9}"
                    f"{seconds:>9.2f}{seconds / baseline:>8.1f}"
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
