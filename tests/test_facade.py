"""The public facade: ``import tool_failure_guard`` is the library, cheap and host-neutral."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

import tool_failure_guard
from benches.startup import FIRST_USE
from tool_failure_guard.guard import GUARD_MODE_ENV_VAR, GuardMode

ROOT = Path(__file__).resolve().parents[1]
CORE = ROOT / "tool_failure_guard" / "core"
#: What no core module may import: hosts, IO, clocks, randomness, concurrency.
FORBIDDEN_IN_CORE = {
    "acp",
    "asyncio",
    "openai",
    "mcp",
    "duckdb",
    "session",
    "os",
    "io",
    "socket",
    "pathlib",
    "time",
    "random",
    "uuid",
    "threading",
    "subprocess",
    "datetime",
}


def _modules_loaded_by(code: str) -> set[str]:
    """The modules a fresh interpreter has in ``sys.modules`` after ``code`` and before it."""
    probe = (
        "import sys\nbefore = set(sys.modules)\n"
        f"{code}\n"
        "print(repr(sorted(before)))\nprint(repr(sorted(sys.modules)))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=ROOT
    )
    before, after = (set(ast.literal_eval(line)) for line in out.stdout.splitlines()[-2:])
    return after - before


#: Distributions no use of the library's public face may load (hosts, providers, analysis,
#: the chart engine, telemetry's SDK and API).
HEAVY = ("acp", "openai", "mcp", "duckdb", "pydantic", "statemachine", "opentelemetry")
HOSTS = (
    "tool_failure_guard.session",
    "tool_failure_guard.rollout",
    "tool_failure_guard.integrations",
    "tool_failure_guard.statecharts",
    "tool_failure_guard.telemetry",
)


def test_importing_the_facade_loads_nothing_but_the_facade() -> None:
    # PEP 562: the names are imported on first use, so the import itself loads no attrs,
    # no guard, no core, not even typing
    assert _modules_loaded_by("import tool_failure_guard") == {"tool_failure_guard"}


def test_first_use_loads_the_library_but_no_host_provider_engine_or_hashing() -> None:
    loaded = _modules_loaded_by(FIRST_USE)
    assert {"attrs", "tool_failure_guard.core.prompt", "tool_failure_guard.guard._guard"} <= loaded
    offenders = {m for m in loaded if m.split(".")[0] in HEAVY or m.startswith(HOSTS)}
    assert not offenders, offenders
    # fingerprints (hashlib, json) are made only when a call id comes back
    assert not {"hashlib", "json"} & loaded


def _static_imports() -> dict[str, str]:
    """Name -> module of the ``if TYPE_CHECKING:`` imports of the facade (what mypy sees)."""
    tree = ast.parse(Path(tool_failure_guard.__file__).read_text(encoding="utf-8"))
    block = next(
        node
        for node in tree.body
        if isinstance(node, ast.If)
        and isinstance(node.test, ast.Name)
        and node.test.id == "TYPE_CHECKING"
    )
    names: dict[str, str] = {}
    for node in block.body:
        if isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                names[alias.asname or alias.name] = node.module
    return names


def test_all_the_lazy_table_and_the_typed_imports_name_the_same_things() -> None:
    static = _static_imports()
    assert set(static) == set(tool_failure_guard._HOME)
    # the subpackages the eager import left as attributes resolve too, outside __all__
    assert set(tool_failure_guard.__all__) == set(static) - {"guard", "modes"}
    assert len(tool_failure_guard.__all__) == len(set(tool_failure_guard.__all__))
    for name, module in static.items():
        home = tool_failure_guard._HOME[name]
        assert home in (module, f"{module}.{name}"), name


def test_every_public_name_is_the_very_object_of_its_module() -> None:
    static = _static_imports()
    for name in tool_failure_guard.__all__:
        module = importlib.import_module(static[name])
        expected = getattr(module, name)
        assert getattr(tool_failure_guard, name) is expected, name
    assert tool_failure_guard.PromptProtection is tool_failure_guard.core.PromptProtection
    for name in ("core", "guard", "modes"):
        module = importlib.import_module(f"tool_failure_guard.{name}")
        assert getattr(tool_failure_guard, name) is module


def test_a_fresh_facade_lists_resolves_and_star_imports_every_name() -> None:
    probe = """
