"""The MCP servers a client names: connect, list tools, call, restart policy, shut down.

A client passes MCP servers in ``session/new`` and ``session/load``
(``mcpServers``, ACP ``McpServerStdio``: name, command, args, env).  Each is
started as a child process with the official ``mcp`` SDK (``stdio_client`` and
``ClientSession``; no hand-written framing), initialized, and its tools listed.
Only stdio servers are supported, which is exactly what ``initialize``
advertises (``mcpCapabilities``: http and sse false); an HTTP or SSE server
in a request is reported as not started.

Why a task per server: the SDK's connection is a pair of anyio context
managers whose task groups must be entered and exited by one task, while
calls come from the prompt's tasks.  :class:`McpServerConnection` runs the
context managers in its own task for the life of the session and lets any
task send requests over the open session.

Failure model:

* a server that cannot be spawned, exits, or does not answer ``initialize``
  and ``tools/list`` within :data:`STARTUP_TIMEOUT` is **not started**: its
  problem goes to the client (see :class:`SessionMcp`), the other servers and
  the built-in tools work as usual;
* a server whose process exits or whose connection drops is **unavailable**
  from then on (told by the transport's state: a live server answering
  JSON-RPC ``-32000``, the generic server error, is a protocol error and stays
  up): the call in flight and every later call to it fail at once with
  ``mcp_server_unavailable``.  Restart policy: no automatic restart within a
  session (a crash-looping server would otherwise be hidden from the guard);
  ``session/load`` of the session starts every server it names afresh;
* when the ACP connection ends (or the session is loaded again) every server
  is shut down the SDK's way: stdin closed, then SIGTERM, then SIGKILL of its
  process group, each step bounded;
* a server that prints lines to stdout that are not JSON-RPC (logs on the
  protocol channel) keeps working: the lines are ignored, with one warning per
  server and then at most one count per :data:`NOISE_WARNING_INTERVAL` seconds
  (the SDK's own traceback per line is silenced), and a last count when the
  server is closed (``tool_failure_guard/session/mcp_bounds.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

import attrs
import mcp_types as types
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError

from tool_failure_guard.session.tools.mcp_bounds import (
    StdoutNoise,
    short_reason,
    silence_parse_tracebacks,
)

_log = logging.getLogger("session.mcp")

#: Seconds a server has to start, answer ``initialize`` and list its tools.
STARTUP_TIMEOUT = 30.0
#: Seconds to wait for a server's shutdown (the SDK bounds each of its own steps).
SHUTDOWN_TIMEOUT = 10.0
#: Pages of ``tools/list`` read at most (a server that pages forever is cut off).
MAX_TOOL_PAGES = 50

CLIENT_INFO = types.Implementation(name="tool-failure-guard", version="0.1.0")


class McpStartError(Exception):
    """A server could not be started; the message says why (for the client)."""


class ServerUnavailable(Exception):
    """The server's process exited or its connection dropped; it stays down."""


class CallTimedOut(Exception):
    """The per-call timeout elapsed; the request was cancelled at the server."""


@attrs.frozen
class StdioServerSpec:
    """One stdio server as the client named it (``McpServerStdio``)."""

    name: str
    command: str
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = attrs.field(factory=dict, eq=False, hash=False)


def server_spec(server: Any) -> StdioServerSpec | str:
    """The stdio spec of one ``mcpServers`` entry, or why it cannot be started."""
    name = getattr(server, "name", None)
    if not isinstance(name, str) or not name:
        return "an MCP server without a name was ignored"
    kind = getattr(server, "type", None)
    command = getattr(server, "command", None)
    if kind in ("http", "sse") or not isinstance(command, str):
        return (
            f"MCP server {name!r} was not started: only stdio servers are supported "
            f"(this agent advertises mcpCapabilities http=false, sse=false)"
        )
    if not command:
        return f"MCP server {name!r} was not started: its command is empty"
    env = {str(v.name): str(v.value) for v in getattr(server, "env", None) or ()}
    args = tuple(str(a) for a in getattr(server, "args", None) or ())
    return StdioServerSpec(name=name, command=command, args=args, env=env)


