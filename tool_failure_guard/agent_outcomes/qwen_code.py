"""How a call in Qwen Code's ``PostToolBatch`` hook payload maps onto the outcome contract.

Qwen Code 0.24.4 reports each settled call with the specification's two axes
already set by the original itself: ``status`` (the terminal status),
``tool_response.execution_status`` and ``tool_response.error_type`` (its own
strings: ``shell_execute_error``, ``file_not_found``, ``invalid_tool_params``,
``tool_not_registered``, ``execution_denied``, ...).  Nothing is read from
text, so no row here is heuristic; a value outside the contract's enums, or an
error type that is not a low-cardinality ``snake_case`` name, is refused
(:class:`ValueError` naming the field and what it allows) rather than guessed.
"""

from __future__ import annotations

from typing import Any

from tool_failure_guard.core.outcomes import ERROR_TYPE_PATTERN
from tool_failure_guard.guard import ExecutionStatus, TerminalStatus

from .claude_code import Outcome


def _enum(kind: type[TerminalStatus] | type[ExecutionStatus], field: str, value: Any) -> Any:
    try:
        return kind(value)
    except ValueError:
        allowed = ", ".join(m.value for m in kind)
        raise ValueError(f"{field} must be one of {allowed}; got {str(value)[:80]!r}") from None


def from_batch_call(entry: dict[str, Any]) -> Outcome:
    """The outcome of one ``tool_calls[]`` entry of a ``PostToolBatch`` payload."""
    response = entry.get("tool_response")
    response = response if isinstance(response, dict) else {}
    status = _enum(TerminalStatus, "status", entry.get("status"))
    if status is TerminalStatus.SUCCESS:
        return Outcome(
            status=status,
            execution_status=ExecutionStatus.SUCCESS,
            error_type=None,
            heuristic=False,
        )
    execution = _enum(
        ExecutionStatus, "tool_response.execution_status", response.get("execution_status")
    )
    error_type = response.get("error_type")
    if error_type is not None and (
        not isinstance(error_type, str) or ERROR_TYPE_PATTERN.fullmatch(error_type) is None
    ):
        raise ValueError(
            "tool_response.error_type must be lower-case snake_case of at most 64 characters; "
            f"got {str(error_type)[:80]!r}"
        )
    if status is TerminalStatus.CANCELLED:
        error_type = None
    return Outcome(
        status=status, execution_status=execution, error_type=error_type, heuristic=False
    )