import sys
import tool_failure_guard as tfg
listed = dir(tfg)
loaded_by_dir = "attrs" in sys.modules
submodules = (tfg.guard.__name__, tfg.modes.__name__)  # as the eager import left them
from tool_failure_guard import RepeatedToolFailureGuard
namespace = {}
exec("from tool_failure_guard import *", namespace)
from tool_failure_guard.guard import RepeatedToolFailureGuard as home
import tool_failure_guard.guard._guard as defining
print(repr({
    "missing_from_dir": sorted({*tfg.__all__, "guard", "modes"} - set(listed)),
    "loaded_by_dir": loaded_by_dir,
    "submodules": submodules,
    "from_import": RepeatedToolFailureGuard is home is defining.RepeatedToolFailureGuard,
    "star_missing": sorted(set(tfg.__all__) - set(namespace)),
    "star_same": all(namespace[n] is getattr(tfg, n) for n in tfg.__all__),
    "star_extra": sorted(set(namespace) - set(tfg.__all__) - {"__builtins__"}),
}))
"""
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=ROOT
    )
    assert ast.literal_eval(out.stdout.splitlines()[-1]) == {
        "missing_from_dir": [],
        "loaded_by_dir": False,
        "submodules": ("tool_failure_guard.guard", "tool_failure_guard.modes"),
        "from_import": True,
        "star_missing": [],
        "star_same": True,
        "star_extra": [],
    }


def test_an_unknown_name_raises_attribute_error_naming_it() -> None:
    unknown = "module 'tool_failure_guard' has no attribute 'Guard'"
    with pytest.raises(AttributeError, match=unknown):
        _ = tool_failure_guard.Guard
    assert getattr(tool_failure_guard, "derive_table", None) is None  # guard's, not public here
    with pytest.raises(ImportError, match="cannot import name 'Nope' from 'tool_failure_guard'"):
        exec("from tool_failure_guard import Nope", {})


def imports_of(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module)
    return found


def forbidden(names: set[str]) -> set[str]:
    """The imports a core module may not have: a host, the agent session, or IO."""
    return {
        name
        for name in names
        if name.split(".")[0] in FORBIDDEN_IN_CORE
        or name.startswith(("tool_failure_guard.session", "tool_failure_guard.integrations"))
    }


@pytest.mark.parametrize("path", sorted(CORE.glob("*.py")), ids=lambda p: p.name)
def test_no_core_module_imports_a_host_or_io(path: Path) -> None:
    assert not forbidden(imports_of(path))


def test_the_core_has_modules_to_check() -> None:
    names = {p.stem for p in CORE.glob("*.py")}
    assert {"outcomes", "receipts", "settlement", "protections", "prompt", "actions"} <= names


def test_an_explicit_mode_wins_over_the_environment_which_defaults_to_shadow() -> None:
    mode_for_run = tool_failure_guard.mode_for_run
    env = {GUARD_MODE_ENV_VAR: "enforce"}
    assert mode_for_run("warn", env) is GuardMode.WARN
    assert mode_for_run(GuardMode.OFF, env) is GuardMode.OFF
    assert mode_for_run(None, env) is GuardMode.ENFORCE
    assert mode_for_run(None, {}) is GuardMode.SHADOW
    assert mode_for_run(None, {GUARD_MODE_ENV_VAR: "loud"}) is GuardMode.SHADOW
    with pytest.raises(ValueError, match="mode must be one of off, shadow, warn, enforce"):
        mode_for_run("loud", env)
