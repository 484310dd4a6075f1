"""Which calls are a batch: one ``AIMessage``'s tool calls, as every ``after_model`` hook left them.

The middleware has no ``after_model`` hook (one more graph node every turn):
the state that ``wrap_tool_call``, ``wrap_model_call`` and ``after_agent`` see
already holds the ``AIMessage``, and the first of them to see a new one
admits it (:func:`catch_up`).  Calls a human answered in the tool's place
(``HumanInTheLoopMiddleware``) are still the batch's, settled ``cancelled``
before execution; calls the model node answered itself (a structured-output
tool) are not tool executions, so not the batch's.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from tool_failure_guard.core import CallOutcome, FunctionCall, invalid_arguments, rejected
from tool_failure_guard.integrations.langchain._outcomes import (
    decided_call,
    function_call,
    human_decision,
    invalid_call,
)
from tool_failure_guard.integrations.langchain._run import GuardedRun


def messages_of(state: Any) -> list[BaseMessage]:
    messages = state.get("messages") if isinstance(state, dict) else None
    return messages if isinstance(messages, list) else list(messages or ())


def last_ai_message(messages: list[BaseMessage]) -> tuple[int, AIMessage] | None:
    for at in range(len(messages) - 1, -1, -1):
        message = messages[at]
        if isinstance(message, AIMessage):
            return at, message
    return None


def catch_up(run: GuardedRun, state: Any) -> list[BaseMessage]:
    """Admit the state's last ``AIMessage`` unless it was; the state's messages.

    Every call of a batch but its first, and the next model call, find the admitted
    message itself at or near the end (the same object), so that is looked for first.
    """
    messages = messages_of(state)
    seen = run.last_message
    if messages and messages[-1] is seen:
        return messages  # a batch's second call, and every one after it
    for at in range(len(messages) - 1, -1, -1):
        message = messages[at]
        if message is seen:
            return messages  # admitted already
        if isinstance(message, AIMessage):
            break
    else:
        return messages  # no AIMessage at all
    if _same(message, seen):
        return messages  # the same message, copied (a checkpointed state)
    with run.catch_up_lock:  # a batch's parallel calls all get here first
        if _same(message, run.last_message):
            return messages
        run.last_message = message
        _admit(run, messages, at, message)
    return messages


def _admit(run: GuardedRun, messages: list[BaseMessage], at: int, message: AIMessage) -> None:
    answers = [m for m in messages[at + 1 :] if isinstance(m, ToolMessage)]
    invalid = [invalid_call(item) for item in message.invalid_tool_calls]
    if not answers:  # the usual case: the batch's first tool call admits it
        calls = [function_call(item) for item in message.tool_calls]
        run.model_response([*calls, *invalid], message.usage_metadata)
        _settle_invalid(run, invalid)
        return
    decided = [m for m in answers if human_decision(m) is not None]
    # Calls the model node answered itself never reach the tools node (an id-less one is
    # known by its name: a structured-output tool is not one of the agent's tools).
    answered = [m for m in answers if human_decision(m) is None]
    answered_ids = {m.tool_call_id for m in answered if m.tool_call_id}
    answered_names = {m.name for m in answered if not m.tool_call_id}
    calls = [
        function_call(item)
        for item in message.tool_calls
        if not _answered(item, answered_ids, answered_names)
    ]
    apart = _apart(decided, calls)
    run.model_response([*calls, *map(decided_call, apart), *invalid], message.usage_metadata)
    own = {id(answer) for answer in apart}
    for answer in decided:  # never run: a human refused it, or answered in its place
        if not answer.tool_call_id or id(answer) in own:
            settle_human_answer(run, answer)  # in order: id-less answers claim by name
    _settle_invalid(run, invalid)


def _apart(decided: list[ToolMessage], calls: list[FunctionCall]) -> list[ToolMessage]:
    """The human answers whose call is no longer in the ``AIMessage``: each is a call of its own.

    LangChain 1.5's ``HumanInTheLoopMiddleware`` keeps a rejected call in the message and
    answers it; a middleware that took the call out leaves only its answer.  An answer
    with an id is its call's when the message still has that id.  An id-less one is one
    of the message's id-less calls of its name while any is left (which one, the answer
    does not say: it carries no arguments), else a call of its own.
    """
    known = {call.call_id for call in calls if call.call_id}
    left = Counter(call.name for call in calls if not call.call_id)
    apart: list[ToolMessage] = []
    for answer in decided:
        if answer.tool_call_id:
            if answer.tool_call_id not in known:
                apart.append(answer)
            continue
        name = str(answer.name or "")
        if left[name] > 0:
            left[name] -= 1
        else:
            apart.append(answer)
    return apart


def _settle_invalid(run: GuardedRun, invalid: list[FunctionCall]) -> None:
    for sent in invalid:  # the tools node never runs these: settled here
        call = run.claim_admitted(sent, sent)
        if call is not None:
            run.record(call.call_id, invalid_arguments(call, call.arguments_error or ""))


def settle_human_answer(run: GuardedRun, answer: ToolMessage) -> None:
    """``answer`` is a human's in the tool's place: its call never runs (unless seen)."""
    call = run.claim_answer(answer)
    if call is not None:
        run.record_if_missing(call, _human_rejected)


def settle_human_answers(run: GuardedRun, messages: list[BaseMessage]) -> None:
    """The batch is closing: the human answers since its ``AIMessage`` (they reach no tool)."""
    for message in reversed(messages):
        if isinstance(message, AIMessage):
            break
        if (
            isinstance(message, ToolMessage)
            and message.additional_kwargs  # empty for every tool's own answer
            and human_decision(message) is not None
        ):
            settle_human_answer(run, message)


def _answered(item: Any, ids: set[str], names: set[str | None]) -> bool:
    call_id = item.get("id")
    return call_id in ids if call_id else item.get("name") in names


def _same(message: AIMessage, seen: AIMessage | None) -> bool:
    """``message`` is ``seen`` (the state's reducer gives every message an id)."""
    if seen is None:
        return False
    return message is seen or (message.id is not None and message.id == seen.id)


def _human_rejected(call: FunctionCall) -> CallOutcome:
    return rejected(call, "a human rejected the call or answered it in the tool's place")
