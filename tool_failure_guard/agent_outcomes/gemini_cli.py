"""How a Gemini CLI ``AfterTool`` hook payload maps onto the outcome contract.

Gemini CLI 0.61.0 fires ``AfterTool`` only for a call that ran (a call refused
before running -- arguments that fail validation, an unknown tool -- gets no
tool hook at all).  Its ``tool_response`` carries ``error: {type, message}``
for a tool error, typed by the CLI itself (``file_not_found``, ...): that is
structured and wins.  A shell command that exits non-zero is *not* an error
to the CLI: only the text the model is shown says ``Exit Code: N``, so that row
is read from the text and marked ``heuristic``.  The rules are tried in order;
the first that matches decides.  Sans-IO: values in, outcome out.
"""

from __future__ import annotations

import re
from typing import Any, Final

from tool_failure_guard.core.outcomes import ERROR_TYPE_PATTERN
from tool_failure_guard.guard import ExecutionStatus, TerminalStatus

from . import vocabulary as v
from .claude_code import Outcome

#: The shell tool's name in Gemini CLI (and in the original, which forked from it).
SHELL_TOOL: Final = "run_shell_command"
_EXIT_CODE = re.compile(r"^Exit Code: (-?\d+)\s*$", re.MULTILINE)
#: Error types the CLI gives a call it refused before running it.
NOT_STARTED_TYPES: Final = frozenset(
    {v.INVALID_TOOL_PARAMS, v.TOOL_NOT_REGISTERED, "execution_denied"}
)


def _out(status: str, execution: str, error_type: str | None, heuristic: bool) -> Outcome:
    return Outcome(
        status=TerminalStatus(status),
        execution_status=ExecutionStatus(execution),
        error_type=error_type,
        heuristic=heuristic,
    )


def _text(value: Any) -> str:
    """``llmContent`` as text: a string, or parts with ``text``."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(_text(part) for part in value)
    if isinstance(value, dict) and isinstance(value.get("text"), str):
        return str(value["text"])
    return ""


def from_after_tool(tool_name: str, tool_response: Any) -> Outcome:
    """The outcome of the call an ``AfterTool`` payload reports."""
    response = tool_response if isinstance(tool_response, dict) else {}
    error = response.get("error")
    if isinstance(error, dict) and error:
        kind = error.get("type")
        if not isinstance(kind, str) or ERROR_TYPE_PATTERN.fullmatch(kind) is None:
            return _out("error", "error", v.EXECUTION_FAILED, False)
        if kind in NOT_STARTED_TYPES:
            return _out("error", "not_started", kind, False)
        return _out("error", "error", kind, False)
    if tool_name == SHELL_TOOL:
        found = _EXIT_CODE.search(_text(response.get("llmContent")))
        if found is not None and int(found.group(1)) != 0:
            return _out("error", "error", v.SHELL_EXECUTE_ERROR, True)
    return _out("success", "success", None, False)
