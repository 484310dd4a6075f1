"""Opening a session for the agent: its settings, tools, MCP servers, drain and model.

:class:`AgentConfig` is what the ``agent`` command gives the
:class:`~tool_failure_guard.session.transport.agent.GuardedAgent`;
:func:`open_session` builds one live
:class:`~tool_failure_guard.session.pipeline.session.GuardedSession` from it
(for ``session/new`` and ``session/load``) and registers it, and its MCP
servers, with the connection's
:class:`~tool_failure_guard.session.transport.lifecycle.LiveSessions`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

import attrs

from tool_failure_guard.session.config.envconfig import (
    EnvConfig,
    load_env_off_loop,
)
from tool_failure_guard.session.config.settings import resolve_settings
from tool_failure_guard.session.model.base import Model
from tool_failure_guard.session.persistence.history import HistoryStore
from tool_failure_guard.session.persistence.pending import PendingInputLog
from tool_failure_guard.session.pipeline.drain import DEFAULT_DRAIN_TIMEOUT, MidTurnInput
from tool_failure_guard.session.pipeline.session import GuardedSession, SessionOptions
from tool_failure_guard.session.tools.builtin import ToolContext, default_tools
from tool_failure_guard.session.tools.executor import Executor
from tool_failure_guard.session.transport.drain_names import DrainMethodNames
from tool_failure_guard.session.transport.lifecycle import DEFAULT_MAX_LIVE_SESSIONS, LiveSessions
from tool_failure_guard.telemetry.sink import GuardTelemetry, NullTelemetry

_log = logging.getLogger("session.agent")


@attrs.frozen(kw_only=True)
class AgentConfig:
    model_factory: Callable[[], Model]
    state_dir: Path
    #: When set, wins over ``model_factory``: a model built from the session's merged
    #: environment (the OpenAI-compatible provider reads its endpoint and key there).
    session_model_factory: Callable[[EnvConfig], Model] | None = None
    telemetry: GuardTelemetry = attrs.field(factory=NullTelemetry)
    drain_timeout: float = DEFAULT_DRAIN_TIMEOUT
    report_decisions: bool = False
    #: ``--max-tool-calls``; None: ``TOOL_FAILURE_GUARD_MAX_TOOL_CALLS`` or the default.
    tool_call_cap: int | None = None
    #: Live sessions per connection; one more closes the least recently used idle one.
    max_live_sessions: int = DEFAULT_MAX_LIVE_SESSIONS


class Connection(Protocol):
    """What opening a session needs of the agent's connection."""

    config: AgentConfig
    store: HistoryStore
    live: LiveSessions
    conn: Any  #: the client-side connection (its ``ext_method`` without learnt drain names)
    drain_names: DrainMethodNames | None


async def open_session(
    agent: Connection,
    session_id: str,
    cwd: str,
    history: list[Any],
    mcp_servers: list[Any] | None,
    pending_input: tuple[str, ...] = (),
) -> GuardedSession:
    """The live session ``session_id`` in ``cwd``, registered with ``agent.live``."""
    config, store, live = agent.config, agent.store, agent.live
    project = Path(cwd)
    env = await load_env_off_loop(project)  # regular files only, bounded, off the loop
    settings = resolve_settings(env, tool_call_cap=config.tool_call_cap)
    mode = settings.mode  # resolved once, when the session is created
    context = ToolContext(cwd=project, shell_timeout=settings.shell_timeout)
    await live.close_servers(session_id)  # session/load starts the servers afresh
    tools = default_tools()
    if mcp_servers:
        from tool_failure_guard.session.tools.mcp import connect_servers
        from tool_failure_guard.session.tools.mcp_tools import mcp_registry

        mcp = await connect_servers(mcp_servers, cwd=project)
        live.mcp[session_id] = mcp
        tools.update(mcp_registry(mcp, settings.mcp_timeout, tools))
    conn, drain_names = agent.conn, agent.drain_names
    pending = PendingInputLog(store, session_id, pending_input)
    drain = MidTurnInput(
        session_id,
        # the learnt wire name; a client object without a raw path: its ext_method
        drain_names.request if drain_names else getattr(conn, "ext_method", None),
        timeout=config.drain_timeout,
        on_queue_change=pending.changed,
        declared=settings.boundary,
        mode=mode,
    )
    drain.restore(pending_input)
    _log.info(
        "session %s: guard mode %s, input boundary %s",
        session_id,
        mode.value,
        settings.boundary.value,
    )
    session = GuardedSession(
        session_id=session_id,
        client=conn,
        model=(
            config.session_model_factory(env)
            if config.session_model_factory is not None
            else config.model_factory()
        ),
        executor_factory=lambda s: Executor(tools, context, s.ask_permission),
        store=store,
        telemetry=config.telemetry,
        mode=mode,
        drain=drain,
        options=SessionOptions(
            tool_call_cap=settings.tool_call_cap, report_decisions=config.report_decisions
        ),
        history=history,
        pending=pending,
    )
    live.sessions[session_id] = session
    return session
