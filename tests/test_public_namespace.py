"""The public face is ``tool_failure_guard``: a user's own ``guard.py``,
``session.py``, ``statecharts/`` or ``rollout/`` beside their code cannot break it."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import tool_failure_guard

PACKAGE = Path(tool_failure_guard.__file__).parent
GENERIC = {"guard", "session", "statecharts", "rollout"}

USE = """
import tool_failure_guard as tfg
guard = tfg.RepeatedToolFailureGuard(tfg.GuardMode.ENFORCE)
receipt = tfg.BatchReceipt([tfg.Observation(call_id="c1", policy_tool_name="read_file",
    tool_type="native", terminal_status="error", execution_status="error",
    execution_error_type="file_not_found")])
print(guard.observe(receipt, tfg.InputBoundary()).kind.value)
import tool_failure_guard.session.transport.agent
import tool_failure_guard.core
"""


def test_a_users_generic_modules_do_not_shadow_the_library(tmp_path: Path) -> None:
    boom = "raise ImportError('the user module was imported instead of the library')\n"
    (tmp_path / "guard.py").write_text(boom)
    (tmp_path / "session.py").write_text(boom)
    for name in ("statecharts", "rollout"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text(boom)
    (tmp_path / "app.py").write_text(USE)
    done = subprocess.run(
        [sys.executable, "app.py"], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "tracked"


def _imported_modules(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
    return names


def _modules() -> list[Path]:
    # the design card's folders are rooms of the package (real folders, no links)
    return [
        Path(root, name)
        for root, _, files in os.walk(PACKAGE, followlinks=True)
        for name in files
        if name.endswith(".py")
    ]


def test_no_module_of_the_package_imports_a_generic_top_level_name() -> None:
    offenders = {
        f"{path.relative_to(PACKAGE)}: {name}"
        for path in _modules()
        for name in _imported_modules(path)
        if name.split(".")[0] in GENERIC
    }
    assert not offenders
    # the walk really went through the design card's folders, and none is a link
    assert (PACKAGE / "guard" / "_guard.py").is_file()
    assert (PACKAGE / "session" / "transport" / "agent.py").is_file()
    assert not [p for p in PACKAGE.rglob("*") if p.is_symlink()]
