"""How each LangChain outcome of a tool call maps onto the outcome contract.

Every row of :data:`OUTCOME_ROWS` is one way a call of one ``AIMessage`` can
end under ``create_agent``, with the (terminal status, execution status,
execution error type) the adapter settles it with; ``docs/integrations.md``
("LangChain") holds the same table (a test compares them).  :func:`outcome_of`
is the only place the adapter turns what it saw into a
:class:`~tool_failure_guard.core.CallOutcome`, always through one of the core's
constructors, so no rule lives here: an exception's type comes from the one table of
every adapter (:func:`tool_failure_guard.integrations._errors.execution_error_type`: its
``error_type`` attribute, else its class; a ``ToolException`` by the exception it was
raised from, else ``tool_failed``), never from its message.

What the adapter sees of one call is an :class:`Attempt` per invocation of the
tool itself (``BaseTool.invoke``/``ainvoke``, observed by
:mod:`._observe`), plus what the handler chain finally returned or raised.
The tool's *own* error handling (``handle_tool_error``,
``handle_validation_error``) is observed inside the tool, so a tool that turns
its exception into an error message is still classified by that exception.
"""

from __future__ import annotations

import asyncio
from typing import Any

import attrs
from langchain_core.messages import ToolMessage
from langgraph.errors import GraphInterrupt
from pydantic import ValidationError
from pydantic.v1 import ValidationError as ValidationErrorV1

from tool_failure_guard.core import (
    ERROR_TYPE_PATTERN,
    CallOutcome,
    FunctionCall,
    cancelled_before,
    cancelled_during,
    failed,
    invalid_arguments,
    post_processing_failed,
    provider_duplicate,
    succeeded,
    unknown_tool,
)
from tool_failure_guard.integrations._errors import raised_outcome

#: The execution error type of a tool that *returned* a ``ToolMessage(status="error")``
#: without raising (unless the message's ``additional_kwargs["error_type"]`` names one).
TOOL_ERROR_STATUS = "tool_error_status"
#: What the docs table writes for "no error type" and "computed by the core's rule".
NO_TYPE = "—"
CLASSIFIED = "classified"
_MESSAGE_LIMIT = 2000


@attrs.frozen
class OutcomeRow:
    """One documented row: a LangChain outcome and the contract's three values for it."""

    outcome: str
    terminal_status: str
    execution_status: str
    error_type: str


#: The documented mapping, in the order of ``docs/integrations.md``'s table.
OUTCOME_ROWS: tuple[OutcomeRow, ...] = (
    OutcomeRow("the tool returned (content, a ToolMessage or a Command)",
               "success", "success", NO_TYPE),
    OutcomeRow("the tool raised (re-raised, or turned into an error message by a middleware)",
               "error", "error", CLASSIFIED),
    OutcomeRow("the tool raised ToolException and its handle_tool_error answered",
               "error", "error", CLASSIFIED),
    OutcomeRow("the tool returned ToolMessage(status='error') itself",
               "error", "error", TOOL_ERROR_STATUS),
    OutcomeRow("arguments failed validation (ToolInvocationError, handle_validation_error)",
               "error", "not_started", "invalid_tool_params"),
    OutcomeRow("arguments not JSON (the AIMessage's invalid_tool_calls, never run)",
               "error", "not_started", "invalid_tool_params"),
    OutcomeRow("unknown tool (the tools node's 'is not a valid tool')",
               "error", "not_started", "tool_not_registered"),
    OutcomeRow("the tool returned, then a middleware's answer was an error",
               "error", "success", NO_TYPE),
    OutcomeRow("cancelled while running (CancelledError, KeyboardInterrupt)",
               "cancelled", "cancelled", NO_TYPE),
    OutcomeRow("interrupted while running (interrupt() in the tool: GraphInterrupt)",
               "cancelled", "cancelled", NO_TYPE),
    OutcomeRow("cancelled before the tool was invoked", "cancelled", "not_started", NO_TYPE),
    OutcomeRow("a human rejected the call, or answered in its place (HumanInTheLoopMiddleware)",
               "cancelled", "not_started", NO_TYPE),
    OutcomeRow("the provider replayed an answered call id (never run)",
               "error", "not_started", NO_TYPE),
    OutcomeRow("past the run's tool-call cap (answered by the middleware, never run)",
               "error", "not_started", "tool_call_cap"),
    OutcomeRow("not observed (an inner middleware answered without invoking the tool, "
               "a call the tools node never ran)",
               "incomplete receipt", "incomplete receipt", NO_TYPE),
)  # fmt: skip

_CANCELLED = (asyncio.CancelledError, KeyboardInterrupt)


