"""Where the test suite finds its MCP servers, and how a test says it needs them.

The real servers are npm packages pinned in ``.mcp-servers/package-lock.json``
and installed by ``make setup`` / ``make test`` (``npm ci``) into the
git-ignored ``.mcp-servers/node_modules``.  Without Node.js they cannot run:
those tests are skipped with a message saying how to get them, never silently.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest
from acp.schema import EnvVariable, McpServerStdio

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ROOT / ".mcp-servers" / "node_modules" / "@modelcontextprotocol"
FILESYSTEM = PACKAGES / "server-filesystem" / "dist" / "index.js"
EVERYTHING = PACKAGES / "server-everything" / "dist" / "index.js"
EDGE = Path(__file__).resolve().parent / "mcp_edge_server.py"

HOW_TO_GET_THEM = (
    "needs Node.js 20+ with npm and the pinned MCP servers: install Node.js, then run "
    "`make setup` (runs `npm ci --prefix .mcp-servers`)"
)


def node_problem() -> str | None:
    if shutil.which("node") is None:
        return "node is not on PATH"
    missing = [p.parent.parent.name for p in (FILESYSTEM, EVERYTHING) if not p.is_file()]
    if missing:
        return f"not installed: {', '.join(missing)}"
    return None


#: Set to 1 where the real servers must run (CI): a missing server fails instead of skipping.
REQUIRE_ENV_VAR = "TOOL_FAILURE_GUARD_REQUIRE_MCP_SERVERS"


def unavailable_message() -> str | None:
    """Why the real servers cannot run here, and how to get them; None when they can."""
    problem = node_problem()
    if problem is None:
        return None
    return f"real MCP servers unavailable ({problem}); {HOW_TO_GET_THEM}"


def require_real_servers() -> None:
    """Skip the calling test, saying how to get the servers; fail instead on CI."""
    message = unavailable_message()
    if message is None:
        return
    if os.environ.get(REQUIRE_ENV_VAR) == "1":
        pytest.fail(f"{message} ({REQUIRE_ENV_VAR}=1)")
    pytest.skip(message)


def filesystem_server(name: str, root: Path, *, pid_file: Path | None = None) -> McpServerStdio:
    """server-filesystem allowed to read ``root`` (as an ACP client would send it)."""
    return _node(name, [str(FILESYSTEM), str(root)], pid_file)


def everything_server(name: str, *, pid_file: Path | None = None) -> McpServerStdio:
    return _node(name, [str(EVERYTHING), "stdio"], pid_file)


def edge_server(name: str, **env: str) -> McpServerStdio:
    return McpServerStdio(
        name=name,
        command=sys.executable,
        args=[str(EDGE)],
        env=[EnvVariable(name=k, value=v) for k, v in env.items()],
    )


def _node(name: str, args: list[str], pid_file: Path | None) -> McpServerStdio:
    node = shutil.which("node") or "node"
    if pid_file is None:
        return McpServerStdio(name=name, command=node, args=args, env=[])
    # `exec` keeps the pid: the file names the server process itself.
    script = 'echo $$ > "$0"; exec "$@"'
    return McpServerStdio(
        name=name, command="/bin/sh", args=["-c", script, str(pid_file), node, *args], env=[]
    )


def read_pid(pid_file: Path) -> int:
    return int(pid_file.read_text(encoding="utf-8").strip())


def alive(pid: int) -> bool:
    """Whether ``pid`` is a live (not zombie) process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8")
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"
