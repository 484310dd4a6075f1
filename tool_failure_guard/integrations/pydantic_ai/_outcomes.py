"""How each pydantic-ai tool-call outcome maps onto the dual-axis outcome contract.

Two things are seen of every call, and together they settle it on one of the
core's paths (:mod:`tool_failure_guard.core.outcomes`):

- the **execution**, frozen at the execution boundary by the observing toolset
  (the tool function's own return or raise, before any capability hook,
  ``on_tool_execute_error`` handler or retry bookkeeping can change it), or
  the argument-validation failure ``on_tool_validate_error`` saw;
- the **tool return part** the framework answered the call with in the next
  request (``ToolReturnPart.outcome``: ``success``, ``failed``, ``retried``
  with its ``retry.cause``, ``denied``, ``interrupted``): what the model was told.

A call with neither a return part nor a cancellation is *missing*: the batch's
receipt is then incomplete, never silently complete.  :data:`OUTCOME_ROWS` is
the table ``docs/integrations.md`` shows (a test checks that they agree).
"""

from __future__ import annotations

from collections.abc import Mapping

import attrs
from pydantic_ai.exceptions import ModelRetry, ToolFailed

from tool_failure_guard.core import (
    INVALID_TOOL_PARAMS,
    TOOL_NOT_REGISTERED,
    UNHANDLED_EXCEPTION,
    CallOutcome,
    FunctionCall,
    cancelled_before,
    cancelled_during,
    failed,
    invalid_arguments,
    not_started,
    post_processing_failed,
    rejected,
    succeeded,
    unknown_tool,
)
from tool_failure_guard.integrations._errors import FAILURE_SIGNALS
from tool_failure_guard.integrations._errors import execution_error_type as shared_error_type

#: The framework's own failure signals and their types: one table for every adapter
#: (:data:`tool_failure_guard.integrations._errors.FAILURE_SIGNALS`).  ``ModelRetry`` keeps
#: its type past the tool's retries budget: the budget's ``UnexpectedModelBehavior`` is
#: raised *around* the tool, after the execution froze.
SIGNAL_ERROR_TYPES: Mapping[type[BaseException], str] = {
    ToolFailed: FAILURE_SIGNALS["pydantic_ai.exceptions.ToolFailed"],
    ModelRetry: FAILURE_SIGNALS["pydantic_ai.exceptions.ModelRetry"],
}
#: A tool that exists but may not be called at this step (tool search, capability not loaded).
TOOL_UNAVAILABLE = "tool_unavailable"
#: ``ModelRetry`` / ``ToolFailed`` from a hook before the tool ran (not argument validation).
TOOL_REFUSED = "tool_refused"


def execution_error_type(exc: BaseException) -> str:
    """The one rule of every adapter (``integrations._errors.execution_error_type``).

    An ``error_type`` attribute wins, then the builtin class table; a framework signal
    (:data:`SIGNAL_ERROR_TYPES`) the core would call ``unhandled_exception`` takes the
    classified type of the exception it was raised from (``raise ToolFailed(...) from
    exc``), else its own signal type.
    """
    return shared_error_type(exc)


@attrs.frozen(kw_only=True)
class Execution:
    """What the observing toolset saw when the tool function settled."""

    #: ``running`` (started, not settled yet), ``success``, ``error`` (raised),
    #: ``cancelled`` (interrupted while running) or ``deferred`` (the tool raised
    #: ``CallDeferred`` / ``ApprovalRequired``).
    status: str
    error_type: str | None = None
    message: str = ""


@attrs.frozen(kw_only=True)
class Returned:
    """The tool return part the call was answered with (``ToolReturnPart``)."""

    outcome: str  #: success, failed, retried, denied, interrupted
    cause: str | None = None  #: ``retry.cause`` of a retried return
    text: str = ""


#: A ``success`` return of a call that ran and returned (its text is read on no path:
#: the outcome is a success, whose text reaches neither the guard nor a receipt).
RETURNED = Returned(outcome="success")


