"""The package's folders follow the data flow, and imports point one way (docs/architecture.md).

Every import inside pytest_r3, at module level or inside a function, goes to the same floor
or below; none goes up. Module-level imports form no cycle.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "pytest_r3"

# bottom (imported by everything above) to top
FLOORS = {
    "errors": 1, "outputs": 1, "settings": 1,
    "model": 2, "reports": 2, "record": 2,
    "backends": 3,
    "kernel": 4,
    "replay": 5,
    "search": 6,
    "llm": 7,
    "tuning": 8,
    "pytest_plugin": 9,
    "cli": 10, "__init__": 10,
}


def _modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def _room(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _imports(module: str, path: Path, modules: dict[str, Path]):
    """(imported module, at module level?) for every pytest_r3 import in ``path``."""
    tree = ast.parse(path.read_text())
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    top_level = {id(node) for node in tree.body}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            names = [f"{target}.{a.name}" for a in node.names]
            targets = [n for n in names if n in modules] or [target]
        elif isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        else:
            continue
        for target in targets:
            if target.startswith("pytest_r3.") or target == "pytest_r3":
                yield target, id(node) in top_level


def test_no_import_points_up():
    modules = _modules()
    upward = []
    for module, path in modules.items():
        floor = FLOORS[_room(module)]
        for target, _ in _imports(module, path, modules):
            if target == "pytest_r3" or _room(target) == "__init__":
                continue
            if FLOORS[_room(target)] > floor:
                upward.append(f"{module} -> {target}")
    assert upward == []


def test_every_folder_has_a_floor():
    rooms = {_room(m) for m in _modules()}
    assert rooms <= set(FLOORS), sorted(rooms - set(FLOORS))


def test_module_level_imports_form_no_cycle():
    modules = _modules()
    graph = defaultdict(set)
    for module, path in modules.items():
        for target, top in _imports(module, path, modules):
            if top and target in modules and target != module:
                graph[module].add(target)
    state: dict[str, int] = {}

    def visit(node: str, trail: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                pytest.fail("import cycle: " + " -> ".join(trail[trail.index(nxt):] + [nxt])
                            if nxt in trail else f"import cycle through {nxt}")
            if nxt not in state:
                visit(nxt, trail + [nxt])
        state[node] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])


def test_no_two_modules_import_each_other():
    """Not even through an import inside a function: two modules that need each other are
    one concern split badly (the CUDA device build and its emulation once did)."""
    modules = _modules()
    edges = {(module, target) for module, path in modules.items()
             for target, _ in _imports(module, path, modules)
             if target in modules and target != module}
    assert sorted({tuple(sorted(e)) for e in edges if e[::-1] in edges}) == []
