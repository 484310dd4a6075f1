"""The evaluation's MCP server: one tool, ``ci_status``, that never answers in time.

Written with the official ``mcp`` SDK's server side and spoken to over stdio
like any MCP server; the agent's per-call timeout (``TOOL_FAILURE_GUARD_MCP_TIMEOUT``)
cancels each call, so every call settles as ``execution_timeout`` (``mcp_timeout`` before
the original's name was adopted).
Run: ``python -m tool_failure_guard.evaluation.mcp_slow_server``
(``TFG_EVAL_MCP_DELAY`` seconds, default 60).
"""

from __future__ import annotations

import os
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

TOOL = "ci_status"


async def list_tools(
    ctx: Any, params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    schema = {
        "type": "object",
        "properties": {"branch": {"type": "string", "description": "branch (default main)"}},
    }
    tool = types.Tool(
        name=TOOL, description="Status of the latest CI run of a branch.", input_schema=schema
    )
    return types.ListToolsResult(tools=[tool])


async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    await anyio.sleep(float(os.environ.get("TFG_EVAL_MCP_DELAY", "60")))
    return types.CallToolResult(content=[types.TextContent(text="passed")])


async def main() -> None:
    server: Server[Any] = Server("ci", on_list_tools=list_tools, on_call_tool=call_tool)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