def settle(
    call: FunctionCall,
    *,
    tool: str | None,
    tool_type: str = "native",
    execution: Execution | None = None,
    invalid_args: bool = False,
    returned: Returned | None = None,
    interrupted: bool = False,
) -> CallOutcome | None:
    """The call's outcome from what was seen of it; None when it cannot be settled (missing).

    ``tool`` is the registered tool's name (None: no such tool); ``interrupted``
    says the batch was cancelled or aborted before this call had an answer.
    """
    text = returned.text if returned is not None else ""
    if execution is not None and execution.status == "running":
        # Still running when the batch ended: only an interruption ends a batch early.
        return cancelled_during(call, tool=tool, tool_type=tool_type) if interrupted else None
    if execution is not None and execution.status == "cancelled":
        return cancelled_during(call, tool=tool, tool_type=tool_type)
    if returned is not None and returned.outcome == "interrupted":
        if execution is not None:
            return cancelled_during(call, tool=tool, tool_type=tool_type)
        return cancelled_before(call, tool=tool, tool_type=tool_type)
    if returned is not None and returned.outcome == "denied":
        return rejected(call, text or "the call was not approved", tool=tool, tool_type=tool_type)
    if execution is not None and execution.status == "error":
        kind = execution.error_type or UNHANDLED_EXCEPTION
        return failed(call, kind, text or execution.message, tool=tool, tool_type=tool_type)
    if execution is not None and execution.status == "success":
        if returned is None and not interrupted:
            return None
        outcome = succeeded(call, text, tool=tool, tool_type=tool_type)
        if returned is not None and returned.outcome != "success":
            return post_processing_failed(outcome, text or "the result was rejected")
        return outcome
    if invalid_args:
        return invalid_arguments(call, text or "invalid arguments", tool=tool, tool_type=tool_type)
    if returned is None:
        if interrupted:
            return cancelled_before(call, tool=tool, tool_type=tool_type)
        return None  # deferred, or an answer the adapter never saw
    return _not_executed(call, returned, tool, tool_type)


def _not_executed(
    call: FunctionCall, returned: Returned, tool: str | None, tool_type: str
) -> CallOutcome:
    """A call answered without the tool function running."""
    text = returned.text
    if returned.outcome == "success":
        # A hook supplied the result (SkipToolExecution) or it came from outside the run
        # (a deferred call's result): success, never executed here.
        outcome = succeeded(call, text, tool=tool, tool_type=tool_type)
        return attrs.evolve(outcome, execution_status="not_started")
    if returned.cause == "unknown_tool" or tool is None:
        return unknown_tool(call, text or None)
    if returned.cause == "validation_error":
        return invalid_arguments(call, text or "invalid arguments", tool=tool, tool_type=tool_type)
    if returned.cause == "unavailable_tool":
        return not_started(call, TOOL_UNAVAILABLE, text, tool=tool, tool_type=tool_type)
    return not_started(call, TOOL_REFUSED, text, tool=tool, tool_type=tool_type)


@attrs.frozen(kw_only=True)
class Row:
    """One documented row: what happened, a sample of what the adapter sees, and the result."""

    what: str
    terminal: str
    execution: str
    error_type: str
    sample_execution: Execution | None = None
    sample_invalid_args: bool = False
    sample_returned: Returned | None = None
    sample_tool: str | None = "lookup"
    sample_interrupted: bool = False


def _raised(kind: str) -> Execution:
    return Execution(status="error", error_type=kind, message="failed")


_FAILED = Returned(outcome="failed", text="failed")
_RETRIED = Returned(outcome="retried", cause="model_retry", text="failed")

