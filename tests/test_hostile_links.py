"""A symlink and a file written through it, in one answer (issue 39), in every answer form.

Each form is refused by the policy before anything touches the tree: the link is never
created, which a probe asserts between the gate and the apply, not only after the run. A
`git apply` that fails half way leaves the tree as before the call.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from controllerkit import FIRMWARE, ControllerKit
from loopkit import APPROVE, LoopProject, coder_answer
from pytest_fwloop.agents.base import RawAnswer
from pytest_fwloop.core.machine.outcomes import Outcome
from pytest_fwloop.core.records.agent_protocol import AgentRequest, CoderAnswer
from pytest_fwloop.loop.steps.coder_patch import Formed, form_patch
from pytest_fwloop.loop.steps.patch_gate import PatchGate
from pytest_fwloop.workspace import PatchApplyError, PatchPolicy, Workspace
from pytest_fwloop.workspace.journal_record import JournalRecord

LINK = "lnk2"
THROUGH = "lnk2/pwned-via-link.txt"
EXACT = (
    f"diff --git a/{LINK} b/{LINK}\nnew file mode 120000\n--- /dev/null\n+++ b/{LINK}\n"
    "@@ -0,0 +1 @@\n+../outside\n\\ No newline at end of file\n"
    f"diff --git a/{THROUGH} b/{THROUGH}\nnew file mode 100644\n--- /dev/null\n+++ b/{THROUGH}\n"
    "@@ -0,0 +1 @@\n+pwned\n"
)
#: What a model writes: no a/ b/ prefixes, hunk numbers that match nothing.
LOOSE = (
    f"diff --git {LINK} {LINK}\nnew file mode 120000\n--- /dev/null\n+++ {LINK}\n"
    "@@ -0,0 +7,3 @@\n+../outside\n\\ No newline at end of file\n"
    f"diff --git {THROUGH} {THROUGH}\nnew file mode 100644\n--- /dev/null\n+++ {THROUGH}\n"
    "@@ -4,2 +9,9 @@\n+pwned\n"
)
#: The same without mode lines: rebuilt from its hunks, `lnk2` would be a file under which
#: git cannot write, and would fail half way.
LOOSE_NO_MODES = (
    f"--- /dev/null\n+++ {LINK}\n@@ -0,0 +7,3 @@\n+../outside\n"
    f"--- /dev/null\n+++ {THROUGH}\n@@ -4,2 +9,9 @@\n+pwned\n"
)
EDITS: list[dict[str, str]] = [
    {"path": LINK, "search": "", "replace": "../outside"},
    {"path": THROUGH, "search": "", "replace": "pwned\n"},
]


def answer(form: str) -> dict[str, Any]:
    if form == "edits":
        return {**coder_answer(""), "edits": EDITS}
    return coder_answer({"exact": EXACT, "loose": LOOSE, "loose-no-modes": LOOSE_NO_MODES}[form])


FORMS = ["exact", "loose", "loose-no-modes", "edits"]


def linked(root: Path) -> bool:
    """Whether anything stands at `lnk2`: a link (dangling or not) or a file."""
    return os.path.lexists(root / LINK)


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    (root / "fw").mkdir(parents=True)
    (root / "fw" / "calc.c").write_text("int add(int a, int b) { return a - b; }\n")
    (tmp_path / "outside").mkdir()
    return root


def test_rebuilt_without_its_modes_the_attack_passes_gits_check_and_fails_half_way(
    tree: Path,
) -> None:
    """The attack has teeth. git's own check refuses the diff as written (a file beyond a
    symbolic link); rebuilt from its hunks, as the repair did before issue 39, `lnk2` is a file
    that git's check lets through, and plain `git apply` writes it before failing on the file
    under it."""
    workspace = Workspace(tree)
    workspace.open("run-1")
    assert "beyond a symbolic link" in (workspace.check_apply(EXACT) or "")
    formed = form_patch(
        CoderAnswer.model_validate(answer("loose-no-modes")), workspace, PatchPolicy()
    )
    assert isinstance(formed, Formed)
    rebuilt = formed.answer.patch
    assert f"+++ b/{LINK}\n" in rebuilt
    assert workspace.check_apply(rebuilt) is None
    workspace.close(keep_tree=False)
    scratch = tree.parent / "scratch"
    shutil.copytree(tree, scratch, symlinks=True, ignore=shutil.ignore_patterns(".fwloop"))
    done = subprocess.run(
        ["git", "apply", "-"], input=rebuilt.encode(), cwd=scratch, capture_output=True, check=False
    )
    assert b"Not a directory" in done.stderr
    assert linked(scratch)


@pytest.mark.parametrize("form", FORMS)
def test_every_answer_form_is_refused_by_the_policy(tree: Path, form: str) -> None:
    workspace = Workspace(tree)
    workspace.open("run-1")
    formed = form_patch(CoderAnswer.model_validate(answer(form)), workspace, PatchPolicy())
    assert isinstance(formed, Formed)
    violations = workspace.check_patch(formed.answer.patch, PatchPolicy())
    rules = {(v.path, v.rule) for v in violations}
    assert rules & {(LINK, "symlink"), (THROUGH, "through_entry")}, violations
    assert not linked(tree)
    workspace.close(keep_tree=False)
    assert not linked(tree)


def test_a_symlink_in_an_unreadable_diff_is_named_as_one(tree: Path) -> None:
    """The diff git would not take is refused for its parse and named for its link."""
    violations = Workspace(tree).check_patch(LOOSE, PatchPolicy())
    assert [v.rule for v in violations] == ["parse", "symlink"]
    assert violations[1].path == LINK


@pytest.mark.parametrize(
    ("patch", "rule"),
    [
        (
            "diff --git a/hal b/hal\nnew file mode 160000\nindex 0000000..1234567\n"
            "--- /dev/null\n+++ b/hal\n@@ -0,0 +1 @@\n+Subproject commit 1234567\n",
            "submodule",
        ),
        (
            "diff --git a/fw/x b/fw/x\nnew file mode 040000\n--- /dev/null\n+++ b/fw/x\n"
            "@@ -0,0 +1 @@\n+x\n",
            "file_type",
        ),
    ],
    ids=["submodule", "directory-mode"],
)
def test_a_submodule_or_another_file_type_is_refused(tree: Path, patch: str, rule: str) -> None:
    assert rule in {v.rule for v in Workspace(tree).check_patch(patch, PatchPolicy())}


@pytest.mark.parametrize(
    ("path", "rule"),
    [("fw/out/x.c", "symlink"), ("fw/link.c", "symlink"), ("fw/calc.c/x.c", "file_type")],
    ids=["through-a-linked-folder", "a-linked-file", "under-a-file"],
)
def test_a_path_through_what_the_tree_holds_is_refused(tree: Path, path: str, rule: str) -> None:
    """A symlink already in the tree, or a file where a folder would be, carries no write."""
    os.symlink(tree.parent / "outside", tree / "fw" / "out")
    os.symlink(tree.parent / "outside" / "victim.c", tree / "fw" / "link.c")
    patch = f"diff --git a/{path} b/{path}\n--- a/{path}\n+++ b/{path}\n@@ -1 +1 @@\n-a\n+b\n"
    violations = Workspace(tree).check_patch(patch, PatchPolicy())
    assert (path, rule) in {(v.path, v.rule) for v in violations}, violations
    assert list((tree.parent / "outside").iterdir()) == []


def test_a_patch_whose_second_file_fails_leaves_the_tree_as_before(tree: Path) -> None:
    """git writes the first file, then fails on the second: the call puts the first back."""
    workspace = Workspace(tree)
    workspace.open("run-1")
    before = sorted((p.relative_to(tree).as_posix(), p.read_bytes()) for p in _files(tree))
    patch = (
        "diff --git a/fw/new.c b/fw/new.c\nnew file mode 100644\n--- /dev/null\n+++ b/fw/new.c\n"
        "@@ -0,0 +1 @@\n+int x;\n"
        "diff --git a/fw/calc.c b/fw/calc.c\n--- a/fw/calc.c\n+++ b/fw/calc.c\n@@ -1 +1 @@\n"
        "-int add(int a, int b) { return a - b; }\n+int add(int a, int b) { return a + b; }\n"
        "diff --git a/fw/new.c/y.c b/fw/new.c/y.c\nnew file mode 100644\n--- /dev/null\n"
        "+++ b/fw/new.c/y.c\n@@ -0,0 +1 @@\n+int y;\n"
    )
    assert workspace.check_apply(patch) is None  # git's own check lets it through
    with pytest.raises(PatchApplyError, match="put back as before the patch"):
        workspace.apply(patch)
    after = sorted((p.relative_to(tree).as_posix(), p.read_bytes()) for p in _files(tree))
    assert after == before
    record = JournalRecord.model_validate_json((tree / ".fwloop/journal.json").read_text())
    assert (record.entries[-1].action, record.entries[-1].done) == ("restore", True)
    workspace.close(keep_tree=True)


def _files(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if ".fwloop" not in p.parts and not p.is_dir()]


@pytest.mark.parametrize("form", FORMS)
def test_the_link_never_exists_in_the_tree_during_a_run(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, form: str
) -> None:
    """The real controller, gate and workspace; a probe after each gate's verdict, at each
    reviewer call and around each apply records whether `lnk2` stands in the tree."""
    kit = ControllerKit(pytester, monkeypatch)
    seen: list[tuple[str, bool]] = []
    judge, apply = PatchGate.judge, Workspace.apply

    def probed_judge(gate: PatchGate, *args: Any, **kwargs: Any) -> Any:
        verdict = judge(gate, *args, **kwargs)
        seen.append(("after the gate", linked(kit.root)))
        return verdict

    def probed_apply(workspace: Workspace, *args: Any, **kwargs: Any) -> Any:
        seen.append(("before apply", linked(kit.root)))
        return apply(workspace, *args, **kwargs)

    monkeypatch.setattr(PatchGate, "judge", probed_judge)
    monkeypatch.setattr(Workspace, "apply", probed_apply)

    def reviewer(request: AgentRequest, timeout: float) -> RawAnswer:
        seen.append(("reviewer asked", linked(kit.root)))
        return RawAnswer(text=json.dumps(APPROVE))

    kit.coder.answers = [answer(form)]
    kit.reviewer.answers = [reviewer]
    kit.build("ok bug", "fwloop_max_iter = 5")
    assert kit.run() is Outcome.POLICY_VIOLATION
    assert seen == [("after the gate", False)] * 3
    assert not linked(kit.root)
    assert (kit.root / FIRMWARE).read_text() == "ok bug\n"


PROBE = """\
import json, os, pathlib, sys
here = pathlib.Path(__file__).parent
request = json.load(sys.stdin)
linked = os.path.lexists(pathlib.Path(request["workspace"]) / "lnk2")
with (here / "probe.jsonl").open("a") as stream:
    stream.write(json.dumps([request["role"], linked]) + "\\n")
