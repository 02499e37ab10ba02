"""The read-only tools a model behind `openai:` may call before it answers (DESIGN.md §16): read
lines of a file, search the tree for literal text, list a folder (pure: the tree is handed in).

Every argument is a model's output, so hostile until checked: a path is judged as a patch's is
(inside the root, relative, no `..`) and never names version control, the loop's own records or
a secret-named file; the reader behind `TreeReader` refuses symbolic links and anything whose
real path leaves the tree. Search is for literal text, never a regex: no pattern can backtrack.
Each call's output and all of one answer's calls are bounded.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from pytest_fwloop.core.change.lines import text_lines
from pytest_fwloop.core.change.posix_paths import normalize_path, root_problem
from pytest_fwloop.core.request.hidden_paths import HIDDEN_PARTS, is_secret

#: Calls one answer may make; then the model is told to answer.
MAX_CALLS = 24
#: Bytes of tool results one answer may receive in all.
MAX_TOTAL_BYTES = 96 * 1024
#: Lines and bytes one `read_file` returns at most.
MAX_READ_LINES = 200
MAX_READ_BYTES = 16 * 1024
#: Matches one `search` returns, files it looks at, and the longest text it takes.
MAX_MATCHES = 40
MAX_SEARCHED_FILES = 20_000
MAX_SEARCH_TEXT = 200
#: Entries one `list_dir` returns.
MAX_ENTRIES = 300


def path_refusal(path: str) -> str | None:
    """Why no tool may touch `path`, or None."""
    problem = root_problem(path) if path not in ("", ".") else None
    if problem is not None:
        return f"{path!r}: {problem}; give a path relative to the workspace root"
    normal = normalize_path(path) if path not in ("", ".") else ""
    if HIDDEN_PARTS.intersection(normal.split("/")):
        return f"{path!r}: version control and the loop's records are not readable"
    if normal and is_secret(normal):
        return f"{path!r}: a file named like a secret is never read"
    return None


class TreeReader(Protocol):
    """The tree as the tools see it; every path given has passed `path_refusal`."""

    def text(self, path: str) -> str | None:
        """A regular file's text (None: missing, a link, binary, outside the tree, too big)."""

    def entries(self, path: str) -> list[str] | None:
        """A folder's entries, folders with a trailing `/` (None: not a readable folder)."""

    def files(self) -> Iterator[str]:
        """The readable files of the tree, in a stable order."""


class _ReadFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    path: str
    start_line: int = Field(default=1, ge=1, le=10_000_000)
    end_line: int | None = Field(default=None, ge=1, le=10_000_000)


class _Search(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: str = Field(min_length=1, max_length=MAX_SEARCH_TEXT)
    path: str = "."


class _ListDir(BaseModel):
    model_config = ConfigDict(extra="forbid")

    path: str = "."


_ARGUMENTS: dict[str, type[BaseModel]] = {
    "read_file": _ReadFile,
    "search": _Search,
    "list_dir": _ListDir,
}


def tool_specs() -> list[dict[str, Any]]:
    """The tools as the chat-completions API takes them."""
    return [
        _spec(
            "read_file",
            f"Read lines of a file of the workspace, numbered; at most {MAX_READ_LINES} lines "
            "a call. Paths are relative to the workspace root.",
            {
                "path": {"type": "string"},
                "start_line": {"type": "integer", "minimum": 1},
                "end_line": {"type": "integer", "minimum": 1},
            },
            ["path"],
        ),
        _spec(
            "search",
            f"Find literal text (not a regex) in the workspace's files, or under `path`; at "
            f"most {MAX_MATCHES} matching lines, each as PATH:LINE: TEXT.",
            {"text": {"type": "string"}, "path": {"type": "string"}},
            ["text"],
        ),
        _spec(
            "list_dir",
            "List a folder of the workspace (folders end with /).",
            {"path": {"type": "string"}},
            [],
        ),
    ]


def _spec(
    name: str, description: str, properties: dict[str, Any], required: list[str]
) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": properties,
                "required": required,
                "additionalProperties": False,
            },
        },
    }


