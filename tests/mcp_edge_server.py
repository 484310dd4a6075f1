"""A small stdio MCP server written with the official SDK's server side, for edge cases.

The real servers (``@modelcontextprotocol/server-*``) answer every bad call
with an ``isError`` result; this one answers with JSON-RPC errors, so the
not-started and protocol-error rows of the MCP outcome contract are exercised
over a real stdio connection.  Run: ``python tests/mcp_edge_server.py``.

Tools:

* ``strict`` -- declares ``{"n": integer >= 1}``; answers ``-32602`` (invalid
  params) when called, as if its own validation were stricter;
* ``vanishing`` -- listed once, then gone: a call answers ``-32602`` and the
  next ``tools/list`` no longer lists it (an unknown tool);
* ``broken`` -- answers JSON-RPC ``-32603`` (internal error);
* ``ok`` -- returns ``{"text": "fine"}`` as structured content only;
* ``sleepy`` -- sleeps ``seconds`` and records, in the file named by
  ``EDGE_SERVER_LOG``, that a ``notifications/cancelled`` interrupted it.

With ``EDGE_SERVER_ODD_TOOLS`` set, also:

* ``busy`` -- answers JSON-RPC ``-32000`` (the generic server-error code, the
  same number the client SDK uses for "connection closed") and stays up;
* ``selfref`` -- declares ``{"$ref": "#"}`` (checking it recurses forever);
* ``unresolvable`` -- declares a ``$ref`` to a definition that does not exist;
* ``remote`` -- only when ``EDGE_SERVER_REMOTE_REF`` names a URL: declares a
  ``$ref`` to that URL (a checker must never fetch it).

With ``EDGE_SERVER_REDOS`` set, also (patterns that backtrack exponentially):

* ``redos`` -- ``{"s": string, pattern "^(a+)+$"}`` (Python's ``re`` takes
  2^n steps on ``"a" * n + "!"``);
* ``redos_hard`` -- ``{"s": string, pattern "^(a|a)*$"}`` (exponential in
  every backtracking engine).
"""

from __future__ import annotations

import os
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError

_listed_once = {"vanishing": False}


def _tool(name: str, schema: dict[str, Any]) -> types.Tool:
    return types.Tool(name=name, input_schema={"type": "object", **schema})


async def list_tools(
    ctx: Any, params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    tools = [
        _tool(
            "strict",
            {"properties": {"n": {"type": "integer", "minimum": 1}}, "required": ["n"]},
        ),
        _tool("broken", {}),
        _tool("ok", {}),
        _tool("sleepy", {"properties": {"seconds": {"type": "number"}}}),
    ]
    if os.environ.get("EDGE_SERVER_ODD_TOOLS"):
        tools.append(_tool("busy", {}))
        tools.append(_tool("selfref", {"$ref": "#"}))
        tools.append(_tool("unresolvable", {"properties": {"x": {"$ref": "#/$defs/missing"}}}))
    if os.environ.get("EDGE_SERVER_REDOS"):
        for name, pattern in (("redos", "^(a+)+$"), ("redos_hard", "^(a|a)*$")):
            schema = {"properties": {"s": {"type": "string", "pattern": pattern}}}
            tools.append(_tool(name, schema))
    remote = os.environ.get("EDGE_SERVER_REMOTE_REF")
    if remote:
        tools.append(_tool("remote", {"properties": {"x": {"$ref": remote}}}))
    if not _listed_once["vanishing"]:
        _listed_once["vanishing"] = True
        tools.append(_tool("vanishing", {}))
    return types.ListToolsResult(tools=tools)


def _log(line: str) -> None:
    path = os.environ.get("EDGE_SERVER_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(line + "\n")


async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    name = params.name
    args = params.arguments or {}
    if name in ("strict", "vanishing"):
        raise MCPError(code=types.INVALID_PARAMS, message=f"rejected {name}")
    if name == "broken":
        raise MCPError(code=types.INTERNAL_ERROR, message="broken on purpose")
    if name == "busy":
        raise MCPError(code=-32000, message="busy, try again")
    if name in ("ok", "selfref", "unresolvable", "remote", "redos", "redos_hard"):
        return types.CallToolResult(content=[], structured_content={"text": "fine"})
    if name == "sleepy":
        _log("sleepy started")
        try:
            await anyio.sleep(float(args.get("seconds", 30)))
        except anyio.get_cancelled_exc_class():
            _log("sleepy cancelled")
            raise
        _log("sleepy finished")
        return types.CallToolResult(content=[types.TextContent(text="slept")])
    raise MCPError(code=types.INVALID_PARAMS, message=f"Unknown tool: {name}")


async def main() -> None:
    server: Server[Any] = Server("edge", on_list_tools=list_tools, on_call_tool=call_tool)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