answers = json.loads((here / "answers.json").read_text())
calls = len((here / "probe.jsonl").read_text().splitlines())
print(json.dumps(answers[min(calls, len(answers)) - 1] if request["role"] == "coder"
                 else answers[-1]))
"""


@pytest.mark.slow
def test_a_real_run_refuses_each_form_and_never_writes_the_link(project: LoopProject) -> None:
    """`pytest --fwloop` with a `command:` coder that sends the attack in three forms and
    looks at the tree on each call (after each refusal): `lnk2` is never there."""
    project.calc_suite()
    agent = project.agents_dir / "probe.py"
    agent.write_text(f"#!{sys.executable}\n{PROBE}")
    agent.chmod(0o755)
    reviewer_approves = {"decision": "approve", "must_fix": [], "risk": 0.1, "summary": "ok"}
    answers = [answer("exact"), answer("loose"), answer("edits"), reviewer_approves]
    (project.agents_dir / "answers.json").write_text(json.dumps(answers))
    result = project.run(f"--fwloop-coder=command:{agent}", f"--fwloop-reviewer=command:{agent}")
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    assert project.summary()["outcome"] == "policy_violation"
    calls = [
        json.loads(line) for line in (project.agents_dir / "probe.jsonl").read_text().splitlines()
    ]
    assert calls == [["coder", False]] * 3  # the reviewer was never asked
    [run_dir] = project.run_dirs()
    assert len(list(run_dir.glob("rounds/*/rejected-*-policy.diff"))) == 3
    assert not linked(project.root)
