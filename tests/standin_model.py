"""A stand-in model behind an OpenAI-compatible endpoint on 127.0.0.1 that knows only its messages.

Like a real model it never opens a file: it reads the chat messages it is sent and nothing else.
It "knows" a set of bugs (the hunks of the fixes, as a model knows a wrong CRC start value when
it sees one) and can fix one only when the request shows the buggy lines with their neighbours
(in `sources`); its diff is written from the text it was sent, with the line numbers the
request gave. Where it sees no known bug it says so with a low confidence, as an honest model
would. The reviewer approves.

`seen` keeps, per coder request, its size and which bugs were visible: what the benchmarks and
the tests measure.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from model_servers import Loopback, LoopbackHandler


@dataclass(frozen=True)
class Bug:
    """One hunk of a fix: the lines before (context and removed) and after (context and added)."""

    name: str
    old: tuple[str, ...]
    new: tuple[str, ...]

    @property
    def removed(self) -> tuple[int, int]:
        """The span of `old` that the fix changes, as (first, end) indices; neighbours around."""
        first = next(
            (i for i, (a, b) in enumerate(zip(self.old, self.new, strict=False)) if a != b), 0
        )
        tail = 0
        while (
            tail < min(len(self.old), len(self.new)) - first
            and self.old[len(self.old) - 1 - tail] == self.new[len(self.new) - 1 - tail]
        ):
            tail += 1
        return first, len(self.old) - tail


def bugs_of_patch(patch: str, name: str) -> list[Bug]:
    """The hunks of a recorded fix as bugs the stand-in knows."""
    bugs: list[Bug] = []
    old: list[str] = []
    new: list[str] = []
    inside = False

    def close() -> None:
        if old or new:
            bugs.append(Bug(f"{name}#{len(bugs) + 1}", tuple(old), tuple(new)))
        old.clear()
        new.clear()

    for line in patch.splitlines():
        if line.startswith("@@"):
            close()
            inside = True
        elif line.startswith(("diff --git", "--- ", "+++ ", "index ")):
            close()
            inside = False
        elif inside and line[:1] in (" ", "-", "+", ""):
            text = line[1:]
            if line[:1] in (" ", "-", ""):
                old.append(text)
            if line[:1] in (" ", "+", ""):
                new.append(text)
    close()
    return bugs


def bugs_of_answers(folder: Path) -> list[Bug]:
    """Every hunk of the recorded coder answers of an example (`fwloop-answers/coder/*.json`)."""
    bugs: list[Bug] = []
    for answer in sorted((folder / "coder").glob("*.json")):
        patch = json.loads(answer.read_text())["patch"]
        bugs += bugs_of_patch(patch, answer.stem)
    return bugs


@dataclass
class Sighting:
    """Where the stand-in saw a bug: the chunk's path and the index of its changed lines."""

    bug: Bug
    path: str
    line: int  # 1-based line of bug.old[removed[0]] in the file
    chunk_lines: list[str]
    index: int  # of that line in chunk_lines
    chunk_start: int


def find(bug: Bug, sources: Sequence[dict[str, Any]]) -> Sighting | None:
    """The bug's changed lines with one neighbour on each side, in one chunk the request holds."""
    first, end = bug.removed
    before = bug.old[first - 1 : first] if first > 0 else ()
    after = bug.old[end : end + 1]
    needle = [*before, *bug.old[first:end], *after]
    for chunk in sources:
        lines = str(chunk.get("text", "")).splitlines()
        for i in range(len(lines) - len(needle) + 1):
            if lines[i : i + len(needle)] == needle:
                at = i + len(before)
                start = int(chunk["start_line"])
                return Sighting(bug, str(chunk["path"]), start + at, lines, at, start)
    return None


