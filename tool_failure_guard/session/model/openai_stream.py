"""One streamed chat-completions answer, assembled from its chunks, or refused as malformed.

:class:`StreamAssembly` takes the chunks the ``openai`` SDK yields, one at a
time, and builds the turn: the text deltas, the tool calls from their
fragments, the usage, and whether the stream finished.  Anything a
well-formed stream never sends raises :class:`MalformedStream`, whose text
names what was wrong (never the content itself); the provider turns it into
``model request failed: malformed stream: <what>``, so the prompt ends as a
model error, never with a Python traceback, and the prompt step still persists
the text the client was already shown.

Tool-call fragments are joined by ``index``, as OpenAI sends them.  Some
gateways omit ``index``: then a fragment carrying an id other than the current
call's starts a new call, and one without an id continues the current call.  A
stream that mixes fragments with and without ``index`` cannot be read either
way and is malformed.  A stream whose choices never carried a
``finish_reason`` was cut short (``stream ended early``), not a complete turn
(the SDK hides whether ``data: [DONE]`` came, so the finish reason decides).
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import attrs

from tool_failure_guard.session.tools.executor import FunctionCall

#: Characters of an exception's own text kept in a malformed-stream reason.
_REASON_CHARS = 200


class MalformedStream(Exception):
    """The stream is not a chat-completions stream the agent can read; says what."""


@attrs.define
class _PendingCall:
    call_id: str = ""
    name: str = ""
    arguments: list[str] = attrs.field(factory=list)


def decode_call(pending: _PendingCall) -> FunctionCall:
    """One assembled tool call; arguments that are not a JSON object are kept as an error."""
    call_id = pending.call_id or f"call_{uuid.uuid4().hex[:24]}"
    raw = "".join(pending.arguments)
    try:
        args = json.loads(raw) if raw.strip() else {}
    except (json.JSONDecodeError, RecursionError) as exc:
        reason = f"{exc.msg} at position {exc.pos}" if isinstance(exc, json.JSONDecodeError) else ""
        return FunctionCall(
            call_id=call_id, name=pending.name, arguments_error=reason or "nested too deeply"
        )
    except ValueError as exc:  # e.g. an integer past the interpreter's digit limit
        return FunctionCall(call_id=call_id, name=pending.name, arguments_error=_short(str(exc)))
    if not isinstance(args, dict):
        return FunctionCall(
            call_id=call_id,
            name=pending.name,
            arguments_error=f"a JSON {type(args).__name__} instead of an object",
        )
    return FunctionCall(call_id=call_id, name=pending.name, args=args)


def _short(text: str) -> str:
    first = text.split(";")[0].strip()
    return first if len(first) <= _REASON_CHARS else first[:_REASON_CHARS] + "..."


def _json_type(value: Any) -> str:
    if isinstance(value, dict):
        return "a JSON object"
    if isinstance(value, list):
        return "a JSON array"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if value is None:
        return "null"
    return type(value).__name__


def undecodable(exc: Exception) -> MalformedStream:
    """What the SDK's decoding of one ``data:`` line raised, as a malformed stream."""
    if isinstance(exc, json.JSONDecodeError):
        return MalformedStream(f"a data: line is not JSON ({exc.msg} at position {exc.pos})")
    if isinstance(exc, UnicodeDecodeError):
        return MalformedStream("a data: line is not UTF-8")
    if isinstance(exc, RecursionError):
        return MalformedStream("a data: line is nested too deeply")
    return MalformedStream(
        f"a data: line cannot be decoded ({type(exc).__name__}: {_short(str(exc))})"
    )


def _field(owner: Any, name: str, expected: type | tuple[type, ...], what: str) -> Any:
    """``owner.name`` when absent/None or of the expected type; else malformed."""
    value = getattr(owner, name, None)
    if value is None or (isinstance(value, expected) and not isinstance(value, bool)):
        return value
    raise MalformedStream(f"{what} is {_json_type(value)}, not {_expected(expected)}")


def _expected(expected: type | tuple[type, ...]) -> str:
    types = expected if isinstance(expected, tuple) else (expected,)
    names = {str: "a string", int: "an integer", list: "an array"}
    return " or ".join(names.get(t, t.__name__) for t in types)


@attrs.define
class StreamAssembly:
    """The turn so far; :meth:`add` one chunk, then :meth:`calls` once the stream ends."""

    text: list[str] = attrs.field(factory=list)
    usage: Any = None
    finished: bool = False
    _calls: list[_PendingCall] = attrs.field(factory=list)
    _by_index: dict[int, _PendingCall] = attrs.field(factory=dict)
    #: Whether the tool-call fragments carry ``index`` (None until the first one).
    _indexed: bool | None = None

    def add(self, chunk: Any) -> str:
        """Take one chunk; return its text delta ("" when none); raise MalformedStream."""
        # imported here, with the first chunk: the agent starts without the SDK
        from openai.types.chat import ChatCompletionChunk

        if not isinstance(chunk, ChatCompletionChunk):
            raise MalformedStream(f"a chunk is {_json_type(chunk)}, not a completion chunk")
        usage = getattr(chunk, "usage", None)
        if usage is not None:
            self.usage = usage
        choices = _field(chunk, "choices", list, "a chunk's choices") or ()
        delta_text: list[str] = []
        for choice in choices:
            if getattr(choice, "finish_reason", None):
                self.finished = True
            delta = getattr(choice, "delta", None)
            if delta is None:
                continue
            content = _field(delta, "content", str, "a text delta")
            if content:
                delta_text.append(content)
            for fragment in _field(delta, "tool_calls", list, "a delta's tool_calls") or ():
                self._fragment(fragment)
        text = "".join(delta_text)
        if text:
            self.text.append(text)
        return text

    def _fragment(self, fragment: Any) -> None:
        index = _field(fragment, "index", int, "a tool call's index")
        call_id = _field(fragment, "id", str, "a tool call's id")
        indexed = index is not None
        if self._indexed is None:
            self._indexed = indexed
        elif self._indexed != indexed:
            raise MalformedStream("tool call deltas mix fragments with and without an index")
        if index is not None:
            pending = self._by_index.get(index)
            if pending is None:
                pending = self._by_index[index] = _PendingCall()
                self._calls.append(pending)
        elif not self._calls or (call_id and call_id != self._calls[-1].call_id):
            # Without an index, a new id is a new call: two calls are never merged.
            pending = _PendingCall()
            self._calls.append(pending)
        else:
            pending = self._calls[-1]
        if call_id:
            pending.call_id = call_id
        function = getattr(fragment, "function", None)
        if function is None:
            return
        name = _field(function, "name", str, "a tool call's name")
        arguments = _field(function, "arguments", str, "a tool call's arguments")
        if name and name != pending.name:
            # OpenAI sends the name once; a server repeating it whole in every
            # delta must not double it.
            pending.name += name
        if arguments:
            pending.arguments.append(arguments)

    def calls(self) -> tuple[FunctionCall, ...]:
        """The assembled calls, in index order (arrival order without indexes).

        Raises :class:`MalformedStream` when no choice carried a ``finish_reason``:
        the stream was cut short and the turn is incomplete.
        """
        if not self.finished:
            raise MalformedStream("the stream ended early (no choice carried a finish_reason)")
        ordered = (
            [self._by_index[i] for i in sorted(self._by_index)] if self._indexed else self._calls
        )
        return tuple(decode_call(pending) for pending in ordered)
