"""The reminder in ``wrap_model_call``: into the request, and into the state.

The reminder's ``SystemMessage`` goes after the batch's results in the
request, and before the model's answer in the state (right after the
results).  The stop's answer is :mod:`._stop`'s.
"""

from __future__ import annotations

import dataclasses

from langchain.agents.middleware.types import (
    ExtendedModelResponse,
    ModelCallResult,
    ModelResponse,
)
from langchain_core.messages import AIMessage, SystemMessage

from tool_failure_guard.core import Action, Continue


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
