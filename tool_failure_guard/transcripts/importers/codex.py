"""OpenAI Codex CLI: its rollouts (``~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl``).

A rollout is JSON lines ``{"timestamp", "type", "payload"}``: ``session_meta``
(the thread id), ``turn_context`` (the model), ``response_item`` (the
Responses API items the model and the tools exchanged: ``message``,
``reasoning``, ``function_call`` / ``custom_tool_call`` and their
``*_output``), ``event_msg`` (``task_started``, ``item_completed``,
``task_complete``, ``turn_aborted``, ``token_count``) and
``token_usage_record`` (one model response's usage).

- A **run** is one task (``task_started`` .. ``task_complete``): what one user
  prompt set going (run id: the thread id, ``<thread id>/<n>`` when the file
  holds several).
- A **turn** (batch) is one model response: consecutive model-authored items
  (assistant message, reasoning, function calls), closed by the first tool
  output or input item, or by the response's usage record; its line is the
  first item's.  MCP tools are called inside their namespace (``mcp__<server>``);
  the tool is named ``<namespace>__<name>``, as Codex names it to the model.
- **Tokens**: the response's ``token_usage_record`` (``usage``); where a file
  has none, the ``last_token_usage`` of ``token_count`` events.
- **Success**: ``task_complete`` without an ``error``: succeeded; with one,
  or ``turn_aborted``: failed; a task the file never completes: None.
- **Outcomes**: :mod:`tool_failure_guard.agent_outcomes.codex` (the mapping table in
  ``docs/transcripts.md``).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any, Final

import attrs

from tool_failure_guard.agent_outcomes import codex as outcomes
from tool_failure_guard.agent_outcomes.vocabulary import bounded_text
from tool_failure_guard.transcripts.model import ImportedCall, Run, TranscriptError, Turn

from ._read import as_int, fingerprint, head_records, records

KIND: Final = "codex"
_RECORD_TYPES: Final = frozenset(
    {
        "session_meta",
        "turn_context",
        "response_item",
        "event_msg",
        "token_usage_record",
        "compacted",
        "world_state",
    }
)
_CALLS: Final = frozenset({"function_call", "custom_tool_call", "local_shell_call"})
_OUTPUTS: Final = frozenset({"function_call_output", "custom_tool_call_output"})
_MODEL_AUTHORED: Final = _CALLS | {"reasoning", "web_search_call"}


def _type(record: dict[str, Any]) -> str | None:
    """A record's ``type`` when it is a string (a JSON Schema's ``"type": [...]`` is not)."""
    value = record.get("type")
    return value if isinstance(value, str) else None


def _is_record(record: dict[str, Any]) -> bool:
    return (
        _type(record) in _RECORD_TYPES
        and isinstance(record.get("payload"), dict)
        and "timestamp" in record
    )


def sniff(path: str, head: bytes) -> bool:
    """True when the first records are a Codex rollout's."""
    first = head[:400]
    if first.startswith(b'{"timestamp":') and b'"type":"session_meta"' in first:
        return True  # a session_meta line longer than the head
    return any(_is_record(record) for record in head_records(head))


@attrs.define
class _Call:
    call_id: str
    tool: str
    arguments: Any
    mcp: bool
    item: outcomes.Outcome | None = None
    output: Any = None
    has_output: bool = False


@attrs.define
class _Turn:
    line: int
    calls: list[_Call] = attrs.field(factory=list)
    input_tokens: int | None = None
    output_tokens: int | None = None


@attrs.define
class _Run:
    line: int
    turns: list[_Turn] = attrs.field(factory=list)
    open: bool = False  #: the last turn still takes items of the same response
    succeeded: bool | None = None
    model: str | None = None
    done: bool = False


def _call(path: str, line: int, payload: dict[str, Any]) -> _Call:
    call_id = payload.get("call_id") or payload.get("id")
    if not isinstance(call_id, str) or not call_id:
        raise TranscriptError(path, line, f"a {payload.get('type')} item without a call_id")
    kind = _type(payload)
    if kind == "local_shell_call":
        return _Call(
            call_id=call_id, tool="local_shell", arguments=payload.get("action"), mcp=False
        )
    name = payload.get("name")
    if not isinstance(name, str) or not name:
        raise TranscriptError(path, line, f"a {kind} item without a name")
    namespace = payload.get("namespace")
    tool = f"{namespace}__{name}" if isinstance(namespace, str) and namespace else name
    arguments = payload.get("arguments" if kind == "function_call" else "input")
    return _Call(call_id=call_id, tool=tool, arguments=arguments, mcp=tool.startswith("mcp__"))


def _usage(turn: _Turn, usage: Any) -> None:
    if isinstance(usage, dict):
        turn.input_tokens = as_int(usage.get("input_tokens"))
        turn.output_tokens = as_int(usage.get("output_tokens"))


def _settled(call: _Call) -> ImportedCall:
    if call.item is not None:
        found = call.item
    elif call.has_output:
        found = outcomes.from_output(call.output)
    else:
        found = outcomes.NO_RESULT
    status, execution, error_type, heuristic = found
    failed = error_type is not None
    return ImportedCall(
        call_id=call.call_id,
        tool=call.tool,
        arguments_fingerprint=fingerprint(call.arguments),
        status=status,
        execution_status=execution,
        error_type=error_type,
        error_text=bounded_text(outcomes.output_text(call.output))
        if failed and call.has_output
        else None,
        heuristic=heuristic,
        mcp=call.mcp,
    )


