"""The Claude Agent SDK host: Claude Code's hook events as Python callbacks, sessions in memory.

The SDK runs its bundled Claude Code and answers the CLI's hook callbacks in the
application's process.  Each callback hands the event to
:func:`tool_failure_guard.hooks.loops.handle_event` with
:mod:`tool_failure_guard.hooks.claude_code` (the modules that say what a Claude Code
event means, and which agent loop's guard it is for) against the event's own session's
:class:`~tool_failure_guard.hooks.loops.SessionLoops`, kept in memory with their
live protections (nothing is replayed, no state file; how long:
:mod:`~tool_failure_guard.integrations.claude_agent_sdk._sessions`); the answer goes back to
the CLI in the SDK's spelling (``continue_``).  ``PostToolBatch`` is registered
under its name: the SDK sends every event key of ``hooks`` to the CLI as it is,
though its ``HookEvent`` type does not list that one yet (0.2.190).

A stop is decided inside a callback, where raising would only fail that hook; the
run ends because the answer says ``continue: false``.  :meth:`RepeatedToolFailureHooks.query`
then raises :class:`ProtectionStopped` once the stream is over (``on_stop="error"``)
or just ends (``"end"``), reading the stop of the sessions its own stream named,
never another query's.  A subagent's stop ends that subagent only (the CLI's own
behaviour): the main agent is told at its next request and the query goes on, so
only a stop of the main agent raises.  Any error inside a callback answers nothing (fail open)
and is logged once per kind on :data:`LOGGER`.
"""

from __future__ import annotations

import contextvars
import dataclasses
import logging
import time
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any, Final

from claude_agent_sdk import ClaudeAgentOptions, ClaudeSDKError, HookMatcher, query

from tool_failure_guard.guard import GuardMode
from tool_failure_guard.hooks import claude_code
from tool_failure_guard.hooks.loops import handle_event, loop_id_of
from tool_failure_guard.hooks.report import report_handled
from tool_failure_guard.integrations import _api
from tool_failure_guard.integrations._api import (
    GuardStop,
    RunReport,
    StopBehaviour,
    stop_behaviour,
)
from tool_failure_guard.integrations.claude_agent_sdk._sessions import Sessions, empty_report
from tool_failure_guard.modes import mode_for_run
from tool_failure_guard.telemetry.sink import GuardTelemetry

#: The ``route`` of this adapter's telemetry (``telemetry.names.FRAMEWORK_ROUTES``).
ROUTE: Final = "claude_agent_sdk"
LOGGER: Final = logging.getLogger("tool_failure_guard.integrations.claude_agent_sdk")
#: The hook events the adapter registers (the command hook's).
EVENTS: Final = claude_code.EVENTS
#: The most characters of a session id or agent type read from an event (as the hooks' names).
_MAX_NAME: Final = 512
#: The session of the last :meth:`RepeatedToolFailureHooks.query` that ended in this task.
_QUERY_SESSION: Final[contextvars.ContextVar[str | None]] = contextvars.ContextVar(
    "tool_failure_guard_claude_agent_sdk_query_session", default=None
)


class ProtectionStopped(_api.ProtectionStopped, ClaudeSDKError):
    """A protection stopped the run (``on_stop="error"``); also a ``ClaudeSDKError``."""


