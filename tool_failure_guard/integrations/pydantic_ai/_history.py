"""What the adapter reads from a pydantic-ai message history (never a decision: only facts)."""

from __future__ import annotations

from collections.abc import Iterable

from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

from tool_failure_guard.core.protections import AnsweredCall, call_fingerprint
from tool_failure_guard.integrations.pydantic_ai._outcomes import Returned

#: Bound on the text kept from a tool return (the receipt never holds text; this is for hooks).
_TEXT_LIMIT = 2000


def answered_calls(messages: Iterable[ModelMessage]) -> list[AnsweredCall]:
    """The calls the history already answered: each call id with its call's fingerprint.

    A replay is the same call sent again (same id, tool name and arguments); an
    answered id arriving with another name or other arguments is a new call.
    Each tool return is paired with the latest call of its id before it; a
    return whose call is not in the history (trimmed) answers every call with
    that id (fingerprint None).
    """
    calls: dict[str, str] = {}
    answered: list[AnsweredCall] = []
    for message in messages:
        if isinstance(message, ModelResponse):
            for call in message.parts:
                if isinstance(call, ToolCallPart):
                    calls[call.tool_call_id] = call_fingerprint(call.tool_name, args_of(call))
        elif isinstance(message, ModelRequest):
            for answer in message.parts:
                if isinstance(answer, ToolReturnPart):
                    answered.append((answer.tool_call_id, calls.get(answer.tool_call_id)))
    return answered


def args_of(part: ToolCallPart) -> dict[str, object]:
    """The call's arguments as a mapping (``{}`` for arguments that are not a JSON object)."""
    try:
        return dict(part.args_as_dict())
    except Exception:  # arguments that are not a JSON object: validation will say so
        return {}


def returned_of(part: ToolReturnPart) -> Returned:
    retry = part.retry
    try:
        text = part.model_response_str(wrap_if_error=False)
    except Exception:  # content the framework cannot render: the statuses still hold
        text = ""
    return Returned(
        outcome=str(part.outcome),
        cause=None if retry is None else str(retry.cause),
        text=text[:_TEXT_LIMIT],
    )


def has_user_input(messages: Iterable[ModelMessage]) -> bool:
    """Whether user content arrived with a batch's answers (an external-input boundary)."""
    return any(
        isinstance(part, UserPromptPart)
        for message in messages
        if isinstance(message, ModelRequest)
        for part in message.parts
    )
