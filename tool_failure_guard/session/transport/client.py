"""A recording ACP client that spawns the guarded agent: used by the demo and the e2e tests.

:class:`RecordingClient` is an ``acp.Client`` that records every session update
synchronously (before any ``await``, so the order is the wire order), answers
permission requests by a policy, and plays a host's mid-turn queue for
``craft/drainMidTurnQueue`` -- or lacks that method, or answers too late, to
play an older host.  ``drain_names`` says which wire names it answers: the
``_``-prefixed one through the SDK's ``ext_method`` (a Python SDK host), the
bare one the original sends through a route added to the SDK's router
(:func:`answer_bare_drain`), or both.  :func:`spawn_guarded_agent` starts
``python -m tool_failure_guard agent`` with a chosen guard mode.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Literal, cast

import attrs
from acp import PROTOCOL_VERSION, spawn_agent_process
from acp.exceptions import RequestError
from acp.schema import (
    AgentMessageChunk,
    AgentPlanUpdate,
    AllowedOutcome,
    ClientCapabilities,
    DeniedOutcome,
    Implementation,
    PermissionOption,
    RequestPermissionResponse,
    ToolCallProgress,
    ToolCallStart,
    ToolCallUpdate,
    UserMessageChunk,
)

from tool_failure_guard.guard import GUARD_MODE_ENV_VAR
from tool_failure_guard.session.transport.drain_names import (
    BARE_DRAIN_NAME,
    PREFIXED_DRAIN_NAME,
)

PermissionPolicy = Callable[[ToolCallUpdate], Literal["allow", "reject", "cancel"]]
DrainSupport = Literal["supported", "missing", "slow"]


@attrs.frozen
class Event:
    """One recorded session update, reduced to what a transcript shows."""

    kind: str  #: user, agent, tool_call, tool_update, plan
    text: str = ""
    call_id: str = ""
    status: str = ""

    def line(self) -> str:
        if self.kind == "tool_call":
            return f"  [tool {self.call_id}] {self.text} ({self.status})"
        if self.kind == "tool_update":
            detail = f": {self.text.splitlines()[0]}" if self.text else ""
            return f"  [tool {self.call_id}] -> {self.status}{detail}"
        if self.kind == "plan":
            return f"  [plan] {self.text}"
        return f"  {self.kind}: {self.text}"


def _text_of(content: Any) -> str:
    return str(getattr(content, "text", ""))


def _tool_text(content: Sequence[Any] | None) -> str:
    if not content:
        return ""
    return " ".join(_text_of(getattr(item, "content", None)) for item in content)


class RecordingClient:
    """An ``acp.Client`` that records updates and plays a host's mid-turn queue."""

    def __init__(
        self,
        *,
        permission: PermissionPolicy | None = None,
        drain: DrainSupport = "supported",
        drain_messages: Mapping[int, Sequence[str]] | None = None,
        queued_prompt_at: Sequence[int] = (),
        on_drain: Callable[[int], None] | None = None,
        drain_names: Sequence[str] = (PREFIXED_DRAIN_NAME,),
    ) -> None:
        self.events: list[Event] = []
        self.sessions: list[str] = []
        self.permission_requests: list[ToolCallUpdate] = []
        self.drain_requests: list[dict[str, Any]] = []
        #: The method of every request the agent sent, in wire order (names unchanged).
        self.agent_requests: list[str] = []
        self.drain_names = frozenset(drain_names)
        self._permission = permission or (lambda _: "allow")
        self._drain = drain
        self._drain_messages = dict(drain_messages or {})
        self._queued_prompt_at = set(queued_prompt_at)
        self._on_drain = on_drain

    # -- acp.Client -------------------------------------------------------------

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.sessions.append(session_id)
        if isinstance(update, UserMessageChunk):
            self.events.append(Event("user", _text_of(update.content)))
        elif isinstance(update, AgentMessageChunk):
            self.events.append(Event("agent", _text_of(update.content)))
        elif isinstance(update, ToolCallStart):
            self.events.append(
                Event("tool_call", update.title, update.tool_call_id, update.status or "")
            )
        elif isinstance(update, ToolCallProgress):
            self.events.append(
                Event(
                    "tool_update",
                    _tool_text(update.content),
                    update.tool_call_id,
                    update.status or "",
                )
            )
        elif isinstance(update, AgentPlanUpdate):
            self.events.append(
                Event("plan", "; ".join(f"{e.content} ({e.status})" for e in update.entries))
            )

    async def request_permission(
        self,
        session_id: str,
        tool_call: ToolCallUpdate,
        options: list[PermissionOption],
        **kwargs: Any,
    ) -> RequestPermissionResponse:
        self.permission_requests.append(tool_call)
        answer = self._permission(tool_call)
        if answer == "cancel":
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        wanted = "allow_once" if answer == "allow" else "reject_once"
        option = next(o for o in options if o.kind == wanted)
        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id=option.option_id)
        )

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        # the SDK strips the ``_`` of the wire name
        return await self.answer_drain(f"_{method}", params)

    async def answer_drain(self, wire_name: str, params: dict[str, Any]) -> dict[str, Any]:
        """A drain request that arrived as ``wire_name``."""
        if wire_name not in self.drain_names or self._drain == "missing":
            raise RequestError.method_not_found(wire_name)
        index = len(self.drain_requests)
        self.drain_requests.append(dict(params))
        if self._on_drain is not None:
            self._on_drain(index)
        if self._drain == "slow":
            await asyncio.sleep(30)
        return {
            "messages": list(self._drain_messages.get(index, ())),
            "hasQueuedPrompt": index in self._queued_prompt_at,
        }

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        return None

    def on_connect(self, conn: Any) -> None:
        return None

    def observe(self, event: Any) -> None:
        """A stream observer: records each request the agent sends, as it arrives."""
        message = event.message
        if event.direction.value == "incoming" and "method" in message and "id" in message:
            self.agent_requests.append(str(message["method"]))

    def drain_round_trips(self) -> list[str]:
        """The wire names of the drain requests the agent sent, in order."""
        return [m for m in self.agent_requests if m in (BARE_DRAIN_NAME, PREFIXED_DRAIN_NAME)]

    # -- views ----------------------------------------------------------------------

    def transcript(self) -> list[str]:
        return [event.line() for event in self.events]

    def agent_texts(self) -> list[str]:
        return [e.text for e in self.events if e.kind == "agent"]

    def final_statuses(self) -> dict[str, str]:
        """call id -> its last reported status."""
        statuses: dict[str, str] = {}
        for event in self.events:
            if event.kind in ("tool_call", "tool_update"):
                statuses[event.call_id] = event.status
        return statuses


