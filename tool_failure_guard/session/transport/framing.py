"""The frame filter at the stdio boundary: only well-formed JSON-RPC reaches the SDK.

The ACP SDK (0.12) reads newline-delimited JSON and trusts every line: a line
that is valid JSON but not an object (``[]``, ``42``, ``"x"``) kills its receive
loop, ``null`` reads as end of input, a line that is not JSON is logged and
never answered, a response whose ``id`` is unhashable kills the loop while a
request waits for it, and a line is buffered whole however long it is.  See
docs/sdk-framing-bug.md.

:class:`FrameFilter` sits between the process's stdin and the SDK's
connection.  It reads stdin in chunks, cuts it into lines (a line longer than
``max_frame_bytes`` is discarded while it is read, never buffered), and judges
each line with :func:`judge_frame`:

- not UTF-8 JSON: it answers ``-32700`` with ``id: null`` itself;
- JSON that is not a request, notification or response object: it answers
  ``-32600``, echoing the ``id`` when it is *usable* (a string or an integer,
  booleans excluded) and ``null`` otherwise;
- a response (``result``/``error``, no ``method``) whose id is malformed or not
  one of the agent's own unanswered requests: logged and ignored (a response
  is never answered); a malformed response to an unanswered request settles
  that request with an error, so the agent never waits on it forever;
- anything else is handed to the SDK unchanged, through a StreamReader the
  filter feeds.

Every bad frame costs exactly one warning line on stderr, without the frame's
content.  The filter writes its answers through the same StreamWriter, on the
same event loop, as the SDK: each JSON-RPC line is one ``write()`` call on one
transport, so the two writers' lines never tear each other.  A tap on that
transport records the ids of the agent's own outgoing requests (the pending
set that tells a known response from a stray one), before the client can see
them.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import re
from collections.abc import Callable
from typing import Any

import attrs

_log = logging.getLogger("session.framing")

#: ``--max-frame-bytes`` default: larger than any sane ACP message, small enough to hold.
DEFAULT_MAX_FRAME_BYTES = 8 * 1024 * 1024
#: Smallest accepted limit: below this even an ``initialize`` may not fit.
MIN_MAX_FRAME_BYTES = 1024
#: Bytes read from stdin at a time (also the raw reader's buffer limit).
READ_CHUNK = 64 * 1024
#: How much of a refused frame is kept to find its id.
_HEAD_BYTES = 4096

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
#: The error a malformed or refused response settles the agent's waiting request with.
MALFORMED_RESPONSE = -32603

JsonId = int | str

#: A refused frame's id is trusted only where it must be the top-level member: first
#: (after ``"jsonrpc": "2.0"``) and followed by the key that says what the frame is.
_HEAD = re.compile(
    rb'\s*\{\s*(?:"jsonrpc"\s*:\s*"2\.0"\s*,\s*)?"id"\s*:\s*(-?\d{1,18}|"(?:[^"\\]|\\.){0,256}")'
    rb'\s*,\s*"(method|result|error)"'
)


@attrs.frozen
class Verdict:
    """What the filter does with one frame."""

    #: The line (with its newline) to hand to the SDK, or None.
    forward: bytes | None = None
    #: The error object to answer with, and the id to answer to.
    error: dict[str, Any] | None = None
    reply_id: JsonId | None = None
    #: The one stderr warning for a bad frame, without its content.
    warning: str | None = None
    #: The agent's request this frame answers (no longer pending).
    settles: JsonId | None = None

    def reply(self) -> bytes | None:
        if self.error is None:
            return None
        payload = {"jsonrpc": "2.0", "id": self.reply_id, "error": self.error}
        return _line(payload)


def _line(payload: dict[str, Any]) -> bytes:
    return (json.dumps(payload, separators=(",", ":")) + "\n").encode("utf-8")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _usable_id(value: Any) -> bool:
    return isinstance(value, str) or _is_int(value)


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def _answer(code: int, details: str, reply_id: JsonId | None = None) -> Verdict:
    message = "Parse error" if code == PARSE_ERROR else "Invalid Request"
    return Verdict(
        error={"code": code, "message": message, "data": {"details": details}},
        reply_id=reply_id,
        warning=f"{details}; answered {code}",
    )


def _settle_with_error(request_id: JsonId, details: str) -> Verdict:
    """A bad answer to one of the agent's requests: the request fails, nothing waits."""
    settled = {
        "jsonrpc": "2.0",
        "id": request_id,
        "error": {"code": MALFORMED_RESPONSE, "message": details},
    }
    return Verdict(
        forward=_line(settled),
        warning=f"{details}; the agent's request {request_id!r} fails",
        settles=request_id,
    )


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _response_problem(message: dict[str, Any]) -> str | None:
    if message.get("jsonrpc") != "2.0":
        return 'response without "jsonrpc": "2.0"'
    if "result" in message and "error" in message:
        return "response with both result and error"
    error = message.get("error", {})
    if "error" in message and not (
        isinstance(error, dict)
        and _is_int(error.get("code"))
        and isinstance(error.get("message"), str)
    ):
        return "response error is not an object with an integer code and a string message"
    return None


