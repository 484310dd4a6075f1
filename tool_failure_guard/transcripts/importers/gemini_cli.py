"""Gemini CLI chat logs (npm ``@google/gemini-cli`` 0.61.0; found by running it here).

Gemini CLI records each session at
``~/.gemini/tmp/<project>/chats/session-<time>-<id8>.jsonl`` (its
``ChatRecordingService``), in ``-p`` as in the terminal: a first line of
metadata (``sessionId``, ``projectHash``, ``startTime``, ``kind``), then
message records (``id``, ``type`` ``user`` / ``gemini`` / ..., ``content``;
a ``gemini`` message has ``tokens``, ``model`` and, once its calls settled,
``toolCalls``: ``id``, ``name``, ``args``, ``status``, ``result`` as the
``functionResponse`` parts the model was sent) and ``{"$set": {...}}`` updates.
A message written again with the same ``id`` replaces the earlier one (the
CLI writes a model message first without, then with its calls); a ``$set``
of ``messages`` replaces the list.  Older versions wrote the same record as one
JSON document, ``session-*.json`` with a ``messages`` list; it is read alike.

Mapping (``docs/transcripts.md``; :data:`RULES` in the order tried): a run is
one user prompt (a ``user`` message with text that is not the CLI's
``<session_context>``; a subagent's own log, ``kind`` ``subagent`` under
``chats/<parent session id>/``, holds none); a turn is one ``gemini`` message, its batch its
``toolCalls``; tokens ``tokens.input`` / ``tokens.output``.  The log keeps a
call's ``status`` but not the error type the CLI knew (its stream-json output
has it), so the type is read from the result's text (``heuristic``), and a
shell command is ``success`` with ``Exit Code: N`` in its output.  Success is
not recorded in the chat log (None).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tool_failure_guard.agent_outcomes import vocabulary as v
from tool_failure_guard.guard import ExecutionStatus, TerminalStatus
from tool_failure_guard.transcripts.importers._ids import distinct_across_turns
from tool_failure_guard.transcripts.importers._read import (
    as_int,
    fingerprint,
    head_records,
    json_document,
    records,
)
from tool_failure_guard.transcripts.model import ImportedCall, Run, TranscriptError, Turn

KIND = "gemini-cli"
SESSION_CONTEXT = "<session_context>"

_Axes = tuple[TerminalStatus, ExecutionStatus, "str | None", bool]
#: rule -> (terminal, execution, error type, heuristic); the docs table shows the same rows
RULES: dict[str, _Axes] = {
    "cancelled": (TerminalStatus.CANCELLED, ExecutionStatus.CANCELLED, None, False),
    "error, tool not found": (
        TerminalStatus.ERROR,
        ExecutionStatus.NOT_STARTED,
        v.TOOL_NOT_REGISTERED,
        True,
    ),
    "error, params invalid": (
        TerminalStatus.ERROR,
        ExecutionStatus.NOT_STARTED,
        v.INVALID_TOOL_PARAMS,
        True,
    ),
    "error, file not found": (TerminalStatus.ERROR, ExecutionStatus.ERROR, v.FILE_NOT_FOUND, True),
    "error": (TerminalStatus.ERROR, ExecutionStatus.ERROR, v.EXECUTION_FAILED, False),
    "success, shell exit code not 0": (
        TerminalStatus.ERROR,
        ExecutionStatus.ERROR,
        v.SHELL_EXECUTE_ERROR,
        True,
    ),
    "success": (TerminalStatus.SUCCESS, ExecutionStatus.SUCCESS, None, False),
    "no result": (TerminalStatus.ERROR, ExecutionStatus.UNKNOWN, None, False),
}
_NOT_FOUND = re.compile(r'^Tool "[^"]*" not found')
_EXIT_CODE = re.compile(r"^Exit Code: (-?\d+)$", re.M)
_SNIFF_KEYS = (b'"sessionId"', b'"projectHash"', b'"startTime"')


def sniff(path: Path, head: bytes) -> bool:
    """A Gemini CLI chat log: a first record with ``sessionId``, ``projectHash``, ``startTime``."""
    first = head_records(head, 1)
    if first:
        return all(k.strip(b'"').decode() in first[0] for k in _SNIFF_KEYS)
    start = head.lstrip()[:1]  # the older whole-document form, maybe longer than the head
    return start == b"{" and all(k in head[:4096] for k in _SNIFF_KEYS)


def _messages(path: Path) -> tuple[dict[str, Any], list[tuple[int, dict[str, Any]]]]:
    """The session's metadata and its final messages, each with the line it was first written."""
    if path.suffix == ".json":
        document = json_document(path)
        listed = document.get("messages")
        if not isinstance(listed, list):
            raise TranscriptError(str(path), 1, "a Gemini CLI session without messages")
        return document, [(n, m) for n, m in enumerate(listed, 1) if isinstance(m, dict)]
    metadata: dict[str, Any] = {}
    order: list[str] = []
    by_id: dict[str, tuple[int, dict[str, Any]]] = {}
    for line, data in records(path):
        update = data.get("$set")
        if isinstance(update, dict):
            listed = update.get("messages")
            if isinstance(listed, list):
                order, by_id = [], {}
                for message in listed:
                    if isinstance(message, dict) and isinstance(message.get("id"), str):
                        order.append(message["id"])
                        by_id[message["id"]] = (line, message)
            continue
        if "type" not in data and "sessionId" in data:
            metadata = data
            continue
        message_id = data.get("id")
        if not isinstance(message_id, str):
            raise TranscriptError(str(path), line, "a message record without an id")
        if message_id not in by_id:
            order.append(message_id)
            by_id[message_id] = (line, data)
        else:
            by_id[message_id] = (by_id[message_id][0], data)
    return metadata, [by_id[i] for i in order]


