"""One guarded ACP session and its prompt loop.

Each ``session/prompt`` runs::

    model turn -> function calls -> de-duplicate -> run the admitted calls
    concurrently -> (all settled) receipt -> protections 1-2 -> drain mid-turn
    input -> guard -> protection 4 -> next model message, or end the prompt

with a fresh :class:`guard.RepeatedToolFailureGuard` per prompt whose mode was
resolved once, when the session was created (``off`` for channel prompts and
automatic-continuation turns).  Every message is persisted before the session
acts on it (:mod:`session.history`).  Decisions are acted on exactly as the
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
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import attrs
from acp import (
    plan_entry,
    start_tool_call,
    text_block,
    tool_content,
    update_agent_message_text,
    update_plan,
    update_tool_call,
    update_user_message_text,
)
from acp.exceptions import RequestError
from acp.schema import (
    AllowedOutcome,
    PermissionOption,
    PromptResponse,
    RequestPermissionResponse,
    ToolCallUpdate,
)

from guard import (
    REPEATED_TOOL_FAILURE_REMINDER,
    REPEATED_TOOL_FAILURE_STOP_MESSAGE,
    DecisionKind,
    GuardMode,
    RepeatedToolFailureGuard,
)
from session.drain import QUEUED_INPUT_PREFIX, DrainResult, MidTurnInput
from session.executor import (
    CallOutcome,
    Cancelled,
    Executor,
    FunctionCall,
    PermissionAnswer,
    race_cancel,
)
from session.history import HistoryStore, HistoryWriteError, Message, Part, answered_call_ids
from session.model import Model, ModelError, ModelTurn, TodoItem
from session.protections import (
    LOOP_INVALID_TOOL_PARAMS,
    LOOP_PROVIDER_DUPLICATE,
    LOOP_REPEATED_TOOL_FAILURE,
    LOOP_TOOL_CALL_CAP,
    Admission,
    CallIdDeduplicator,
    PromptProtections,
)
from session.receipts import ReceiptBuilder
from session.telemetry import GuardTelemetry
from session.tools import Tool

_log = logging.getLogger("session.loop")

#: The ``_meta`` key a channel bridge sets on its prompts (a routing hint, not a credential).
CHANNEL_PROMPT_META_KEY = "qwen.channel.prompt"
#: The ``_meta`` key of a prompt response naming the loop type of a stop.
LOOP_TYPE_META_KEY = "loopType"
#: The ``_meta`` key of the per-batch guard report (``--report-decisions``).
REPORT_META_KEY = "toolFailureGuard"
#: Automatic continuations the todo stop guard may add to one prompt.
MAX_TODO_CONTINUATIONS = 3

TODO_CONTINUATION_MESSAGE = (
    "System: your todo list still has open items. Continue with the next open item, "
    "or mark the items completed if they are done."
)

#: What the user sees when a protection other than this guard stops a prompt.
STOP_NOTICES = {
    LOOP_REPEATED_TOOL_FAILURE: REPEATED_TOOL_FAILURE_STOP_MESSAGE,
    LOOP_PROVIDER_DUPLICATE: (
        "System: Automatic continuation stopped because the model kept replaying tool calls "
        "that were already answered. New user input is required to continue."
    ),
    LOOP_INVALID_TOOL_PARAMS: (
        "System: Automatic continuation stopped because the model kept calling a tool with "
        "invalid parameters. New user input is required to continue."
    ),
    LOOP_TOOL_CALL_CAP: (
        "System: Automatic continuation stopped because this prompt reached its tool-call "
        "limit. New user input is required to continue."
    ),
}

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


@attrs.frozen(kw_only=True)
class BatchReport:
    """One row of the ``--report-decisions`` table: no tool names, keys or text."""

    batch: int
    mode: str
    decision: str
    reason: str | None
    phase_before: str
    phase_after: str
    failure_count: int
    batch_count: int
    reliable_input: bool

    def to_json(self) -> dict[str, Any]:
        return {
            "batch": self.batch,
            "mode": self.mode,
            "decision": self.decision,
            "reason": self.reason,
            "phaseBefore": self.phase_before,
            "phaseAfter": self.phase_after,
            "failureCount": self.failure_count,
            "batchCount": self.batch_count,
            "reliableInput": self.reliable_input,
        }


class TodoStopGuard:
    """Continues a prompt (with mode off) while the model's todo list has open items."""

    def __init__(self, limit: int = MAX_TODO_CONTINUATIONS) -> None:
        self._limit = limit
        self._used = 0
        self._suspended = False

    def suspend(self) -> None:
        self._suspended = True

    @property
    def suspended(self) -> bool:
        return self._suspended

    def should_continue(self, todos: Sequence[TodoItem]) -> bool:
        if self._suspended or self._used >= self._limit:
            return False
        if not any(item.open for item in todos):
            return False
        self._used += 1
        return True