def judge_frame(line: bytes, pending: set[JsonId] | frozenset[JsonId]) -> Verdict:
    """Judge one line read from the client (without its newline).

    ``pending`` holds the ids of the agent's own requests still awaiting an answer.
    Blank lines are skipped silently, as the SDK does.
    """
    text = line.strip()
    if not text:
        return Verdict()
    try:
        value = json.loads(text.decode("utf-8"), parse_constant=_reject_constant)
    except UnicodeDecodeError:
        return _answer(PARSE_ERROR, "frame is not UTF-8 text")
    except RecursionError:
        return _answer(PARSE_ERROR, "frame is nested too deeply to parse")
    except json.JSONDecodeError as exc:
        return _answer(PARSE_ERROR, f"frame is not valid JSON: {exc.msg} (byte {exc.pos})")
    except ValueError as exc:
        return _answer(PARSE_ERROR, f"frame is not valid JSON ({str(exc)[:80]})")
    if isinstance(value, list) and value:
        return _answer(INVALID_REQUEST, "frame is a JSON-RPC batch; batches are not supported")
    if not isinstance(value, dict):
        return _answer(INVALID_REQUEST, f"frame is a JSON {_kind(value)}, not a JSON-RPC object")

    has_id = "id" in value
    msg_id = value.get("id")
    echo: JsonId | None = msg_id if _usable_id(msg_id) else None
    if "method" in value:
        problem = None
        if not isinstance(value["method"], str):
            problem = f"request method is a JSON {_kind(value['method'])}, not a string"
        elif value.get("jsonrpc") != "2.0":
            problem = 'request without "jsonrpc": "2.0"'
        elif has_id and echo is None:
            problem = f"request id is a JSON {_kind(msg_id)}, not a string or an integer"
        elif "params" in value and not isinstance(value["params"], (dict, list)):
            problem = f"request params are a JSON {_kind(value['params'])}, not structured"
        if problem is not None:
            return _answer(INVALID_REQUEST, problem, echo)
        return Verdict(forward=text + b"\n")

    if "result" in value or "error" in value:
        if echo is None:
            return Verdict(warning=f"response id is a JSON {_kind(msg_id)}; ignored")
        if echo not in pending:
            return Verdict(warning="response to no request the agent is waiting on; ignored")
        problem = _response_problem(value)
        if problem is not None:
            return _settle_with_error(echo, problem)
        return Verdict(forward=text + b"\n", settles=echo)

    if echo is not None and echo in pending:
        return _settle_with_error(echo, "response without result or error")
    return _answer(INVALID_REQUEST, "object has neither a method nor a result or error", echo)


def judge_oversized(
    head: bytes, size: int, limit: int, pending: set[JsonId] | frozenset[JsonId]
) -> Verdict:
    """Judge a frame refused for its size from its first bytes only."""
    details = f"frame of {size} bytes exceeds the {limit}-byte limit (--max-frame-bytes)"
    match = _HEAD.match(head)
    if match is None:
        return _answer(INVALID_REQUEST, details)
    try:
        msg_id = json.loads(match.group(1).decode("utf-8"))
    except ValueError:
        return _answer(INVALID_REQUEST, details)
    if match.group(2) == b"method":
        return _answer(INVALID_REQUEST, details, msg_id)
    if msg_id in pending:
        return _settle_with_error(msg_id, f"response {details}")
    return Verdict(warning=f"response {details}, to no request the agent is waiting on; ignored")


def _record_request(pending: set[JsonId], data: bytes) -> None:
    """Record the id of an agent's outgoing request (one SDK write is one JSON-RPC line)."""
    try:
        message = json.loads(data)
    except (ValueError, RecursionError):
        return
    if isinstance(message, dict) and "method" in message and _usable_id(message.get("id")):
        pending.add(message["id"])


