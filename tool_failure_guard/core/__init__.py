"""The host-neutral protection core: what every host of the guard shares, sans-IO.

A *host* runs the model/tool loop (the ACP session, a framework adapter, your
own loop) and does all IO; this package holds every rule, so no host
re-implements one:

- :mod:`~tool_failure_guard.core.outcomes`: :class:`FunctionCall`,
  :class:`CallOutcome` and one constructor per settle path (the dual-axis
  outcome contract; :func:`error_type_of` classifies raised exceptions);
- :mod:`~tool_failure_guard.core.receipts` and
  :mod:`~tool_failure_guard.core.settlement`: the batch receipt with its
  completeness proof (a call never seen makes it incomplete);
- :mod:`~tool_failure_guard.core.protections`: the four protections in order
  and the loop-type latch;
- :mod:`~tool_failure_guard.core.prompt` and
  :mod:`~tool_failure_guard.core.actions`: :class:`PromptProtection`, one per
  run, answering each settled batch with :class:`Continue` (and the reminder
  to add), :class:`Stop` (with its fixed notice) or :class:`PromptCancelled`.

No module here imports ``acp``, ``asyncio`` or anything that does IO.
"""

from tool_failure_guard.core.actions import (
    STOP_NOTICES,
    Action,
    Continue,
    GuardStep,
    PromptCancelled,
    Stop,
)
from tool_failure_guard.core.outcomes import (
    ERROR_TYPE_PATTERN,
    EXCEPTION_ERROR_TYPES,
    INVALID_TOOL_PARAMS,
    POST_PROCESSING_FAILED,
    TOOL_NOT_REGISTERED,
    UNHANDLED_EXCEPTION,
    CallOutcome,
    FunctionCall,
    cancelled_before,
    cancelled_during,
    error_type_of,
    failed,
    invalid_arguments,
    not_started,
    post_processing_failed,
    provider_duplicate,
    raised,
    rejected,
    succeeded,
    unknown_tool,
)
from tool_failure_guard.core.prompt import QUIET_BOUNDARY, PromptProtection
from tool_failure_guard.core.protections import (
    DEFAULT_TOOL_CALL_CAP,
    INVALID_TOOL_PARAMS_LIMIT,
    LOOP_INVALID_TOOL_PARAMS,
    LOOP_PROVIDER_DUPLICATE,
    LOOP_REPEATED_TOOL_FAILURE,
    LOOP_TOOL_CALL_CAP,
    LOOP_TYPES_IN_ORDER,
    PROVIDER_REPLAY_BATCH_LIMIT,
    Admission,
    CallIdDeduplicator,
    LoopLatch,
    PromptProtections,
)
from tool_failure_guard.core.receipts import CallRecord, ReceiptBuilder
from tool_failure_guard.core.settlement import BatchSettlement, settle_all

__all__ = [
    "DEFAULT_TOOL_CALL_CAP",
    "ERROR_TYPE_PATTERN",
    "EXCEPTION_ERROR_TYPES",
    "INVALID_TOOL_PARAMS",
    "INVALID_TOOL_PARAMS_LIMIT",
    "LOOP_INVALID_TOOL_PARAMS",
    "LOOP_PROVIDER_DUPLICATE",
    "LOOP_REPEATED_TOOL_FAILURE",
    "LOOP_TOOL_CALL_CAP",
    "LOOP_TYPES_IN_ORDER",
    "POST_PROCESSING_FAILED",
    "PROVIDER_REPLAY_BATCH_LIMIT",
    "QUIET_BOUNDARY",
    "STOP_NOTICES",
    "TOOL_NOT_REGISTERED",
    "UNHANDLED_EXCEPTION",
    "Action",
    "Admission",
    "BatchSettlement",
    "CallIdDeduplicator",
    "CallOutcome",
    "CallRecord",
    "Continue",
    "FunctionCall",
    "GuardStep",
    "LoopLatch",
    "PromptCancelled",
    "PromptProtection",
    "PromptProtections",
    "ReceiptBuilder",
    "Stop",
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
    "settle_all",
    "succeeded",
    "unknown_tool",
]
