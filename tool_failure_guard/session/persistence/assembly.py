"""From persisted records to the model-facing history: every call answered exactly once.

A crash or a disconnect can leave a batch's calls without their
``tool_results`` message.  :func:`assemble` answers each call with the batch's
response, else the one persisted when the call settled, else a synthesized
``cancelled`` / ``interrupted`` response (:func:`interrupted_response`), so a
loaded history is always a valid call/response sequence.  The other helpers
read calls and answers out of a history.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from tool_failure_guard.session.persistence.messages import Message, Part, SettledCall

_log = logging.getLogger("session.history")
#: The terminal error type of a response synthesized on load for a call with no outcome.
INTERRUPTED = "interrupted"
INTERRUPTED_TEXT = (
    "The agent stopped before this call's outcome was recorded; "
    "the call may or may not have taken effect."
)


def interrupted_response(call: Part) -> Part:
    """The response synthesized for ``call`` when no outcome of it was persisted."""
    return Part(
        kind="function_response",
        call_id=call.call_id,
        name=call.name,
        status="cancelled",
        error_type=INTERRUPTED,
        text=INTERRUPTED_TEXT,
        duplicate=call.duplicate,
    )


def assemble(records: Sequence[Message | SettledCall]) -> tuple[list[Message], list[str]]:
    """The model-facing history of persisted ``records``, and the calls answered ``interrupted``.

    Every model message's function calls get exactly one function response, in
    the model's call order, in the user message that follows it: the batch's
    ``tool_results`` response if it was written, else the response persisted
    when the call settled (``call_settled``), else a synthesized ``cancelled``
    / ``interrupted`` one.  A response for no open call (its model message was
    lost) is dropped, so the history stays a valid call/response sequence.
    """
    messages: list[Message] = []
    interrupted: list[str] = []
    open_calls: list[Part] = []
    open_prompt = ""
    settled: dict[str, Part] = {}

    def answers(given: dict[str, Part]) -> list[Part]:
        parts = []
        for call in open_calls:
            part = given.get(call.call_id) or settled.get(call.call_id)
            if part is None:
                part = interrupted_response(call)
                interrupted.append(call.call_id)
            parts.append(part)
        return parts

    for record in records:
        if isinstance(record, SettledCall):
            if any(call.call_id == record.part.call_id for call in open_calls):
                settled[record.part.call_id] = record.part
            else:
                _log.warning(
                    "history: an outcome for no open call %s was ignored", record.part.call_id
                )
            continue
        message = record
        if open_calls and message.kind == "tool_results":
            given = {p.call_id: p for p in message.parts if p.kind == "function_response"}
            stray = set(given) - {call.call_id for call in open_calls}
            if stray:
                _log.warning("history: responses for no open call were dropped: %s", sorted(stray))
            rest = [p for p in message.parts if p.kind != "function_response"]
            message = attrs.evolve(message, parts=(*answers(given), *rest))
            open_calls, settled = [], {}
        else:
            if open_calls:
                closing = Message(
                    role="user",
                    kind="tool_results",
                    prompt_id=open_prompt,
                    parts=tuple(answers({})),
                )
                messages.append(closing)
                open_calls, settled = [], {}
            if message.kind == "tool_results":
                stray_parts = [p for p in message.parts if p.kind == "function_response"]
                if stray_parts:
                    _log.warning("history: responses without their calls were dropped")
                    message = attrs.evolve(
                        message,
                        parts=tuple(p for p in message.parts if p.kind != "function_response"),
                    )
        messages.append(message)
        if message.kind == "model":
            open_calls = [p for p in message.parts if p.kind == "function_call"]
            open_prompt = message.prompt_id
    if open_calls:
        messages.append(
            Message(
                role="user", kind="tool_results", prompt_id=open_prompt, parts=tuple(answers({}))
            )
        )
    return messages, interrupted


def open_calls(messages: Sequence[Message]) -> bool:
    """Whether the last model message's calls are still unanswered."""
    for message in reversed(messages):
        if message.kind == "tool_results":
            return False
        if message.kind == "model":
            return any(p.kind == "function_call" for p in message.parts)
    return False


def answered_call_ids(messages: list[Message]) -> set[str]:
    """Call ids that already have a function response in ``messages``."""
    return {
        part.call_id
        for message in messages
        for part in message.parts
        if part.kind == "function_response"
    }


def function_calls(
    messages: Sequence[Message],
) -> tuple[list[tuple[str, str, Mapping[str, Any]]], list[tuple[str, str, Mapping[str, Any]]]]:
    """The function calls of ``messages`` as (id, name, arguments): answered ones, open ones.

    A call is answered when the ``tool_results`` message after its model
    message holds a response with its id; the last model message's calls are
    open while no ``tool_results`` message follows it.
    """
    answered: list[tuple[str, str, Mapping[str, Any]]] = []
    waiting: list[tuple[str, str, Mapping[str, Any]]] = []
    for message in messages:
        if message.kind == "model":
            waiting = [
                (p.call_id, p.name, p.args) for p in message.parts if p.kind == "function_call"
            ]
        elif message.kind == "tool_results" and waiting:
            ids = {p.call_id for p in message.parts if p.kind == "function_response"}
            answered.extend(call for call in waiting if call[0] in ids)
            waiting = []
    return answered, waiting
