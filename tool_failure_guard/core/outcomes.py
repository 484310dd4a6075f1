"""The dual-axis outcome contract: one function call and its settled outcome.

A host settles every admitted call on exactly one of these paths, each with its
own constructor, so the two axes are set where the path settles and never
inferred later (``docs/outcome-contract.md``, ``docs/integrations.md``):

- unknown tool (:func:`unknown_tool`): error / not_started / ``tool_not_registered``;
- invalid arguments (:func:`invalid_arguments`): error / not_started / ``invalid_tool_params``;
- refused before running (:func:`not_started`): error / not_started / the given reason;
- rejected approval (:func:`rejected`): cancelled / not_started;
- cancelled before it ran (:func:`cancelled_before`): cancelled / not_started;
- returned output (:func:`succeeded`): success / success;
- a typed failure (:func:`failed`): error / error / the given type;
- a raised exception (:func:`raised`): error / error / :func:`error_type_of`;
- cancelled or interrupted while it ran (:func:`cancelled_during`): cancelled / cancelled;
- post-processing failed after success (:func:`post_processing_failed`): error / success;
- a provider duplicate (:func:`provider_duplicate`): error / not_started, never executed;
- past the tool-call cap (:func:`skipped_by_cap`): error / not_started / ``tool_call_cap``.

(terminal status / execution status / execution error type.)

A raised exception's execution error type (:func:`error_type_of`) is, in order:

1. its ``error_type`` attribute, when that is a string matching
   :data:`ERROR_TYPE_PATTERN` (lower-case ``snake_case``, at most 64 characters);
2. else the first class of its method resolution order listed in
   :data:`EXCEPTION_ERROR_TYPES` (so ``ConnectionRefusedError`` is
   ``connection_error``);
3. else ``unhandled_exception``.

It is never parsed from the exception's message.  Sans-IO: values in, values out.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import attrs

__all__ = [
    "ERROR_TYPE_PATTERN",
    "EXCEPTION_ERROR_TYPES",
    "INVALID_TOOL_PARAMS",
    "POST_PROCESSING_FAILED",
    "TOOL_CALL_CAP_SKIPPED",
    "TOOL_NOT_REGISTERED",
    "UNHANDLED_EXCEPTION",
    "CallOutcome",
    "FunctionCall",
    "cancelled_before",
    "cancelled_during",
    "error_type_of",
    "failed",
    "invalid_arguments",
    "not_started",
    "post_processing_failed",
    "provider_duplicate",
    "raised",
    "rejected",
    "skipped_by_cap",
    "succeeded",
    "unknown_tool",
]

#: What a valid ``error_type`` attribute looks like (a low-cardinality classified reason).
ERROR_TYPE_PATTERN = re.compile(r"[a-z][a-z0-9_]{0,63}")
_FULLMATCH = ERROR_TYPE_PATTERN.fullmatch
#: The type of a raised exception that carries no valid ``error_type`` and is not in the table.
UNHANDLED_EXCEPTION = "unhandled_exception"
#: The not-started reasons the invalid-parameter protection counts.
INVALID_TOOL_PARAMS = "invalid_tool_params"
TOOL_NOT_REGISTERED = "tool_not_registered"
#: The terminal error type of a post-processing failure after a successful execution.
POST_PROCESSING_FAILED = "post_processing_failed"
#: The not-started reason of a call past the per-prompt tool-call cap (never executed).
TOOL_CALL_CAP_SKIPPED = "tool_call_cap"

#: Builtin exception classes and their execution error types (checked along the MRO).
EXCEPTION_ERROR_TYPES: Mapping[type[BaseException], str] = {
    FileNotFoundError: "file_not_found",
    IsADirectoryError: "is_a_directory",
    NotADirectoryError: "not_a_directory",
    PermissionError: "permission_denied",
    FileExistsError: "file_exists",
    TimeoutError: "timeout",
    ConnectionError: "connection_error",
    InterruptedError: "interrupted",
    MemoryError: "out_of_memory",
    RecursionError: "recursion_error",
    UnicodeError: "unicode_error",
    NotImplementedError: "not_implemented",
}


@attrs.frozen(kw_only=True)
class FunctionCall:
    """One function call of a model turn, as the provider sent it."""

    call_id: str
    name: str
    args: Mapping[str, Any] = attrs.field(factory=dict)
    #: Why the provider's arguments could not be decoded (not JSON); the call is then
    #: ``not_started`` / ``invalid_tool_params`` like any schema violation.
    arguments_error: str | None = None


@attrs.frozen(kw_only=True)
class CallOutcome:
    """The settled outcome of one call: both axes, and what the model is told."""

    call_id: str
    name: str  #: the name the model used
    policy_tool_name: str | None  #: the registry-resolved identity, None when unresolved
    tool_type: str | None
    terminal_status: str
    execution_status: str
    execution_error_type: str | None  #: frozen when execution settled
    error_type: str | None = None  #: the terminal error type (later steps may change it)
    output: str = ""  #: text for the model: the result, or the error message

    @property
    def failed(self) -> bool:
        return self.terminal_status == "error"


def error_type_of(exc: BaseException) -> str:
    """The execution error type of a raised exception (the rule in the module docstring)."""
    claimed = getattr(exc, "error_type", None)
    if isinstance(claimed, str) and ERROR_TYPE_PATTERN.fullmatch(claimed):
        return claimed
    for cls in type(exc).__mro__:
        found = EXCEPTION_ERROR_TYPES.get(cls)
        if found is not None:
            return found
    return UNHANDLED_EXCEPTION


def _identity(call: FunctionCall, tool: str | None) -> str:
    return call.name if tool is None else tool


def succeeded(
    call: FunctionCall, output: str = "", *, tool: str | None = None, tool_type: str = "native"
) -> CallOutcome:
    """The tool ran and returned ``output``; ``tool`` is its identity (default: the call's name)."""
    name = call.name
    return CallOutcome(
        call_id=call.call_id,
        name=name,
        policy_tool_name=name if tool is None else tool,
        tool_type=tool_type,
        terminal_status="success",
        execution_status="success",
        execution_error_type=None,
        output=output,
    )


def failed(
    call: FunctionCall,
    error_type: str,
    message: str,
    *,
    tool: str | None = None,
    tool_type: str = "native",
) -> CallOutcome:
    """The tool ran and failed for the classified reason ``error_type``."""
    if not _FULLMATCH(error_type):
        raise ValueError(
            f"error_type must be lower-case snake_case of at most 64 characters; got {error_type!r}"
        )
    name = call.name
    return CallOutcome(
        call_id=call.call_id,
        name=name,
        policy_tool_name=name if tool is None else tool,
        tool_type=tool_type,
        terminal_status="error",
        execution_status="error",
        execution_error_type=error_type,
        error_type=error_type,
        output=message,
    )


def raised(
    call: FunctionCall,
    exc: BaseException,
    *,
    tool: str | None = None,
    tool_type: str = "native",
    message: str | None = None,
    error_type: str | None = None,
) -> CallOutcome:
    """The tool ran and raised ``exc``: error/error, typed by :func:`error_type_of` unless
    the host's own table typed it already (``error_type``)."""
    text = message if message is not None else f"{type(exc).__name__}: {exc}"
    typed = error_type if error_type is not None else error_type_of(exc)
    return failed(call, typed, text, tool=tool, tool_type=tool_type)


def not_started(
    call: FunctionCall,
    error_type: str,
    message: str,
    *,
    tool: str | None = None,
    tool_type: str | None = "native",
) -> CallOutcome:
    """The call never started, for the reason ``error_type``."""
    return CallOutcome(
        call_id=call.call_id,
        name=call.name,
        policy_tool_name=_identity(call, tool),
        tool_type=tool_type,
        terminal_status="error",
        execution_status="not_started",
        execution_error_type=error_type,
        error_type=error_type,
        output=message,
    )


def invalid_arguments(
    call: FunctionCall, message: str, *, tool: str | None = None, tool_type: str = "native"
) -> CallOutcome:
    """The arguments failed validation: never started, never counted by the guard."""
    return not_started(call, INVALID_TOOL_PARAMS, message, tool=tool, tool_type=tool_type)


def unknown_tool(call: FunctionCall, message: str | None = None) -> CallOutcome:
    """No tool has the call's name: never started, no tool identity."""
    text = message if message is not None else f"tool {call.name!r} is not registered"
    return attrs.evolve(
        not_started(call, TOOL_NOT_REGISTERED, text), policy_tool_name=None, tool_type=None
    )


def _cancelled(
    call: FunctionCall, execution_status: str, message: str, tool: str | None, tool_type: str
) -> CallOutcome:
    return CallOutcome(
        call_id=call.call_id,
        name=call.name,
        policy_tool_name=_identity(call, tool),
        tool_type=tool_type,
        terminal_status="cancelled",
        execution_status=execution_status,
        execution_error_type=None,
        output=message,
    )


def cancelled_before(
    call: FunctionCall,
    message: str = "cancelled before execution",
    *,
    tool: str | None = None,
    tool_type: str = "native",
) -> CallOutcome:
    """Cancelled before the tool started: cancelled / not_started."""
    return _cancelled(call, "not_started", message, tool, tool_type)


def rejected(
    call: FunctionCall,
    message: str = "the user did not allow this call",
    *,
    tool: str | None = None,
    tool_type: str = "native",
) -> CallOutcome:
    """An approval was refused (or the approval request was cancelled): cancelled / not_started."""
    return _cancelled(call, "not_started", message, tool, tool_type)


def cancelled_during(
    call: FunctionCall,
    message: str = "cancelled during execution",
    *,
    tool: str | None = None,
    tool_type: str = "native",
) -> CallOutcome:
    """Cancelled (or interrupted) while the tool ran: cancelled / cancelled."""
    return _cancelled(call, "cancelled", message, tool, tool_type)


def post_processing_failed(
    outcome: CallOutcome, message: str, *, error_type: str = POST_PROCESSING_FAILED
) -> CallOutcome:
    """A step after a successful execution failed: error / success (the execution axis stays)."""
    if outcome.execution_status != "success":
        raise ValueError(
            "post-processing can only fail after a successful execution; "
            f"got execution status {outcome.execution_status!r}"
        )
    return attrs.evolve(outcome, terminal_status="error", error_type=error_type, output=message)


def provider_duplicate(
    call: FunctionCall, *, tool: str | None = None, tool_type: str | None = "native"
) -> CallOutcome:
    """A replayed call id that history already answered: recorded, never executed."""
    return CallOutcome(
        call_id=call.call_id,
        name=call.name,
        policy_tool_name=tool,
        tool_type=tool_type if tool is not None else None,
        terminal_status="error",
        execution_status="not_started",
        execution_error_type=None,
        error_type="duplicate_call_id",
        output="this call id was already answered; it was not executed again",
    )


def skipped_by_cap(
    call: FunctionCall, *, tool: str | None = None, tool_type: str | None = "native"
) -> CallOutcome:
    """A call past the per-prompt tool-call cap: never started (a skip, not a failure)."""
    outcome = not_started(
        call,
        TOOL_CALL_CAP_SKIPPED,
        "skipped: this prompt reached its tool-call cap before this call could run",
        tool=tool,
        tool_type=tool_type,
    )
    return outcome if tool is not None else attrs.evolve(outcome, policy_tool_name=None)
