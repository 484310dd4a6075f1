"""The packages import one way: no circle inside ``session/``, the core imports no host."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SESSION = "tool_failure_guard.session"


def module_imports(package: str = SESSION) -> dict[str, set[str]]:
    """Each module under ``package`` and the modules under it that it imports (type-only too)."""
    base = ROOT.joinpath(*package.split("."))
    graph: dict[str, set[str]] = {}
    for path in sorted(base.rglob("*.py")):
        parts = path.relative_to(base).with_suffix("").parts
        name = (
            ".".join((package, *parts[:-1]))
            if parts[-1] == "__init__"
            else ".".join((package, *parts))
        )
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found.update(a.name for a in node.names if a.name.startswith(package + "."))
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                if node.module == package or (
                    node.module.startswith(package + ".") and node.module.count(".") < 3
                ):
                    # ``from tool_failure_guard.session.pipeline import batch``: a module each
                    found.update(f"{node.module}.{a.name}" for a in node.names)
                if node.module.startswith(package + "."):
                    found.add(node.module)
        graph[name] = {m for m in found if m in _modules(base, package)} - {name}
    return graph


def _modules(base: Path, package: str) -> set[str]:
    names = set()
    for path in base.rglob("*.py"):
        parts = path.relative_to(base).with_suffix("").parts
        names.add(".".join((package, *(parts[:-1] if parts[-1] == "__init__" else parts))))
    return names


def concern_imports(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """The same graph between the session's concerns (its subpackages)."""

    def concern(module: str) -> str:
        rest = module[len(SESSION) + 1 :]
        return rest.split(".")[0] if rest else ""

    found: dict[str, set[str]] = {}
    for module, targets in graph.items():
        if concern(module):
            found.setdefault(concern(module), set()).update(
                concern(t) for t in targets if concern(t) and concern(t) != concern(module)
            )
    return found


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
    graph = module_imports()
    prompt, boundary = f"{SESSION}.pipeline.prompt", f"{SESSION}.pipeline.boundary"
    assert prompt in graph and boundary in graph[prompt]
    assert cycle_in(graph) is None, " -> ".join(cycle_in(graph) or [])


def test_the_session_concerns_import_each_other_one_way_only() -> None:
    concerns = concern_imports(module_imports())
    assert {"transport", "pipeline", "tools", "model", "persistence", "telemetry"} <= set(concerns)
    assert cycle_in(concerns) is None, " -> ".join(cycle_in(concerns) or [])


def test_the_cycle_finder_finds_a_circle() -> None:
    assert cycle_in({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert cycle_in({"a": {"b"}, "b": set()}) is None


def test_the_prompt_steps_do_not_reach_back_into_the_session_or_the_prompt() -> None:
    graph = module_imports()
    steps = [f"{SESSION}.pipeline.{name}" for name in ("batch", "boundary", "outcome")]
    owners = {f"{SESSION}.pipeline.session", f"{SESSION}.pipeline.prompt"}
    for step in steps:
        assert graph[step].isdisjoint(owners), (step, graph[step])
