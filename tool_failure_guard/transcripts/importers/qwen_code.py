"""Qwen Code's own session records (the original, npm ``@qwen-code/qwen-code``, 0.24.4).

Qwen Code writes one JSON Lines file per session at
``~/.qwen/projects/<cwd, "/" as "->/chats/<session id>.jsonl``: records of
``type`` ``user`` (a prompt), ``assistant`` (one model message: Gemini-style
``message.parts``, ``functionCall`` parts for its calls, ``usageMetadata``),
``tool_result`` (one call's settled result: ``toolCallResult`` with
``callId``, ``status``, ``executionStatus``, ``errorType``) and ``system``
(telemetry snapshots: ``qwen-code.tool_call`` events carry ``tool_type``).

Mapping (``docs/transcripts.md``; no text is classified, every axis is the
agent's own record):

- a run is one prompt: a ``user`` record (``provenance`` ``real_user`` or
  none) starts the next; its id is ``<session id>#<prompt number>``;
- a turn is one ``assistant`` record; its batch the ``functionCall`` parts;
  tokens ``usageMetadata.promptTokenCount`` / ``candidatesTokenCount``;
- each call settles by its ``tool_result`` (:data:`STATUS_TABLE`); a call with
  none is ``error`` / ``unknown`` (the run ended, or Qwen Code halted it);
- ``mcp``: the telemetry's ``tool_type`` ``mcp``, else an ``mcp__`` name;
- success: not recorded (None).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tool_failure_guard.guard import ExecutionStatus, TerminalStatus
from tool_failure_guard.transcripts.importers._read import (
    as_int,
    fingerprint,
    head_records,
    records,
)
from tool_failure_guard.transcripts.model import ImportedCall, Run, TranscriptError, Turn

KIND = "qwen-code"

#: (toolCallResult.status, executionStatus) -> (terminal, execution); ``errorType`` is kept as
#: recorded for error rows, dropped for success and cancelled ones.  An execution status not
#: in the contract, or none, is ``unknown`` (the guard fails open on it).
STATUS_TABLE: dict[tuple[str, str], tuple[TerminalStatus, ExecutionStatus]] = {
    ("success", "success"): (TerminalStatus.SUCCESS, ExecutionStatus.SUCCESS),
    ("success", "not_started"): (TerminalStatus.SUCCESS, ExecutionStatus.NOT_STARTED),
    ("error", "error"): (TerminalStatus.ERROR, ExecutionStatus.ERROR),
    ("error", "not_started"): (TerminalStatus.ERROR, ExecutionStatus.NOT_STARTED),
    ("error", "success"): (TerminalStatus.ERROR, ExecutionStatus.SUCCESS),
    ("error", "cancelled"): (TerminalStatus.ERROR, ExecutionStatus.CANCELLED),
    ("cancelled", "cancelled"): (TerminalStatus.CANCELLED, ExecutionStatus.CANCELLED),
    ("cancelled", "not_started"): (TerminalStatus.CANCELLED, ExecutionStatus.NOT_STARTED),
}
_TERMINAL = {"success": TerminalStatus.SUCCESS, "error": TerminalStatus.ERROR}
_TERMINAL["cancelled"] = TerminalStatus.CANCELLED
_SNIFF_RECORDS = 20


def sniff(path: Path, head: bytes) -> bool:
    """A Qwen Code session record: ``sessionId`` + ``uuid`` records, Gemini-style ``parts``."""
    for data in head_records(head, _SNIFF_RECORDS):
        if "sessionId" not in data or "uuid" not in data:
            return False
        message = data.get("message")
        if isinstance(message, dict):
            return isinstance(message.get("parts"), list)
    return False


class _Prompt:
    def __init__(self, session: str, number: int) -> None:
        self.run_id = f"{session}#{number}"
        self.turns: list[tuple[Any, ...]] = []
        self.model: str | None = None


def _parts(data: dict[str, Any], path: Path, line: int) -> list[Any]:
    message = data.get("message")
    parts = message.get("parts") if isinstance(message, dict) else None
    if not isinstance(parts, list):
        raise TranscriptError(str(path), line, f"a {data.get('type')} record without message.parts")
    return parts


def _settle(
    result: dict[str, Any], path: Path, line: int
) -> tuple[TerminalStatus, ExecutionStatus, str | None]:
    status = result.get("status")
    if not isinstance(status, str) or status not in _TERMINAL:
        shown = repr(status) if len(repr(status)) <= 80 else f"a {type(status).__name__}"
        raise TranscriptError(str(path), line, f"unknown toolCallResult.status {shown}")
    execution = result.get("executionStatus")
    axes = STATUS_TABLE.get((status, execution)) if isinstance(execution, str) else None
    terminal, exec_status = axes or (_TERMINAL[status], ExecutionStatus.UNKNOWN)
    error_type = result.get("errorType")
    if terminal is not TerminalStatus.ERROR or not isinstance(error_type, str) or not error_type:
        error_type = None
    return terminal, exec_status, error_type


def _error_text(response: Any) -> str | None:
    if isinstance(response, dict):
        inner = response.get("response")
        if isinstance(inner, dict) and isinstance(inner.get("error"), str):
            return str(inner["error"])
    return None


def _telemetry_tool_type(data: dict[str, Any]) -> tuple[str, str] | None:
    """``(call id, tool_type)`` of a ``qwen-code.tool_call`` telemetry snapshot."""
    payload = data.get("systemPayload")
    event = payload.get("uiEvent") if isinstance(payload, dict) else None
    if not isinstance(event, dict) or event.get("event.name") != "qwen-code.tool_call":
        return None
    call_id, tool_type = event.get("call_id"), event.get("tool_type")
    if isinstance(call_id, str) and isinstance(tool_type, str):
        return call_id, tool_type
    return None


def _assistant(data: dict[str, Any], path: Path, line: int) -> tuple[Any, ...]:
    calls = []
    for index, part in enumerate(_parts(data, path, line)):
        call = part.get("functionCall") if isinstance(part, dict) else None
        if not isinstance(call, dict):
            continue
        name = call.get("name")
        if not isinstance(name, str) or not name:
            raise TranscriptError(str(path), line, "a functionCall without a name")
        given = call.get("id")
        call_id = given if isinstance(given, str) else f"{line}.{index}"
        calls.append(_Slot(call_id, name, fingerprint(call.get("args", {}))))
    usage = data.get("usageMetadata")
    usage = usage if isinstance(usage, dict) else {}
    return (
        line,
        calls,
        as_int(usage.get("promptTokenCount")),
        as_int(usage.get("candidatesTokenCount")),
    )


_Result = tuple[TerminalStatus, ExecutionStatus, str | None, str | None]


class _Slot:
    """One ``functionCall`` and, once read, its result."""

    def __init__(self, call_id: str, name: str, args: str) -> None:
        self.call_id, self.name, self.args = call_id, name, args
        self.result: _Result | None = None


def _tool_result(data: dict[str, Any], path: Path, line: int) -> tuple[str, _Result]:
    result = data.get("toolCallResult")
    if not isinstance(result, dict) or not isinstance(result.get("callId"), str):
        raise TranscriptError(str(path), line, "a tool_result without toolCallResult.callId")
    terminal, execution, error_type = _settle(result, path, line)
    parts = _parts(data, path, line)
    first = parts[0] if parts and isinstance(parts[0], dict) else {}
    text = _error_text(first.get("functionResponse"))
    display = result.get("resultDisplay")
    if text is None and terminal is TerminalStatus.ERROR and isinstance(display, str):
        text = display
    return result["callId"], (terminal, execution, error_type, text)


def read(path: Path) -> Iterator[Run]:
    """One :class:`Run` per prompt of the session, in file order."""
    session = path.stem
    prompts: list[_Prompt] = []
    # a provider may number call ids per response (``functions.read_file:0`` every turn):
    # each result settles the oldest call of its id still without one
    open_calls: dict[str, list[_Slot]] = {}
    early: dict[str, list[_Result]] = {}
    tool_types: dict[str, str] = {}
    current: _Prompt | None = None
    for line, data in records(path):
        kind = data.get("type")
        if isinstance(data.get("sessionId"), str):
            session = data["sessionId"]
        if kind == "user" and data.get("provenance", "real_user") == "real_user":
            current = _Prompt(session, len(prompts) + 1)
            prompts.append(current)
        elif kind == "assistant":
            if current is None:  # a resumed file may start mid-prompt
                current = _Prompt(session, len(prompts) + 1)
                prompts.append(current)
            turn = _assistant(data, path, line)
            current.turns.append(turn)
            for slot in turn[1]:
                waiting = early.get(slot.call_id)
                if waiting:
                    slot.result = waiting.pop(0)
                else:
                    open_calls.setdefault(slot.call_id, []).append(slot)
            if isinstance(data.get("model"), str):
                current.model = data["model"]
        elif kind == "tool_result":
            call_id, result = _tool_result(data, path, line)
            slots = open_calls.get(call_id)
            if slots:
                slots.pop(0).result = result
            else:
                early.setdefault(call_id, []).append(result)
        elif kind == "system":
            found = _telemetry_tool_type(data)
            if found is not None:
                tool_types[found[0]] = found[1]
    for prompt in prompts:
        yield Run(
            agent=KIND,
            source=str(path),
            run_id=prompt.run_id,
            model=prompt.model,
            succeeded=None,
            turns=tuple(
                Turn(
                    line=line,
                    calls=tuple(_call(c, tool_types) for c in calls),
                    input_tokens=tokens_in,
                    output_tokens=tokens_out,
                )
                for line, calls, tokens_in, tokens_out in prompt.turns
            ),
        )


def _call(slot: _Slot, tool_types: dict[str, str]) -> ImportedCall:
    call_id, name, args = slot.call_id, slot.name, slot.args
    terminal, execution, error_type, text = slot.result or (
        TerminalStatus.ERROR,
        ExecutionStatus.UNKNOWN,
        None,
        None,
    )
    mcp = tool_types.get(call_id) == "mcp" or name.startswith("mcp__")
    return ImportedCall(
        call_id=call_id,
        tool=name,
        arguments_fingerprint=args,
        status=terminal,
        execution_status=execution,
        error_type=error_type,
        error_text=text if terminal is TerminalStatus.ERROR else None,
        mcp=mcp,
    )
