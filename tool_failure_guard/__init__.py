"""tool-failure-guard: repeated tool-call protection for agents, as a library.

``import tool_failure_guard`` is the public surface the docs teach
(``docs/integrations.md``): the guard and its values (from ``guard``), the
host-neutral protection core (:mod:`tool_failure_guard.core`) and the mode
helper.  It stays cheap: importing it loads no ACP, OpenAI, MCP or DuckDB code.
The command line (``tool-failure-guard``: replay, render, bench, agent, demo)
lives in :mod:`tool_failure_guard.commands.cli` and is imported only when run
(``tool-failure-guard --version`` prints ``__version__``, the installed distribution's).
"""

from tool_failure_guard import core
from tool_failure_guard.core import (
    DEFAULT_TOOL_CALL_CAP,
    LOOP_INVALID_TOOL_PARAMS,
    LOOP_PROVIDER_DUPLICATE,
    LOOP_REPEATED_TOOL_FAILURE,
    LOOP_TOOL_CALL_CAP,
    LOOP_TYPES_IN_ORDER,
    QUIET_BOUNDARY,
    STOP_NOTICES,
    Action,
    Admission,
    BatchSettlement,
    CallIdDeduplicator,
    CallOutcome,
    CallRecord,
    Continue,
    FunctionCall,
    GuardStep,
    PromptCancelled,
    PromptProtection,
    ReceiptBuilder,
    Stop,
    error_type_of,
)
from tool_failure_guard.guard import (
    GUARD_MODE_ENV_VAR,
    REPEATED_TOOL_FAILURE_BATCH_THRESHOLD,
    REPEATED_TOOL_FAILURE_REMINDER,
    REPEATED_TOOL_FAILURE_STOP_MESSAGE,
    REPEATED_TOOL_FAILURE_THRESHOLD,
    BatchReceipt,
    Decision,
    DecisionKind,
    ExecutionStatus,
    GuardMode,
    InputBoundary,
    Observation,
    Phase,
    RepeatedToolFailureGuard,
    ResetReason,
    TerminalStatus,
    ToolType,
    classify_batch,
    classify_observation,
    resolve_mode,
)
from tool_failure_guard.modes import mode_for_run


# ``__version__`` (the installed distribution's, ``_version.py``) is looked up when used,
# so importing the package reads no distribution metadata.
def __getattr__(name: str) -> str:
    if name == "__version__":
        from tool_failure_guard._version import installed_version

        return installed_version()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "DEFAULT_TOOL_CALL_CAP",
    "GUARD_MODE_ENV_VAR",
    "LOOP_INVALID_TOOL_PARAMS",
    "LOOP_PROVIDER_DUPLICATE",
    "LOOP_REPEATED_TOOL_FAILURE",
    "LOOP_TOOL_CALL_CAP",
    "LOOP_TYPES_IN_ORDER",
    "QUIET_BOUNDARY",
    "REPEATED_TOOL_FAILURE_BATCH_THRESHOLD",
    "REPEATED_TOOL_FAILURE_REMINDER",
    "REPEATED_TOOL_FAILURE_STOP_MESSAGE",
    "REPEATED_TOOL_FAILURE_THRESHOLD",
    "STOP_NOTICES",
    "Action",
    "Admission",
    "BatchReceipt",
    "BatchSettlement",
    "CallIdDeduplicator",
    "CallOutcome",
    "CallRecord",
    "Continue",
    "Decision",
    "DecisionKind",
    "ExecutionStatus",
    "FunctionCall",
    "GuardMode",
    "GuardStep",
    "InputBoundary",
    "Observation",
    "Phase",
    "PromptCancelled",
    "PromptProtection",
    "ReceiptBuilder",
    "RepeatedToolFailureGuard",
    "ResetReason",
    "Stop",
    "TerminalStatus",
    "ToolType",
    "classify_batch",
    "classify_observation",
    "core",
    "error_type_of",
    "mode_for_run",
    "resolve_mode",
]
