"""What ``session/load`` sends: the ACP updates that replay a persisted history.

Every replayed call is shown with its final status from the start (``completed``
or ``failed``), never ``pending``: the history is assembled so that every call
has exactly one response (a call that never settled was answered
``cancelled``/``interrupted`` by :func:`~tool_failure_guard.session.persistence.assembly.assemble`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from acp import (
    start_tool_call,
    text_block,
    tool_content,
    update_agent_message_text,
    update_tool_call,
    update_user_message_text,
)

from tool_failure_guard.core.actions import shown_text
from tool_failure_guard.session.persistence.assembly import interrupted_response
from tool_failure_guard.session.persistence.messages import Message, Part


def _responses(messages: Sequence[Message]) -> dict[tuple[int, str], Part]:
    """(index of the model message, call id) -> the response in the message after it."""
    found: dict[tuple[int, str], Part] = {}
    for index, message in enumerate(messages):
        if message.kind != "model" or index + 1 >= len(messages):
            continue
        following = messages[index + 1]
        if following.kind == "tool_results":
            for part in following.parts:
                if part.kind == "function_response":
                    found[(index, part.call_id)] = part
    return found


def _status(response: Part) -> str:
    """ACP has no ``cancelled`` tool-call status: everything but success is ``failed``."""
    return "completed" if response.status == "success" else "failed"


def _final_update(response: Part) -> Any:
    return update_tool_call(
        response.call_id,
        status=_status(response),  # type: ignore[arg-type]
        content=[tool_content(text_block(response.text))],
        raw_output={"terminalStatus": response.status, "errorType": response.error_type},
    )


def replay_updates(messages: Sequence[Message]) -> list[Any]:
    """The ACP updates that replay ``messages`` to a client (``session/load``)."""
    responses = _responses(messages)
    updates: list[Any] = []
    for index, message in enumerate(messages):
        unanswered: list[Part] = []
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
                response = responses.get((index, part.call_id))
                if response is None:  # not assembled: never leave the client waiting
                    response = interrupted_response(part)
                    unanswered.append(response)
                updates.append(
                    start_tool_call(
                        part.call_id,
                        part.title or part.name,
                        kind=part.tool_kind or "other",  # type: ignore[arg-type]
                        status=_status(response),  # type: ignore[arg-type]
                        raw_input=dict(part.args),
                    )
                )
            elif part.kind == "function_response":
                updates.append(_final_update(part))
            elif part.kind == "notice":  # shown as it was: without the System: prefix
                updates.append(update_agent_message_text(shown_text(part.text)))
        updates.extend(_final_update(response) for response in unanswered)
    return updates
