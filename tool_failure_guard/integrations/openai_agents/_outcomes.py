"""How each OpenAI Agents SDK outcome of a function call maps onto the outcome contract.

Every row of :data:`OUTCOME_ROWS` is one way a call of one model response can
end in the SDK, with the (terminal status, execution status, execution error
type) the adapter settles it with; ``docs/integrations.md`` holds the same
table (a test compares them).  The functions below are the only place the
adapter turns an SDK event into a :class:`~tool_failure_guard.core.CallOutcome`;
each calls one of the core's constructors, so no rule lives here: the
exception's type comes from :func:`tool_failure_guard.core.error_type_of`
(its ``error_type`` attribute, else its class), never from its message.
"""

from __future__ import annotations

import asyncio

import attrs
from agents.exceptions import ModelBehaviorError, ToolTimeoutError

from tool_failure_guard.core import (
    CallOutcome,
    FunctionCall,
    cancelled_before,
    cancelled_during,
    failed,
    invalid_arguments,
    provider_duplicate,
    rejected,
    succeeded,
    unknown_tool,
)
from tool_failure_guard.integrations._errors import raised_outcome

#: The execution error type of a function tool that ran past its ``timeout_seconds``.
TIMEOUT = "timeout"
#: What the docs table writes for "no error type" and "computed by the core's rule".
NO_TYPE = "—"
CLASSIFIED = "classified"


@attrs.frozen
class OutcomeRow:
    """One documented row: an SDK outcome and the contract's three values for it."""

    outcome: str
    terminal_status: str
    execution_status: str
    error_type: str


#: The documented mapping, in the order of ``docs/integrations.md``'s table.
OUTCOME_ROWS: tuple[OutcomeRow, ...] = (
    OutcomeRow("the tool returned", "success", "success", NO_TYPE),
    OutcomeRow("the tool raised (with or without failure_error_function)",
               "error", "error", CLASSIFIED),
    OutcomeRow("the tool ran past timeout_seconds", "error", "error", TIMEOUT),
    OutcomeRow("arguments not JSON or off-schema (ModelBehaviorError)",
               "error", "not_started", "invalid_tool_params"),
    OutcomeRow("unknown tool (tool_not_found_behavior='return_error_to_model')",
               "error", "not_started", "tool_not_registered"),
    OutcomeRow("approval rejected", "cancelled", "not_started", NO_TYPE),
    OutcomeRow("the run was interrupted for an approval", "cancelled", "not_started", NO_TYPE),
    OutcomeRow("cancelled while running (CancelledError)", "cancelled", "cancelled", NO_TYPE),
    OutcomeRow("the provider replayed an answered call id", "error", "not_started", NO_TYPE),
    OutcomeRow("not observed (input guardrail, hosted or MCP tool, a handed-off agent)",
               "incomplete receipt", "incomplete receipt", NO_TYPE),
)  # fmt: skip


def returned(call: FunctionCall, output: object) -> CallOutcome:
    """The tool's invoker returned without the tool raising."""
    return succeeded(call, _text(output))


def from_exception(call: FunctionCall, exc: BaseException) -> CallOutcome:
    """The tool's body (or the SDK's argument decoding in front of it) raised ``exc``.

    ``ModelBehaviorError`` is the SDK's argument failure (invalid JSON, a schema
    violation): the call never started.  ``ToolTimeoutError`` is the SDK's timeout
    with ``timeout_behavior="raise_exception"``: an execution failure typed
    ``timeout``.  A cancellation while running is ``cancelled`` (a timeout the SDK
    answered with text is :func:`timed_out`, told by the SDK's own handling).
    """
    if isinstance(exc, ModelBehaviorError):
        return invalid_arguments(call, "the tool's arguments failed validation")
    if isinstance(exc, ToolTimeoutError):
        return failed(call, TIMEOUT, f"the tool ran past its timeout ({type(exc).__name__})")
    if isinstance(exc, asyncio.CancelledError):
        return cancelled_during(call)
    return raised_outcome(call, exc)


def timed_out(call: FunctionCall) -> CallOutcome:
    """The SDK cancelled the tool at its ``timeout_seconds`` and answered the model."""
    return failed(call, TIMEOUT, "the tool ran past its timeout_seconds")


def running_when_cut(call: FunctionCall) -> CallOutcome:
    """The run was cancelled while the call ran (the SDK does not wait for its task)."""
    return cancelled_during(call)


def not_registered(call: FunctionCall) -> CallOutcome:
    """The model named a tool the agent does not have (the SDK answered the model)."""
    return unknown_tool(call)


def approval_rejected(call: FunctionCall) -> CallOutcome:
    return rejected(call)


def interrupted(call: FunctionCall) -> CallOutcome:
    """The run stopped to ask for an approval: this call has not run."""
    return cancelled_before(call, "the run was interrupted for an approval")


def replayed(call: FunctionCall) -> CallOutcome:
    """The provider replayed a call id this run already answered: never executed."""
    return provider_duplicate(call)


def _text(output: object, limit: int = 4096) -> str:
    text = output if isinstance(output, str) else repr(output)
    return text[:limit]