#: The pydantic-ai outcome table (``docs/integrations.md``, section "pydantic-ai").
OUTCOME_ROWS: tuple[Row, ...] = (
    Row(
        what="the tool returned",
        terminal="success",
        execution="success",
        error_type="(none)",
        sample_execution=Execution(status="success"),
        sample_returned=Returned(outcome="success", text="ok"),
    ),
    Row(
        what="the tool raised `ToolFailed`",
        terminal="error",
        execution="error",
        error_type="its `error_type`, else its cause's (`raise ToolFailed(...) from exc`), "
        "else `tool_failed`",
        sample_execution=_raised("tool_failed"),
        sample_returned=_FAILED,
    ),
    Row(
        what="the tool raised `ModelRetry` (within or past its retries budget)",
        terminal="error",
        execution="error",
        error_type="its `error_type`, else its cause's, else `tool_retry`",
        sample_execution=_raised("tool_retry"),
        sample_returned=_RETRIED,
    ),
    Row(
        what="the tool raised another exception, turned into a result by an "
        "`on_tool_execute_error` handler",
        terminal="error",
        execution="error",
        error_type="`error_type_of(exc)`",
        sample_execution=_raised("file_not_found"),
        sample_returned=Returned(outcome="success", text="handled"),
    ),
    Row(
        what="the tool raised another exception that ends the run",
        terminal="error",
        execution="error",
        error_type="`error_type_of(exc)`",
        sample_execution=_raised("unhandled_exception"),
        sample_interrupted=True,
    ),
    Row(
        what="the result was rejected after the tool returned (`after_tool_execute` "
        "raised `ModelRetry` / `ToolFailed`)",
        terminal="error",
        execution="success",
        error_type="(none; terminal type `post_processing_failed`)",
        sample_execution=Execution(status="success"),
        sample_returned=_RETRIED,
    ),
    Row(
        what="the arguments failed validation (schema, or an `args_validator`'s `ModelRetry`)",
        terminal="error",
        execution="not_started",
        error_type=f"`{INVALID_TOOL_PARAMS}`",
        sample_invalid_args=True,
        sample_returned=Returned(outcome="retried", cause="validation_error"),
    ),
    Row(
        what="unknown tool name",
        terminal="error",
        execution="not_started",
        error_type=f"`{TOOL_NOT_REGISTERED}`",
        sample_tool=None,
        sample_returned=Returned(outcome="retried", cause="unknown_tool"),
    ),
    Row(
        what="a tool not available yet (tool search, capability not loaded)",
        terminal="error",
        execution="not_started",
        error_type=f"`{TOOL_UNAVAILABLE}`",
        sample_returned=Returned(outcome="retried", cause="unavailable_tool"),
    ),
    Row(
        what="refused by a hook before the tool ran (`ModelRetry` / `ToolFailed`)",
        terminal="error",
        execution="not_started",
        error_type=f"`{TOOL_REFUSED}`",
        sample_returned=_FAILED,
    ),
    Row(
        what="result supplied without running the tool (`SkipToolExecution`, a deferred "
        "call's external result)",
        terminal="success",
        execution="not_started",
        error_type="(none)",
        sample_returned=Returned(outcome="success", text="supplied"),
    ),
    Row(
        what="approval denied (`ToolDenied`)",
        terminal="cancelled",
        execution="not_started",
        error_type="(none)",
        sample_returned=Returned(outcome="denied"),
    ),
    Row(
        what="cancelled or interrupted while the tool ran",
        terminal="cancelled",
        execution="cancelled",
        error_type="(none)",
        sample_execution=Execution(status="cancelled"),
    ),
    Row(
        what="cancelled or interrupted before the tool ran",
        terminal="cancelled",
        execution="not_started",
        error_type="(none)",
        sample_interrupted=True,
    ),
    Row(
        what="deferred (`CallDeferred` / `ApprovalRequired`), or no answer seen",
        terminal="(missing: receipt incomplete)",
        execution="(missing)",
        error_type="(none)",
        sample_execution=Execution(status="deferred"),
    ),
)


def sample_outcome(row: Row) -> CallOutcome | None:
    """What :func:`settle` makes of the row's sample (the docs test checks it against the row)."""
    return settle(
        FunctionCall(call_id="call-1", name="lookup"),
        tool=row.sample_tool,
        execution=row.sample_execution,
        invalid_args=row.sample_invalid_args,
        returned=row.sample_returned,
        interrupted=row.sample_interrupted,
    )


def outcome_table() -> str:
    """The rows as the markdown table ``docs/integrations.md`` holds."""
    lines = [
        "| what happened | terminal status | execution status | execution error type |",
        "| --- | --- | --- | --- |",
    ]
    lines.extend(
        f"| {row.what} | {row.terminal} | {row.execution} | {row.error_type} |"
        for row in OUTCOME_ROWS
    )
    return "\n".join(lines)
