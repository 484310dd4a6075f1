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

import logging
import math
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, cast

import attrs
from acp import PROTOCOL_VERSION
from acp.exceptions import RequestError
from acp.schema import (
    AgentCapabilities,
    Implementation,
    InitializeResponse,
    LoadSessionResponse,
    NewSessionResponse,
    PromptCapabilities,
    PromptResponse,
)

from session.drain import DEFAULT_DRAIN_TIMEOUT, STEERING_METHOD, MidTurnInput
from session.envconfig import load_env
from session.executor import Executor
from session.history import HistoryError, HistoryStore, HistoryWriteError
from session.loop import CHANNEL_PROMPT_META_KEY, GuardedSession, SessionOptions
from session.model import Model
from session.protections import DEFAULT_TOOL_CALL_CAP
from session.replay import replay_updates
from session.telemetry import GuardTelemetry, NullTelemetry
from session.tools import DEFAULT_SHELL_TIMEOUT, ToolContext, default_tools

_log = logging.getLogger("session.agent")

AGENT_NAME = "tool-failure-guard"
AGENT_VERSION = "0.1.0"

#: Settings the agent reads from its merged environment (process env and env files).
TOOL_CALL_CAP_ENV_VAR = "TOOL_FAILURE_GUARD_MAX_TOOL_CALLS"
SHELL_TIMEOUT_ENV_VAR = "TOOL_FAILURE_GUARD_SHELL_TIMEOUT"

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

    Project ``.env`` files may set these, so a bad value must never break a session.
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
                load_session=True, prompt_capabilities=PromptCapabilities()
            ),
            agent_info=Implementation(
                name=AGENT_NAME, title="Guarded agent", version=AGENT_VERSION
            ),
            field_meta={"steering": {"supported": True}},
        )

    async def authenticate(self, method_id: str, **kwargs: Any) -> None:
        return None

    def _open(self, session_id: str, cwd: str, history: list[Any]) -> GuardedSession:
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
        conn = self.conn
        drain = MidTurnInput(
            session_id,
            conn.ext_method if conn is not None else None,
            timeout=self.config.drain_timeout,
        )
        _log.info("session %s: guard mode %s", session_id, mode.value)
        session = GuardedSession(
            session_id=session_id,
            client=conn,
            model=self.config.model_factory(),
            executor_factory=lambda s: Executor(default_tools(), context, s.ask_permission),
            store=self.store,
            telemetry=self.config.telemetry,
            mode=mode,
            drain=drain,
            options=SessionOptions(
                tool_call_cap=cap, report_decisions=self.config.report_decisions
            ),
            history=history,
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
        self._open(session_id, cwd, [])
        return NewSessionResponse(session_id=session_id)

    async def load_session(
        self,
        cwd: str,
        session_id: str,
        mcp_servers: list[Any] | None = None,
        additional_directories: list[str] | None = None,
        **kwargs: Any,
    ) -> LoadSessionResponse:
        self._check_cwd(cwd)
        try:
            _, messages = self.store.load(session_id)
        except HistoryError as exc:
            raise RequestError.invalid_params({"sessionId": str(exc)}) from exc
        old = self.sessions.get(session_id)
        if old is not None and old.running:
            raise RequestError.invalid_request({"details": "the session has a prompt running"})
        session = self._open(session_id, cwd, messages)
        for update in replay_updates(messages):
            await session.client.session_update(session_id, update)
        return LoadSessionResponse()

    def _session(self, session_id: str) -> GuardedSession:
        session = self.sessions.get(session_id)
        if session is None:
            raise RequestError.invalid_params({"sessionId": f"unknown session {session_id!r}"})
        return session

    async def prompt(self, session_id: str, prompt: list[Any], **kwargs: Any) -> PromptResponse:
        session = self._session(session_id)
        # A routing hint from a channel bridge, not a credential: only `is True` counts.
        channel = kwargs.get(CHANNEL_PROMPT_META_KEY) is True
        return await session.run_prompt(_prompt_texts(prompt), channel=channel)

    def close_sessions(self) -> None:
        """The client has gone: report each session closed, ``disconnect`` if mid-prompt."""
        for session in self.sessions.values():
            session.report_closed("disconnect" if session.running else "clean")

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


async def serve(agent: GuardedAgent) -> None:
    """Serve ``agent`` on stdin/stdout until the client disconnects."""
    from acp.agent.connection import AgentSideConnection
    from acp.stdio import stdio_streams

    reader, writer = await stdio_streams(limit=50 * 1024 * 1024)
    conn = AgentSideConnection(cast(Any, agent), writer, reader, listening=False)
    inner = conn._conn
    inner._handler = strip_colliding_meta(inner._handler)
    try:
        await conn.listen()
    finally:
        agent.close_sessions()
        await conn.close()
