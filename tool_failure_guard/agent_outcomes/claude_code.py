"""How a Claude Code tool result maps onto the outcome contract (``docs/transcripts.md``).

Claude Code records a result as a ``tool_result`` content block (``is_error``
and the text the model was shown) plus, on the same line, the tool's own
result object (``toolUseResult`` in session logs, ``tool_use_result`` in
stream-json; for an error it is the text again).  Only ``is_error``, the tool's
name (``mcp__`` tools are MCP tools) and the ``interrupted`` flag of a shell
result are structured; every finer distinction below is read from the text
and is marked ``heuristic``.  The rules are tried in the order of
:data:`RULES`; the first that matches decides.

The text is outside input (a hostile tool can return megabytes of it), so the
rules read only its first :data:`MAX_CLASSIFIED_TEXT` characters and use plain
string operations, never a backtracking pattern: a classification costs time
linear in that bound, whatever the text.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

import attrs

from tool_failure_guard.guard import ExecutionStatus, TerminalStatus

from . import vocabulary as v

#: The most characters of a result's text the rules read; the rest is never looked at.
MAX_CLASSIFIED_TEXT: Final = 64 * 1024

_OPEN_TAG: Final = "<tool_use_error>"
_CLOSE_TAG: Final = "</tool_use_error>"


def _cut(text: str) -> str:
    """The part of ``text`` the rules read (cut before any matching)."""
    return text[:MAX_CLASSIFIED_TEXT]


@attrs.frozen(kw_only=True)
class Outcome:
    status: TerminalStatus
    execution_status: ExecutionStatus
    error_type: str | None
    heuristic: bool


@attrs.frozen(kw_only=True)
class Result:
    """One recorded result, as the rules read it."""

    tool: str
    is_error: bool
    text: str = attrs.field(converter=_cut)  #: its first MAX_CLASSIFIED_TEXT characters
    interrupted: bool  #: the tool's result object says it was interrupted (shell)


def _out(status: str, execution: str, error_type: str | None, heuristic: bool) -> Outcome:
    return Outcome(
        status=TerminalStatus(status),
        execution_status=ExecutionStatus(execution),
        error_type=error_type,
        heuristic=heuristic,
    )


def _inner(text: str) -> str | None:
    """What ``<tool_use_error>...</tool_use_error>`` wraps (the closing tag optional), or None.

    Whitespace around the whole is ignored, as is a text that does not start with
    the tag.  String operations on the cut text: linear, never backtracking.
    """
    body = _cut(text).lstrip()
    if not body.startswith(_OPEN_TAG):
        return None
    body = body[len(_OPEN_TAG) :].rstrip()
    return body[: -len(_CLOSE_TAG)] if body.endswith(_CLOSE_TAG) else body


def _interrupted_flag(r: Result) -> Outcome | None:
    return _out("cancelled", "cancelled", None, False) if r.interrupted else None


def _interrupted_text(r: Result) -> Outcome | None:
    if r.is_error and r.text.lstrip().startswith("[Request interrupted by user"):
        return _out("cancelled", "cancelled", None, True)
    return None


def _not_granted(r: Result) -> Outcome | None:
    # -p without a matching allow rule, or a user who said no in the terminal (or declined
    # the permission prompt: "doesn't want to take this action right now")
    if not r.is_error:
        return None
    if (
        ("requested permissions to" in r.text and "haven't granted it yet" in r.text)
        or "doesn't want to proceed with this tool use" in r.text
        or "doesn't want to take this action right now" in r.text
    ):
        return _out("cancelled", "not_started", None, True)
    return None


def _refused_before_running(r: Result) -> Outcome | None:
    # Claude Code wraps what its validation refused, before the tool ran, in <tool_use_error>
    inner = _inner(r.text) if r.is_error else None
    if inner is None:
        return None
    if inner.lstrip().startswith("Error: No such tool available"):
        return _out("error", "not_started", v.TOOL_NOT_REGISTERED, True)
    return _out("error", "not_started", v.INVALID_TOOL_PARAMS, True)


def _mcp_error(r: Result) -> Outcome | None:
    if r.is_error and r.tool.startswith("mcp__"):
        return _out("error", "error", v.MCP_TOOL_ERROR, False)
    return None


def _shell(r: Result) -> Outcome | None:
    if not r.is_error or r.tool != "Bash":
        return None
    if "Command timed out" in r.text:
        return _out("error", "error", v.EXECUTION_TIMEOUT, True)
    if r.text.lstrip().startswith("Exit code "):
        return _out("error", "error", v.SHELL_EXECUTE_ERROR, True)
    return None


def _by_text(r: Result) -> Outcome | None:
    if not r.is_error:
        return None
    text = r.text
    if "File does not exist" in text or "ENOENT" in text or "No such file or directory" in text:
        return _out("error", "error", v.FILE_NOT_FOUND, True)
    if "EACCES" in text or "ermission denied" in text:
        return _out("error", "error", v.PERMISSION_DENIED, True)
    if "timed out" in text:
        return _out("error", "error", v.EXECUTION_TIMEOUT, True)
    return None


def _other_error(r: Result) -> Outcome | None:
    return _out("error", "error", v.EXECUTION_FAILED, False) if r.is_error else None


def _succeeded(r: Result) -> Outcome | None:
    return _out("success", "success", None, False)


#: The rules, in the order they are tried (each row of the mapping table is one).
RULES: Final[tuple[Callable[[Result], Outcome | None], ...]] = (
    _interrupted_flag,
    _interrupted_text,
    _not_granted,
    _refused_before_running,
    _mcp_error,
    _shell,
    _by_text,
    _other_error,
    _succeeded,
)

#: A call the log holds no result for (the session ended first): nothing is known.
NO_RESULT: Final = _out("error", "unknown", None, False)


def classify(result: Result) -> Outcome:
    for rule in RULES:
        found = rule(result)
        if found is not None:
            return found
    raise AssertionError("the last rule always matches")  # pragma: no cover


def result_text(content: Any) -> str:
    """The text of a ``tool_result`` block's content (a string, or text blocks)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [
            str(block.get("text", ""))
            for block in content
            if isinstance(block, dict) and block.get("type") == "text"
        ]
        return "\n".join(parts)
    return ""


