"""The guarded ACP agent: initialize, session/new, session/load, session/prompt, cancel.

:func:`serve` runs a :class:`GuardedAgent` on stdio with the ACP Python SDK.
Log to stderr only: stdout carries the protocol.

``_meta`` hygiene: the SDK spreads a request's ``_meta`` keys into the
handler's keyword arguments, so a ``_meta`` key spelled like a parameter
(``session_id``, ``prompt``, ``self``...) would override the real parameter.
:func:`strip_colliding_meta` removes such keys before the SDK sees them, and
the agent only ever reads namespaced keys (``qwen.channel.prompt``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import signal
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import attrs
from acp import PROTOCOL_VERSION
from acp.exceptions import RequestError
from acp.helpers import update_agent_message_text
from acp.schema import (
    AgentCapabilities,
    Implementation,
    InitializeResponse,
    LoadSessionResponse,
    McpCapabilities,
    NewSessionResponse,
    PromptCapabilities,
    PromptResponse,
)
from pydantic import ValidationError

from session.drain import DEFAULT_DRAIN_TIMEOUT, STEERING_METHOD, MidTurnInput
from session.envconfig import (
    MCP_TIMEOUT_ENV_VAR,
    SHELL_TIMEOUT_ENV_VAR,
    TOOL_CALL_CAP_ENV_VAR,
    EnvConfig,
    load_env,
)
from session.executor import Executor
from session.framing import DEFAULT_MAX_FRAME_BYTES, filtered_stdio
from session.history import HistoryError, HistoryStore, HistoryWriteError
from session.loop import CHANNEL_PROMPT_META_KEY, GuardedSession, SessionOptions
from session.model import Model
from session.pending import PendingInputLog
from session.replay import replay_updates
from session.telemetry import GuardTelemetry, NullTelemetry
from session.tools import DEFAULT_SHELL_TIMEOUT, ToolContext, default_tools
from tool_failure_guard.core.protections import DEFAULT_TOOL_CALL_CAP

if TYPE_CHECKING:  # the MCP SDK is imported only when a client names servers (start-up time)
    from session.mcp import SessionMcp

_log = logging.getLogger("session.agent")

AGENT_NAME = "tool-failure-guard"
AGENT_VERSION = "0.1.0"

#: Seconds an MCP tool call may run unless ``TOOL_FAILURE_GUARD_MCP_TIMEOUT`` says otherwise.
DEFAULT_MCP_TIMEOUT = 60.0

#: The ``_meta`` key of a ``session/load`` answer that had to skip corrupt history lines.
HISTORY_META_KEY = "toolFailureGuardHistory"
#: How long a disconnected agent waits for its cancelled prompts to persist and end.
DISCONNECT_GRACE_S = 5.0

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


def _prompt_texts(prompt: list[Any]) -> list[str]:
    texts: list[str] = []
    for block in prompt:
        kind = getattr(block, "type", None)
        if kind == "text":
            texts.append(str(block.text))
        elif kind == "resource_link":
            texts.append(f"[resource: {block.uri}]")
        elif kind == "resource":
            texts.append(f"[resource: {getattr(block.resource, 'uri', '?')}]")
        else:
            texts.append(f"[{kind} content omitted]")
    return texts


def _env_setting(env_value: str | None, default: float, name: str, *, integer: bool) -> float:
    """A positive, finite number from a settings variable; anything else warns, uses default.

    A typo in a deployment must never break a session.
    """
    if env_value is None:
        return default
    kind = "a whole number" if integer else "a number of seconds"
    try:
        value = int(env_value.strip()) if integer else float(env_value)
    except ValueError:
        _log.warning("%s=%r is not %s; using %g", name, env_value, kind, default)
        return default
    if not math.isfinite(value) or value <= 0:
        _log.warning("%s=%r must be positive and finite; using %g", name, env_value, default)
        return default
    return value


class GuardedAgent:
    """The ``acp.Agent`` implementation."""

    def __init__(self, config: AgentConfig) -> None:
        self.config = config
        self.store = HistoryStore(config.state_dir)
        self.sessions: dict[str, GuardedSession] = {}
        #: Sessions whose prompt was running when the client went away (for session_closed).
        self._interrupted: set[str] = set()
        #: The MCP servers of each session, shut down when the connection ends.
        self.mcp: dict[str, SessionMcp] = {}
        self.conn: Any = None

    def on_connect(self, conn: Any) -> None:
        self.conn = conn

    async def initialize(
        self,
        protocol_version: int,
        client_capabilities: Any = None,
        client_info: Any = None,
        **kwargs: Any,
    ) -> InitializeResponse:
        return InitializeResponse(
            protocol_version=min(protocol_version, PROTOCOL_VERSION),
            agent_capabilities=AgentCapabilities(
                load_session=True,
                prompt_capabilities=PromptCapabilities(),
                # stdio MCP servers only: exactly what session.mcp supports
                mcp_capabilities=McpCapabilities(http=False, sse=False),
            ),
            agent_info=Implementation(
                name=AGENT_NAME, title="Guarded agent", version=AGENT_VERSION
            ),
            field_meta={"steering": {"supported": True}},
        )

    async def authenticate(self, method_id: str, **kwargs: Any) -> None:
        return None

    async def _open(
        self,
        session_id: str,
        cwd: str,
        history: list[Any],
        mcp_servers: list[Any] | None,
        pending_input: tuple[str, ...] = (),
    ) -> GuardedSession:
        project = Path(cwd)
        env = load_env(project)
        mode = env.guard_mode()  # resolved once, when the session is created
        cap = self.config.tool_call_cap or int(
            _env_setting(
                env.get(TOOL_CALL_CAP_ENV_VAR),
                DEFAULT_TOOL_CALL_CAP,
                TOOL_CALL_CAP_ENV_VAR,
                integer=True,
            )
        )
        shell_timeout = _env_setting(
            env.get(SHELL_TIMEOUT_ENV_VAR),
            DEFAULT_SHELL_TIMEOUT,
            SHELL_TIMEOUT_ENV_VAR,
            integer=False,
        )
        context = ToolContext(cwd=project, shell_timeout=shell_timeout)
        mcp_timeout = _env_setting(
            env.get(MCP_TIMEOUT_ENV_VAR), DEFAULT_MCP_TIMEOUT, MCP_TIMEOUT_ENV_VAR, integer=False
        )
        old_mcp = self.mcp.pop(session_id, None)
        if old_mcp is not None:  # session/load starts the servers afresh
            await old_mcp.close()
        tools = default_tools()
        if mcp_servers:
            from session.mcp import connect_servers
            from session.mcp_tools import mcp_registry

            mcp = await connect_servers(mcp_servers, cwd=project)
            self.mcp[session_id] = mcp
            tools.update(mcp_registry(mcp, mcp_timeout, tools))
        conn = self.conn
        pending = PendingInputLog(self.store, session_id, pending_input)
        drain = MidTurnInput(
            session_id,
            conn.ext_method if conn is not None else None,
            timeout=self.config.drain_timeout,
            on_queue_change=pending.changed,
        )
        drain.restore(pending_input)
        _log.info("session %s: guard mode %s", session_id, mode.value)
        session = GuardedSession(
            session_id=session_id,
            client=conn,
            model=(
                self.config.session_model_factory(env)
                if self.config.session_model_factory is not None
                else self.config.model_factory()
            ),
            executor_factory=lambda s: Executor(tools, context, s.ask_permission),
            store=self.store,
            telemetry=self.config.telemetry,
            mode=mode,
            drain=drain,
            options=SessionOptions(
                tool_call_cap=cap, report_decisions=self.config.report_decisions
            ),
            history=history,
            pending=pending,
        )
        self.sessions[session_id] = session
        return session

    @staticmethod
    def _check_cwd(cwd: str) -> None:
        path = Path(cwd)
        if not path.is_absolute() or not path.is_dir():
            raise RequestError.invalid_params(
                {"cwd": f"{cwd!r} must be an absolute path to an existing directory"}
            )

    async def new_session(
        self,
        cwd: str,
        additional_directories: list[str] | None = None,
        mcp_servers: list[Any] | None = None,
        **kwargs: Any,
    ) -> NewSessionResponse:
        self._check_cwd(cwd)
        session_id = uuid.uuid4().hex
        try:
            self.store.create(session_id, cwd)
        except HistoryWriteError as exc:
            _log.error("%s", exc)
            raise RequestError.internal_error(
                {"details": "the session history could not be created"}
            ) from exc
        await self._open(session_id, cwd, [], mcp_servers)
        return NewSessionResponse(session_id=session_id, field_meta=self._mcp_meta(session_id))

    async def load_session(
        self,
        cwd: str,
        session_id: str,
        mcp_servers: list[Any] | None = None,
        additional_directories: list[str] | None = None,
        **kwargs: Any,
    ) -> LoadSessionResponse:
        self._check_cwd(cwd)
        old = self.sessions.get(session_id)
        if old is not None and old.running:
            raise RequestError.invalid_request({"details": "the session has a prompt running"})
        try:
            loaded = self.store.load_session(session_id)
        except HistoryError as exc:
            # HistoryError messages name the session, never the state directory's path.
            raise RequestError.invalid_params({"sessionId": str(exc)}) from exc
        session = await self._open(
            session_id, cwd, loaded.messages, mcp_servers, loaded.pending_input
        )
        for update in replay_updates(loaded.messages):
            await session.client.session_update(session_id, update)
        meta = self._mcp_meta(session_id) or {}
        if loaded.skipped_lines:
            meta[HISTORY_META_KEY] = {"skippedLines": list(loaded.skipped_lines)}
        return LoadSessionResponse(field_meta=meta or None)

    def _mcp_meta(self, session_id: str) -> dict[str, Any] | None:
        """``_meta.toolFailureGuard.mcpServers``: each server's status, when any were given."""
        mcp = self.mcp.get(session_id)
        if mcp is None or not (mcp.connections or mcp.problems):
            return None
        return {"toolFailureGuard": {"mcpServers": mcp.status()}}

    async def close(self) -> None:
        """Shut down every session's MCP servers (the connection ended)."""
        servers = list(self.mcp.values())
        self.mcp.clear()
        started = time.monotonic()
        await asyncio.gather(*(mcp.close() for mcp in servers))
        if servers:
            _log.info("MCP servers shut down in %.2fs", time.monotonic() - started)

    def _session(self, session_id: str) -> GuardedSession:
        session = self.sessions.get(session_id)
        if session is None:
            raise RequestError.invalid_params({"sessionId": f"unknown session {session_id!r}"})
        return session

    async def prompt(self, session_id: str, prompt: list[Any], **kwargs: Any) -> PromptResponse:
        session = self._session(session_id)
        # A routing hint from a channel bridge, not a credential: only `is True` counts.
        channel = kwargs.get(CHANNEL_PROMPT_META_KEY) is True
        mcp = self.mcp.get(session_id)
        if mcp is not None and not session.running:
            for notice in mcp.take_notices():  # servers that did not start: tell the user once
                await session.client.session_update(session_id, update_agent_message_text(notice))
        return await session.run_prompt(_prompt_texts(prompt), channel=channel)

    def close_sessions(self) -> None:
        """The client has gone: report each session closed, ``disconnect`` if mid-prompt.

        :meth:`disconnect` has usually ended the running prompts by now; it
        remembers which sessions they were.
        """
        for session in self.sessions.values():
            interrupted = session.running or session.session_id in self._interrupted
            session.report_closed("disconnect" if interrupted else "clean")

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        session = self.sessions.get(session_id)
        if session is not None:
            session.cancel()

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        if method == STEERING_METHOD:
            session_id = params.get("sessionId")
            prompt = params.get("prompt")
            if not isinstance(session_id, str) or not isinstance(prompt, list):
                raise RequestError.invalid_params(
                    {"details": "_session/steering needs sessionId (string) and prompt (list)"}
                )
            session = self._session(session_id)
            texts = [
                str(block["text"])
                for block in prompt
                if isinstance(block, dict) and block.get("type") == "text" and "text" in block
            ]
            if not session.running:
                return {"outcome": "promptRequired"}
            session.drain.push(texts)
            return {"outcome": "injected"}
        raise RequestError.method_not_found(f"_{method}")

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        return None

    async def disconnect(self, grace: float = DISCONNECT_GRACE_S) -> None:
        """The client is gone: cancel every running prompt and let it persist, bounded.

        Cancelling is what ``session/cancel`` does: running tools are cancelled
        (outcome ``cancelled``), every outcome is persisted and the batch's
        results are recorded.  Nobody is left to answer a permission request or
        see a next model turn, so no prompt continues unobserved.
        """
        running = [session for session in self.sessions.values() if session.running]
        self._interrupted.update(session.session_id for session in running)
        for session in running:
            session.cancel()
        if not running:
            return
        try:
            await asyncio.wait_for(
                asyncio.gather(*(session.wait_idle() for session in running)), grace
            )
        except TimeoutError:
            _log.warning("disconnected: a prompt did not end within %gs", grace)


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

    The SDK's connection reads stdin only through :mod:`session.framing`: bad,
    huge and stray frames are answered or dropped there and never reach it.
    """
    from acp.agent.connection import AgentSideConnection

    reader, writer, frames = await filtered_stdio(max_frame_bytes)
    conn = AgentSideConnection(cast(Any, agent), writer, reader, listening=False)
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