def _describe(exc: BaseException) -> str:
    """A one-line reason from an exception (or the first leaf of an exception group)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, MCPError) and exc.code == types.CONNECTION_CLOSED:
        return "the server exited or closed its output before answering"
    if isinstance(exc, MCPError):
        return short_reason(f"MCP error {exc.code}: {exc.message}")
    if isinstance(exc, FileNotFoundError):
        return short_reason(f"command not found: {exc.filename or exc}")
    text = str(exc) or type(exc).__name__
    return short_reason(text.splitlines()[0])


class McpServerConnection:
    """One running stdio server, owned by its own task for the life of the session."""

    def __init__(self, spec: StdioServerSpec, *, cwd: Path, errlog: TextIO | None = None) -> None:
        self.spec = spec
        self.cwd = cwd
        self.tools: tuple[types.Tool, ...] = ()
        #: Why the server is down (None while it is up); set once, never cleared.
        self.unavailable: str | None = None
        self._errlog = errlog if errlog is not None else sys.stderr
        self._session: ClientSession | None = None
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.noise = StdoutNoise(spec.name)
        silence_parse_tracebacks()

    @property
    def name(self) -> str:
        return self.spec.name

    async def start(self, timeout: float = STARTUP_TIMEOUT) -> None:
        """Spawn, initialize and list tools; raise :class:`McpStartError` on any failure."""
        started: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._task = asyncio.create_task(self._own(started), name=f"mcp server {self.name}")
        try:
            await asyncio.wait_for(asyncio.shield(started), timeout)
        except TimeoutError:
            await self.close()
            raise McpStartError(
                f"MCP server {self.name!r} was not started: no answer to initialize "
                f"and tools/list within {timeout:g}s"
            ) from None
        except BaseException:  # McpStartError, or the request itself was cancelled
            await self.close()
            raise

    async def _own(self, started: asyncio.Future[None]) -> None:
        params = StdioServerParameters(
            command=self.spec.command,
            args=list(self.spec.args),
            env=dict(self.spec.env),
            cwd=self.cwd,
        )
        try:
            async with (
                stdio_client(params, errlog=self._errlog) as (read, write),
                ClientSession(
                    read, write, client_info=CLIENT_INFO, message_handler=self.noise
                ) as session,
            ):
                await session.initialize()
                self.tools = await _list_tools(session)
                self._session = session
                started.set_result(None)
                await self._stop.wait()
        except asyncio.CancelledError:
            started.cancel()  # closed before it started: nobody waits for a reason any more
            raise
        except Exception as exc:  # the SDK raises exception groups and plain errors
            reason = _describe(exc)
            if not started.done():
                started.set_exception(
                    McpStartError(f"MCP server {self.name!r} was not started: {reason}")
                )
            else:
                _log.warning("MCP server %r: connection ended: %s", self.name, reason)
        finally:
            self._session = None
            self.noise.close()
            if self.unavailable is None:
                self.unavailable = "the server connection is closed"

    def _mark_down(self, reason: str) -> None:
        if self.unavailable is None:
            self.unavailable = reason
            _log.warning("MCP server %r is unavailable: %s", self.name, reason)
        self._stop.set()  # let the owner task close the streams and reap the process

    async def call_tool(
        self, tool: str, arguments: Mapping[str, Any], timeout: float
    ) -> types.CallToolResult:
        """Call ``tool``; raise ServerUnavailable, CallTimedOut or the server's MCPError.

        Cancelling the calling task (``session/cancel``) and the timeout both make
        the SDK send ``notifications/cancelled`` for the request.
        """
        session = self._session
        if self.unavailable is not None or session is None:
            raise ServerUnavailable(self.unavailable or "the server is not running")
        try:
            async with asyncio.timeout(timeout):
                return await session.call_tool(tool, dict(arguments))
        except TimeoutError:
            raise CallTimedOut(f"no result within {timeout:g}s; the call was cancelled") from None
        except MCPError as exc:
            # -32000 is also JSON-RPC's generic server error, which a live server may
            # answer: only the transport's state says the connection is closed.
            if exc.code == types.CONNECTION_CLOSED and transport_closed(session):
                self._mark_down("the server exited or closed the connection")
                raise ServerUnavailable(self.unavailable) from None
            raise
        except (OSError, EOFError) as exc:
            self._mark_down(_describe(exc))
            raise ServerUnavailable(self.unavailable) from None
        except Exception as exc:
            if type(exc).__module__.startswith("anyio"):  # closed or broken streams
                self._mark_down(_describe(exc))
                raise ServerUnavailable(self.unavailable) from None
            raise

    async def lists_tool(self, tool: str, timeout: float) -> bool:
        """Whether the server still lists ``tool`` (after it rejected a call with -32602)."""
        session = self._session
        if session is None:
            return False
        try:
            async with asyncio.timeout(timeout):
                tools = await _list_tools(session)
        except Exception:
            return True  # cannot tell: keep the narrower reading, invalid params
        return any(t.name == tool for t in tools)

    async def close(self) -> None:
        """Shut the server down; bounded, never raises."""
        self._stop.set()
        task = self._task
        if task is None or task.done():
            return
        if self._session is None:  # still starting (or stuck in initialize): stop waiting
            task.cancel()
        try:
            await asyncio.wait_for(asyncio.shield(task), SHUTDOWN_TIMEOUT)
        except BaseException:
            task.cancel()
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(task, SHUTDOWN_TIMEOUT)


def transport_closed(session: ClientSession) -> bool:
    """Whether the session's transport is closed (EOF, or the dispatcher shut down).

    The SDK's stream dispatcher keeps that state (``_closed``, set before it wakes
    the waiting requests with ``-32000``); the SDK exposes no public flag for it.
    A dispatcher without that state falls back to the code alone (closed).
    """
    dispatcher = getattr(session, "_dispatcher", None)
    closed = getattr(dispatcher, "_closed", None)
    if isinstance(closed, bool):
        return closed
    return True


async def _list_tools(session: ClientSession) -> tuple[types.Tool, ...]:
    tools: list[types.Tool] = []
    cursor: str | None = None
    for _ in range(MAX_TOOL_PAGES):
        params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
        page = await session.list_tools(params=params)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            break
    return tuple(tools)


@attrs.define
class SessionMcp:
    """The MCP servers of one session and what the client must be told about them.

    ``problems`` are the servers that were not started (and tools that could
    not be registered).  The client learns them twice: in the ``session/new``
    or ``session/load`` response's ``_meta`` (``toolFailureGuard.mcpServers``)
    and as an agent message at the start of the next prompt -- an error on
    ``session/new`` would take the working servers down with the broken one.
    """

    connections: list[McpServerConnection] = attrs.field(factory=list)
    problems: list[str] = attrs.field(factory=list)
    #: Problems not yet shown to the user as an agent message.
    unannounced: list[str] = attrs.field(factory=list)

    def status(self) -> list[dict[str, Any]]:
        """Per-server status for the response ``_meta``."""
        rows: list[dict[str, Any]] = [
            {"name": c.name, "status": "connected", "tools": len(c.tools)} for c in self.connections
        ]
        rows.extend({"status": "not_started", "message": p} for p in self.problems)
        return rows

    def take_notices(self) -> list[str]:
        notices, self.unannounced = self.unannounced, []
        return notices

    async def close(self) -> None:
        await asyncio.gather(*(c.close() for c in self.connections))


async def connect_servers(
    servers: Sequence[Any], *, cwd: Path, startup_timeout: float = STARTUP_TIMEOUT
) -> SessionMcp:
    """Start every server concurrently; a failing one is reported, never fatal."""
    result = SessionMcp()
    pending: list[McpServerConnection] = []
    seen: set[str] = set()
    for server in servers:
        spec = server_spec(server)
        if isinstance(spec, str):
            result.problems.append(spec)
            continue
        if spec.name in seen:
            result.problems.append(
                f"MCP server {spec.name!r} was not started: another server has that name"
            )
            continue
        seen.add(spec.name)
        pending.append(McpServerConnection(spec, cwd=cwd))

    async def start(connection: McpServerConnection) -> str | None:
        try:
            await connection.start(startup_timeout)
        except McpStartError as exc:
            return str(exc)
        return None

    outcomes = await asyncio.gather(*(start(c) for c in pending))
    for connection, problem in zip(pending, outcomes, strict=True):
        if problem is None:
            result.connections.append(connection)
        else:
            result.problems.append(problem)
    for problem in result.problems:
        _log.warning("%s", problem)
    result.unannounced = list(result.problems)
    return result