def interrupted(structured: Any) -> bool:
    """The shell result object's ``interrupted`` flag (False for anything else)."""
    return isinstance(structured, dict) and structured.get("interrupted") is True


# -- the hooks' view (``tool-failure-guard hook claude-code``, the Claude Agent SDK adapter) --

#: The execution error type of a failure the rules cannot type: ineligible (the seed's unknown).
UNCLASSIFIED: Final = "unknown"

#: The rules that type an executed failure's error text, in order (PostToolUseFailure).
_FAILURE_RULES: Final[tuple[Callable[[Result], Outcome | None], ...]] = (
    _interrupted_text,
    _mcp_error,
    _shell,
    _by_text,
)


def classify_hook_failure(tool: str, error: str, *, is_interrupt: bool) -> Outcome:
    """A ``PostToolUseFailure`` event: the tool ran and failed, or was interrupted.

    ``is_interrupt`` is a cancellation; the text is typed by the same rules as a
    logged error result (``Exit code 3`` -> ``shell_execute_error``, ``File does not
    exist.`` -> ``file_not_found``, ...); text none of them types is
    :data:`UNCLASSIFIED` (error / error / ``unknown``: never an eligible failure).
    """
    if is_interrupt:
        return _out("cancelled", "cancelled", None, False)
    text = _inner(error)
    result = Result(
        tool=tool, is_error=True, text=error if text is None else text, interrupted=False
    )
    for rule in _FAILURE_RULES:
        found = rule(result)
        if found is not None:
            return found
    return _out("error", "error", UNCLASSIFIED, True)


def classify_batch_entry(tool: str, text: str) -> Outcome:
    """A ``PostToolBatch`` call with no ``PostToolUseFailure``: refused before it ran, or a success.

    Claude Code sends no per-call hook for invalid arguments, an unknown tool or a
    call it was not allowed to make: only the batch entry's text says so
    (``<tool_use_error>...``, the permission sentence).  Anything else succeeded.
    """
    result = Result(tool=tool, is_error=True, text=text, interrupted=False)
    for rule in (_not_granted, _refused_before_running):
        found = rule(result)
        if found is not None:
            return found
    return _out("success", "success", None, False)
