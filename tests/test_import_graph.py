"""The packages import one way: no circle inside ``session/``, the rooms of the house in layers."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "tool_failure_guard"
SESSION = "tool_failure_guard.session"

#: The house: each room of the package (a subpackage, or a module at the package's root) on
#: its floor.  A room imports rooms of its own floor or below, never above (type-only and
#: function-level imports included).  docs/design.md "Where things live" is the long form.
FLOORS: dict[str, int] = {
    # sans-IO: the chart, the guard, the host-neutral core
    "statecharts": 0,
    "guard": 0,
    "core": 0,
    # the library below every host: telemetry records and sinks, the package's facade and
    # its small shared helpers
    "telemetry": 1,
    "__init__": 1,
    "_version": 1,
    "_extras": 1,
    "modes": 1,
    "redaction": 1,
    "worker_threads": 1,
    "private_files": 1,
    "sdk_import": 1,
    "line_input": 1,
    "peer_rules": 1,
    "framework_protection": 1,
    "agent_outcomes": 1,
    # hosts of the core
    "session": 2,
    "integrations": 2,
    "hooks": 2,
    # tools over the hosts' records and runs
    "rollout": 3,
    "evaluation": 3,
    "transcripts": 3,
    # the command line, on top
    "commands": 4,
    "__main__": 4,
}


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
    assert {"transport", "pipeline", "tools", "model", "persistence", "config"} <= set(concerns)
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


def room_of(module: str) -> str:
    """``tool_failure_guard.session.pipeline.batch`` -> ``session``; the root -> ``__init__``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def house_imports() -> dict[str, set[str]]:
    return module_imports(PACKAGE)


def test_every_module_of_the_package_is_in_a_room_of_the_house() -> None:
    homeless = sorted({room_of(m) for m in house_imports()} - set(FLOORS))
    assert not homeless, f"give each a floor in FLOORS (or move it into a room): {homeless}"


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    """``module -> target`` for each import of a room on a higher floor (unknown rooms: 0)."""
    return sorted(
        f"{module} -> {target}"
        for module, targets in graph.items()
        for target in targets
        if FLOORS.get(room_of(target), 0) > FLOORS.get(room_of(module), 0)
    )


def test_no_room_imports_a_room_on_a_floor_above_it() -> None:
    graph = house_imports()
    assert f"{PACKAGE}.telemetry.sink" in graph[f"{PACKAGE}.telemetry.runs"]
    upward = upward_imports(graph)
    assert not upward, "\n".join(upward)


def test_the_sans_io_rooms_and_telemetry_import_no_host_tool_or_command() -> None:
    graph = house_imports()
    above = {"session", "integrations", "rollout", "evaluation", "transcripts", "commands"}
    for room in ("statecharts", "guard", "core", "telemetry"):
        reached = {
            room_of(t) for m, targets in graph.items() if room_of(m) == room for t in targets
        }
        assert reached, room
        assert reached.isdisjoint(above), (room, reached & above)


def test_the_hosts_import_no_tool_and_nothing_imports_a_command_but_the_entry_points() -> None:
    graph = house_imports()
    for module, targets in graph.items():
        if room_of(module) in {"session", "integrations"}:
            tools = {room_of(t) for t in targets} & {"rollout", "evaluation", "transcripts"}
            assert not tools, (module, tools)
    importers = {
        (module, target)
        for module, targets in graph.items()
        for target in targets
        if room_of(target) == "commands" and room_of(module) != "commands"
    }
    assert importers == {(f"{PACKAGE}.__main__", f"{PACKAGE}.commands.cli")}


def test_the_floor_check_sees_an_upward_import() -> None:
    core, session = f"{PACKAGE}.core.x", f"{PACKAGE}.session.y"
    assert upward_imports({core: {session}, session: {core}}) == [f"{core} -> {session}"]
