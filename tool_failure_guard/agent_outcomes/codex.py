"""How a Codex CLI tool call maps onto the outcome contract (``docs/transcripts.md``).

A rollout records each call's result twice at most: the item the agent
completed (an ``event_msg`` ``item_completed``: ``CommandExecution`` with its
``status`` and ``exit_code``, ``McpToolCall`` with ``status`` and the MCP
result's ``isError``, ``FileChange``, ``DynamicToolCall`` with ``success``),
and the ``function_call_output`` the model was shown.  The item is
structured and wins; only where there is none (the call never reached a
tool: arguments that do not parse, an unknown tool, an escalation the
approval policy refused) is the output's text read, and those rows are
marked ``heuristic``.  Statuses are compared without case or ``_``
(``inProgress`` = ``in_progress``).
"""

from __future__ import annotations

import json
import re
from typing import Any, Final

from tool_failure_guard.guard import ExecutionStatus, TerminalStatus

from . import vocabulary as v

Outcome = tuple[TerminalStatus, ExecutionStatus, str | None, bool]

_EXIT_CODE = re.compile(r"^Process exited with code (-?\d+)\s*$", re.MULTILINE)

SUCCESS: Final[Outcome] = (TerminalStatus.SUCCESS, ExecutionStatus.SUCCESS, None, False)
#: A call the log holds no result for (the task ended first): nothing is known.
NO_RESULT: Final[Outcome] = (TerminalStatus.ERROR, ExecutionStatus.UNKNOWN, None, False)


#: Outputs of Codex's own tool handlers that say the call failed although no item or exit
#: code records it (each the start of the text its handler returns to the model): prefix ->
#: error type.  Read from text, so ``heuristic``.
FAILED_OUTPUT_PREFIXES: Final[dict[str, str]] = {
    "apply_patch verification failed": v.EXECUTION_FAILED,  # the patch does not fit the file
    "collab spawn failed": v.EXECUTION_FAILED,  # spawn_agent
    "collab manager unavailable": v.EXECUTION_FAILED,  # spawn_agent
    "write_stdin failed": v.EXECUTION_FAILED,  # e.g. "Unknown process id"
    "resources/list failed": v.MCP_TOOL_ERROR,  # list_mcp_resources
    "resources/templates/list failed": v.MCP_TOOL_ERROR,
    "resources/read failed": v.MCP_TOOL_ERROR,
}


def _out(status: str, execution: str, error_type: str | None, heuristic: bool) -> Outcome:
    return (TerminalStatus(status), ExecutionStatus(execution), error_type, heuristic)


def _status(item: dict[str, Any]) -> str:
    return str(item.get("status") or "").replace("_", "").lower()


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def from_item(item: dict[str, Any]) -> Outcome | None:
    """The outcome a completed item records; None when the item says nothing usable."""
    kind = str(item.get("type") or "").replace("_", "").lower()
    status = _status(item)
    if status == "declined":
        return _out("cancelled", "not_started", None, False)
    if status == "interrupted":
        return _out("cancelled", "cancelled", None, False)
    if kind == "commandexecution":
        code = _int(item.get("exit_code", item.get("exitCode")))
        if status == "completed" and code in (0, None):
            return SUCCESS
        if status in ("failed", "completed"):
            return _out("error", "error", v.SHELL_EXECUTE_ERROR, False)
        return None
    if kind == "mcptoolcall":
        result = item.get("result")
        failed = isinstance(result, dict) and result.get("isError") is True
        if status == "completed" and not failed and not item.get("error"):
            return SUCCESS
        if status in ("failed", "completed"):
            return _out("error", "error", v.MCP_TOOL_ERROR, False)
        return None
    if kind == "dynamictoolcall" and isinstance(item.get("success"), bool):
        return SUCCESS if item["success"] else _out("error", "error", v.EXECUTION_FAILED, False)
    if status == "completed":
        return SUCCESS
    if status == "failed":
        return _out("error", "error", v.EXECUTION_FAILED, False)
    return None


def output_text(output: Any) -> str:
    """The text of a ``function_call_output``'s ``output`` (a string, or input_text items)."""
    if isinstance(output, str):
        return output
    if isinstance(output, list):
        return "\n".join(
            str(part.get("text", ""))
            for part in output
            if isinstance(part, dict) and isinstance(part.get("text"), str)
        )
    if isinstance(output, dict):
        return output_text(output.get("content", ""))
    return ""


def from_output(output: Any) -> Outcome:
    """The outcome of a call with no completed item, from what the model was shown."""
    if isinstance(output, dict) and isinstance(output.get("success"), bool):
        return SUCCESS if output["success"] else _out("error", "error", v.EXECUTION_FAILED, False)
    text = output_text(output)
    stripped = text.lstrip()
    if stripped.startswith("failed to parse function arguments"):
        return _out("error", "not_started", v.INVALID_TOOL_PARAMS, True)
    if stripped.startswith("unsupported call") or stripped.startswith(
        "unsupported custom tool call"
    ):
        return _out("error", "not_started", v.TOOL_NOT_REGISTERED, True)
    if "reject command" in text or "rejected by user" in text:
        return _out("cancelled", "not_started", None, True)
    if stripped == "aborted" or stripped.startswith("aborted by user"):
        return _out("cancelled", "cancelled", None, True)
    for prefix, error_type in FAILED_OUTPUT_PREFIXES.items():
        if stripped.startswith(prefix):
            return _out("error", "error", error_type, True)
    code = _metadata_exit_code(stripped)
    if code is not None:  # the older shell tool's JSON output: structured
        return SUCCESS if code == 0 else _out("error", "error", v.SHELL_EXECUTE_ERROR, False)
    found = _EXIT_CODE.search(text)
    if found is not None:
        if int(found.group(1)) == 0:
            return SUCCESS
        return _out("error", "error", v.SHELL_EXECUTE_ERROR, True)
    return SUCCESS


def _metadata_exit_code(text: str) -> int | None:
    if not text.startswith("{"):
        return None
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):  # outside text: nested past the parser's depth too
        return None
    if not isinstance(value, dict) or not isinstance(value.get("metadata"), dict):
        return None
    return _int(value["metadata"].get("exit_code"))