def _settle(
    builder: ReceiptBuilder, ordinal: int, outcome: CallOutcome, *, provider_duplicate: bool = False
) -> None:
    """Queue the terminal record of ``outcome``: only the narrow receipt fields cross over."""
    builder.settle(
        ordinal=ordinal,
        call_id=outcome.call_id,
        policy_tool_name=outcome.policy_tool_name,
        tool_type=outcome.tool_type,
        terminal_status=outcome.terminal_status,
        execution_status=outcome.execution_status,
        execution_error_type=outcome.execution_error_type,
        provider_duplicate=provider_duplicate,
    )


def _response_part(outcome: CallOutcome, duplicate: bool = False) -> Part:
    return Part(
        kind="function_response",
        call_id=outcome.call_id,
        name=outcome.name,
        status=outcome.terminal_status,
        error_type=outcome.error_type,
        text=outcome.output,
        duplicate=duplicate,
    )


def _tool_status(outcome: CallOutcome) -> str:
    return "completed" if outcome.terminal_status == "success" else "failed"


def replay_updates(messages: Sequence[Message]) -> list[Any]:
    """The ACP updates that replay ``messages`` to a client (``session/load``)."""
    updates: list[Any] = []
    for message in messages:
        for part in message.parts:
            if part.duplicate:
                continue
            if part.kind == "text":
                if message.role == "user":
                    updates.append(update_user_message_text(part.text))
                elif part.text:
                    updates.append(update_agent_message_text(part.text))
            elif part.kind == "queued_input":
                updates.append(update_user_message_text(part.text))
            elif part.kind == "function_call":
                updates.append(
                    start_tool_call(
                        part.call_id,
                        part.title or part.name,
                        kind=part.tool_kind or "other",  # type: ignore[arg-type]
                        status="pending",
                        raw_input=dict(part.args),
                    )
                )
            elif part.kind == "function_response":
                updates.append(
                    update_tool_call(
                        part.call_id,
                        status="completed" if part.status == "success" else "failed",
                        content=[tool_content(text_block(part.text))],
                        raw_output={"terminalStatus": part.status, "errorType": part.error_type},
                    )
                )
            elif part.kind == "notice":
                updates.append(update_agent_message_text(part.text))
    return updates


