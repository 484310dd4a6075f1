"""Claude Code: session logs (``~/.claude/projects/*/*.jsonl``) and ``--output-format stream-json``.

Both are JSON lines carrying the Anthropic messages the agent exchanged:
``assistant`` records (one content block a line: Claude Code splits one API
message over several lines that share ``message.id``) and ``user`` records
holding ``tool_result`` blocks.  The session log names the session
``sessionId`` and marks subagent lines ``isSidechain``; stream-json names it
``session_id``, marks subagent lines with a ``parent_tool_use_id`` and ends
each prompt with a ``result`` record.

- A **run** is one prompt: in a session log each user prompt starts one (run
  id: the session id, ``<session id>/<n>`` when the file holds several); in
  stream-json each ``result`` record ends one.
- A **turn** (batch) is one assistant message: every line with its
  ``message.id``, its ``tool_use`` blocks in order; its line is the first.
- **Tokens**: ``usage`` of the message; input counts ``input_tokens`` plus
  both cache counts.  Stream-json lines carry the usage of the message's
  start (``stop_reason`` still null), whose output count is not final: output
  tokens are then None.
- **Success**: stream-json's ``result`` (``subtype`` ``success`` and not
  ``is_error``); a session log records only running out of turns (an
  ``max_turns_reached`` attachment: failed), else None.
- **Outcomes**: :mod:`tool_failure_guard.agent_outcomes.claude_code` (the mapping table
  in ``docs/transcripts.md``).

Subagent (sidechain) lines and Claude Code's own synthetic messages (model
``<synthetic>``) are not the run's turns and are skipped.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any, Final

import attrs

from tool_failure_guard.agent_outcomes import claude_code as outcomes
from tool_failure_guard.agent_outcomes.vocabulary import bounded_text
from tool_failure_guard.transcripts.model import ImportedCall, Run, TranscriptError, Turn

from ._read import as_int, fingerprint, head_records, records

KIND: Final = "claude-code"
_SESSION_ONLY_TYPES: Final = frozenset(
    {
        "queue-operation",
        "last-prompt",
        "file-history-snapshot",
        "summary",
        "attachment",
        "permission-mode",  # the first line of 2.1.109-2.1.114's logs
    }
)
_STREAM_TYPES: Final = frozenset({"system", "assistant", "user", "result", "stream_event"})
_NOT_A_PROMPT_PREFIXES: Final = (
    "<command-name>",
    "<command-message>",
    "<local-command-",
    "<bash-input>",
    "<bash-stdout>",
    "<system-reminder>",
    "[Request interrupted by user",
    "Caveat: ",
)


def _type(record: dict[str, Any]) -> str | None:
    """A record's ``type`` when it is a string (a JSON Schema's ``"type": [...]`` is not)."""
    value = record.get("type")
    return value if isinstance(value, str) else None


def _session_like(record: dict[str, Any]) -> bool:
    kind = _type(record)
    if (kind == "summary" and "leafUuid" in record) or (
        kind == "file-history-snapshot" and "snapshot" in record
    ):
        return True  # records of a session log that name no session
    if not isinstance(record.get("sessionId"), str):
        return False
    if "isSidechain" in record or _type(record) in _SESSION_ONLY_TYPES:
        return True
    message = record.get("message")
    return (
        _type(record) in ("user", "assistant")
        and isinstance(message, dict)
        and "content" in message
        and "parts" not in message
    )


def _stream_like(record: dict[str, Any]) -> bool:
    if _type(record) not in _STREAM_TYPES or not isinstance(record.get("session_id"), str):
        return False
    if _type(record) == "system":
        return record.get("subtype") == "init" and "claude_code_version" in record
    return "parent_tool_use_id" in record or _type(record) == "result"


def _form(record: dict[str, Any]) -> str | None:
    if _stream_like(record):
        return "stream"
    if _session_like(record):
        return "session"
    return None


def sniff(path: str, head: bytes) -> bool:
    """True when the first records are Claude Code's (session log or stream-json)."""
    return any(_form(record) is not None for record in head_records(head))