class _TapTransport(asyncio.WriteTransport):
    """The stdout transport, seen through a tap that records the agent's request ids."""

    def __init__(self, inner: asyncio.WriteTransport, on_write: Callable[[bytes], None]) -> None:
        super().__init__()
        self._inner = inner
        self._on_write = on_write

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self._on_write(bytes(data))
        self._inner.write(data)

    def is_closing(self) -> bool:
        return self._inner.is_closing()

    def close(self) -> None:
        self._inner.close()

    def abort(self) -> None:
        self._inner.abort()

    def can_write_eof(self) -> bool:
        return self._inner.can_write_eof()

    def write_eof(self) -> None:
        self._inner.write_eof()

    def get_write_buffer_size(self) -> int:
        return self._inner.get_write_buffer_size()

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self._inner.get_extra_info(name, default)


class FrameFilter:
    """Reads raw frames, answers the bad ones, feeds the good ones to the SDK's reader."""

    def __init__(
        self,
        raw: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        *,
        pending: set[JsonId] | None = None,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
    ) -> None:
        self._raw = raw
        self.writer = writer
        self.max_frame_bytes = max_frame_bytes
        #: What the SDK's connection reads: only frames the filter let through.
        self.reader = asyncio.StreamReader(limit=max(max_frame_bytes, READ_CHUNK) + 2)
        #: Ids of the agent's own requests still awaiting the client's answer.
        self.pending: set[JsonId] = pending if pending is not None else set()
        self.keep_alive: object = None
        self._line = bytearray()
        self._head = b""
        self._skipped: int | None = None  # bytes of the oversized frame being discarded
        self._frames = 0

    async def pump(self) -> None:
        """Filter stdin until it ends, then end the SDK's input too."""
        try:
            while True:
                try:
                    chunk = await self._raw.read(READ_CHUNK)
                except (OSError, ValueError) as exc:
                    _log.warning("standard input failed (%s); closing the connection", exc)
                    break
                if not chunk:
                    break
                await self._take(chunk)
            if self._line or self._skipped is not None:
                await self._end_frame()
        finally:
            self.reader.feed_eof()

    async def _take(self, chunk: bytes) -> None:
        start = 0
        while True:
            end = chunk.find(b"\n", start)
            self._append(chunk[start:] if end < 0 else chunk[start:end])
            if end < 0:
                return
            await self._end_frame()
            start = end + 1

    def _append(self, piece: bytes) -> None:
        if self._skipped is not None:
            self._skipped += len(piece)
        elif len(self._line) + len(piece) > self.max_frame_bytes:
            self._head = bytes(self._line[:_HEAD_BYTES] + piece[:_HEAD_BYTES])[:_HEAD_BYTES]
            self._skipped = len(self._line) + len(piece)
            self._line = bytearray()
        else:
            self._line += piece

    async def _end_frame(self) -> None:
        self._frames += 1
        if self._skipped is not None:
            size = self._skipped
            verdict = judge_oversized(self._head, size, self.max_frame_bytes, self.pending)
            self._head, self._skipped = b"", None
        else:
            size = len(self._line)
            verdict = judge_frame(bytes(self._line), self.pending)
            self._line = bytearray()
        if verdict.warning is not None:
            _log.warning("bad frame #%d (%d bytes): %s", self._frames, size, verdict.warning)
        if verdict.settles is not None:
            self.pending.discard(verdict.settles)
        reply = verdict.reply()
        if reply is not None:
            self.writer.write(reply)
            await self.writer.drain()
        if verdict.forward is not None:
            self.reader.feed_data(verdict.forward)
            await asyncio.sleep(0)  # let the SDK take it before the next frame is judged


async def filtered_stdio(
    max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter, FrameFilter]:
    """stdin/stdout for the SDK's connection, with the frame filter in between.

    Returns the reader and writer to give the SDK, and the filter, whose
    :meth:`FrameFilter.pump` must run for the reader to see anything.
    """
    from acp.stdio import stdio_streams

    raw, stdout = await stdio_streams(limit=READ_CHUNK)
    pending: set[JsonId] = set()
    tap = _TapTransport(stdout.transport, functools.partial(_record_request, pending))
    protocol: Any = stdout.transport.get_protocol()
    writer = asyncio.StreamWriter(tap, protocol, None, asyncio.get_running_loop())
    frames = FrameFilter(raw, writer, pending=pending, max_frame_bytes=max_frame_bytes)
    frames.keep_alive = stdout  # a collected StreamWriter closes its transport
    return frames.reader, writer, frames
