"""The packages import one way: no circle inside ``session/``, the core imports no host."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def module_imports(package: str) -> dict[str, set[str]]:
    """Each module of ``package`` and the modules of ``package`` it imports (type-only too)."""
    graph: dict[str, set[str]] = {}
    for path in sorted((ROOT / package).glob("*.py")):
        name = f"{package}.{path.stem}" if path.stem != "__init__" else package
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found.update(a.name for a in node.names if a.name.startswith(package + "."))
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                if node.module == package:
                    found.update(f"{package}.{a.name}" for a in node.names)
                elif node.module.startswith(package + "."):
                    found.add(node.module)
        graph[name] = found - {name}
    return graph


def cycle_in(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle, if there is any (depth-first search)."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for target in sorted(graph.get(node, ())):
            if state.get(target) == 1:
                return [*stack[stack.index(target) :], target]
            if target not in state:
                found = visit(target)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def test_the_session_modules_import_each_other_one_way_only() -> None:
    graph = module_imports("session")
    assert "session.prompt" in graph and "session.boundary" in graph["session.prompt"]
    assert cycle_in(graph) is None, " -> ".join(cycle_in(graph) or [])


def test_the_cycle_finder_finds_a_circle() -> None:
    assert cycle_in({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert cycle_in({"a": {"b"}, "b": set()}) is None


def test_the_prompt_steps_do_not_reach_back_into_the_session_or_the_prompt() -> None:
    graph = module_imports("session")
    for step in ("session.batch", "session.boundary", "session.outcome"):
        assert graph[step].isdisjoint({"session.loop", "session.prompt"}), (step, graph[step])
