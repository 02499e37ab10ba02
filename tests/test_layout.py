"""The package's layout is its architecture (docs/architecture.md): checked, so it cannot drift.

The import graph is read with `ast`, type-only imports (`if TYPE_CHECKING:`) and imports inside
functions included: an import circle is one even when Python would tolerate it at run time.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "pytest_fwloop"

#: What each folder may import besides itself, lowest first (docs/architecture.md). The top-level
#: modules (plugin, hookspecs, the public re-exports) sit above all of them.
ALLOWED: dict[str, set[str]] = {
    "core": set(),
    "procs": {"core"},
    "agents": {"core", "procs"},
    "workspace": {"core", "procs"},
    "farm": {"core"},
    "config": {"core", "procs", "agents", "workspace", "reports", "farm"},
    "envs": {"core", "config"},
    "child": {"core"},
    "knowledge": {"core"},
    "codemap": {"core"},
    "reports": {"core", "child"},
    "loop": {
        "core",
        "procs",
        "agents",
        "workspace",
        "config",
        "child",
        "knowledge",
        "codemap",
        "reports",
        "farm",
    },
    "cli": {"core", "procs", "agents", "workspace", "config", "knowledge", "reports", "loop"},
    "docgen": {"core", "config"},
}


#: The core's domains, each importing only the ones listed for it (docs/architecture.md): the
#: run's vocabulary at the bottom, the gate that judges a patch at the top.
CORE_ALLOWED: dict[str, set[str]] = {
    "machine": set(),
    "records": {"machine"},
    "suite": {"machine", "records"},
    "change": {"records"},
    "request": {"change", "records", "suite"},
    "execution": {"request"},
    "verdict": {"machine", "records", "suite"},
    "gate": {"change", "machine", "records", "suite"},
}

#: The most modules a folder holds before it hides what its parts are about.
MAX_MODULES_PER_FOLDER = 15

#: Folders whose `__init__` is their public face, by design.
FACADES = {
    "envs": "envs/ re-exports its two exception classes, a leaf module (docs/environments.md)",
    "workspace": "workspace/ is one interface, `Workspace`, over the shadow store and journal",
}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _imports(name: str, path: Path) -> set[str]:
    """The package's modules that `name` imports, by the module each import loads."""
    is_package = path.name == "__init__.py"
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = name.split(".")[: len(name.split(".")) - node.level + is_package]
                base = ".".join([*anchor, *([base] if base else [])])
            # `from pkg import mod` loads pkg.mod; `from mod import name` loads mod.
            targets = [
                f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base
                for alias in node.names
            ]
        for target in targets:
            while target and target not in MODULES:
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


GRAPH = {name: _imports(name, path) for name, path in MODULES.items()}


def _folder(module: str) -> str:
    parts = module.split(".")
    is_folder = len(parts) > 2 or MODULES[module].name == "__init__.py"
    return parts[1] if is_folder and len(parts) > 1 else "top"


def test_no_import_cycle_type_only_imports_included() -> None:
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles: list[list[str]] = []

    def visit(module: str) -> None:  # Tarjan's strongly connected components
        index[module] = low[module] = len(index)
        stack.append(module)
        for target in GRAPH[module]:
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            component = stack[stack.index(module) :]
            del stack[stack.index(module) :]
            if len(component) > 1:
                circles.append(sorted(component))

    for module in GRAPH:
        if module not in index:
            visit(module)
    assert circles == []


def test_each_folder_imports_only_the_folders_below_it() -> None:
    upward = sorted(
        f"{module} -> {target}"
        for module, targets in GRAPH.items()
        for target in targets
        if (folder := _folder(module)) != "top"
        and _folder(target) != folder
        and _folder(target) not in ALLOWED[folder]
        # the package itself (`from pytest_fwloop import ...`) is only ever its public names
        and target != "pytest_fwloop"
    )
    assert upward == []


def test_every_folder_is_placed_in_the_layering() -> None:
    folders = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists()}
    assert folders == set(ALLOWED)


@pytest.mark.parametrize(
    "init",
    sorted(PACKAGE.glob("**/__init__.py")),
    ids=lambda p: str(p.parent.relative_to(PACKAGE)),
)
def test_every_folder_init_is_empty(init: Path) -> None:
    """A folder's `__init__` runs whenever any of its modules is imported: code there would
    land on plain pytest's path and on the way to the baseline's fork. A docstring is allowed."""
    if init.parent == PACKAGE:
        pytest.skip("the package's own `__init__` is its public face (docs/api)")
    if init.parent.name in FACADES:
        pytest.skip(FACADES[init.parent.name])
    body = ast.parse(init.read_text(encoding="utf-8")).body
    assert [node for node in body if not _is_docstring(node)] == []


def _is_docstring(node: ast.stmt) -> bool:
    return isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)


def test_few_modules_at_the_top() -> None:
    """The top holds what pytest loads in every run and the public import paths; the rest
    lives in the folder of its role."""
    top = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(top) <= 20, top


@pytest.mark.parametrize("module", sorted(MODULES), ids=str)
def test_modules_of_one_job_stay_small(module: str) -> None:
    lines = MODULES[module].read_text(encoding="utf-8").count("\n")
    limit = 400 if module == "pytest_fwloop.loop.controller" else 500
    assert lines <= limit, f"{MODULES[module]}: {lines} lines (limit {limit}); split it by job"


def _core_domain(module: str) -> str | None:
    parts = module.split(".")
    return parts[2] if len(parts) > 2 and parts[1] == "core" else None


def test_core_has_only_domains_at_its_top() -> None:
    """`core/` is a folder of domains: a module at its top would belong to none of them."""
    core = PACKAGE / "core"
    assert sorted(p.name for p in core.glob("*.py")) == ["__init__.py"]
    domains = {p.name for p in core.iterdir() if (p / "__init__.py").exists()}
    assert domains == set(CORE_ALLOWED)


def test_each_core_domain_imports_only_the_domains_below_it() -> None:
    """Walks every module of every domain (none skipped); the core imports nothing outside it."""
    walked = {module for module in MODULES if _core_domain(module)}
    assert len(walked) == len(list((PACKAGE / "core").glob("*/*.py")))
    upward = sorted(
        f"{module} -> {target}"
        for module in walked
        for target in GRAPH[module]
        if _core_domain(target)
        not in {_core_domain(module), *CORE_ALLOWED[_core_domain(module) or ""]}
    )
    assert upward == []


@pytest.mark.parametrize(
    "folder",
    sorted({p.parent for p in PACKAGE.rglob("*.py")}),
    ids=lambda p: str(p.relative_to(PACKAGE.parent)),
)
def test_no_folder_holds_more_than_a_few_modules(folder: Path) -> None:
    modules = sorted(p.name for p in folder.glob("*.py") if p.name != "__init__.py")
    assert len(modules) <= MAX_MODULES_PER_FOLDER, modules