def diff_for(sightings: Sequence[Sighting], form: str = "exact") -> str:
    """A unified diff of every sighting, from the chunks' text and line numbers: exact, or
    as models often write them ("sloppy": hunk numbers off by three, no `a/` `b/`)."""
    sloppy = form == "sloppy"
    by_path: dict[str, list[Sighting]] = {}
    for sighting in sightings:
        by_path.setdefault(sighting.path, []).append(sighting)
    parts: list[str] = []
    for path, found in by_path.items():
        if sloppy:
            parts += [f"--- {path}", f"+++ {path}"]
        else:
            parts += [f"diff --git a/{path} b/{path}", f"--- a/{path}", f"+++ b/{path}"]
        shift = 0
        for s in sorted(found, key=lambda s: s.line):
            first, end = s.bug.removed
            removed = s.bug.old[first:end]
            added = s.bug.new[first : len(s.bug.new) - (len(s.bug.old) - end)]
            low = max(s.index - 3, 0)
            high = min(s.index + len(removed) + 3, len(s.chunk_lines))
            head = s.chunk_lines[low : s.index]
            tail = s.chunk_lines[s.index + len(removed) : high]
            old_start = s.chunk_start + low + (3 if sloppy else 0)
            old_count = len(head) + len(removed) + len(tail)
            new_count = len(head) + len(added) + len(tail)
            parts.append(f"@@ -{old_start},{old_count} +{old_start + shift},{new_count} @@")
            parts += [f" {x}" for x in head]
            parts += [f"-{x}" for x in removed]
            parts += [f"+{x}" for x in added]
            parts += [f" {x}" for x in tail]
            shift += len(added) - len(removed)
    return "\n".join(parts) + "\n"


def edits_for(sightings: Sequence[Sighting]) -> list[dict[str, str]]:
    """Search/replace edits of every sighting: the changed lines with one neighbour each side,
    as the chunk showed them, and what they become."""
    edits = []
    for s in sightings:
        first, end = s.bug.removed
        removed = s.bug.old[first:end]
        added = s.bug.new[first : len(s.bug.new) - (len(s.bug.old) - end)]
        before = s.chunk_lines[s.index - 1 : s.index] if s.index > 0 else []
        after = s.chunk_lines[s.index + len(removed) : s.index + len(removed) + 1]
        search = "".join(f"{x}\n" for x in [*before, *removed, *after])
        replace = "".join(f"{x}\n" for x in [*before, *added, *after])
        edits.append({"path": s.path, "search": search, "replace": replace})
    return edits


@dataclass
class Seen:
    """One coder request as the stand-in received it."""

    request_bytes: int
    visible: list[str]
    sources: int


_SOURCE_SUFFIXES = (".c", ".h", ".py", ".cpp", ".hpp", ".s", ".S", ".ld")
#: What a hostile model asks the tools for (issue 32's corpus): nothing of it may come back.
HOSTILE_CALLS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("read_file", {"path": "../outside/victim.txt"}),
    ("read_file", {"path": "/proc/self/environ"}),
    ("read_file", {"path": "firmware/../../outside/victim.txt"}),
    ("read_file", {"path": "firmware/src/leak.c"}),  # a symlink to a file outside the tree
    ("list_dir", {"path": "firmware/linked"}),  # a symlink to a folder outside the tree
    ("read_file", {"path": ".git/config"}),
    ("read_file", {"path": ".fwloop/.gitignore"}),
    ("read_file", {"path": "firmware/.env"}),
    ("read_file", {"path": "firmware/src/crc8.c", "start_line": 1, "end_line": 10_000_000}),
    ("search", {"text": "(a+)+$" * 30}),
    ("search", {"text": "x" * 5000}),
    ("nonexistent_tool", {}),
)