class _Reader:
    def __init__(self, path: str) -> None:
        self.path = path
        self.thread: str | None = None
        self.runs: list[_Run] = []
        #: call id -> its calls, oldest first (a provider may number ids per response and
        #: reuse ``functions.read_file:0`` in every turn: each output settles the oldest call
        #: of its id still without one, each completed item the newest without one)
        self.calls: dict[str, list[_Call]] = {}
        self.usage_records = False

    def run(self, line: int) -> _Run:
        if not self.runs or self.runs[-1].done:
            self.runs.append(_Run(line=line))
        return self.runs[-1]

    def response_item(self, line: int, payload: dict[str, Any]) -> None:
        kind = _type(payload)
        run = self.run(line)
        authored = kind in _MODEL_AUTHORED or (
            kind == "message" and payload.get("role") == "assistant"
        )
        if not authored:
            run.open = False
            if kind in _OUTPUTS:
                waiting = self.calls.get(str(payload.get("call_id")), [])
                call = next((c for c in waiting if not c.has_output), None)
                if call is not None:
                    call.output, call.has_output = payload.get("output"), True
            return
        if not run.open:
            run.turns.append(_Turn(line=line))
            run.open = True
        if kind in _CALLS:
            call = _call(self.path, line, payload)
            if all(c.call_id != call.call_id for c in run.turns[-1].calls):
                # (the same item twice in one response is one call)
                self.calls.setdefault(call.call_id, []).append(call)
                run.turns[-1].calls.append(call)

    def event(self, line: int, payload: dict[str, Any]) -> None:
        kind = _type(payload)
        if kind == "task_started":
            if (
                self.runs
                and not self.runs[-1].done
                and (self.runs[-1].turns or self.runs[-1].succeeded is not None)
            ):
                self.runs[-1].done = True
            self.run(line)
        elif kind in ("task_complete", "turn_complete"):
            run = self.run(line)
            run.succeeded = not payload.get("error")
            run.done, run.open = True, False
        elif kind == "turn_aborted":
            run = self.run(line)
            run.succeeded = False
            run.done, run.open = True, False
        elif kind == "item_completed":
            item = payload.get("item")
            if isinstance(item, dict):
                waiting = self.calls.get(str(item.get("id")), [])
                call = next((c for c in reversed(waiting) if c.item is None), None)
                if call is not None:
                    call.item = outcomes.from_item(item) or call.item
                    call.mcp = call.mcp or str(item.get("type")).lower() == "mcptoolcall"
        elif kind == "token_count" and not self.usage_records:
            info = payload.get("info")
            last = self.runs[-1] if self.runs else None
            if last is not None and last.turns and isinstance(info, dict):
                if last.turns[-1].input_tokens is None:
                    _usage(last.turns[-1], info.get("last_token_usage"))
                last.open = False

    def usage_record(self, payload: dict[str, Any]) -> None:
        self.usage_records = True
        run = self.runs[-1] if self.runs else None
        if run is not None and run.turns:
            _usage(run.turns[-1], payload.get("usage"))
            run.open = False

    def feed(self, line: int, record: dict[str, Any]) -> None:
        kind, payload = _type(record), record.get("payload")
        if not isinstance(payload, dict):
            if kind in _RECORD_TYPES:
                raise TranscriptError(self.path, line, f"a {kind} record without a payload object")
            return
        if kind == "session_meta":
            found = payload.get("id") or payload.get("session_id")
            if self.thread is None and isinstance(found, str):
                self.thread = found
        elif kind == "turn_context":
            model = payload.get("model")
            run = self.run(line)
            if run.model is None and isinstance(model, str):
                run.model = model
        elif kind == "response_item":
            self.response_item(line, payload)
        elif kind == "event_msg":
            self.event(line, payload)
        elif kind == "token_usage_record":
            self.usage_record(payload)

    def finish(self) -> Iterator[Run]:
        kept = [run for run in self.runs if run.turns or run.succeeded is not None]
        base = self.thread or self.path
        for number, run in enumerate(kept, 1):
            yield Run(
                agent=KIND,
                source=str(self.path),
                run_id=base if len(kept) == 1 else f"{base}/{number}",
                turns=tuple(
                    Turn(
                        line=turn.line,
                        calls=tuple(_settled(call) for call in turn.calls),
                        input_tokens=turn.input_tokens,
                        output_tokens=turn.output_tokens,
                    )
                    for turn in run.turns
                ),
                succeeded=run.succeeded,
                model=run.model,
            )


def read(source: str | os.PathLike[str]) -> Iterator[Run]:
    """The runs of a Codex rollout, in order."""
    path = os.fspath(source)
    reader = _Reader(path)
    first = True
    for line, record in records(path):
        if first:
            if not _is_record(record):
                raise TranscriptError(path, line, "not a Codex CLI rollout")
            first = False
        reader.feed(line, record)
    yield from reader.finish()
