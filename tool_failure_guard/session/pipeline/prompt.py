"""One top-level prompt: its guard, protections, todo stop guard and report.

The prompt's steps live in their own modules; this one strings them together::

    model turn (here) -> batch (session.batch) -> boundary (session.boundary)
    -> next model turn, or the end of the prompt

A :class:`PromptRun` is created for every ``session/prompt`` and dropped when
it returns, so the guard lives exactly as long as the prompt.  The rules are the
host-neutral core's (:class:`tool_failure_guard.core.PromptProtection`, one per
prompt); the run is the ACP host of it.  It sees the session only through
:class:`PromptSession`, and the steps see the run only through their own
protocols (:class:`~tool_failure_guard.session.pipeline.batch.BatchHost`,
:class:`~tool_failure_guard.session.pipeline.boundary.BoundaryHost`,
:class:`~tool_failure_guard.session.pipeline.outcome.ReportedPrompt`), so the imports run one way:
``loop -> prompt -> boundary -> batch``.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Sequence
from typing import Any, Protocol

import attrs
from acp import plan_entry, update_agent_message_text, update_plan
from acp.exceptions import RequestError
from acp.schema import PromptResponse

from tool_failure_guard.core import (
    Admission,
    BatchSettlement,
    CallIdDeduplicator,
    GuardStep,
    PromptProtections,
)
from tool_failure_guard.guard import DecisionKind, GuardMode, RepeatedToolFailureGuard
from tool_failure_guard.session.model.base import (
    Model,
    ModelError,
    ModelTurn,
    TodoItem,
    UsageTotals,
    request_turn,
)
from tool_failure_guard.session.persistence.messages import Message, Part
from tool_failure_guard.session.pipeline import batch, boundary, outcome
from tool_failure_guard.session.pipeline.drain import DrainResult, MidTurnInput
from tool_failure_guard.session.pipeline.outcome import PromptTally
from tool_failure_guard.session.pipeline.protection import prompt_protection
from tool_failure_guard.session.tools.executor import Cancelled, race_cancel

#: The ``_meta`` key of a prompt response naming the loop type of a stop.
LOOP_TYPE_META_KEY = "loopType"
#: The rest of a stopped prompt's ``_meta``: the fields, names and values of the
#: ``data`` Qwen Code 0.24.4 answers a stopped ``session/prompt`` with (error -32603),
#: so a host written for it recognises the stop without reading text.
LOOP_DETECTED_META = {"code": "LOOP_DETECTED", "errorKind": "loop_detected"}
#: The ``_meta`` key of the per-batch guard report (``--report-decisions``).
REPORT_META_KEY = "toolFailureGuard"
#: Automatic continuations the todo stop guard may add to one prompt.
MAX_TODO_CONTINUATIONS = 3

TODO_CONTINUATION_MESSAGE = (
    "System: your todo list still has open items. Continue with the next open item, "
    "or mark the items completed if they are done."
)


class PromptSession(batch.BatchHost, outcome.ReportingSession, Protocol):
    """What a prompt needs of its session (``session.loop.GuardedSession``)."""

    todos: tuple[TodoItem, ...]

    @property
    def model(self) -> Model: ...

    @property
    def history(self) -> Sequence[Message]: ...

    @property
    def dedup(self) -> CallIdDeduplicator: ...

    @property
    def report_decisions(self) -> bool: ...

    def record(self, message: Message) -> None: ...


_log = logging.getLogger("session.prompt")


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
    """Continues a prompt while the model's todo list has open items.

    A continuation stays inside the prompt: it keeps the prompt's guard, mode
    and candidate streak, so a failure repeated across it is still counted
    (and stopped in enforce).  A stop suspends this guard for the rest of the
    prompt.
    """

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


class PromptRun:
    """The state of one prompt and its loop of model turns and tool batches."""

    def __init__(self, session: PromptSession, prompt_id: str, mode: GuardMode) -> None:
        self.session = session
        self.prompt_id = prompt_id
        self.mode = mode
        self.initial_mode = mode  # the prompt's effective mode, for its outcome record
        self.tally = PromptTally()
        self.protection = prompt_protection(
            mode, dedup=session.dedup, tool_call_cap=session.tool_call_cap
        )
        self.todo_guard = TodoStopGuard()
        self.reports: list[BatchReport] = []
        #: Model usage summed over this prompt's model requests (the outcome record reads it).
        self.usage_totals = UsageTotals()

    @property
    def guard(self) -> RepeatedToolFailureGuard:
        return self.protection.guard

    @property
    def protections(self) -> PromptProtections:
        return self.protection.protections

    @property
    def drain(self) -> MidTurnInput:
        return self.session.drain

    @property
    def cancel_event(self) -> asyncio.Event:
        return self.session.cancel_event

    @property
    def drain_supported(self) -> bool:
        """False when this prompt ran against a host without a working drain contract.

        See :attr:`session.drain.MidTurnInput.drain_supported`: such a prompt's
        boundaries are all unreliable, so rollout analysis keeps it apart from
        supported hosts (``drainSupported`` in the ``--report-decisions`` meta).
        """
        return self.session.drain.drain_supported

    def _meta(self, loop_type: str | None = None) -> dict[str, Any] | None:
        meta: dict[str, Any] = {}
        if loop_type is not None:
            meta.update(LOOP_DETECTED_META)
            meta[LOOP_TYPE_META_KEY] = loop_type
        if self.session.report_decisions:
            meta[REPORT_META_KEY] = {
                "promptId": self.prompt_id,
                "mode": self.mode.value,
                "drainSupported": self.drain_supported,
                "batches": [report.to_json() for report in self.reports],
                "usage": self.usage_totals.to_json(),
            }
        return meta or None

    def end(self, stop_reason: str, loop_type: str | None = None) -> PromptResponse:
        return PromptResponse(stop_reason=stop_reason, field_meta=self._meta(loop_type))  # type: ignore[arg-type]

    def results_message(self, parts: Sequence[Part]) -> Message:
        return Message(
            role="user", kind="tool_results", prompt_id=self.prompt_id, parts=tuple(parts)
        )

    # -- what the boundary step needs (session.boundary.BoundaryHost) ---------------

    def record_results(self, parts: Sequence[Part]) -> None:
        self.session.record(self.results_message(parts))

    async def emit(self, update: Any) -> None:
        await self.session.emit(update)

    def suspend_continuations(self) -> None:
        self.todo_guard.suspend()

    def batch_settled(self, settled: BatchSettlement) -> None:
        outcome.report_calls(self.session, self.prompt_id, self.tally, settled)

    def loop_detected(self, loop_type: str) -> None:
        s = self.session
        s.report(
            "loop_detected",
            lambda: s.telemetry.loop_detected(prompt_id=self.prompt_id, loop_type=loop_type),
        )

    def guard_reduced(self, step: GuardStep, drained: DrainResult) -> None:
        """Report one guard reduction: the ``--report-decisions`` row and the telemetry."""
        s = self.session
        decision = step.decision
        self.reports.append(
            BatchReport(
                batch=len(self.reports) + 1,
                mode=self.mode.value,
                decision=decision.kind.value,
                reason=decision.reason.value if decision.reason is not None else None,
                phase_before=decision.phase_before.value,
                phase_after=decision.phase_after.value,
                failure_count=step.failure_count,
                batch_count=step.batch_count,
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
                    failure_count_before=step.failure_count_before,
                    batch_count_before=step.batch_count_before,
                    receipt=step.receipt,
                    batch_ordinal=step.batch_ordinal,
                ),
            )

    async def loop(self) -> PromptResponse:
        s = self.session
        while True:
            if s.cancel_event.is_set():
                return self.end("cancelled")
            shown: list[str] = []
            request = request_turn(
                s.model,
                tuple(s.history),
                tools=s.executor.tools(),
                on_text=functools.partial(self._show, shown),
            )
            try:
                turn = await race_cancel(request, s.cancel_event)
            except Cancelled:
                self._keep_shown(shown)
                return self.end("cancelled")
            except ModelError as exc:
                self._keep_shown(shown)
                raise RequestError.internal_error(
                    {"details": f"model request failed: {exc}"}
                ) from exc
            self.usage_totals = self.usage_totals.add(turn.usage)
            if s.cancel_event.is_set():
                return self.end("cancelled")
            self.tally.turn(turn)
            admission = self.protection.admit(turn.calls)
            for call_id in sorted(admission.reused_ids):
                _log.info(
                    "call id %r was answered before for another call: a new call", call_id[:80]
                )
            await self._record_turn(turn, admission, "".join(shown))
            if not admission.calls:
                if self.todo_guard.should_continue(s.todos):
                    # An automatic continuation is part of this prompt: same guard, same
                    # mode, same streak (only separate automatic routes run with off).
                    s.record(
                        Message(
                            role="user",
                            kind="continuation",
                            prompt_id=self.prompt_id,
                            parts=(Part(kind="system", text=TODO_CONTINUATION_MESSAGE),),
                        )
                    )
                    continue
                return self.end("end_turn")
            settled = self.protection.open_batch(admission)
            await batch.run_batch(s, settled)
            response = await boundary.after_batch(self, settled, turn)
            if response is not None:
                return response

    def _keep_shown(self, shown: list[str]) -> None:
        """A turn that ended early still persists the text the client was shown.

        So ``session/load`` replays what the user saw, and the next request
        tells the model what it had already said.
        """
        if shown:
            text = "".join(shown)
            self.session.record(
                Message(
                    role="model",
                    kind="model",
                    prompt_id=self.prompt_id,
                    parts=(Part(kind="text", text=text),),
                )
            )

    async def _show(self, shown: list[str], delta: str) -> None:
        """A streamed text delta: shown to the client as it arrives, remembered as shown."""
        if delta:
            shown.append(delta)
            await self.session.emit(update_agent_message_text(delta))

    async def _record_turn(self, turn: ModelTurn, admission: Admission, shown: str = "") -> None:
        """Persist the turn, then show what streaming did not already show."""
        s = self.session
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
        s.record(Message(role="model", kind="model", prompt_id=self.prompt_id, parts=tuple(parts)))
        unshown = turn.text[len(shown) :] if turn.text.startswith(shown) else ""
        if unshown:
            await s.emit(update_agent_message_text(unshown))
        if turn.todos is not None:
            s.todos = turn.todos
            await s.emit(
                update_plan(
                    [
                        plan_entry(item.content, status=item.status)  # type: ignore[arg-type]
                        for item in turn.todos
                    ]
                )
            )