@attrs.define
class _Call:
    call_id: str
    tool: str
    arguments: Any
    result: ImportedCall | None = None


@attrs.define
class _Turn:
    line: int
    calls: list[_Call] = attrs.field(factory=list)
    input_tokens: int | None = None
    output_tokens: int | None = None


@attrs.define
class _Run:
    run_id: str
    line: int
    turns: dict[str, _Turn] = attrs.field(factory=dict)
    #: call id -> its calls not yet settled, oldest first (a provider may reuse an id per turn)
    open_calls: dict[str, list[_Call]] = attrs.field(factory=dict)
    #: call id -> results written before their ``tool_use`` line (2.1.110-2.1.128), oldest first
    early: dict[str, list[tuple[dict[str, Any], Any]]] = attrs.field(factory=dict)
    succeeded: bool | None = None
    model: str | None = None

    def empty(self) -> bool:
        return not self.turns and self.succeeded is None


def _message(path: str, line: int, record: dict[str, Any]) -> dict[str, Any]:
    message = record.get("message")
    if not isinstance(message, dict):
        raise TranscriptError(path, line, f"a {record.get('type')} record without a message object")
    return message


def _blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    if isinstance(content, list):
        return [block for block in content if isinstance(block, dict)]
    return []


def _is_prompt(record: dict[str, Any], message: dict[str, Any]) -> bool:
    """A user's prompt: not tool results, not Claude Code's own notes (meta, slash-command
    echoes, an interruption marker, a compaction summary)."""
    if record.get("isMeta") or record.get("isCompactSummary"):
        return False
    if record.get("isVisibleInTranscriptOnly"):
        return False
    content = message.get("content")
    if isinstance(content, str):
        return not content.lstrip().startswith(_NOT_A_PROMPT_PREFIXES)
    blocks = _blocks(message)
    if not blocks or any(b.get("type") == "tool_result" for b in blocks):
        return False
    texts = [str(b.get("text", "")) for b in blocks if b.get("type") == "text"]
    return not texts or not all(t.lstrip().startswith(_NOT_A_PROMPT_PREFIXES) for t in texts)


def _tokens(turn: _Turn, message: dict[str, Any], *, final: bool) -> None:
    usage = message.get("usage")
    if not isinstance(usage, dict):
        return
    counts = [
        as_int(usage.get(k))
        for k in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
    ]
    if counts[0] is not None:
        turn.input_tokens = sum(c for c in counts if c is not None)
    turn.output_tokens = as_int(usage.get("output_tokens")) if final else None


def _assistant(path: str, line: int, record: dict[str, Any], run: _Run, form: str) -> None:
    message = _message(path, line, record)
    model = message.get("model")
    if model == "<synthetic>":
        return
    if run.model is None and isinstance(model, str):
        run.model = model
    key = message.get("id")
    key = key if isinstance(key, str) and key else f"line {line}"
    turn = run.turns.get(key)
    if turn is None:
        turn = run.turns[key] = _Turn(line=line)
    final = form == "session" or message.get("stop_reason") is not None
    _tokens(turn, message, final=final)
    for block in _blocks(message):
        if block.get("type") != "tool_use":
            continue
        call_id, name = block.get("id"), block.get("name")
        if not isinstance(call_id, str) or not call_id or not isinstance(name, str) or not name:
            raise TranscriptError(path, line, "a tool_use block without an id and a name")
        if any(c.call_id == call_id for c in turn.calls):
            continue  # the same block repeated on a later line of the message
        call = _Call(call_id=call_id, tool=name, arguments=block.get("input"))
        turn.calls.append(call)
        waiting = run.early.get(call_id)
        if waiting:  # its result came first
            result, structured = waiting.pop(0)
            call.result = _settle(call, result, structured)
        else:
            run.open_calls.setdefault(call_id, []).append(call)


