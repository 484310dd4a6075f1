"""MCP tools as registered tools: naming, argument validation, kind, and the outcome contract.

Naming.  A server ``S``'s tool ``T`` is registered as ``mcp__<S>__<T>``: that
is the policy tool name (the server-qualified identity the guard keys on) and
the name the model calls.  In ``S`` and ``T`` every character outside
``A-Z a-z 0-9 _ -`` becomes ``_`` (a provider's function names allow no
more).  A name longer than :data:`MAX_NAME_LENGTH` characters keeps its first
55 characters, then ``_`` and the first 8 hex digits of the SHA-256 of
``S + "\\0" + T``, so it stays unique and stable.  When two tools map to the
same name, the first one listed keeps it and the other is not registered (the
client is told).

Arguments are validated against the tool's declared ``inputSchema`` with
``jsonschema`` before anything is sent: a violation is ``not_started`` /
``invalid_tool_params``, exactly like a built-in.

Kind and permission.  Every MCP call asks ``session/request_permission``:
annotations are hints a server makes about itself, and the MCP specification
says not to trust them for such decisions.  They only choose the ACP tool kind
the client shows: ``readOnlyHint: true`` -> ``read``, ``readOnlyHint: false``
-> ``edit``, no hint -> ``other``.

The outcome contract of a call (:data:`MCP_OUTCOME_TABLE`, documented in
``docs/outcome-contract.md``) is produced when the call settles: :meth:`McpTool.run`
raises :class:`~tool_failure_guard.session.tools.builtin.ToolError` with the frozen execution error
type, or :class:`~tool_failure_guard.session.tools.builtin.ToolNotStarted` when the server rejected
the
call
before executing it.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections.abc import Mapping
from typing import Any, Literal

import attrs
import mcp_types as types
from mcp.shared.exceptions import MCPError

from tool_failure_guard.session.tools.builtin import (
    Tool,
    ToolContext,
    ToolError,
    ToolKind,
    ToolNotStarted,
)
from tool_failure_guard.session.tools.mcp import (
    CallTimedOut,
    McpServerConnection,
    ServerUnavailable,
    SessionMcp,
)
from tool_failure_guard.session.tools.schema_check import schema_problem

_log = logging.getLogger("session.mcp_tools")

MCP_PREFIX = "mcp__"
#: Longest registered name (what model providers accept for a function name).
MAX_NAME_LENGTH = 64
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")

MCP_TOOL_ERROR = "mcp_tool_error"
MCP_TIMEOUT = "execution_timeout"
MCP_SERVER_UNAVAILABLE = "mcp_server_unavailable"
MCP_PROTOCOL_ERROR = "mcp_protocol_error"


@attrs.frozen
class McpOutcomeRow:
    """One row of the MCP outcome contract: what happened, and the frozen axes."""

    path: str
    terminal_status: str
    execution_status: str
    execution_error_type: str | None


#: The outcome contract for MCP calls; ``docs/outcome-contract.md`` shows it (checked by a test).
MCP_OUTCOME_TABLE: tuple[McpOutcomeRow, ...] = (
    McpOutcomeRow(
        "arguments violate the tool's inputSchema", "error", "not_started", "invalid_tool_params"
    ),
    McpOutcomeRow("permission refused or cancelled", "cancelled", "not_started", None),
    McpOutcomeRow("result with isError: true", "error", "error", MCP_TOOL_ERROR),
    McpOutcomeRow("successful result", "success", "success", None),
    McpOutcomeRow(
        "JSON-RPC -32602, tool no longer listed", "error", "not_started", "tool_not_registered"
    ),
    McpOutcomeRow(
        "JSON-RPC -32602, tool still listed", "error", "not_started", "invalid_tool_params"
    ),
    McpOutcomeRow(
        "per-call timeout (request cancelled at the server)", "error", "error", MCP_TIMEOUT
    ),
    McpOutcomeRow("session/cancel during the call", "cancelled", "cancelled", None),
    McpOutcomeRow(
        "server exits or connection drops during the call", "error", "error", MCP_SERVER_UNAVAILABLE
    ),
    McpOutcomeRow(
        "call to a server that is already unavailable", "error", "error", MCP_SERVER_UNAVAILABLE
    ),
    McpOutcomeRow("any other JSON-RPC error", "error", "error", MCP_PROTOCOL_ERROR),
)


def _safe(part: str) -> str:
    return _UNSAFE.sub("_", part) or "_"


def registered_name(server: str, tool: str) -> str:
    """``mcp__<server>__<tool>``, mapped to provider-safe characters and length."""
    name = f"{MCP_PREFIX}{_safe(server)}__{_safe(tool)}"
    if len(name) <= MAX_NAME_LENGTH:
        return name
    digest = hashlib.sha256(f"{server}\0{tool}".encode()).hexdigest()[:8]
    return f"{name[:55]}_{digest}"


def tool_kind(annotations: types.ToolAnnotations | None) -> ToolKind:
    hint = annotations.read_only_hint if annotations is not None else None
    if hint is True:
        return "read"
    if hint is False:
        return "edit"
    return "other"


#: What a tool whose declared schema is broken is checked against: an object, nothing more.
_ANY_OBJECT: Mapping[str, Any] = {"type": "object"}


def _checked_schema(server: str, tool: types.Tool) -> Mapping[str, Any]:
    """The declared schema when it can check arguments offline; else only "an object".

    Malformed, a ``$ref`` that resolves nowhere (remote ones are never fetched)
    or a ``$ref`` cycle: one warning, and the tool is checked for an object.
    """
    schema = dict(tool.input_schema)
    problem = schema_problem(schema)
    if problem is not None:
        _log.warning(
            "MCP server %r tool %r: unusable inputSchema (%s); only checking for an object",
            server,
            tool.name,
            problem,
        )
        return _ANY_OBJECT
    return schema


@attrs.frozen(kw_only=True)
class McpTool:
    """One listed tool of a connected server, behind the
    :class:`~tool_failure_guard.session.tools.builtin.Tool` protocol."""

    name: str  #: the registered name, ``mcp__<server>__<tool>``
    remote_name: str  #: the tool's name at the server
    kind: ToolKind
    connection: McpServerConnection = attrs.field(eq=False, repr=False)
    timeout: float
    #: What a model needs to call it: the server's description and declared schema.
    description: str = ""
    #: The one schema the executor checks arguments against and a model is sent.
    parameters_schema: Mapping[str, Any] = attrs.field(
        factory=lambda: dict(_ANY_OBJECT), eq=False, repr=False
    )
    tool_type: Literal["native", "mcp"] = "mcp"
    needs_permission: bool = True

    def validate(self, args: Mapping[str, Any]) -> Mapping[str, Any]:
        """Nothing beyond the schema, which the executor has already checked."""
        return dict(args)

    def title(self, args: Mapping[str, Any]) -> str:
        return f"{self.remote_name} ({self.connection.name})"

    async def run(self, args: Mapping[str, Any], context: ToolContext) -> bytes:
        try:
            result = await self.connection.call_tool(self.remote_name, args, self.timeout)
        except CallTimedOut as exc:
            raise ToolError(MCP_TIMEOUT, str(exc)) from None
        except ServerUnavailable as exc:
            raise ToolError(MCP_SERVER_UNAVAILABLE, f"MCP server unavailable: {exc}") from None
        except MCPError as exc:
            if exc.code == types.INVALID_PARAMS:
                if await self.connection.lists_tool(self.remote_name, self.timeout):
                    raise ToolNotStarted("invalid_tool_params", exc.message) from None
                raise ToolNotStarted("tool_not_registered", exc.message) from None
            raise ToolError(MCP_PROTOCOL_ERROR, f"MCP error {exc.code}: {exc.message}") from None
        except Exception as exc:  # a malformed result and the like: still the protocol's fault
            raise ToolError(MCP_PROTOCOL_ERROR, f"{type(exc).__name__}: {exc}") from None
        text = result_text(result)
        if result.is_error:
            raise ToolError(MCP_TOOL_ERROR, text or "the tool reported an error")
        return text.encode("utf-8")


def result_text(result: types.CallToolResult) -> str:
    """The model's text for a tool result: text blocks as they are, others described."""
    parts: list[str] = []
    for block in result.content:
        if isinstance(block, types.TextContent):
            parts.append(block.text)
        elif isinstance(block, types.ImageContent | types.AudioContent):
            parts.append(f"[{block.type} {block.mime_type} omitted]")
        elif isinstance(block, types.ResourceLink):
            parts.append(f"[resource link: {block.uri}]")
        elif isinstance(block, types.EmbeddedResource):
            resource = block.resource
            if isinstance(resource, types.TextResourceContents):
                parts.append(resource.text)
            else:
                parts.append(f"[binary resource {resource.uri} omitted]")
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False))
    return "\n".join(parts)


def mcp_registry(mcp: SessionMcp, timeout: float, taken: Mapping[str, Tool]) -> dict[str, Tool]:
    """Register every listed tool of every connected server; report names that clash."""
    registry: dict[str, Tool] = {}
    for connection in mcp.connections:
        for tool in connection.tools:
            name = registered_name(connection.name, tool.name)
            if name in registry or name in taken:
                problem = (
                    f"MCP server {connection.name!r}: tool {tool.name!r} was not registered: "
                    f"its name {name!r} is already taken"
                )
                _log.warning("%s", problem)
                mcp.problems.append(problem)
                mcp.unannounced.append(problem)
                continue
            registry[name] = McpTool(
                name=name,
                remote_name=tool.name,
                kind=tool_kind(tool.annotations),
                connection=connection,
                timeout=timeout,
                description=tool.description or "",
                parameters_schema=_checked_schema(connection.name, tool),
            )
    return registry