def _is_prompt(message: dict[str, Any]) -> bool:
    if message.get("type") != "user":
        return False
    content = message.get("content")
    if isinstance(content, str):
        return not content.startswith(SESSION_CONTEXT)
    if not isinstance(content, list):
        return False
    texts = [p.get("text") for p in content if isinstance(p, dict)]
    if not texts or not all(isinstance(t, str) for t in texts):
        return False  # function responses, not a prompt
    return not str(texts[0]).startswith(SESSION_CONTEXT)


def _response(call: dict[str, Any]) -> tuple[str | None, str | None]:
    """(error text, output text) of the call's ``functionResponse``."""
    result = call.get("result")
    for part in result if isinstance(result, list) else []:
        response = part.get("functionResponse") if isinstance(part, dict) else None
        body = response.get("response") if isinstance(response, dict) else None
        if isinstance(body, dict):
            error, output = body.get("error"), body.get("output")
            return (
                error if isinstance(error, str) else None,
                output if isinstance(output, str) else None,
            )
    return None, None


def rule(call: dict[str, Any]) -> tuple[str, str]:
    """Which :data:`RULES` row a recorded tool call is, and its error text."""
    status = call.get("status")
    error, output = _response(call)
    display = call.get("resultDisplay")
    text = error or (display if isinstance(display, str) else "") or ""
    if status == "cancelled":
        return "cancelled", text
    if status == "error":
        if _NOT_FOUND.match(text):
            return "error, tool not found", text
        if text.startswith("params "):
            return "error, params invalid", text
        if text.startswith("File not found"):
            return "error, file not found", text
        return "error", text
    if status == "success":
        code = _EXIT_CODE.search(output or "")
        if call.get("name") == "run_shell_command" and code and code[1] != "0":
            return "success, shell exit code not 0", output or ""
        return "success", ""
    return "no result", ""


def _call(call: dict[str, Any], path: Path, line: int) -> ImportedCall:
    name, call_id = call.get("name"), call.get("id")
    if not isinstance(name, str) or not name or not isinstance(call_id, str):
        raise TranscriptError(str(path), line, "a tool call without a name or id")
    row, text = rule(call)
    terminal, execution, error_type, heuristic = RULES[row]
    return ImportedCall(
        call_id=call_id,
        tool=name,
        arguments_fingerprint=fingerprint(call.get("args", {})),
        status=terminal,
        execution_status=execution,
        error_type=error_type,
        error_text=v.bounded_text(text)
        if terminal is not TerminalStatus.SUCCESS and text
        else None,
        heuristic=heuristic,
        mcp=name.startswith("mcp_"),
    )


def read(path: Path) -> Iterator[Run]:
    """One :class:`Run` per prompt of the session."""
    metadata, messages = _messages(Path(path))
    if metadata.get("kind") == "subagent":  # one invoke_agent call of its parent session
        return
    session = metadata.get("sessionId")
    session = session if isinstance(session, str) else Path(path).stem
    prompts: list[list[Turn]] = []
    models: list[str | None] = []
    for line, message in messages:
        if _is_prompt(message):
            prompts.append([])
            models.append(None)
        elif message.get("type") == "gemini":
            if not prompts:  # a resumed file may start mid-prompt
                prompts.append([])
                models.append(None)
            calls = message.get("toolCalls")
            calls = [c for c in calls if isinstance(c, dict)] if isinstance(calls, list) else []
            tokens = message.get("tokens")
            tokens = tokens if isinstance(tokens, dict) else {}
            prompts[-1].append(
                Turn(
                    line=line,
                    calls=tuple(_call(c, Path(path), line) for c in calls),
                    input_tokens=as_int(tokens.get("input")),
                    output_tokens=as_int(tokens.get("output")),
                )
            )
            if isinstance(message.get("model"), str):
                models[-1] = message["model"]
    for number, turns in enumerate(prompts, start=1):
        yield Run(
            agent=KIND,
            source=str(path),
            run_id=session if len(prompts) == 1 else f"{session}/{number}",
            turns=distinct_across_turns(turns),
            succeeded=None,
            model=models[number - 1],
        )