@dataclass(frozen=True)
class ToolResult:
    """What one call returned to the model, and whether it was refused."""

    name: str
    arguments: str
    text: str
    refused: bool


def run_tool(reader: TreeReader, name: str, arguments: str, room: int) -> ToolResult:
    """One call, its output within `room` bytes (and the tool's own bound)."""
    model = _ARGUMENTS.get(name)
    if model is None:
        known = ", ".join(_ARGUMENTS)
        return _refused(name, arguments, f"no tool named {name[:60]!r}; the tools are {known}")
    try:
        parsed = model.model_validate(json.loads(arguments or "{}"))
    except ValidationError as exc:
        # What the model can act on: the argument and what is wrong with it, not our types.
        error = exc.errors()[0]
        where = ".".join(str(part) for part in error["loc"]) or "the arguments"
        why = f"{where}: {error['msg']}"[:200]
        return _refused(name, arguments, f"the arguments are not valid for {name}: {why}")
    except ValueError as exc:
        first = str(exc).splitlines()[0][:200]
        return _refused(name, arguments, f"the arguments are not JSON for {name}: {first}")
    path = str(getattr(parsed, "path", "."))
    refusal = path_refusal(path)
    if refusal is not None:
        return _refused(name, arguments, refusal)
    normal = "" if path in ("", ".") else normalize_path(path)
    if isinstance(parsed, _ReadFile):
        text = _read(reader, normal, parsed)
    elif isinstance(parsed, _Search):
        text = _search(reader, normal, parsed.text, room)
    else:
        text = _list(reader, normal)
    refused = text.startswith("error: ")
    return ToolResult(name, arguments, _bounded(text, room), refused)


def _refused(name: str, arguments: str, why: str) -> ToolResult:
    return ToolResult(name, arguments[:500], f"error: {why}", True)


def _read(reader: TreeReader, path: str, args: _ReadFile) -> str:
    text = reader.text(path) if path else None
    if text is None:
        return f"error: {path!r} is not a readable file of the workspace"
    lines = text_lines(text)
    start = args.start_line
    end = min(args.end_line or start + MAX_READ_LINES - 1, start + MAX_READ_LINES - 1, len(lines))
    if start > len(lines):
        return f"error: {path} has {len(lines)} lines; start_line {start} is past its end"
    shown = [f"{n}: {lines[n - 1]}" for n in range(start, end + 1)]
    body = _bounded("\n".join(shown), MAX_READ_BYTES)
    more = (
        f"\n({len(lines) - end} more lines; ask from start_line {end + 1})"
        if end < len(lines)
        else ""
    )
    return f"{path} lines {start}-{end} of {len(lines)}:\n{body}{more}"


def _search(reader: TreeReader, under: str, needle: str, room: int) -> str:
    found: list[str] = []
    searched = 0
    for path in reader.files():
        if under and not (path == under or path.startswith(under + "/")):
            continue
        searched += 1
        if searched > MAX_SEARCHED_FILES:
            found.append(f"(stopped after {MAX_SEARCHED_FILES} files)")
            break
        text = reader.text(path)
        if text is None or needle not in text:
            continue
        for number, line in enumerate(text_lines(text), 1):
            if needle in line:
                found.append(f"{path}:{number}: {line.strip()[:200]}")
                if len(found) >= MAX_MATCHES:
                    return "\n".join([*found, f"(first {MAX_MATCHES} matches; narrow the search)"])
    return "\n".join(found) if found else f"no line holds {needle!r}"


def _list(reader: TreeReader, path: str) -> str:
    entries = reader.entries(path)
    if entries is None:
        return f"error: {path or '.'!r} is not a readable folder of the workspace"
    shown = [e for e in entries if path_refusal(f"{path}/{e}".strip("/") or ".") is None]
    more = f"\n({len(shown) - MAX_ENTRIES} more)" if len(shown) > MAX_ENTRIES else ""
    return "\n".join(shown[:MAX_ENTRIES]) + more


def _bounded(text: str, room: int) -> str:
    data = text.encode()
    if len(data) <= room:
        return text
    cut = data[: max(room - 40, 0)].decode("utf-8", "ignore")
    return f"{cut}\n(cut at {room} bytes)"
