"""One table for every adapter: a raised exception -> its execution error type.

The core's rule comes first (:func:`tool_failure_guard.core.error_type_of`: an
``error_type`` attribute, else the builtin class table).  What the core calls
``unhandled_exception`` may be a framework's *failure signal*, the exception a tool
raises to answer the model with a failure (pydantic-ai's ``ToolFailed`` and
``ModelRetry``, LangChain's ``ToolException``).  A signal is typed by the exception it
was raised from (``raise ToolException("...") from FileNotFoundError(...)``, or raised
while handling one) when the core classifies that one, else by its own row of
:data:`FAILURE_SIGNALS`.  So the same failing tool is the same failure key in every
framework: ``file_not_found`` whether it raises ``ToolFailed`` or ``ToolException``
from a ``FileNotFoundError``, ``tool_failed`` for either without a cause.

Signals are named by module and class, so this module imports no framework.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from tool_failure_guard.core import (
    UNHANDLED_EXCEPTION,
    CallOutcome,
    FunctionCall,
    error_type_of,
    raised,
)

#: ``module.Class`` of a framework's failure signal -> its type when no cause classifies it.
FAILURE_SIGNALS: Final[Mapping[str, str]] = {
    "pydantic_ai.exceptions.ToolFailed": "tool_failed",
    "pydantic_ai.exceptions.ModelRetry": "tool_retry",
    "langchain_core.tools.base.ToolException": "tool_failed",
}


def _signal_type(cls: type[BaseException]) -> str | None:
    for base in cls.__mro__:
        found = FAILURE_SIGNALS.get(f"{base.__module__}.{base.__qualname__}")
        if found is not None:
            return found
    return None


def _cause(exc: BaseException) -> BaseException | None:
    """What ``exc`` was raised from: ``raise ... from cause``, else the exception it was
    raised while handling (unless ``from None`` suppressed that)."""
    if exc.__cause__ is not None:
        return exc.__cause__
    return None if exc.__suppress_context__ else exc.__context__


def execution_error_type(exc: BaseException) -> str:
    """The execution error type of ``exc``, the same in every adapter (module docstring)."""
    found = error_type_of(exc)
    if found != UNHANDLED_EXCEPTION:
        return found
    signal = _signal_type(type(exc))
    if signal is None:
        return found
    cause = _cause(exc)
    if cause is not None and _signal_type(type(cause)) is None:
        from_cause = error_type_of(cause)
        if from_cause != UNHANDLED_EXCEPTION:
            return from_cause
    return signal


def raised_outcome(
    call: FunctionCall,
    exc: BaseException,
    *,
    tool: str | None = None,
    tool_type: str = "native",
    message: str | None = None,
) -> CallOutcome:
    """The tool ran and raised ``exc``: error/error, typed by :func:`execution_error_type`."""
    return raised(
        call,
        exc,
        tool=tool,
        tool_type=tool_type,
        message=message,
        error_type=execution_error_type(exc),
    )
