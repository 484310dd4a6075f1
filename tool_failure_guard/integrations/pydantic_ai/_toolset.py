"""The execution boundary: a toolset wrapper that sees every tool function settle.

It wraps the run's assembled toolset (``get_wrapper_toolset``), so it sees the
tool function's own return or raise before any capability hook, error handler
or retry bookkeeping turns it into something else: ``raise ToolFailed`` and
``raise ModelRetry`` are observed here although they never reach
``on_tool_execute_error``, and an exception another capability's handler turns
into a result still counts as the failure it was.  It observes; it never
changes what the tool returned or raised.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from pydantic_ai.exceptions import ApprovalRequired, CallDeferred, ModelRetry, ToolFailed
from pydantic_ai.tools import RunContext
from pydantic_ai.toolsets import AbstractToolset, WrapperToolset
from pydantic_ai.toolsets.abstract import ToolsetTool

from tool_failure_guard.integrations.pydantic_ai._outcomes import Execution, execution_error_type
from tool_failure_guard.integrations.pydantic_ai._run import GuardedRun

try:  # MCP toolsets need the ``mcp`` package, which the framework makes optional
    from pydantic_ai.mcp import MCPToolset as _MCPToolset
except ImportError:  # pragma: no cover - the project itself depends on mcp
    _MCP_TYPES: tuple[type[Any], ...] = ()
else:
    _MCP_TYPES = (_MCPToolset,)

#: Bound on the error text kept per call (it reaches no receipt, no telemetry).
_MESSAGE_LIMIT = 500
#: The executions every call reports (frozen values: one each, never one per call).
_RUNNING = Execution(status="running")
_SUCCESS = Execution(status="success")
_DEFERRED = Execution(status="deferred")
_CANCELLED = Execution(status="cancelled")


def tool_type_of(toolset: AbstractToolset[Any]) -> str:
    """``mcp`` for a tool of an MCP server (through any wrappers), else ``native``."""
    current: AbstractToolset[Any] | None = toolset
    for _ in range(32):  # wrappers nest; a bound keeps a cyclic wrapper from hanging
        if current is None:
            break
        if isinstance(current, _MCP_TYPES):
            return "mcp"
        current = current.wrapped if isinstance(current, WrapperToolset) else None
    return "native"


@dataclass
class ObservingToolset(WrapperToolset[Any]):
    """Records each call's execution in the run's :class:`GuardedRun`."""

    run: GuardedRun = field(kw_only=True, repr=False)

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any], tool: ToolsetTool[Any]
    ) -> Any:
        call_id = ctx.tool_call_id
        run = self.run
        run.executed(call_id, _RUNNING)
        try:
            # the wrapped toolset's own call (``WrapperToolset.call_tool`` adds nothing more)
            result = await self.wrapped.call_tool(name, tool_args, ctx, tool)
        except (CallDeferred, ApprovalRequired):
            run.executed(call_id, _DEFERRED)
            raise
        except asyncio.CancelledError:
            run.executed(call_id, _CANCELLED)
            raise
        except Exception as exc:
            message = f"{type(exc).__name__}: {exc}"[:_MESSAGE_LIMIT]
            kind = execution_error_type(exc)
            run.executed(call_id, Execution(status="error", error_type=kind, message=message))
            if not isinstance(exc, ToolFailed | ModelRetry):  # it ends the run: say so, once
                run.plain_exception(name, type(exc).__name__)
            raise
        run.executed(call_id, _SUCCESS)
        return result
