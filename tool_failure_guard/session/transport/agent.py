"""The guarded ACP agent: initialize, session/new, load, prompt, cancel and close.

:func:`~tool_failure_guard.session.transport.serve.serve` runs a
:class:`GuardedAgent` on stdio with the ACP Python SDK.  The live sessions,
their one lock each, their history writer locks and their bound are
:mod:`~tool_failure_guard.session.transport.lifecycle`'s; building a session
(settings, tools, MCP servers, drain, model) and :class:`AgentConfig` are
:mod:`~tool_failure_guard.session.transport.opening`'s.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

from acp import PROTOCOL_VERSION
from acp.exceptions import RequestError
from acp.helpers import update_agent_message_text
from acp.schema import (
    AgentCapabilities,
    CloseSessionResponse,
    Implementation,
    InitializeResponse,
    LoadSessionResponse,
    McpCapabilities,
    NewSessionResponse,
    PromptCapabilities,
    PromptResponse,
    SessionCapabilities,
    SessionCloseCapabilities,
)

from tool_failure_guard.session.config.settings import DEFAULT_MCP_TIMEOUT as DEFAULT_MCP_TIMEOUT
from tool_failure_guard.session.persistence.history import HistoryStore, HistoryWriteError
from tool_failure_guard.session.persistence.messages import HistoryError
from tool_failure_guard.session.persistence.replay import replay_updates
from tool_failure_guard.session.pipeline.drain import STEERING_METHOD
from tool_failure_guard.session.pipeline.session import CHANNEL_PROMPT_META_KEY, GuardedSession
from tool_failure_guard.session.transport.drain_names import DrainMethodNames
from tool_failure_guard.session.transport.lifecycle import CLOSE, LOAD, PROMPT, LiveSessions
from tool_failure_guard.session.transport.opening import AgentConfig, open_session

if TYPE_CHECKING:  # the MCP SDK is imported only when a client names servers (start-up time)
    from tool_failure_guard.session.tools.mcp import SessionMcp

_log = logging.getLogger("session.agent")

__all__ = ["DEFAULT_MCP_TIMEOUT", "HISTORY_META_KEY", "AgentConfig", "GuardedAgent"]

AGENT_NAME = "tool-failure-guard"
AGENT_VERSION = "0.1.0"

#: The ``_meta`` key of a ``session/load`` answer that had to skip corrupt history lines.
HISTORY_META_KEY = "toolFailureGuardHistory"
#: How long a disconnected agent waits for its cancelled prompts to persist and end.
DISCONNECT_GRACE_S = 5.0


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


class GuardedAgent:
    """The ``acp.Agent`` implementation."""

    def __init__(self, config: AgentConfig) -> None:
        self.config = config
        self.store = HistoryStore(config.state_dir)
        self.live = LiveSessions(config.state_dir, config.max_live_sessions)
        #: The live sessions, least recently used first (``self.live`` owns the dict).
        self.sessions: dict[str, GuardedSession] = self.live.sessions
        #: Sessions whose prompt was running when the client went away (for session_closed).
        self._interrupted: set[str] = set()
        #: The MCP servers of each session, shut down when the connection ends.
        self.mcp: dict[str, SessionMcp] = self.live.mcp
        self.conn: Any = None
        self.drain_names: DrainMethodNames | None = None  #: learnt once per connection

    def on_connect(self, conn: Any) -> None:
        self.conn = conn
        self.drain_names = DrainMethodNames.for_connection(conn)

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
                session_capabilities=SessionCapabilities(close=SessionCloseCapabilities()),
            ),
            agent_info=Implementation(
                name=AGENT_NAME, title="Guarded agent", version=AGENT_VERSION
            ),
            field_meta={"steering": {"supported": True}},
        )

    async def authenticate(self, method_id: str, **kwargs: Any) -> None:
        return None

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
        await self.live.make_room()
        session_id = uuid.uuid4().hex
        try:
            self.store.create(session_id, cwd)
        except HistoryWriteError as exc:
            _log.error("%s", exc)
            raise RequestError.internal_error(
                {"details": "the session history could not be created"}
            ) from exc
        self.live.claim_writer(session_id)
        try:
            await open_session(self, session_id, cwd, [], mcp_servers)
        except BaseException:
            await self.live.release(session_id, "clean")
            raise
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
        # One lock per session: refused while its prompt runs or another load/close holds it.
        with self.live.hold(session_id, LOAD):
            was_live = session_id in self.sessions
            try:
                loaded = self.store.load_session(session_id)
            except HistoryError as exc:
                # HistoryError messages name the session, never the state directory's path.
                raise RequestError.invalid_params({"sessionId": str(exc)}) from exc
            self.live.claim_writer(session_id)  # refused if another process has it open
            try:
                await self.live.make_room(keep=session_id)
                session = await open_session(
                    self, session_id, cwd, loaded.messages, mcp_servers, loaded.pending_input
                )
            except BaseException:
                if not was_live:
                    await self.live.release(session_id, "clean")
                raise
            self.live.touch(session_id)
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
        """Shut down every session's MCP servers and free its writer lock (connection ended)."""
        servers = list(self.mcp.values())
        self.mcp.clear()
        started = time.monotonic()
        try:
            await asyncio.gather(*(mcp.close() for mcp in servers))
        finally:
            self.live.release_writers()
        if servers:
            _log.info("MCP servers shut down in %.2fs", time.monotonic() - started)

    async def close_session(self, session_id: str, **kwargs: Any) -> CloseSessionResponse:
        """``session/close``: end a running prompt as a cancel would, then release the session.

        Its MCP servers are shut down, its writer lock freed and its close
        reported (``disconnect`` if a prompt was running, else ``clean``); the
        history stays on disk for a later ``session/load``.
        """
        session = self._session(session_id)
        interrupted = session.running
        if interrupted:
            session.cancel()
            try:
                await asyncio.wait_for(session.wait_idle(), DISCONNECT_GRACE_S)
            except TimeoutError:
                raise RequestError.internal_error(
                    {"details": f"the prompt did not end within {DISCONNECT_GRACE_S:g}s"}
                ) from None
            await asyncio.sleep(0)  # let the prompt's request handler release its hold
        with self.live.hold(session_id, CLOSE):
            await self.live.release(session_id, "disconnect" if interrupted else "clean")
        return CloseSessionResponse()

    def _session(self, session_id: str) -> GuardedSession:
        session = self.sessions.get(session_id)
        if session is None:
            raise RequestError.invalid_params({"sessionId": f"unknown session {session_id!r}"})
        return session

    async def prompt(self, session_id: str, prompt: list[Any], **kwargs: Any) -> PromptResponse:
        self._session(session_id)
        # One lock per session: refused while a load, close or another prompt holds it.
        with self.live.hold(session_id, PROMPT):
            session = self._session(session_id)
            self.live.touch(session_id)
            # A routing hint from a channel bridge, not a credential: only `is True` counts.
            channel = kwargs.get(CHANNEL_PROMPT_META_KEY) is True
            mcp = self.mcp.get(session_id)
            if mcp is not None and not session.running:
                for notice in mcp.take_notices():  # servers that did not start: tell once
                    await session.client.session_update(
                        session_id, update_agent_message_text(notice)
                    )
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
