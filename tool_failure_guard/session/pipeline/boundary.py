"""After a batch has settled: the core's decision, the input boundary, the next message.

The rules live in the host-neutral core
(:class:`tool_failure_guard.core.PromptProtection`); this step does the ACP
session's IO around them, in the specification's order:

1. a cancelled prompt keeps its settled results and skips the guard;
2. protections 1-2 (provider duplicates, invalid parameters) may stop first;
3. the mid-turn drain (the input boundary);
4. the guard reduces the receipt with that boundary; ``stop`` ends the prompt;
5. protection 4 (the tool-call cap);
6. otherwise the next model message: [function responses, todo reminder,
   the core's system texts (the REMINDER on ``warn``), mid-turn input].

A stop suspends the todo stop guard, persists the responses and the fixed stop
notice ("System: ...", model-facing) before anything is reported, emits it once
as an agent message without the ``System: `` prefix (what a person reads), and
opens no further model stream.  The step sees its prompt only through :class:`BoundaryHost`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, Protocol

from acp import update_agent_message_text, update_user_message_text
from acp.schema import PromptResponse

from tool_failure_guard.core import (
    LOOP_TOOL_CALL_CAP,
    STOP_NOTICES,
    BatchSettlement,
    GuardStep,
    PromptCancelled,
    PromptProtection,
    Stop,
)
from tool_failure_guard.guard import GuardMode
from tool_failure_guard.session.model.base import ModelTurn, TodoItem
from tool_failure_guard.session.persistence.messages import Part
from tool_failure_guard.session.pipeline import batch
from tool_failure_guard.session.pipeline.drain import QUEUED_INPUT_PREFIX, DrainResult, MidTurnInput

__all__ = ["STOP_NOTICES", "BoundaryHost", "after_batch", "stop", "todo_reminder"]


class BoundaryHost(Protocol):
    """What the boundary step needs of its prompt (``session.prompt.PromptRun``)."""

    @property
    def protection(self) -> PromptProtection: ...

    @property
    def mode(self) -> GuardMode: ...

    @property
    def drain(self) -> MidTurnInput: ...

    @property
    def cancel_event(self) -> asyncio.Event: ...

    def batch_settled(self, settled: BatchSettlement) -> None:
        """Count the batch and report its per-call records."""

    def guard_reduced(self, step: GuardStep, drained: DrainResult) -> None:
        """Report one guard reduction (the decision table row and the telemetry)."""

    def loop_detected(self, loop_type: str) -> None: ...

    def suspend_continuations(self) -> None: ...

    def record_results(self, parts: Sequence[Part]) -> None: ...

    async def emit(self, update: Any) -> None: ...

    def end(self, stop_reason: str, loop_type: str | None = None) -> PromptResponse: ...


def todo_reminder(todos: Sequence[TodoItem]) -> str:
    open_items = [item.content for item in todos if item.open]
    return "System: todo list has open items: " + "; ".join(open_items)


async def after_batch(
    host: BoundaryHost, settled: BatchSettlement, turn: ModelTurn
) -> PromptResponse | None:
    """Act on one settled batch; a response ends the prompt, None continues it."""
    protection = host.protection
    cancelled = host.cancel_event
    host.batch_settled(settled)
    responses = batch.responses(settled)
    early = protection.settled(settled, cancelled=cancelled.is_set())
    if isinstance(early, PromptCancelled):
        # A cancelled prompt keeps its settled results and skips the guard.
        host.record_results(responses)
        return host.end("cancelled")
    if isinstance(early, Stop):
        return await stop(host, early, responses)

    drained = await host.drain.drain(
        watch_queued_prompt=host.mode is not GuardMode.OFF, cancelled=cancelled
    )
    # Cancellation that arrived while the host answered the drain (or instead of its
    # answer: the wait is raced against it) still wins over any guard decision.
    # The queued-prompt answer feeds the guard's boundary only: acting on it here would
    # make shadow (which asks for it) continue differently from off (which does not).
    action = protection.at_boundary(drained.boundary(), cancelled=cancelled.is_set())
    if isinstance(action, PromptCancelled):
        if drained.messages:  # what was drained goes back to the queue
            host.drain.requeue(drained.messages)
        host.record_results(responses)
        return host.end("cancelled")
    if action.guard_step is not None:
        host.guard_reduced(action.guard_step, drained)
    if isinstance(action, Stop):
        return await stop(host, action, responses, drained)

    parts = list(responses)
    if turn.todos is not None and any(item.open for item in turn.todos):
        parts.append(Part(kind="system", text=todo_reminder(turn.todos)))
    parts.extend(Part(kind="system", text=text) for text in action.system_texts)
    parts.extend(
        Part(kind="queued_input", text=QUEUED_INPUT_PREFIX + text) for text in drained.messages
    )
    host.record_results(parts)
    for text in drained.messages:
        await host.emit(update_user_message_text(QUEUED_INPUT_PREFIX + text))
    return None


async def stop(
    host: BoundaryHost, action: Stop, responses: list[Part], drained: DrainResult | None = None
) -> PromptResponse:
    """End the prompt for ``action``: persisted first, reported once, no new model stream."""
    host.suspend_continuations()
    if drained is not None and drained.messages:
        host.drain.requeue(drained.messages)  # queued input stays queued
    # Persist first: a stop that was not recorded is never reported.
    host.record_results([*responses, Part(kind="notice", text=action.notice)])
    if action.first:
        host.loop_detected(action.loop_type)
    await host.emit(update_agent_message_text(action.shown_text))  # no System: prefix
    stop_reason = "max_turn_requests" if action.loop_type == LOOP_TOOL_CALL_CAP else "end_turn"
    return host.end(stop_reason, action.loop_type)
