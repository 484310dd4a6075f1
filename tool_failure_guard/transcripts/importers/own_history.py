"""This project's own ACP session history (``<state dir>/sessions/<session id>.jsonl``).

The agent appends a header (``type`` ``session``), then ``message`` records
(``prompt``, ``model``, ``tool_results``, ``continuation``) and
``call_settled`` records (:mod:`tool_failure_guard.session.persistence`);
each line is read with the agent's own strict reader
(:meth:`Message.from_json <tool_failure_guard.session.persistence.messages.Message.from_json>`),
so a hand-edited or damaged line is an error naming ``file:line``.

Mapping (``docs/transcripts.md``):

- a run is one prompt (``prompt_id``); a turn one ``model`` message, its batch
  the ``function_call`` parts that are not provider duplicates (those never
  ran); tokens are not recorded;
- each call settles by its ``function_response`` in the ``tool_results``
  message, else its ``call_settled`` record, else it is ``error`` /
  ``unknown`` (a crash before it settled);
- the history keeps the terminal status and error type, not the execution
  axis: :data:`EXECUTION_BY_TYPE` restores it from the closed vocabulary of
  types the agent gives a call that never started or failed after running
  (every other error type is an execution failure, ``error`` / ``error``);
- success: not recorded (None).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

from tool_failure_guard.core.outcomes import (
    INVALID_TOOL_PARAMS,
    POST_PROCESSING_FAILED,
    TOOL_CALL_CAP_SKIPPED,
    TOOL_NOT_REGISTERED,
)
from tool_failure_guard.guard import ExecutionStatus, TerminalStatus
from tool_failure_guard.session.persistence.assembly import INTERRUPTED
from tool_failure_guard.session.persistence.messages import HistoryError, Message, Part, SettledCall
from tool_failure_guard.transcripts.importers._read import fingerprint, records
from tool_failure_guard.transcripts.model import ImportedCall, Run, TranscriptError, Turn

KIND = "tool-failure-guard"

#: error type -> the execution status it implies (an error type not listed: ``error``).
EXECUTION_BY_TYPE: dict[str, ExecutionStatus] = {
    INVALID_TOOL_PARAMS: ExecutionStatus.NOT_STARTED,
    TOOL_NOT_REGISTERED: ExecutionStatus.NOT_STARTED,
    TOOL_CALL_CAP_SKIPPED: ExecutionStatus.NOT_STARTED,
    "duplicate_call_id": ExecutionStatus.NOT_STARTED,
    POST_PROCESSING_FAILED: ExecutionStatus.SUCCESS,
    INTERRUPTED: ExecutionStatus.UNKNOWN,
}
_TERMINAL = {s.value: s for s in TerminalStatus}


def sniff(path: Path, head: bytes) -> bool:
    """The agent's history: a first line ``{"type": "session", "version": …, "session_id": …}``."""
    first, newline, _ = head.partition(b"\n")
    if not newline:
        return False
    try:
        data = json.loads(first)
    except ValueError:
        return False
    return (
        isinstance(data, dict)
        and data.get("type") == "session"
        and isinstance(data.get("version"), int)
        and isinstance(data.get("session_id"), str)
    )


def axes(part: Part) -> tuple[TerminalStatus, ExecutionStatus, str | None]:
    """A persisted function response on both axes (the mapping table's rows)."""
    terminal = _TERMINAL[part.status]
    if terminal is TerminalStatus.SUCCESS:
        return terminal, ExecutionStatus.SUCCESS, None
    if terminal is TerminalStatus.CANCELLED:
        return terminal, ExecutionStatus.CANCELLED, None
    if not part.error_type:
        return terminal, ExecutionStatus.UNKNOWN, None
    execution = EXECUTION_BY_TYPE.get(part.error_type, ExecutionStatus.ERROR)
    return (
        terminal,
        execution,
        part.error_type if execution is not ExecutionStatus.UNKNOWN else None,
    )


def read(path: Path) -> Iterator[Run]:
    """One :class:`Run` per prompt of the session, in file order."""
    session = path.stem
    order: list[str] = []
    turns: dict[str, list[tuple[int, list[Part]]]] = {}
    responses: dict[str, Part] = {}
    settled: dict[str, Part] = {}
    for line, data in records(path):
        where = f"{path}:{line}"
        kind = data.get("type")
        try:
            if kind == "session":
                if isinstance(data.get("session_id"), str):
                    session = data["session_id"]
            elif kind == "message":
                message = Message.from_json(data, where)
                prompt = message.prompt_id or f"{session}#{len(order)}"
                if prompt not in turns:
                    order.append(prompt)
                    turns[prompt] = []
                if message.kind == "model":
                    calls = [
                        p for p in message.parts if p.kind == "function_call" and not p.duplicate
                    ]
                    turns[prompt].append((line, calls))
                elif message.kind == "tool_results":
                    for part in message.parts:
                        if part.kind == "function_response" and not part.duplicate:
                            responses[part.call_id] = part
            elif kind == "call_settled":
                record = SettledCall.from_json(data, where)
                settled[record.part.call_id] = record.part
            elif kind not in ("pending_input", "torn_line"):
                raise TranscriptError(str(path), line, f"unknown record type {kind!r}")
        except HistoryError as exc:
            raise TranscriptError(str(path), line, str(exc).removeprefix(f"{where}: ")) from None
    for prompt in order:
        yield Run(
            agent=KIND,
            source=str(path),
            run_id=prompt,
            succeeded=None,
            turns=tuple(
                Turn(
                    line=line,
                    calls=tuple(
                        _call(c, responses.get(c.call_id) or settled.get(c.call_id)) for c in calls
                    ),
                )
                for line, calls in turns[prompt]
            ),
        )


def _call(call: Part, response: Part | None) -> ImportedCall:
    if response is None:
        terminal, execution, error_type = TerminalStatus.ERROR, ExecutionStatus.UNKNOWN, None
    else:
        terminal, execution, error_type = axes(response)
    return ImportedCall(
        call_id=call.call_id,
        tool=call.name,
        arguments_fingerprint=fingerprint(dict(call.args)),
        status=terminal,
        execution_status=execution,
        error_type=error_type,
        error_text=response.text
        if response is not None and terminal is TerminalStatus.ERROR
        else None,
        mcp=call.name.startswith("mcp__"),
    )
