"""The messages and nodes the capability reads and builds (framework facts, no decisions)."""

from __future__ import annotations

import dataclasses
from typing import Any

from pydantic_ai._agent_graph import ModelRequestNode
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.tools import RunContext

from tool_failure_guard.core import Stop
from tool_failure_guard.integrations.pydantic_ai._toolset import tool_type_of

#: ``metadata`` key marking the parts and responses this adapter added to a history.
METADATA_KEY = "tool_failure_guard"
#: ``model_name`` of the stop response (no model produced it).
STOP_MODEL_NAME = "tool-failure-guard"


def function_calls(
    ctx: RunContext[Any], response: ModelResponse
) -> tuple[list[ToolCallPart], dict[str, tuple[str | None, str]]]:
    """The response's calls the guard settles (output tools excluded) and each name's identity."""
    manager = ctx.tool_manager
    registered = getattr(manager, "tools", None) if manager is not None else None
    calls: list[ToolCallPart] = []
    tools: dict[str, tuple[str | None, str]] = {}
    for part in response.tool_calls:
        name = part.tool_name
        tool = registered.get(name) if registered is not None else None
        if tool is not None and tool.tool_def.kind == "output":
            continue
        calls.append(part)
        if name in tools:
            continue
        if tool is not None:
            tools[name] = (name, tool_type_of(tool.toolset))
        elif registered is None:
            tools[name] = (name, "native")  # the registry was not readable: trust the name
        else:
            tools[name] = (None, "native")
    return calls, tools


def answers_of(
    messages: list[ModelMessage], response: ModelResponse, result: Any
) -> list[ModelMessage]:
    """The requests that answer ``response``: the next node's, and any already in the history."""
    answers: list[ModelMessage] = []
    if isinstance(result, ModelRequestNode):
        answers.append(result.request)
    for index in range(len(messages) - 1, -1, -1):
        if messages[index] is response:
            answers.extend(m for m in messages[index + 1 :] if isinstance(m, ModelRequest))
            break
    return answers


def with_reminder(
    result: ModelRequestNode[Any, Any], texts: tuple[str, ...]
) -> ModelRequestNode[Any, Any]:
    """The next request with the reminder right after the batch's tool returns."""
    parts = list(result.request.parts)
    last_return = max(
        (i for i, part in enumerate(parts) if isinstance(part, ToolReturnPart)),
        default=len(parts) - 1,
    )
    reminders = [SystemPromptPart(text, metadata={METADATA_KEY: "reminder"}) for text in texts]
    parts[last_return + 1 : last_return + 1] = reminders
    return dataclasses.replace(result, request=dataclasses.replace(result.request, parts=parts))


def stop_response(ctx: RunContext[Any], stop: Stop) -> ModelResponse:
    """The history's answer to a stopped run: the model-facing stop notice, marked as ours."""
    return ModelResponse(
        parts=[TextPart(stop.notice)],
        model_name=STOP_MODEL_NAME,
        run_id=ctx.run_id,
        conversation_id=ctx.conversation_id,
        metadata={METADATA_KEY: {"stop": stop.loop_type}},
    )


def requests_plain_text(params: Any) -> bool:
    """Whether a run's model request parameters let a plain text answer be its output.

    ``text`` mode (``str`` or a ``TextOutput`` function), or ``tool`` mode with
    text allowed (``[str, Model]``); not ``native`` / ``prompted`` / ``auto``,
    whose text is parsed into a structured output.
    """
    mode = getattr(params, "output_mode", None)
    return mode == "text" or (mode == "tool" and bool(getattr(params, "allow_text_output", False)))
