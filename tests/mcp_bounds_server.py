"""A stdio MCP server written with the official SDK's server side that answers too much.

For the "every output is bounded" tests: each tool answers ``size`` characters
(default 5,000,000) where a well-behaved server answers a line.  Run:
``python tests/mcp_bounds_server.py``.

Tools:

* ``huge_error`` -- an ``isError: true`` result of ``size`` characters;
* ``huge_rpc_error`` -- JSON-RPC ``-32603`` whose message is ``size`` characters;
* ``huge_refusal`` -- JSON-RPC ``-32602`` (invalid params) of ``size`` characters;
* ``huge_ok`` -- a successful result of ``size`` characters;
* ``quiet`` -- answers ``quiet``.

With ``BOUNDS_SERVER_NOISE=N`` in its environment it prints N garbage lines to
stdout (the protocol channel) before it starts serving, as a server logging to
the wrong stream does.  (Once serving, the SDK's ``stdio_server`` points the
process's stdout at stderr, so a Python server cannot pollute it later.)
"""

from __future__ import annotations

import os
import sys
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError

DEFAULT_SIZE = 5_000_000
TOOLS = ("huge_error", "huge_rpc_error", "huge_refusal", "huge_ok", "quiet")


async def list_tools(
    ctx: Any, params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    schema = {"type": "object", "properties": {"size": {"type": "integer"}}}
    return types.ListToolsResult(tools=[types.Tool(name=n, input_schema=schema) for n in TOOLS])


def garbage(lines: int) -> None:
    """Lines on stdout that are not JSON-RPC (a server logging to the wrong stream)."""
    out = sys.stdout.buffer
    for index in range(lines):
        out.write(f"debug: step {index} of the server's chatter\n".encode())
    out.flush()


async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    args = params.arguments or {}
    text = "E" * int(args.get("size", DEFAULT_SIZE))
    if params.name == "huge_error":
        return types.CallToolResult(content=[types.TextContent(text=text)], is_error=True)
    if params.name == "huge_rpc_error":
        raise MCPError(code=types.INTERNAL_ERROR, message=text)
    if params.name == "huge_refusal":
        raise MCPError(code=types.INVALID_PARAMS, message=text)
    if params.name == "huge_ok":
        return types.CallToolResult(content=[types.TextContent(text=text)])
    if params.name == "quiet":
        return types.CallToolResult(content=[types.TextContent(text="quiet")])
    raise MCPError(code=types.INVALID_PARAMS, message=f"Unknown tool: {params.name}")


async def main() -> None:
    garbage(int(os.environ.get("BOUNDS_SERVER_NOISE", "0")))
    server: Server[Any] = Server("bounds", on_list_tools=list_tools, on_call_tool=call_tool)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
