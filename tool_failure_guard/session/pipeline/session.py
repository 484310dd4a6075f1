"""One guarded ACP session: its history, its mode, its client, and its prompts.

A :class:`GuardedSession` owns what outlives a prompt (history, call-id
de-duplication, the input boundary, the todo list) and the IO helpers every
step uses.  Each ``session/prompt`` runs as a
:class:`~tool_failure_guard.session.pipeline.prompt.PromptRun`
whose steps live in their own modules::

    session.prompt    model turn -> function calls -> de-duplicate
    session.batch     run the admitted calls concurrently until all settle
    session.boundary  receipt -> protections 1-2 -> drain mid-turn input
                      -> guard -> protection 4 -> next model message, or stop
    session.replay    what ``session/load`` sends back to the client

The rules (the protections, the guard, what each decision means) are the
host-neutral core's, :class:`tool_failure_guard.core.PromptProtection`: a fresh
one is created per prompt with the mode resolved once, when the session was
created (``off`` for channel prompts).  Every message is persisted before the session acts on it
(:mod:`~tool_failure_guard.session.persistence.history`).  Decisions are acted on exactly as the
specification says:

* ``warn``: the next model message is [function responses, todo reminder if
  any, REMINDER, mid-turn input] -- once per candidate streak (the guard
  guarantees the once);
* ``stop`` (enforce only): suspend the todo stop guard; append the function
  responses plus the stop message to history (a write failure answers an
  internal error); emit the stop message once as an agent message; end the
  prompt with ``end_turn`` and ``_meta.loopType``; open no further model stream;
* every other decision is telemetry only, so a shadow run produces the same
  transcript as an ``off`` run.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import attrs
from acp.exceptions import RequestError
from acp.schema import (
    AllowedOutcome,
    PermissionOption,
    PromptResponse,
    RequestPermissionResponse,
    ToolCallUpdate,
)

from tool_failure_guard.core.protections import CallIdDeduplicator, call_fingerprint
from tool_failure_guard.guard import GuardMode
from tool_failure_guard.session.model.base import Model, TodoItem
from tool_failure_guard.session.persistence.assembly import assemble, function_calls, open_calls
from tool_failure_guard.session.persistence.history import HistoryStore, HistoryWriteError
from tool_failure_guard.session.persistence.messages import Message, Part, SettledCall
from tool_failure_guard.session.persistence.pending import PendingInputLog
from tool_failure_guard.session.pipeline import outcome
from tool_failure_guard.session.pipeline.drain import QUEUED_INPUT_PREFIX, MidTurnInput
from tool_failure_guard.session.pipeline.prompt import PromptRun
from tool_failure_guard.session.tools.builtin import Tool
from tool_failure_guard.session.tools.executor import Executor, FunctionCall, PermissionAnswer
from tool_failure_guard.telemetry.sink import GuardTelemetry, OutcomeTelemetry

_log = logging.getLogger("session.loop")

#: The ``_meta`` key a channel bridge sets on its prompts (a routing hint, not a credential).
CHANNEL_PROMPT_META_KEY = "qwen.channel.prompt"

_PERMISSION_OPTIONS = [
    PermissionOption(option_id="allow", name="Allow", kind="allow_once"),
    PermissionOption(option_id="reject", name="Reject", kind="reject_once"),
]


class ClientPort(Protocol):
    """The part of ``acp.AgentSideConnection`` a session uses."""

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None: ...

    async def request_permission(
        self,
        session_id: str,
        tool_call: ToolCallUpdate,
        options: list[PermissionOption],
        **kwargs: Any,
    ) -> RequestPermissionResponse: ...

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]: ...


@attrs.frozen(kw_only=True)
class SessionOptions:
    tool_call_cap: int = 100
    report_decisions: bool = False


class GuardedSession:
    """One ACP session: its history, its mode, and its prompt loop."""

    #: Measures prompt wall time (seconds); a simulated fleet replaces it per session.
    clock: Callable[[], float] = staticmethod(time.monotonic)

    def __init__(
        self,
        *,
        session_id: str,
        client: ClientPort,
        model: Model,
        executor_factory: Callable[[GuardedSession], Executor],
        store: HistoryStore,
        telemetry: GuardTelemetry,
        mode: GuardMode,
        drain: MidTurnInput,
        options: SessionOptions,
        history: Sequence[Message] = (),
        pending: PendingInputLog | None = None,
    ) -> None:
        self.session_id = session_id
        self.client = client
        self.model = model
        self.store = store
        self.telemetry = telemetry
        self.mode = mode
        self.drain = drain
        self.options = options
        self.history: list[Message] = list(history)
        answered, still_open = function_calls(self.history)
        self.dedup = CallIdDeduplicator(
            [(i, call_fingerprint(name, args)) for i, name, args in answered],
            open_calls=[(i, call_fingerprint(name, args)) for i, name, args in still_open],
        )
        self.todos: tuple[TodoItem, ...] = ()
        self.executor = executor_factory(self)
        self.pending = pending
        self._prompt_id = ""
        self._settled: list[SettledCall] = []  #: persisted outcomes of the open batch
        self._running = False
        self._idle = asyncio.Event()
        self._idle.set()
        self._cancelled = asyncio.Event()
        self._sink_failures: set[str] = set()

    @property
    def cancel_event(self) -> asyncio.Event:
        """Set by ``session/cancel`` while the current prompt runs."""
        return self._cancelled

    @property
    def tool_call_cap(self) -> int:
        return self.options.tool_call_cap

    @property
    def report_decisions(self) -> bool:
        return self.options.report_decisions

    @property
    def running(self) -> bool:
        return self._running

    def cancel(self) -> None:
        if self._running:
            self._cancelled.set()

    # -- IO helpers -------------------------------------------------------------

    def report(self, label: str, call: Callable[[], object]) -> None:
        """Run one telemetry sink call; a failing sink never changes control flow.

        The first failure at each call site is logged with its traceback, later
        ones at debug level only, so a dead exporter cannot flood stderr.
        """
        try:
            call()
        except Exception:
            if label in self._sink_failures:
                _log.debug("telemetry sink failed again in %s", label, exc_info=True)
            else:
                self._sink_failures.add(label)
                _log.warning("telemetry sink failed in %s", label, exc_info=True)

    def report_closed(self, reason: str) -> None:
        """Report this session's end (``clean`` or ``disconnect``) to an outcome sink."""
        sink = self.telemetry
        if isinstance(sink, OutcomeTelemetry):
            prompts = sum(1 for m in self.history if m.kind == "prompt")
            self.report(
                "session_closed",
                lambda: sink.session_closed(
                    session_id=self.session_id, reason=reason, prompts=prompts
                ),
            )

    async def _emit(self, update: Any) -> None:
        await self.client.session_update(self.session_id, update)

    async def emit(self, update: Any) -> None:
        """Send one ``session/update`` to the client."""
        await self._emit(update)

    def record(self, message: Message) -> None:
        """Persist, then remember (see :meth:`_record`)."""
        self._record(message)

    async def wait_idle(self) -> None:
        """Return once no prompt is running."""
        await self._idle.wait()

    def record_settled(self, part: Part) -> None:
        """Persist one call's outcome the moment it settled (before the client is told).

        A write failure is logged, not raised: the outcome still reaches the
        batch's ``tool_results`` message, whose write failure is the prompt's error.
        """
        settled = SettledCall(prompt_id=self._prompt_id, part=part)
        self._settled.append(settled)
        try:
            self.store.append_settled(self.session_id, settled)
        except HistoryWriteError as exc:
            _log.error("history write failed for a settled call: %s", exc)

    def _record(self, message: Message) -> None:
        """Persist, then remember: a write failure is an internal error, never hidden."""
        snapshot = self.pending.snapshot_for_message() if self.pending is not None else None
        try:
            self.store.append(self.session_id, message, pending_input=snapshot)
        except HistoryWriteError as exc:
            _log.error("history write failed: %s", exc)
            raise RequestError.internal_error(
                {"details": "the session history could not be persisted"}
            ) from exc
        if self.pending is not None:
            self.pending.message_persisted()
        if message.kind == "tool_results":
            self._settled = []
        self.history.append(message)
        self.dedup.mark_answered(
            part.call_id for part in message.parts if part.kind == "function_response"
        )

    async def ask_permission(self, call: FunctionCall, tool: Tool, args: Any) -> PermissionAnswer:
        try:
            response = await self.client.request_permission(
                self.session_id,
                ToolCallUpdate(
                    tool_call_id=call.call_id,
                    title=tool.title(args),
                    kind=tool.kind,
                    status="pending",
                    raw_input=dict(args),
                ),
                list(_PERMISSION_OPTIONS),
            )
        except Exception as exc:
            _log.warning("permission request failed: %s", exc)
            return PermissionAnswer.FAILED
        outcome = response.outcome
        if isinstance(outcome, AllowedOutcome):
            return (
                PermissionAnswer.ALLOWED
                if outcome.option_id == "allow"
                else PermissionAnswer.REJECTED
            )
        return PermissionAnswer.CANCELLED

    # -- the prompt loop ------------------------------------------------------------

    async def run_prompt(self, texts: list[str], *, channel: bool) -> PromptResponse:
        if self._running:
            raise RequestError.invalid_request(
                {"details": "a prompt is already running in this session"}
            )
        self._running = True
        self._idle.clear()
        self._cancelled = asyncio.Event()
        try:
            return await self._run_prompt(texts, channel=channel)
        finally:
            self._running = False
            self._idle.set()

    def _close_open_calls(self) -> None:
        """An earlier prompt failed mid-batch: answer its calls before the next prompt.

        The answers are what
        :func:`~tool_failure_guard.session.persistence.assembly.assemble` gives on load (the
        persisted outcome, else ``interrupted``), so memory and disk agree.
        """
        if not open_calls(self.history):
            return
        assembled, _ = assemble([*self.history, *self._settled])
        self._record(assembled[-1])

    async def _run_prompt(self, texts: list[str], *, channel: bool) -> PromptResponse:
        number = sum(1 for m in self.history if m.kind == "prompt")
        # Qwen Code's prompt id shape, `<session id>########<prompt number>`: the same id
        # the tool-call telemetry carries, so guard diagnostics join it without a second id.
        prompt_id = f"{self.session_id}########{number}"
        self._close_open_calls()
        self._prompt_id = prompt_id
        mode = GuardMode.OFF if channel else self.mode
        leftover = self.drain.take_pushed()
        self._record(
            Message(
                role="user",
                kind="prompt",
                prompt_id=prompt_id,
                parts=(
                    *(Part(kind="text", text=text) for text in texts),
                    *(Part(kind="queued_input", text=QUEUED_INPUT_PREFIX + t) for t in leftover),
                ),
            )
        )
        self.drain.start_prompt()
        run = PromptRun(self, prompt_id, mode)
        return await outcome.run_reported(self, run, channel=channel)