class RepeatedToolFailureHooks:
    """The guard as Claude Agent SDK hook callbacks: one object per application (or agent).

    ``mode`` is explicit or the environment's (``TOOL_FAILURE_GUARD_MODE``, default
    ``shadow``); ``telemetry`` a sink (``telemetry.build.build_telemetry``), reported
    with ``route="claude_agent_sdk"``; ``on_stop`` how :meth:`query` ends a stopped run.
    """

    def __init__(
        self,
        mode: GuardMode | str | None = None,
        *,
        telemetry: GuardTelemetry | None = None,
        on_stop: StopBehaviour = "error",
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.mode = mode_for_run(mode)
        self.on_stop = stop_behaviour(on_stop)
        self._telemetry = telemetry
        self._clock = clock
        self._sessions = Sessions(self.mode, ROUTE)
        self._failed: set[str] = set()

    # -- wiring -----------------------------------------------------------------------

    def hooks(self) -> dict[str, list[HookMatcher]]:
        """The ``hooks`` of ``ClaudeAgentOptions``: one matcher per event, every tool."""
        callback: Any = self._event  # typed for the SDK's input union; it reads a Mapping
        return {event: [HookMatcher(matcher=None, hooks=[callback])] for event in EVENTS}

    def options(self, options: ClaudeAgentOptions | None = None) -> ClaudeAgentOptions:
        """A copy of ``options`` with the guard's hooks added after any already there.

        Options that hold this guard's hooks already (``guard.query(options=guard.options(...))``)
        are not given them twice: each event would be reduced twice."""
        options = options if options is not None else ClaudeAgentOptions()
        hooks: dict[Any, list[HookMatcher]] = dict(options.hooks or {})
        for event, matchers in self.hooks().items():
            present = hooks.get(event, [])
            if not any(callback == self._event for m in present for callback in m.hooks):
                hooks[event] = [*present, *matchers]
        return dataclasses.replace(options, hooks=hooks)

    async def query(
        self, *, prompt: Any, options: ClaudeAgentOptions | None = None, **more: Any
    ) -> AsyncIterator[Any]:
        """``claude_agent_sdk.query`` with the guard; a stop raises once the stream ends.

        The outcome is this query's own: the sessions its stream's messages name
        (``session_id``), whatever other queries the same guard serves meanwhile.
        Their live state is released when the stream ends; their reports stay
        readable (``report_of(session_id)``, or ``report_of()`` in the same task).
        """
        seen: list[str] = []
        try:
            async for message in query(prompt=prompt, options=self.options(options), **more):
                session_id = session_of(message)
                if session_id is not None and session_id not in seen:
                    seen.append(session_id)
                yield message
        finally:
            reports = [(session_id, self._sessions.end(session_id)) for session_id in seen]
        if seen:
            _QUERY_SESSION.set(seen[-1])
        for _, report in reports:
            if report is not None and report.stop is not None and self.on_stop == "error":
                raise ProtectionStopped(report.stop, report)

    # -- what the guard did -------------------------------------------------------------

    def report_of(self, session_id: str | None = None) -> RunReport:
        """The report of ``session_id``'s current (or last) prompt.

        Without ``session_id``: the session of the last :meth:`query` that ended in
        the calling task, else the last session an event came from (with queries
        running concurrently, pass the id: ``ResultMessage.session_id``).
        """
        chosen = session_id or _QUERY_SESSION.get() or self._sessions.last
        report = self._sessions.report(chosen) if chosen is not None else None
        return report if report is not None else empty_report(self.mode)

    def stop_of(self, session_id: str | None = None) -> GuardStop | None:
        """The stop of ``session_id``'s current (or last) prompt (default as :meth:`report_of`)."""
        return self.report_of(session_id).stop

    @property
    def sessions(self) -> int:
        """How many sessions the guard holds live in memory (ended queries hold none)."""
        return len(self._sessions)

    # -- the callback -------------------------------------------------------------------

    async def _event(self, data: Any, tool_use_id: str | None, context: Any) -> dict[str, Any]:
        if self.mode is GuardMode.OFF:
            return {}
        try:
            return self._handle(data)
        except Exception as error:  # fail open: the run goes on as without the guard
            kind = type(error).__name__
            if kind not in self._failed:
                self._failed.add(kind)
                LOGGER.warning(
                    "tool-failure-guard: hook callback failed open (%s: %s)", kind, error
                )
            return {}

    def _handle(self, data: Mapping[str, Any]) -> dict[str, Any]:
        session_id = str(data.get("session_id") or "")[:_MAX_NAME]
        guard = self._sessions.live(session_id)
        loop_id = loop_id_of(data)
        loop = guard.loops.get(loop_id)
        before = (loop.prompt_id, len(loop.batches)) if loop is not None else None
        now = self._clock()
        guard.loops.expire(now)
        handled = handle_event(claude_code, data, guard.loops)
        guard.loops.expire(now)  # the records this event kept are stamped
        agent_type = data.get("agent_type")
        record = guard.record(
            loop_id, agent_type[:_MAX_NAME] if isinstance(agent_type, str) else "", before, now
        )
        record.settled(handled, self.mode)
        loop = guard.loops.get(loop_id)
        telemetry = self._telemetry
        if telemetry is not None and loop is not None and (handled.settled or handled.prompt_ended):
            report_handled(
                telemetry,
                route=ROUTE,
                session=loop,
                handled=handled,
                wall_time_s=max(0.0, now - record.started),
            )
        return _sdk_answer(handled.answer)


def session_of(message: Any) -> str | None:
    """The session a stream message names: its ``session_id`` (the init message: in ``data``)."""
    session_id = getattr(message, "session_id", None)
    if session_id is None and getattr(message, "subtype", None) == "init":
        data = getattr(message, "data", None)
        session_id = data.get("session_id") if isinstance(data, dict) else None
    return session_id[:_MAX_NAME] if isinstance(session_id, str) and session_id else None


def _sdk_answer(answer: Mapping[str, Any] | None) -> dict[str, Any]:
    """The command hook's answer in the SDK's spelling (``continue`` is ``continue_``)."""
    if not answer:
        return {}
    return {("continue_" if key == "continue" else key): value for key, value in answer.items()}


def report_of(guard: RepeatedToolFailureHooks, session_id: str | None = None) -> RunReport:
    """``guard.report_of(session_id)``: the same vocabulary as the other adapters."""
    return guard.report_of(session_id)


def stop_of(guard: RepeatedToolFailureHooks, session_id: str | None = None) -> GuardStop | None:
    """``guard.stop_of(session_id)``."""
    return guard.stop_of(session_id)
