"""tool-failure-guard's pure core: ACP repeated tool-call protection, sans-IO.

One :class:`RepeatedToolFailureGuard` per interactive foreground ACP prompt;
:meth:`~RepeatedToolFailureGuard.observe` once per fully settled tool batch,
with the batch's narrow :class:`BatchReceipt` and the :class:`InputBoundary`
the mid-turn drain reported.  The returned :class:`Decision` tells the session
whether to do nothing, record telemetry, inject the corrective reminder, or
stop automatic continuation.  No files, sockets, clocks, randomness or global
state: values in, decisions out.
"""

from tool_failure_guard.guard._classify import (
    INELIGIBLE_RESET_REASON_PRECEDENCE,
    OUTCOME_TABLE,
    BatchVerdict,
    ObservationClass,
    classify_batch,
    classify_observation,
)
from tool_failure_guard.guard._guard import RepeatedToolFailureGuard
from tool_failure_guard.guard._mode import resolve_mode
from tool_failure_guard.guard._table import (
    TRANSITIONS,
    ChartError,
    Transition,
    declared_transitions,
    derive_table,
)
from tool_failure_guard.guard._values import (
    GUARD_MODE_ENV_VAR,
    REPEATED_TOOL_FAILURE_BATCH_THRESHOLD,
    REPEATED_TOOL_FAILURE_REMINDER,
    REPEATED_TOOL_FAILURE_STOP_MESSAGE,
    REPEATED_TOOL_FAILURE_THRESHOLD,
    BatchReceipt,
    Decision,
    DecisionKind,
    ExecutionStatus,
    FailureKey,
    GuardMode,
    InputBoundary,
    Observation,
    Phase,
    ResetReason,
    TerminalStatus,
    ToolType,
)

__all__ = [
    "GUARD_MODE_ENV_VAR",
    "INELIGIBLE_RESET_REASON_PRECEDENCE",
    "OUTCOME_TABLE",
    "REPEATED_TOOL_FAILURE_BATCH_THRESHOLD",
    "REPEATED_TOOL_FAILURE_REMINDER",
    "REPEATED_TOOL_FAILURE_STOP_MESSAGE",
    "REPEATED_TOOL_FAILURE_THRESHOLD",
    "TRANSITIONS",
    "BatchReceipt",
    "BatchVerdict",
    "ChartError",
    "Decision",
    "DecisionKind",
    "ExecutionStatus",
    "FailureKey",
    "GuardMode",
    "InputBoundary",
    "Observation",
    "ObservationClass",
    "Phase",
    "RepeatedToolFailureGuard",
    "ResetReason",
    "TerminalStatus",
    "ToolType",
    "Transition",
    "classify_batch",
    "classify_observation",
    "declared_transitions",
    "derive_table",
    "resolve_mode",
]