def answer_bare_drain(conn: Any, client: RecordingClient) -> None:
    """Route the bare ``craft/drainMidTurnQueue`` to ``client`` on a client-side connection.

    The Python SDK answers every method outside ACP that lacks the ``_``
    prefix with "method not found"; a host written for the original (whose
    TypeScript SDK passes names unchanged) answers it.  This wraps the SDK's
    router the way such a host would register the method.
    """
    inner = conn._conn
    route = inner._handler

    async def handler(method: str, params: Any, is_notification: bool) -> Any:
        if method == BARE_DRAIN_NAME and not is_notification:
            return await client.answer_drain(method, params if isinstance(params, dict) else {})
        return await route(method, params, is_notification)

    inner._handler = handler


def agent_environment(
    mode: str | None, *, home: Path, extra: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The environment of a spawned agent: a private HOME, the mode, the import path."""
    package_root = str(Path(__file__).resolve().parents[3])
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "PYTHONPATH": package_root,
        "PYTHONUNBUFFERED": "1",
    }
    if mode is not None:
        env[GUARD_MODE_ENV_VAR] = mode
    env.update(extra or {})
    return env


@asynccontextmanager
async def spawn_guarded_agent(
    client: RecordingClient,
    *,
    mode: str | None,
    state_dir: Path,
    home: Path,
    scenario: str | None = "read-loop",
    extra_args: Sequence[str] = (),
    extra_env: Mapping[str, str] | None = None,
    stderr: Any = None,
) -> AsyncIterator[Any]:
    """Spawn the agent, initialize it, and yield the client-side connection.

    ``scenario`` is the scripted model's; None for an agent given ``--model
    openai:NAME`` in ``extra_args`` (the agent refuses both at once).

    ``stderr`` is where the agent's stderr goes: None inherits ours (never a pipe
    nobody reads: an agent that logs a lot would block on it).
    """
    async with spawn_guarded_agent_process(
        client,
        mode=mode,
        state_dir=state_dir,
        home=home,
        scenario=scenario,
        extra_args=extra_args,
        extra_env=extra_env,
        stderr=stderr,
    ) as (conn, _process):
        yield conn


@asynccontextmanager
async def spawn_guarded_agent_process(
    client: RecordingClient,
    *,
    mode: str | None,
    state_dir: Path,
    home: Path,
    scenario: str | None = "read-loop",
    extra_args: Sequence[str] = (),
    extra_env: Mapping[str, str] | None = None,
    stderr: Any = None,
) -> AsyncIterator[tuple[Any, asyncio.subprocess.Process]]:
    """:func:`spawn_guarded_agent`, also yielding the agent's process (crash tests kill it)."""
    args = [
        "-m",
        "tool_failure_guard",
        "agent",
        *(("--scenario", scenario) if scenario is not None else ()),
        "--state-dir",
        str(state_dir),
        "--report-decisions",
        *extra_args,
    ]
    async with spawn_agent_process(
        cast(Any, client),
        sys.executable,
        *args,
        env=agent_environment(mode, home=home, extra=extra_env),
        # time to shut its MCP servers down before the SDK resorts to SIGTERM
        transport_kwargs={"stderr": stderr, "shutdown_timeout": 10.0},
    ) as (conn, process):
        conn._conn.add_observer(client.observe)
        if BARE_DRAIN_NAME in client.drain_names:
            answer_bare_drain(conn, client)
        await conn.initialize(
            protocol_version=PROTOCOL_VERSION,
            client_capabilities=ClientCapabilities(),
            client_info=Implementation(name="recording-client", version="0.1.0"),
        )
        yield conn, process