def _settle(call: _Call, block: dict[str, Any], structured: Any) -> ImportedCall:
    text = outcomes.result_text(block.get("content"))
    is_error = block.get("is_error") is True
    found = outcomes.classify(
        outcomes.Result(
            tool=call.tool,
            is_error=is_error,
            text=text,
            interrupted=outcomes.interrupted(structured),
        )
    )
    return ImportedCall(
        call_id=call.call_id,
        tool=call.tool,
        arguments_fingerprint=fingerprint(call.arguments),
        status=found.status,
        execution_status=found.execution_status,
        error_type=found.error_type,
        error_text=bounded_text(text) if found.error_type is not None or is_error else None,
        heuristic=found.heuristic,
        mcp=call.tool.startswith("mcp__"),
    )


def _user(path: str, line: int, record: dict[str, Any], run: _Run, form: str) -> bool:
    """Settle the results it holds; True when it is a new prompt (session logs)."""
    message = _message(path, line, record)
    if form == "session" and _is_prompt(record, message):
        return True
    structured = record.get("toolUseResult", record.get("tool_use_result"))
    for block in _blocks(message):
        if block.get("type") != "tool_result":
            continue
        call_id = str(block.get("tool_use_id"))
        waiting = run.open_calls.get(call_id)
        if waiting:
            call = waiting.pop(0)
            call.result = _settle(call, block, structured)
        else:
            run.early.setdefault(call_id, []).append((block, structured))
    return False


def _finish(path: str, run: _Run) -> Run:
    turns = []
    for turn in run.turns.values():
        calls = []
        for call in turn.calls:
            if call.result is not None:
                calls.append(call.result)
                continue
            nothing = outcomes.NO_RESULT
            calls.append(
                ImportedCall(
                    call_id=call.call_id,
                    tool=call.tool,
                    arguments_fingerprint=fingerprint(call.arguments),
                    status=nothing.status,
                    execution_status=nothing.execution_status,
                    error_type=None,
                    mcp=call.tool.startswith("mcp__"),
                )
            )
        turns.append(
            Turn(
                line=turn.line,
                calls=tuple(calls),
                input_tokens=turn.input_tokens,
                output_tokens=turn.output_tokens,
            )
        )
    return Run(
        agent=KIND,
        source=str(path),
        run_id=run.run_id,
        turns=tuple(turns),
        succeeded=run.succeeded,
        model=run.model,
    )


def _skipped(record: dict[str, Any], form: str) -> bool:
    if form == "session":
        return record.get("isSidechain") is True
    return record.get("parent_tool_use_id") not in (None, "")


def _session_id(record: dict[str, Any], form: str) -> str | None:
    value = record.get("sessionId" if form == "session" else "session_id")
    return value if isinstance(value, str) and value else None


def read(source: str | os.PathLike[str]) -> Iterator[Run]:
    """The runs of a Claude Code session log or stream-json output, in order."""
    path = os.fspath(source)
    form: str | None = None
    runs: list[_Run] = []
    session: str | None = None
    for line, record in records(path):
        if form is None:
            form = _form(record)
            if form is None:
                continue  # a record that names neither form (yet): the next ones decide
        session = session or _session_id(record, form)
        kind = _type(record)
        if _skipped(record, form):
            continue
        if not runs or (
            form == "stream"
            and kind == "system"
            and record.get("subtype") == "init"
            and not runs[-1].empty()
        ):
            runs.append(_Run(run_id=session or path, line=line))
        run = runs[-1]
        if kind == "assistant":
            _assistant(path, line, record, run, form)
        elif kind == "user":
            if _user(path, line, record, run, form) and not run.empty():
                runs.append(_Run(run_id=session or path, line=line))
        elif kind == "result":
            run.succeeded = (
                record.get("subtype") == "success" and record.get("is_error") is not True
            )
            runs.append(_Run(run_id=session or path, line=line))
        elif kind == "attachment":
            attachment = record.get("attachment")
            if isinstance(attachment, dict) and attachment.get("type") == "max_turns_reached":
                run.succeeded = False
    if form is None:
        raise TranscriptError(path, 1, "not a Claude Code session log or stream-json output")
    kept = [run for run in runs if not run.empty()]
    for number, run in enumerate(kept, 1):
        base = session or path
        run.run_id = base if len(kept) == 1 else f"{base}/{number}"
        yield _finish(path, run)
