"""What ``session/load`` sends: the ACP updates that replay a persisted history."""

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

from session.history import Message


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