def tool_chunks(messages: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """What `read_file` results showed, as chunks with their first line number."""
    chunks = []
    for message in messages:
        if message.get("role") != "tool":
            continue
        head, _, body = str(message.get("content", "")).partition(":\n")
        if " lines " not in head:
            continue
        path = head.split(" lines ", 1)[0]
        parts = [line.partition(": ") for line in body.splitlines() if ": " in line]
        numbered = [(n, text) for n, _, text in parts if n.isdigit()]
        if numbered:
            text = "".join(f"{t}\n" for _, t in numbered)
            chunks.append({"path": path, "start_line": int(numbered[0][0]), "text": text})
    return chunks


def next_tool_calls(
    messages: Sequence[dict[str, Any]], limit: int = 4
) -> list[tuple[str, dict[str, Any]]]:
    """A model exploring the tree from its own messages only: list folders it has not listed,
    read source files it has not read (as the listings and its request name them)."""
    asked = set()
    for message in messages:
        for call in message.get("tool_calls") or []:
            asked.add((call["function"]["name"], call["function"]["arguments"]))
    request = json.loads(next(m["content"] for m in messages if m["role"] == "user"))
    # First the words of the failing tests' names, searched for; then what they found.
    words = {
        word
        for failure in request.get("failures", [])
        for word in failure["nodeid"].rpartition("::")[2].split("[")[0].split("_")
        if len(word) > 3 and word != "test"
    }
    longest = sorted(words, key=lambda w: (-len(w), w))[:6]
    todo: list[tuple[str, dict[str, Any]]] = [("search", {"text": w}) for w in longest]
    for entry in request.get("repo_map", []):
        todo.append(("read_file", {"path": entry["path"]}))
    for message in messages:
        if message.get("role") == "tool":
            for line in str(message.get("content", "")).splitlines():
                path = line.split(":", 1)[0]
                if path.endswith(_SOURCE_SUFFIXES) and not path.startswith("tests/"):
                    todo.append(("read_file", {"path": path}))
    todo.append(("list_dir", {"path": "."}))
    calls: dict[str, dict[str, Any]] = {}
    for message in messages:
        for call in message.get("tool_calls") or []:
            calls[call["id"]] = call
        if message.get("role") != "tool":
            continue
        call = calls.get(str(message.get("tool_call_id")))
        if call is not None and call["function"]["name"] == "list_dir":
            base = json.loads(call["function"]["arguments"]).get("path", ".")
            for entry in str(message["content"]).splitlines():
                path = entry if base in (".", "") else f"{base}/{entry}"
                if entry.endswith("/") and not entry.startswith((".", "tests/", "build/")):
                    todo.append(("list_dir", {"path": path.rstrip("/")}))
                elif path.endswith(_SOURCE_SUFFIXES):
                    todo.append(("read_file", {"path": path}))
    fresh = {json.dumps([n, a]): (n, a) for n, a in todo if (n, json.dumps(a)) not in asked}
    return list(fresh.values())[:limit]


@dataclass
class StandinModel:
    """The server; `bugs` is what it knows, `seen` what it was shown. `mode`: "plain" answers at
    once (a chat template that knows no tools: it ignores them); "tools" reads the tree through
    the tools before answering when its request does not show every bug; "hostile" first makes
    every call of HOSTILE_CALLS, then keeps calling."""

    bugs: list[Bug]
    mode: str = "plain"
    #: How its fixes are written: "exact" diffs, "sloppy" diffs (numbers off by three, no
    #: prefixes) or "edits" (search/replace).
    form: str = "exact"
    seen: list[Seen] = field(default_factory=list)
    url: str = ""
    #: Every tool message the server received, for the hostile corpus's checks.
    tool_results: list[str] = field(default_factory=list)

    def turn(self, body: dict[str, Any]) -> dict[str, Any]:
        """The assistant message for one chat completion request: tool calls or the answer."""
        messages = body["messages"]
        request = json.loads(next(m["content"] for m in messages if m["role"] == "user"))
        # A hostile model calls tools whatever `tool_choice` says, as long as they are offered.
        offered = bool(body.get("tools")) and (
            body.get("tool_choice") != "none" or self.mode == "hostile"
        )
        self.tool_results += [str(m["content"]) for m in messages if m["role"] == "tool"]
        if request.get("role") == "coder" and offered and self.mode != "plain":
            calls = self._calls(request, messages)
            if not calls and body.get("tool_choice") == "required":
                calls = [("list_dir", {"path": "."})]  # a server that does tools forces a call
            if calls:
                return {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": f"call_{len(messages)}_{i}",
                            "type": "function",
                            "function": {"name": name, "arguments": json.dumps(args)},
                        }
                        for i, (name, args) in enumerate(calls)
                    ],
                }
        request["sources"] = [*request.get("sources", []), *tool_chunks(messages)]
        return {"role": "assistant", "content": json.dumps(self.answer(request))}

    def _calls(
        self, request: dict[str, Any], messages: Sequence[dict[str, Any]]
    ) -> list[tuple[str, dict[str, Any]]]:
        if self.mode == "hostile":
            made = sum(len(m.get("tool_calls") or []) for m in messages)
            if made < len(HOSTILE_CALLS):
                return list(HOSTILE_CALLS)
            return [("list_dir", {"path": "."})] * 10  # hundreds of calls, ten at a time
        shown = [*request.get("sources", []), *tool_chunks(messages)]
        if all(find(bug, shown) for bug in self.bugs):
            return []
        return next_tool_calls(messages)

    def answer(self, request: dict[str, Any]) -> dict[str, Any]:
        role = request.get("role")
        if role == "reviewer":
            return {"decision": "approve", "must_fix": [], "risk": 0.1, "summary": "looks right"}
        if role == "tester":
            return {"select": [], "commands": [], "notes": "nothing to add"}
        sources = list(request.get("sources", []))
        sightings = [s for bug in self.bugs if (s := find(bug, sources)) is not None]
        self.seen[-1].visible = [s.bug.name for s in sightings]
        self.seen[-1].sources = len(sources)
        if not sightings:
            return {
                "analysis": {
                    "root_cause": "the source of the failing code is not in the request",
                    "hypotheses": [],
                    "confidence": 0.1,
                },
                "patch": "",
                "summary": "cannot see the code",
            }
        names = ", ".join(s.bug.name for s in sightings)
        return {
            "analysis": {
                "root_cause": f"seen in the sources: {names}",
                "hypotheses": [f"{s.path}:{s.line}" for s in sightings],
                "confidence": 0.9,
            },
            "patch": "" if self.form == "edits" else diff_for(sightings, self.form),
            **({"edits": edits_for(sightings)} if self.form == "edits" else {}),
            "summary": f"fix {names}",
        }

    def __enter__(self) -> StandinModel:
        model = self

        class Handler(LoopbackHandler):
            def do_GET(self) -> None:
                self._send(200, {"object": "list", "data": [{"id": "standin"}]})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                body = json.loads(raw)
                user = next(m for m in body["messages"] if m["role"] == "user")
                request = json.loads(user["content"])
                first_turn = not any(m["role"] == "tool" for m in body["messages"])
                if request.get("role") == "coder" and first_turn:
                    model.seen.append(Seen(len(raw), [], 0))
                message = model.turn(body)
                self._send(
                    200,
                    {
                        "choices": [
                            {
                                "index": 0,
                                "message": message,
                                "finish_reason": "tool_calls"
                                if message.get("tool_calls")
                                else "stop",
                            }
                        ],
                        "usage": {"prompt_tokens": len(raw) // 4, "completion_tokens": 200},
                    },
                )

            def _send(self, status: int, document: dict[str, Any]) -> None:
                self.send(status, json.dumps(document).encode(), "application/json")

        self._loopback = Loopback(Handler)
        self.url = f"{self._loopback.url}/v1"
        return self

    def __exit__(self, *exc: object) -> None:
        self._loopback.close()

    @property
    def spec(self) -> str:
        return f"openai:standin@{self.url}"


@dataclass
class SamplingStandin(StandinModel):
    """A stand-in that samples, as a model with a temperature does: in about half its answers
    (where the request's iteration plus its candidate number is odd, so a run is the same each
    time) it writes a plausible wrong fix of the bugs named in `wrong` that compiles: the
    changed line as `wrong` has it instead of the right one. It knows its own wrong fixes too:
    a later request showing one gets it put right."""

    #: bug name -> (the fix's line, the plausible wrong line written instead)
    wrong: dict[str, tuple[str, str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.bugs = [*self.bugs, *(self._repair(b) for b in self.bugs if b.name in self.wrong)]

    def _wrong_new(self, bug: Bug) -> tuple[str, ...]:
        right, wrong = self.wrong[bug.name]
        return tuple(wrong if line == right else line for line in bug.new)

    def _repair(self, bug: Bug) -> Bug:
        return Bug(f"{bug.name}-wrong", self._wrong_new(bug), bug.new)

    def answer(self, request: dict[str, Any]) -> dict[str, Any]:
        number = int((request.get("candidate") or {}).get("number", 1))
        answer = super().answer(request)
        if request.get("role") != "coder" or (int(request["iteration"]) + number) % 2 == 0:
            return answer
        sightings = [s for bug in self.bugs if (s := find(bug, request.get("sources", [])))]
        if not any(s.bug.name in self.wrong for s in sightings):
            return answer
        sampled = [
            dataclasses.replace(s, bug=Bug(s.bug.name, s.bug.old, self._wrong_new(s.bug)))
            if s.bug.name in self.wrong
            else s
            for s in sightings
        ]
        return {**answer, "patch": diff_for(sampled, self.form), "summary": "fix (sampled)"}