@attrs.define
class Attempt:
    """One invocation of the tool itself: what it raised, or handled, or returned."""

    exception: BaseException | None = None  #: raised, or handled by the tool's own handler
    returned: Any = None
    done: bool = False  #: the invocation returned (it did not raise)


def function_call(tool_call: Any) -> FunctionCall:
    """The core's value for one of an ``AIMessage``'s tool calls (LangChain parsed the JSON)."""
    call_id = str(tool_call.get("id") or "")
    name = str(tool_call.get("name") or "")
    args = tool_call.get("args")
    if not isinstance(args, dict):
        return FunctionCall(call_id=call_id, name=name, arguments_error="not a JSON object")
    return FunctionCall(call_id=call_id, name=name, args=args)


def invalid_call(invalid: Any) -> FunctionCall:
    """One of an ``AIMessage``'s ``invalid_tool_calls`` (arguments that are not JSON)."""
    return FunctionCall(
        call_id=str(invalid.get("id") or ""),
        name=str(invalid.get("name") or ""),
        arguments_error=str(invalid.get("error") or "the arguments are not JSON")[:200],
    )


#: The ``lc_source`` of the ToolMessage ``HumanInTheLoopMiddleware`` answers a call with.
HUMAN_DECISION_SOURCE = "hitl_interrupt_decision"


def human_decision(message: Any) -> str | None:
    """``reject`` or ``respond`` when ``message`` is a human's answer in place of the tool."""
    if not isinstance(message, ToolMessage):
        return None
    if message.additional_kwargs.get("lc_source") != HUMAN_DECISION_SOURCE:
        return None
    data = message.additional_kwargs.get("lc_data")
    decision = data.get("decision") if isinstance(data, dict) else None
    return decision if decision in ("reject", "respond") else None


def decided_call(message: ToolMessage) -> FunctionCall:
    """The call a human answered (its arguments are gone from the AIMessage)."""
    return FunctionCall(call_id=message.tool_call_id, name=str(message.name or ""))


def replayed(call: FunctionCall) -> CallOutcome:
    """The provider replayed a call id this run already answered: never executed."""
    return provider_duplicate(call)


def outcome_of(
    call: FunctionCall,
    tool_known: bool,
    attempt: Attempt | None,
    result: Any = None,
    error: BaseException | None = None,
) -> CallOutcome | None:
    """The call's outcome from its last tool :class:`Attempt` and the handler chain's end.

    ``result`` is what the handler chain returned, ``error`` what it raised.
    None: the adapter could not see the outcome (the receipt stays incomplete).
    """
    if not tool_known:
        if isinstance(result, ToolMessage) and result.status == "error":
            return unknown_tool(call, _text(result.content))
        return None  # a middleware served a tool the agent does not have: not seen
    if attempt is None:  # the tool itself was never invoked
        if isinstance(error, _CANCELLED):
            return cancelled_before(call)
        return None
    if attempt.exception is not None:
        return _from_exception(call, attempt.exception)
    if not attempt.done:  # pragma: no cover - an invocation either returns or raises
        return None
    own = _error_message(attempt.returned)
    if own is not None:
        return failed(call, _message_error_type(own), _text(own.content))
    done = succeeded(call, _text(_content(attempt.returned)))
    if isinstance(error, _CANCELLED):
        return cancelled_during(call)
    if error is not None:
        return post_processing_failed(done, f"{type(error).__name__} after the tool returned")
    if isinstance(result, ToolMessage) and result.status == "error":
        return post_processing_failed(done, _text(result.content))
    return done


def _from_exception(call: FunctionCall, exc: BaseException) -> CallOutcome:
    if isinstance(exc, ValidationError | ValidationErrorV1):
        return invalid_arguments(call, "the tool's arguments failed validation")
    if isinstance(exc, _CANCELLED):
        return cancelled_during(call)
    if isinstance(exc, GraphInterrupt):
        return cancelled_during(call, "interrupted while running")
    return raised_outcome(call, exc, message=_text(f"{type(exc).__name__}: {exc}"))


def _error_message(value: Any) -> ToolMessage | None:
    """The tool's own return value when it is an error ``ToolMessage``."""
    if isinstance(value, ToolMessage) and value.status == "error":
        return value
    return None


def _message_error_type(message: ToolMessage) -> str:
    claimed = message.additional_kwargs.get("error_type")
    if isinstance(claimed, str) and ERROR_TYPE_PATTERN.fullmatch(claimed):
        return claimed
    return TOOL_ERROR_STATUS


def _content(value: Any) -> Any:
    return value.content if isinstance(value, ToolMessage) else value


def _text(value: Any) -> str:
    text = value if isinstance(value, str) else repr(value)
    return text[:_MESSAGE_LIMIT]
