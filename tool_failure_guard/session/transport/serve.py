"""The agent on stdio: the SDK connection, its router wrappers, and the connection's end.

:func:`serve` runs a :class:`~tool_failure_guard.session.transport.agent.GuardedAgent` on
stdin/stdout with
the ACP Python SDK.  Log to stderr only: stdout carries the protocol.

``_meta`` hygiene: the SDK spreads a request's ``_meta`` keys into the
handler's keyword arguments, so a ``_meta`` key spelled like a parameter
(``session_id``, ``prompt``, ``self``...) would override the real parameter.
:func:`strip_colliding_meta` removes such keys before the SDK sees them, and
the agent only ever reads namespaced keys (``qwen.channel.prompt``).

``session/close`` is routed by SDK 0.12 only with its unstable protocol
enabled; the agent enables it for that method (the other unstable methods it
does not implement answer "method not found" as before).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, cast

from acp.exceptions import RequestError
from pydantic import ValidationError

from tool_failure_guard.session.transport.framing import DEFAULT_MAX_FRAME_BYTES, filtered_stdio

if TYPE_CHECKING:
    from tool_failure_guard.session.transport.agent import GuardedAgent

_log = logging.getLogger("session.agent")

#: Names the SDK would let a ``_meta`` key override (parameters of every request handler).
RESERVED_META_KEYS = frozenset(
    {
        "self",
        "session_id",
        "prompt",
        "cwd",
        "mcp_servers",
        "additional_directories",
        "protocol_version",
        "client_capabilities",
        "client_info",
        "method_id",
        "mode_id",
        "config_id",
        "value",
        "cursor",
        "message_id",
    }
)

MethodHandler = Callable[[str, Any, bool], Awaitable[Any]]


def strip_colliding_meta(handler: MethodHandler) -> MethodHandler:
    """Wrap the SDK's router: ``_meta`` keys never override request parameters."""

    async def wrapped(method: str, params: Any, is_notification: bool) -> Any:
        if isinstance(params, dict) and isinstance(params.get("_meta"), dict):
            meta = params["_meta"]
            colliding = sorted(key for key in meta if key in RESERVED_META_KEYS)
            if colliding:
                _log.warning("%s: ignoring _meta keys that name parameters: %s", method, colliding)
                params = {
                    **params,
                    "_meta": {k: v for k, v in meta.items() if k not in RESERVED_META_KEYS},
                }
        return await handler(method, params, is_notification)

    return wrapped


def quiet_notifications(handler: MethodHandler) -> MethodHandler:
    """Wrap the SDK's router: a notification it cannot route costs one warning line.

    A notification has no answer, so the SDK logs its failures with a traceback;
    an unknown method or unreadable params is the client's mistake, not ours.
    """

    async def wrapped(method: str, params: Any, is_notification: bool) -> Any:
        if not is_notification:
            return await handler(method, params, is_notification)
        try:
            return await handler(method, params, is_notification)
        except RequestError as exc:
            _log.warning("notification %r ignored: %s", method[:100], exc)
        except ValidationError as exc:
            count = exc.error_count()
            _log.warning("notification %r ignored: %d invalid params", method[:100], count)
        return None

    return wrapped


async def serve(agent: GuardedAgent, *, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
    """Serve ``agent`` on stdin/stdout until the client disconnects.

    The SDK's connection reads stdin only through
    :mod:`~tool_failure_guard.session.transport.framing`: bad,
    huge and stray frames are answered or dropped there and never reach it.
    """
    from acp.agent.connection import AgentSideConnection

    reader, writer, frames = await filtered_stdio(max_frame_bytes)
    conn = AgentSideConnection(
        cast(Any, agent), writer, reader, listening=False, use_unstable_protocol=True
    )
    inner = conn._conn
    inner._handler = quiet_notifications(strip_colliding_meta(inner._handler))
    pump = asyncio.create_task(frames.pump(), name="session.framing.pump")
    listening = asyncio.ensure_future(conn.listen())
    loop = asyncio.get_running_loop()
    # SIGTERM ends the connection like EOF does, so MCP servers are shut down, not orphaned.
    with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
        loop.add_signal_handler(signal.SIGTERM, listening.cancel)
    try:
        with contextlib.suppress(asyncio.CancelledError):
            await listening
        # End of input (the client closed stdin, went away, or SIGTERM): settle, persist, exit.
        await agent.disconnect()
    finally:
        agent.close_sessions()
        pump.cancel()
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.remove_signal_handler(signal.SIGTERM)
        await agent.close()
        await conn.close()
