"""The public facade: ``import tool_failure_guard`` is the library, cheap and host-neutral."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

import tool_failure_guard
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


def test_importing_the_facade_loads_no_host_provider_or_analysis_code() -> None:
    probe = "import json, sys; import tool_failure_guard; print(json.dumps(sorted(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=ROOT
    )
    loaded = set(json.loads(out.stdout))
    assert {"tool_failure_guard", "tool_failure_guard.guard"} <= loaded  # the probe imported it
    heavy = ("acp", "openai", "mcp", "duckdb")
    hosts = ("tool_failure_guard.session", "tool_failure_guard.rollout")
    offenders = {m for m in loaded if m.split(".")[0] in heavy or m.startswith(hosts)}
    assert not offenders, offenders


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


def test_the_facade_exports_what_it_lists() -> None:
    for name in tool_failure_guard.__all__:
        assert hasattr(tool_failure_guard, name), name
    assert tool_failure_guard.PromptProtection is tool_failure_guard.core.PromptProtection


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
