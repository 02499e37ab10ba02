"""Chat as seed 004 describes it (docs/operator.md): several roles in one call, asked at once;
the run's threads listed; a follow-up that is a bare yes confirms the proposal; a chat hands a
task to the loop. Chat itself never changes the tree."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from loopkit import LoopProject, calc_fix_patches, coder_answer, tree_state
from pytest_fwloop.cli.chat import ThreadChoice, chat_thread, chat_usage, roles_argument
from pytest_fwloop.cli.confirm_words import ASSENT, FILLER, MAX_CHARS, confirms
from pytest_fwloop.cli.main import main
from pytest_fwloop.core.records.redaction import Redactor
from pytest_fwloop.loop.operator.threads import HANDED_OVER_CHARS, Thread, list_threads

# -- the confirmation rule (pure) ------------------------------------------------------------------

CONFIRMING = [
    "ok, apply it",
    "yes go ahead",
    "Yes, please go ahead!",
    "LGTM",
    "ok.",
    "confirmed, thanks",
    "sounds good; ship it",
    "好的，应用吧",
    "go",
    "apply the patch please",
]
NOT_CONFIRMING = [
    "ok, but keep the names",
    "yes, and also fix scale",
    "no",
    "don't apply it",
    "not yet",
    "apply it?",
    "ok?",
    "thanks",
    "please",
    "apply it to uart.c",
    "ok 2",
    "fix the ring buffer first",
    "",
    "yes " * 20,
]


@pytest.mark.parametrize("text", CONFIRMING)
def test_a_bare_yes_confirms(text: str) -> None:
    assert confirms(text)


@pytest.mark.parametrize("text", NOT_CONFIRMING)
def test_anything_more_than_a_yes_is_a_follow_up(text: str) -> None:
    assert not confirms(text)


@given(st.sampled_from(CONFIRMING), st.text(min_size=1, max_size=20))
def test_a_question_mark_or_any_extra_word_makes_a_yes_a_follow_up(yes: str, extra: str) -> None:
    assert not confirms(f"{yes}?")
    assert not confirms(f"{yes}, but {extra}")
    word = "".join(c for c in extra if c.isalnum()).lower()
    if word and (word,) not in ASSENT | FILLER:  # a word of its own, not a yes or a please
        assert not confirms(f"{yes} {word}")


@given(st.text(max_size=2 * MAX_CHARS))
def test_whatever_the_text_the_rule_answers_and_long_texts_never_confirm(text: str) -> None:
    said = confirms(text)
    if len(text.strip()) > MAX_CHARS or "?" in text:
        assert not said


# -- the command line's pieces --------------------------------------------------------------------


def test_roles_are_a_comma_list_of_known_roles_each_once() -> None:
    assert roles_argument("coder") == ["coder"]
    assert roles_argument("coder, reviewer") == ["coder", "reviewer"]
    for bad in ("poet", "coder,coder", "coder,"):
        with pytest.raises(argparse.ArgumentTypeError, match="at most once, comma-separated"):
            roles_argument(bad)


@pytest.mark.parametrize(
    ("given_args", "says"),
    [
        ({"role": None, "text": "hi"}, "fwloop: chat needs --role ROLE[,ROLE…]"),
        ({"role": ["coder"]}, "fwloop: chat takes a question as TEXT, or a task"),
        ({"role": ["coder"], "text": "hi", "start": "go"}, "fwloop: chat takes a question"),
        ({"list": True, "text": "hi"}, "fwloop: chat --list takes only RUN"),
        ({"role": ["coder"], "text": "hi", "max_iter": 3}, "fwloop: chat --max-iter goes with"),
    ],
)
def test_chat_arguments_that_do_not_go_together_are_one_line(
    given_args: dict[str, Any], says: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args: dict[str, Any] = {
        "list": False,
        "text": None,
        "start": None,
        "role": None,
        "max_iter": None,
    }
    args.update(given_args)
    problem = chat_usage(argparse.Namespace(**args))
    assert problem is not None
    assert problem.startswith(says)
    # The command says it before it looks for the run, and changes nothing.
    argv = ["chat", "no-such-run", "--rootdir", str(tmp_path)]
    argv += ["--role", ",".join(args["role"])] if args["role"] else []
    argv += ["--start", args["start"]] if args["start"] else []
    argv += ["--list"] if args["list"] else []
    argv += ["--max-iter", str(args["max_iter"])] if args["max_iter"] else []
    argv += [args["text"]] if args["text"] else []
    assert main(argv) == 2
    assert capsys.readouterr().err == f"{problem}\n"
    assert list(tmp_path.iterdir()) == []


def test_threads_are_listed_oldest_first_and_a_handover_keeps_the_latest(tmp_path: Path) -> None:
    run_dir = tmp_path / "run-1"
    redact = Redactor({})
    first = Thread(run_dir, "chat-coder")
    first.append("operator", "chat", "why does clamp fail?", redact, "coder", "about clamp")
    first.append("coder", "chat", "it ignores high", redact, "coder", "about clamp")
    both = Thread(run_dir, "chat-coder-reviewer")
    both.append("operator", "chat", "risky?", redact, "coder,reviewer", "both")
    (run_dir / "threads" / "stray").mkdir()  # no meta.json: not a thread
    rows = list_threads(run_dir)
    assert [(r.id, r.title, r.role, r.messages) for r in rows] == [
        ("chat-coder", "about clamp", "coder", 2),
        ("chat-coder-reviewer", "both", "coder,reviewer", 1),
    ]
    assert first.handed_over() == "operator: why does clamp fail?\ncoder: it ignores high"
    long = Thread(run_dir, "long")
    for n in range(100):
        long.append("coder", "chat", f"message {n} " + "x" * 40, redact, "coder", "long")
    kept = long.handed_over()
    assert len(kept) == HANDED_OVER_CHARS + 1
    assert kept.startswith("…")
    assert kept.endswith("message 99 " + "x" * 40)
    (run_dir / "threads" / "chat-coder" / "messages.jsonl").write_text("{not json\n")
    assert list_threads(run_dir)[0].title == "(its records do not read)"


def _chat(roles: str, start: str | None, thread: str | None = None) -> argparse.Namespace:
    return argparse.Namespace(role=roles.split(","), start=start, thread=thread)


def test_start_hands_over_the_one_chat_its_roles_took_part_in(tmp_path: Path) -> None:
    """`--start --role coder` after a chat held with `--role coder,reviewer` went on in an
    empty chat-coder thread, and said nothing of the conversation it left behind."""
    run_dir = tmp_path / "run-1"
    assert chat_thread(_chat("coder", "go"), run_dir) == ("chat-coder", "")
    both = Thread(run_dir, "chat-coder-reviewer")
    both.append("operator", "chat", "risky?", Redactor({}), "coder,reviewer", "both")
    assert chat_thread(_chat("coder", "go"), run_dir) == (
        "chat-coder-reviewer",
        "fwloop: run run-1 has no thread chat-coder; handing over chat-coder-reviewer, the chat "
        "the coder took part in (--thread names another)",
    )
    assert chat_thread(_chat("coder", None), run_dir) == ("chat-coder", "")  # a question
    assert chat_thread(_chat("tester", "go"), run_dir) == ("chat-tester", "")
    assert chat_thread(_chat("coder", "go", "mine"), run_dir) == ("mine", "")
    Thread(run_dir, "chat-coder-tester").append(
        "operator", "chat", "flaky?", Redactor({}), "coder,tester", "tests"
    )
    with pytest.raises(ThreadChoice) as refused:
        chat_thread(_chat("coder", "go"), run_dir)
    assert str(refused.value) == (
        "fwloop: run run-1 has no thread chat-coder; the coder took part in "
        "chat-coder-reviewer, chat-coder-tester: name the one to hand over with --thread"
    )
    Thread(run_dir, "chat-coder").append("operator", "chat", "hi", Redactor({}), "coder", "c")
    assert chat_thread(_chat("coder", "go"), run_dir) == ("chat-coder", "")


# -- real runs ----------------------------------------------------------------------------------

RENDEZVOUS = """\
import json, pathlib, sys, time
here = pathlib.Path(__file__).parent
request = json.load(sys.stdin)
role = request["role"]
(here / f"chat-{role}.asked").write_text(request["chat"]["question"])
other = here / ("chat-reviewer.asked" if role == "coder" else "chat-coder.asked")
for _ in range(1200):  # waits for the other role's call, a minute at most
    if other.exists():
        break
    time.sleep(0.05)
