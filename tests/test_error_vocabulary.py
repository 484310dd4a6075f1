"""Our tools' error vocabulary is the original's where it classifies the same failure.

Each case runs one of our shared tools (``read_file``, ``write_file``,
``run_shell_command``) through the real executor on a temporary project and
checks the outcome's three axes against the "ours" column of the table in
docs/outcome-contract.md ("One error vocabulary with the original"), which
also records what Qwen Code 0.24.4 does and how that was established.  The
MCP rows are checked against ``MCP_OUTCOME_TABLE`` (the MCP tests run them
against real servers).
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import pytest

from tool_failure_guard.session.tools.builtin import ToolContext, default_tools
from tool_failure_guard.session.tools.executor import (
    CallOutcome,
    Executor,
    FunctionCall,
    PermissionAnswer,
)
from tool_failure_guard.session.tools.mcp_tools import MCP_OUTCOME_TABLE

DOC = Path(__file__).resolve().parents[1] / "docs" / "outcome-contract.md"
#: The old names, before the original's were adopted: no tool may emit them.
OLD_NAMES = {
    "shell_nonzero_exit",
    "shell_timeout",
    "path_outside_workspace",
    "mcp_timeout",
    "read_only_file_system",
}


def table() -> dict[str, tuple[str, str]]:
    """failure -> (the original's cell, our cell), from the documentation table."""
    text = DOC.read_text(encoding="utf-8")
    body = text.split("<!-- error-vocabulary:begin -->")[1].split("<!-- error-vocabulary:end -->")[
        0
    ]
    rows = [line for line in body.splitlines() if line.startswith("| ")][2:]
    cells = [[c.strip() for c in row.strip("|").split(" | ")] for row in rows]
    return {c[0]: (c[1], c[2]) for c in cells}


def run_call(project: Path, name: str, args: dict[str, Any]) -> CallOutcome:
    async def allow(*_: Any) -> PermissionAnswer:
        return PermissionAnswer.ALLOWED

    async def go() -> CallOutcome:
        executor = Executor(dict(default_tools()), ToolContext(cwd=project), allow)
        return await executor.execute(
            FunctionCall(call_id="c", name=name, args=args), asyncio.Event()
        )

    return asyncio.run(go())


#: failure (a row of the table) -> the call that provokes it, given the project
CASES: dict[str, Any] = {
    "read a missing file": lambda p: ("read_file", {"path": "missing.txt"}),
    "read outside the workspace": lambda p: ("read_file", {"path": "/etc/hostname"}),
    "write outside the workspace": lambda p: (
        "write_file",
        {"path": str(p.parent / "outside.txt"), "content": "x"},
    ),
    "write onto a directory": lambda p: ("write_file", {"path": "sub", "content": "x"}),
    "shell command exits non-zero": lambda p: ("run_shell_command", {"command": "exit 3"}),
    "shell command times out": lambda p: (
        "run_shell_command",
        {"command": "sleep 5", "timeout": 0.05},
    ),
}


def ours(cell: str) -> tuple[str, str, str]:
    """``type (status / execution status)`` -> (status, execution status, type)."""
    found = re.match(r"([a-z_]+) \((\w+) / (\w+)\)", cell)
    assert found, cell
    return found[2], found[3], found[1]


@pytest.mark.parametrize("failure", list(CASES))
def test_our_tool_settles_as_the_table_says(tmp_path: Path, failure: str) -> None:
    project = tmp_path / "project"
    (project / "sub").mkdir(parents=True)
    name, args = CASES[failure](project)
    outcome = run_call(project, name, args)
    got = (outcome.terminal_status, outcome.execution_status, outcome.execution_error_type)
    assert got == ours(table()[failure][1])
    assert outcome.execution_error_type not in OLD_NAMES


def test_the_renamed_types_are_the_originals() -> None:
    rows = table()
    for failure in ("shell command exits non-zero", "shell command times out"):
        original, mine = rows[failure]
        assert original.split()[0] == ours(mine)[2]  # same name as the original's
    assert ours(rows["read outside the workspace"][1])[2] == "path_not_in_workspace"


def test_the_mcp_rows_match_the_mcp_outcome_table() -> None:
    rows = table()
    produced = {r.execution_error_type for r in MCP_OUTCOME_TABLE}
    assert ours(rows["MCP call times out"][1])[2] == "execution_timeout" in produced
    assert ours(rows["MCP tool result with `isError: true`"][1])[2] == "mcp_tool_error" in produced
    assert not OLD_NAMES & produced