class GuardedSession:
    """One ACP session: its history, its mode, and its prompt loop."""

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
        self.dedup = CallIdDeduplicator(answered_call_ids(self.history))
        self.todos: tuple[TodoItem, ...] = ()
        self.executor = executor_factory(self)
        self._running = False
        self._cancelled = asyncio.Event()
        self._sink_failures: set[str] = set()

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

    async def _emit(self, update: Any) -> None:
        await self.client.session_update(self.session_id, update)

    def _record(self, message: Message) -> None:
        """Persist, then remember: a write failure is an internal error, never hidden."""
        try:
            self.store.append(self.session_id, message)
        except HistoryWriteError as exc:
            _log.error("history write failed: %s", exc)
            raise RequestError.internal_error(
                {"details": "the session history could not be persisted"}
            ) from exc
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
        self._cancelled = asyncio.Event()
        try:
            return await self._run_prompt(texts, channel=channel)
        finally:
            self._running = False

    async def _run_prompt(self, texts: list[str], *, channel: bool) -> PromptResponse:
        number = sum(1 for m in self.history if m.kind == "prompt")
        # Qwen Code's prompt id shape, `<session id>########<prompt number>`: the same id
        # the tool-call telemetry carries, so guard diagnostics join it without a second id.
        prompt_id = f"{self.session_id}########{number}"
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
        run = _PromptRun(self, prompt_id, mode)
        return await run.loop()