said = "asked at the same time" if other.exists() else "not asked"
print(f"{role} here; the other role was {said}")
"""


def _calc_coder(project: LoopProject, answers: list[Any] | None = None) -> Any:
    project.calc_suite()
    patches = calc_fix_patches()
    answers = answers or [coder_answer(p, f"fix {i}") for i, p in enumerate(patches)]
    return project.agent("coder", answers)


def _messages(run_dir: Path, thread: str) -> list[dict[str, Any]]:
    lines = (run_dir / "threads" / thread / "messages.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


@pytest.mark.slow
def test_several_roles_answer_one_question_at_once_and_the_threads_are_listed(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = LoopProject(pytester, monkeypatch)
    coder = _calc_coder(project)
    assert project.run(f"--fwloop-coder={coder.spec}", "--fwloop-propose=first").ret == 1
    [run_dir] = project.run_dirs()
    before, state = tree_state(project.root), (run_dir / "state.json").read_bytes()
    # The same executable answers both roles (the reviewer defaults to the coder): from now on
    # each answer waits for the other role's call, which comes only if both are asked at once.
    coder.path.write_text(f"#!{sys.executable}\n{RENDEZVOUS}")
    asked = project.fwloop("chat", "last", "--role", "coder,reviewer", "is fix 0 safe for SPI?")
    assert asked.returncode == 0, asked.stdout + asked.stderr
    assert asked.stdout.splitlines() == [
        "fwloop: the coder answers:",
        "coder here; the other role was asked at the same time",
        "fwloop: the reviewer answers:",
        "reviewer here; the other role was asked at the same time",
    ]
    assert tree_state(project.root) == before
    assert (run_dir / "state.json").read_bytes() == state
    thread = run_dir / "threads" / "chat-coder-reviewer"
    meta = json.loads((thread / "meta.json").read_text())
    assert (meta["role"], meta["title"]) == (
        "coder,reviewer",
        f"chat with the coder and reviewer about run {run_dir.name}",
    )
    assert [m["author"] for m in _messages(run_dir, "chat-coder-reviewer")] == [
        "operator",
        "coder",
        "reviewer",
    ]
    assert sorted(p.name for p in (thread / "calls").iterdir()) == [
        "1.answer.txt",
        "1.request.json",
        "2.answer.txt",
        "2.request.json",
    ]
    listed = project.fwloop("chat", "last", "--list")
    assert listed.returncode == 0, listed.stderr
    header, _, row = listed.stdout.splitlines()
    assert header.split() == ["id", "title", "role", "created", "messages"]
    assert row.startswith("chat-coder-reviewer  chat with the coder and reviewer about run ")
    assert row.split()[-4:-2] == ["coder,reviewer", meta["created_at"][:10]]
    assert row.split()[-1] == "3"
    # A role whose provider gives no answer is named; the others' answers are kept.
    coder.path.write_text(
        f"#!{sys.executable}\nimport json, sys\nrole = json.load(sys.stdin)['role']\n"
        "sys.exit(3) if role == 'reviewer' else print('the coder again')\n"
    )
    again = project.fwloop("chat", "last", "--role", "coder,reviewer", "and for I2C?")
    assert again.returncode == 1
    lines = again.stdout.splitlines()
    assert lines[:2] == ["fwloop: the coder answers:", "the coder again"]
    assert lines[2].startswith(
        "fwloop: the reviewer's provider gave no answer (provider_bad_output"
    )
    assert lines[2].endswith("; the question is kept in thread chat-coder-reviewer")
    authors = [m["author"] for m in _messages(run_dir, "chat-coder-reviewer")]
    assert authors[3:] == ["operator", "coder"]
    assert tree_state(project.root) == before


@pytest.mark.slow
def test_a_follow_up_that_is_a_bare_yes_confirms_the_proposal_and_anything_more_revises_it(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = LoopProject(pytester, monkeypatch)
    add, scale, clamp = (coder_answer(p, f"fix {i}") for i, p in enumerate(calc_fix_patches()))
    coder = _calc_coder(project, [add, scale, clamp, add])  # scale first, when asked so
    assert project.run(f"--fwloop-coder={coder.spec}", "--fwloop-propose=first").ret == 1
    [run_dir] = project.run_dirs()
    revised = project.fwloop("followup", "last", "ok, but fix scale first")
    assert revised.returncode == 1, revised.stdout + revised.stderr
    assert "confirms the proposal" not in revised.stdout
    state = json.loads((run_dir / "state.json").read_text())
    assert (state["outcome"], state["pending"]["summary"]) == ("awaiting_operator_confirm", "fix 1")
    confirmed = project.fwloop("followup", "last", "yes, go ahead")
    assert confirmed.returncode == 0, confirmed.stdout + confirmed.stderr
    assert confirmed.stdout.startswith(
        f"fwloop: 'yes, go ahead' confirms the proposal of run {run_dir.name}: it goes to the "
        f"strict gate as `fwloop confirm {run_dir.name} --note TEXT` would\n"
    )
    assert project.summary()["outcome"] == "success"
    # The revised proposal went through the strict gate as it stood: not asked for again.
    strict = [r for r in coder.requests("reviewer") if r["schema"]]
    assert strict[0]["patch"] == calc_fix_patches()[1]
    assert strict[0]["operator_messages"] == ["ok, but fix scale first", "yes, go ahead"]
    kinds = [(m["kind"], m["text"]) for m in _messages(run_dir, "operator")]
    assert kinds == [("followup", "ok, but fix scale first"), ("confirm_note", "yes, go ahead")]
    assert project.replay().returncode == 0


@pytest.mark.slow
def test_a_chat_hands_a_task_to_the_loop_with_its_conversation(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = LoopProject(pytester, monkeypatch)
    add, scale, clamp = (coder_answer(p, f"fix {i}") for i, p in enumerate(calc_fix_patches()))
    # The coder's second answer is its chat reply (plain text); then the fixes go on.
    coder = _calc_coder(project, [add, "I would bound value by high in clamp", clamp, scale])
    assert project.run(f"--fwloop-coder={coder.spec}", "--max-iter=2").ret == 1
    [run_dir] = project.run_dirs()
    before = tree_state(project.root)
    chat = project.fwloop("chat", "last", "--role", "coder", "what would you change in clamp?")
    assert chat.returncode == 0, chat.stdout + chat.stderr
    assert chat.stdout == "I would bound value by high in clamp\n"
    assert tree_state(project.root) == before  # chat alone changes nothing
    started = project.fwloop(
        "chat", "last", "--role", "coder", "--start", "do what you said about clamp",
        "--max-iter", "5",
    )  # fmt: skip
    assert started.returncode == 0, started.stdout + started.stderr
    assert project.summary()["outcome"] == "success"
    asked = coder.requests("coder")[2]
    assert asked["iteration"] == 3
    assert {
        "issue": "the operator asks: do what you said about clamp\n(handed over from chat "
        "thread chat-coder; it said:\noperator: what would you change in clamp?\ncoder: I "
        "would bound value by high in clamp)",
        "file": None,
        "line": None,
    } in asked["must_fix"]
    assert asked["operator_messages"] == ["do what you said about clamp"]
    assert [(m["author"], m["kind"]) for m in _messages(run_dir, "chat-coder")] == [
        ("operator", "chat"),
        ("coder", "chat"),
        ("operator", "task"),
    ]
    assert [m["kind"] for m in _messages(run_dir, "operator")] == ["followup"]
    listed = project.fwloop("chat", "last", "--list").stdout
    assert [line.split()[0] for line in listed.splitlines()[2:]] == ["chat-coder", "operator"]
    assert project.replay().returncode == 0
