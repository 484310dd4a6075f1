"""tool-failure-guard: repeated tool-call protection for agents, as a library.

``import tool_failure_guard`` is the public surface the docs teach
(``docs/integrations.md``): the guard and its values (from ``guard``), the
host-neutral protection core (:mod:`tool_failure_guard.core`) and the mode
helper.  Importing it loads none of them (PEP 562): each name of ``__all__`` is
looked up in :data:`_HOME` on first use, its module imported then (with attrs and the
rest of the library it needs), and the very object of that module kept here, so
later uses are plain attribute reads.  ``from tool_failure_guard import X`` and
``import *`` work as for any module; type checkers read the imports below.
It never loads ACP, OpenAI, MCP or DuckDB code.
The command line (``tool-failure-guard``: replay, render, agent, demo, ...)
lives in :mod:`tool_failure_guard.commands.cli` and is imported only when run
(``tool-failure-guard --version`` prints ``__version__``, the installed distribution's).
"""

import importlib as _importlib

# ``typing.TYPE_CHECKING`` without importing ``typing`` (which ``python -c pass`` does not
# load); mypy and ruff treat any ``TYPE_CHECKING`` name as true when checking.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from tool_failure_guard import core
    from tool_failure_guard import guard as guard
    from tool_failure_guard import modes as modes
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

    __version__: str

_CORE = "tool_failure_guard.core"
_GUARD = "tool_failure_guard.guard"
#: Where each public name lives: the module it is read from on first use (``core`` is
#: that submodule itself; so are ``guard`` and ``modes``, not in ``__all__``, which the
#: eager import used to leave here as attributes).  ``tests/test_facade.py`` checks that
#: this table, ``__all__`` and the imports above name the same things, each the very
#: object of its module.
_HOME: dict[str, str] = {
    "core": _CORE,
    "guard": _GUARD,
    "modes": "tool_failure_guard.modes",
    "DEFAULT_TOOL_CALL_CAP": _CORE,
    "LOOP_INVALID_TOOL_PARAMS": _CORE,
    "LOOP_PROVIDER_DUPLICATE": _CORE,
    "LOOP_REPEATED_TOOL_FAILURE": _CORE,
    "LOOP_TOOL_CALL_CAP": _CORE,
    "LOOP_TYPES_IN_ORDER": _CORE,
    "QUIET_BOUNDARY": _CORE,
    "STOP_NOTICES": _CORE,
    "Action": _CORE,
    "Admission": _CORE,
    "BatchSettlement": _CORE,
    "CallIdDeduplicator": _CORE,
    "CallOutcome": _CORE,
    "CallRecord": _CORE,
    "Continue": _CORE,
    "FunctionCall": _CORE,
    "GuardStep": _CORE,
    "PromptCancelled": _CORE,
    "PromptProtection": _CORE,
    "ReceiptBuilder": _CORE,
    "Stop": _CORE,
    "error_type_of": _CORE,
    "GUARD_MODE_ENV_VAR": _GUARD,
    "REPEATED_TOOL_FAILURE_BATCH_THRESHOLD": _GUARD,
    "REPEATED_TOOL_FAILURE_REMINDER": _GUARD,
    "REPEATED_TOOL_FAILURE_STOP_MESSAGE": _GUARD,
    "REPEATED_TOOL_FAILURE_THRESHOLD": _GUARD,
    "BatchReceipt": _GUARD,
    "Decision": _GUARD,
    "DecisionKind": _GUARD,
    "ExecutionStatus": _GUARD,
    "GuardMode": _GUARD,
    "InputBoundary": _GUARD,
    "Observation": _GUARD,
    "Phase": _GUARD,
    "RepeatedToolFailureGuard": _GUARD,
    "ResetReason": _GUARD,
    "TerminalStatus": _GUARD,
    "ToolType": _GUARD,
    "classify_batch": _GUARD,
    "classify_observation": _GUARD,
    "resolve_mode": _GUARD,
    "mode_for_run": "tool_failure_guard.modes",
}


def __getattr__(name: str) -> object:
    """A public name, imported from its home on first use and kept; ``__version__``."""
    home = _HOME.get(name)
    if home is not None:
        module = _importlib.import_module(home)
        value = module if home == f"{__name__}.{name}" else getattr(module, name)
        globals()[name] = value
        return value
    if name == "__version__":
        # the installed distribution's (``_version.py``), read when asked for, never kept:
        # importing the package reads no distribution metadata
        from tool_failure_guard._version import installed_version

        return installed_version()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_HOME})


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