class _PromptRun:
    """The state of one prompt: its guard, protections, todo stop guard and report."""

    def __init__(self, session: GuardedSession, prompt_id: str, mode: GuardMode) -> None:
        self.s = session
        self.prompt_id = prompt_id
        self.mode = mode
        self.guard = RepeatedToolFailureGuard(mode)
        self.protections = PromptProtections(session.dedup, session.options.tool_call_cap)
        self.todo_guard = TodoStopGuard()
        self.reports: list[BatchReport] = []

    def _meta(self, loop_type: str | None = None) -> dict[str, Any] | None:
        meta: dict[str, Any] = {}
        if loop_type is not None:
            meta[LOOP_TYPE_META_KEY] = loop_type
        if self.s.options.report_decisions:
            meta[REPORT_META_KEY] = {
                "promptId": self.prompt_id,
                "mode": self.mode.value,
                "batches": [report.to_json() for report in self.reports],
            }
        return meta or None

    def _end(self, stop_reason: str, loop_type: str | None = None) -> PromptResponse:
        return PromptResponse(stop_reason=stop_reason, field_meta=self._meta(loop_type))  # type: ignore[arg-type]

    async def loop(self) -> PromptResponse:
        s = self.s
        while True:
            if s._cancelled.is_set():
                return self._end("cancelled")
            try:
                turn = await race_cancel(s.model.generate(tuple(s.history)), s._cancelled)
            except Cancelled:
                return self._end("cancelled")
            except ModelError as exc:
                raise RequestError.internal_error(
                    {"details": f"model request failed: {exc}"}
                ) from exc
            if s._cancelled.is_set():
                return self._end("cancelled")
            admission = self.protections.admit(turn.calls)
            await self._record_turn(turn, admission)
            if not admission.calls:
                if self.todo_guard.should_continue(s.todos):
                    # An automatic continuation turn: it runs with the guard off.
                    self.mode = GuardMode.OFF
                    self.guard = RepeatedToolFailureGuard(GuardMode.OFF)
                    s._record(
                        Message(
                            role="user",
                            kind="continuation",
                            prompt_id=self.prompt_id,
                            parts=(Part(kind="system", text=TODO_CONTINUATION_MESSAGE),),
                        )
                    )
                    continue
                return self._end("end_turn")
            outcomes, builder = await self._run_batch(admission)
            response = await self._after_batch(admission, outcomes, builder, turn)
            if response is not None:
                return response

    async def _record_turn(self, turn: ModelTurn, admission: Admission) -> None:
        s = self.s
        parts: list[Part] = []
        if turn.text:
            parts.append(Part(kind="text", text=turn.text))
        for call in admission.calls:
            tool = s.executor.resolve(call.name)
            parts.append(
                Part(
                    kind="function_call",
                    call_id=call.call_id,
                    name=call.name,
                    title=tool.title(call.args) if tool is not None else call.name,
                    tool_kind=tool.kind if tool is not None else "other",
                    args=dict(call.args),
                    duplicate=call.call_id in admission.provider_duplicates,
                )
            )
        s._record(Message(role="model", kind="model", prompt_id=self.prompt_id, parts=tuple(parts)))
        if turn.text:
            await s._emit(update_agent_message_text(turn.text))
        if turn.todos is not None:
            s.todos = turn.todos
            await s._emit(
                update_plan(
                    [
                        plan_entry(item.content, status=item.status)  # type: ignore[arg-type]
                        for item in turn.todos
                    ]
                )
            )

    async def _run_batch(
        self, admission: Admission
    ) -> tuple[list[CallOutcome | None], ReceiptBuilder]:
        """Run every admitted call concurrently; return outcomes in the model's order."""
        s = self.s
        builder = ReceiptBuilder(len(admission.calls))
        for call in admission.executable:
            tool = s.executor.resolve(call.name)
            await s._emit(
                start_tool_call(
                    call.call_id,
                    tool.title(call.args) if tool is not None else call.name,
                    kind=tool.kind if tool is not None else "other",
                    status="pending",
                    raw_input=dict(call.args),
                )
            )

        async def run_one(ordinal: int, call: FunctionCall) -> CallOutcome:
            if call.call_id in admission.provider_duplicates:
                tool = s.executor.resolve(call.name)
                outcome = CallOutcome(
                    call_id=call.call_id,
                    name=call.name,
                    policy_tool_name=tool.name if tool is not None else None,
                    tool_type=tool.tool_type if tool is not None else None,
                    terminal_status="error",
                    execution_status="not_started",
                    execution_error_type=None,
                    error_type="duplicate_call_id",
                    output="this call id was already answered; it was not executed again",
                )
                _settle(builder, ordinal, outcome, provider_duplicate=True)
                return outcome
            await s._emit(update_tool_call(call.call_id, status="in_progress"))
            outcome = await s.executor.execute(call, s._cancelled)
            _settle(builder, ordinal, outcome)
            s.report(
                "tool_call_settled",
                lambda: s.telemetry.tool_call_settled(
                    terminal_status=outcome.terminal_status,
                    execution_status=outcome.execution_status,
                    tool_type=outcome.tool_type,
                ),
            )
            await s._emit(
                update_tool_call(
                    call.call_id,
                    status=_tool_status(outcome),  # type: ignore[arg-type]
                    content=[tool_content(text_block(outcome.output))],
                    raw_output={
                        "terminalStatus": outcome.terminal_status,
                        "errorType": outcome.error_type,
                    },
                )
            )
            return outcome

        results = await asyncio.gather(
            *(run_one(ordinal, call) for ordinal, call in enumerate(admission.calls)),
            return_exceptions=True,
        )
        outcomes: list[CallOutcome | None] = []
        for call, result in zip(admission.calls, results, strict=True):
            if isinstance(result, BaseException):
                # No record for this call: the receipt cannot be proven complete.
                _log.error("call %s did not settle cleanly: %r", call.call_id, result)
                outcomes.append(None)
            else:
                outcomes.append(result)
        return outcomes, builder

    def _responses(
        self, admission: Admission, outcomes: Sequence[CallOutcome | None]
    ) -> list[Part]:
        parts = []
        for call, outcome in zip(admission.calls, outcomes, strict=True):
            if outcome is None:
                parts.append(
                    Part(
                        kind="function_response",
                        call_id=call.call_id,
                        name=call.name,
                        status="error",
                        error_type="internal_error",
                        text="the call did not settle",
                    )
                )
            else:
                parts.append(_response_part(outcome, call.call_id in admission.provider_duplicates))
        return parts

    async def _after_batch(
        self,
        admission: Admission,
        outcomes: list[CallOutcome | None],
        builder: ReceiptBuilder,
        turn: ModelTurn,
    ) -> PromptResponse | None:
        s = self.s
        receipt = builder.build()
        responses = self._responses(admission, outcomes)
        if s._cancelled.is_set():
            # A cancelled prompt keeps its settled results and skips the guard.
            s._record(self._results_message(responses))
            return self._end("cancelled")
        settled = [o for o in outcomes if o is not None]
        loop_type = self.protections.before_guard(admission, settled)
        if loop_type is not None:
            return await self._stop(loop_type, responses)

        drained = await s.drain.drain(watch_queued_prompt=self.mode is not GuardMode.OFF)
        if s._cancelled.is_set():
            # Cancellation arrived while the host answered the drain: it still wins over
            # any guard decision, and what was drained goes back to the queue.
            if drained.messages:
                s.drain.requeue(drained.messages)
            s._record(self._results_message(responses))
            return self._end("cancelled")
        # The queued-prompt answer feeds the guard's boundary only: acting on it here would
        # make shadow (which asks for it) continue differently from off (which does not).
        failure_count_before = self.guard.failure_count
        batch_count_before = self.guard.batch_count
        decision = self.guard.observe(receipt, drained.boundary())
        self.reports.append(
            BatchReport(
                batch=len(self.reports) + 1,
                mode=self.mode.value,
                decision=decision.kind.value,
                reason=decision.reason.value if decision.reason is not None else None,
                phase_before=decision.phase_before.value,
                phase_after=decision.phase_after.value,
                failure_count=self.guard.failure_count,
                batch_count=self.guard.batch_count,
                reliable_input=drained.reliable,
            )
        )
        if decision.kind is not DecisionKind.NONE:
            guard = self.guard
            s.report(
                "guard_decision",
                lambda: s.telemetry.guard_decision(
                    prompt_id=self.prompt_id,
                    mode=self.mode,
                    decision=decision,
                    guard=guard,
                    failure_count_before=failure_count_before,
                    batch_count_before=batch_count_before,
                    receipt=receipt,
                ),
            )
        if decision.kind is DecisionKind.STOP:
            return await self._stop(LOOP_REPEATED_TOOL_FAILURE, responses, drained)
        loop_type = self.protections.after_guard(len(admission.executable))
        if loop_type is not None:
            return await self._stop(loop_type, responses, drained)

        parts = list(responses)
        if turn.todos is not None and any(item.open for item in turn.todos):
            parts.append(Part(kind="system", text=_todo_reminder(turn.todos)))
        if decision.kind is DecisionKind.WARN:
            parts.append(Part(kind="system", text=REPEATED_TOOL_FAILURE_REMINDER))
        parts.extend(
            Part(kind="queued_input", text=QUEUED_INPUT_PREFIX + text) for text in drained.messages
        )
        s._record(self._results_message(parts))
        for text in drained.messages:
            await s._emit(update_user_message_text(QUEUED_INPUT_PREFIX + text))
        return None

    def _results_message(self, parts: Sequence[Part]) -> Message:
        return Message(
            role="user", kind="tool_results", prompt_id=self.prompt_id, parts=tuple(parts)
        )

    async def _stop(
        self, loop_type: str, responses: list[Part], drained: DrainResult | None = None
    ) -> PromptResponse:
        s = self.s
        self.todo_guard.suspend()
        if drained is not None and drained.messages:
            s.drain.requeue(drained.messages)  # queued input stays queued
        notice = STOP_NOTICES[loop_type]
        # Persist first: a stop that was not recorded is never reported.
        s._record(self._results_message([*responses, Part(kind="notice", text=notice)]))
        if self.protections.latch.record(loop_type):
            s.report(
                "loop_detected",
                lambda: s.telemetry.loop_detected(prompt_id=self.prompt_id, loop_type=loop_type),
            )
        await s._emit(update_agent_message_text(notice))
        stop_reason = "max_turn_requests" if loop_type == LOOP_TOOL_CALL_CAP else "end_turn"
        return self._end(stop_reason, loop_type)


def _todo_reminder(todos: Sequence[TodoItem]) -> str:
    open_items = [item.content for item in todos if item.open]
    return "System: todo list has open items: " + "; ".join(open_items)
