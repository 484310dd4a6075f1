"""After a batch has settled: protections, the input boundary, the guard, the next message.

In order, exactly as the specification places them:

1. a cancelled prompt keeps its settled results and skips the guard;
2. protections 1-2 (provider duplicates, invalid parameters) may stop first;
3. the mid-turn drain (the input boundary);
4. the guard reduces the receipt with that boundary; ``stop`` ends the prompt;
5. protection 4 (the tool-call cap);
6. otherwise the next model message: [function responses, todo reminder,
   REMINDER on ``warn``, mid-turn input].

A stop suspends the todo stop guard, persists the responses and the fixed stop
notice before anything is reported, emits the notice once and opens no further
model stream.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from acp import update_agent_message_text, update_user_message_text
from acp.schema import PromptResponse

from guard import (
    REPEATED_TOOL_FAILURE_REMINDER,
    REPEATED_TOOL_FAILURE_STOP_MESSAGE,
    DecisionKind,
    GuardMode,
)
from session import batch, outcome
from session.drain import QUEUED_INPUT_PREFIX, DrainResult
from session.executor import CallOutcome
from session.history import Part
from session.model import ModelTurn, TodoItem
from tool_failure_guard.core.protections import (
    LOOP_INVALID_TOOL_PARAMS,
    LOOP_PROVIDER_DUPLICATE,
    LOOP_REPEATED_TOOL_FAILURE,
    LOOP_TOOL_CALL_CAP,
    Admission,
)
from tool_failure_guard.core.receipts import ReceiptBuilder

if TYPE_CHECKING:
    from session.prompt import PromptRun

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


def todo_reminder(todos: Sequence[TodoItem]) -> str:
    open_items = [item.content for item in todos if item.open]
    return "System: todo list has open items: " + "; ".join(open_items)


async def after_batch(
    run: PromptRun,
    admission: Admission,
    outcomes: list[CallOutcome | None],
    builder: ReceiptBuilder,
    turn: ModelTurn,
) -> PromptResponse | None:
    """Act on one settled batch; a response ends the prompt, None continues it."""
    s = run.session
    receipt = builder.build()
    outcome.report_calls(run, admission, outcomes)
    responses = batch.responses(admission, outcomes)
    if s._cancelled.is_set():
        # A cancelled prompt keeps its settled results and skips the guard.
        s._record(run.results_message(responses))
        return run.end("cancelled")
    settled = [o for o in outcomes if o is not None]
    loop_type = run.protections.before_guard(admission, settled)
    if loop_type is not None:
        return await stop(run, loop_type, responses)

    drained = await s.drain.drain(
        watch_queued_prompt=run.mode is not GuardMode.OFF, cancelled=s._cancelled
    )
    if s._cancelled.is_set():
        # Cancellation arrived while the host answered the drain (or instead of its
        # answer: the wait is raced against it): it still wins over any guard decision,
        # and what was drained goes back to the queue; a late answer joins it later.
        if drained.messages:
            s.drain.requeue(drained.messages)
        s._record(run.results_message(responses))
        return run.end("cancelled")
    # The queued-prompt answer feeds the guard's boundary only: acting on it here would
    # make shadow (which asks for it) continue differently from off (which does not).
    decision = run.observe(receipt, drained)
    if decision.kind is DecisionKind.STOP:
        return await stop(run, LOOP_REPEATED_TOOL_FAILURE, responses, drained)
    loop_type = run.protections.after_guard(len(admission.executable))
    if loop_type is not None:
        return await stop(run, loop_type, responses, drained)

    parts = list(responses)
    if turn.todos is not None and any(item.open for item in turn.todos):
        parts.append(Part(kind="system", text=todo_reminder(turn.todos)))
    if decision.kind is DecisionKind.WARN:
        parts.append(Part(kind="system", text=REPEATED_TOOL_FAILURE_REMINDER))
    parts.extend(
        Part(kind="queued_input", text=QUEUED_INPUT_PREFIX + text) for text in drained.messages
    )
    s._record(run.results_message(parts))
    for text in drained.messages:
        await s._emit(update_user_message_text(QUEUED_INPUT_PREFIX + text))
    return None


async def stop(
    run: PromptRun, loop_type: str, responses: list[Part], drained: DrainResult | None = None
) -> PromptResponse:
    """End the prompt for ``loop_type``: persisted first, reported once, no new model stream."""
    s = run.session
    run.todo_guard.suspend()
    if drained is not None and drained.messages:
        s.drain.requeue(drained.messages)  # queued input stays queued
    notice = STOP_NOTICES[loop_type]
    # Persist first: a stop that was not recorded is never reported.
    s._record(run.results_message([*responses, Part(kind="notice", text=notice)]))
    if run.protections.latch.record(loop_type):
        s.report(
            "loop_detected",
            lambda: s.telemetry.loop_detected(prompt_id=run.prompt_id, loop_type=loop_type),
        )
    await s._emit(update_agent_message_text(notice))
    stop_reason = "max_turn_requests" if loop_type == LOOP_TOOL_CALL_CAP else "end_turn"
    return run.end(stop_reason, loop_type)
