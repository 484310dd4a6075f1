"""What ``wrap_model_call`` answers with: the stop in the model's place, or the reminder.

The stop's text is an ``AIMessage`` without tool calls (the agent loop ends
there); the reminder's ``SystemMessage`` goes before the model's answer in the
state, right after the batch's results.
"""

from __future__ import annotations

import dataclasses
import uuid

from langchain.agents.middleware.types import (
    ExtendedModelResponse,
    ModelCallResult,
    ModelResponse,
)
from langchain_core.messages import AIMessage, SystemMessage

from tool_failure_guard.core import Action, Continue, Stop
from tool_failure_guard.integrations.langchain._run import GuardedRun


def stopped(run: GuardedRun, stop: Stop) -> AIMessage:
    """The stop: its text answers in the model's place (no tool calls: the run ends)."""
    notice = AIMessage(content=stop.notice, id=str(uuid.uuid4()))
    run.last_message = notice  # the guard's own message: no model turn
    return notice


def reminders_of(action: Action) -> list[SystemMessage]:
    texts = action.system_texts if isinstance(action, Continue) else ()
    return [SystemMessage(content=text) for text in texts]


def with_reminders(response: ModelCallResult, reminders: list[SystemMessage]) -> ModelCallResult:
    """``response`` with the reminders before its messages in the state (after the results)."""
    if isinstance(response, ExtendedModelResponse):
        inner = response.model_response
        return dataclasses.replace(
            response, model_response=dataclasses.replace(inner, result=[*reminders, *inner.result])
        )
    if isinstance(response, AIMessage):
        return ModelResponse(result=[*reminders, response])
    return dataclasses.replace(response, result=[*reminders, *response.result])
