"""A small OpenAI-compatible chat-completions server on 127.0.0.1, for the tests.

It speaks the wire format the ``openai`` SDK expects: ``POST
/v1/chat/completions`` answered as server-sent events (``stream: true``: text
and tool-call deltas, a usage chunk when ``stream_options.include_usage``, then
``data: [DONE]``) or as one JSON completion, and error bodies
(``{"error": {"message", "type", "code"}}``) with any status.  What it answers
comes from a per-test responder: a list of :class:`Reply` / :class:`Fail` /
:class:`Hang` / :class:`Raw` (a malformed or cut-short stream) taken in
order, or a function of the request body.  Every request body is recorded
(``requests``), and so is every client that went away in the middle of a held
stream (``disconnects``).  It also answers llama-server's slot action
``POST /slots/<id>?action=erase`` (``{"id_slot", "n_erased"}``), recorded in
``slot_actions`` with the number of chat requests before it.

It runs in a thread (the stdlib ``ThreadingHTTPServer``) so the agent, a
subprocess, reaches it through the real SDK over a real socket.
"""

from __future__ import annotations

import json
import select
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import attrs

from tool_failure_guard.guard import REPEATED_TOOL_FAILURE_REMINDER
from tool_failure_guard.session.pipeline.drain import QUEUED_INPUT_PREFIX


@attrs.frozen(kw_only=True)
class Reply:
    """One assistant answer: text (streamed in ``pieces``) and tool calls."""

    text: str = ""
    #: (id, name, raw JSON arguments): raw, so a test can send arguments that are not JSON
    calls: tuple[tuple[str, str, str], ...] = ()
    usage: tuple[int, int] = (11, 7)
    pieces: int = 3
    #: Repeat each call's whole name in every argument delta (some servers do).
    repeat_names: bool = False


@attrs.frozen(kw_only=True)
class Fail:
    """An error response."""

    status: int
    message: str = "failed"
    code: str | None = None
    type: str = "invalid_request_error"
    headers: tuple[tuple[str, str], ...] = ()


@attrs.frozen(kw_only=True)
class Hang:
    """Stream ``text``, then hold the stream open until the client goes away."""

    text: str = "Thinking"
    limit_s: float = 20.0


@attrs.frozen(kw_only=True)
class Raw:
    """A stream written exactly as given, for streams no well-behaved server sends.

    Each event is a ``delta`` (a dict, wrapped in a chunk of choice 0), the text
    of a ``data:`` line (a str, written as it is: ``'{"choices": ['``), or raw
    bytes.  Then a chunk with ``finish`` as its ``finish_reason`` (unless None),
    then ``data: [DONE]`` (unless ``done`` is false); the connection closes.
    """

    events: tuple[dict[str, Any] | str | bytes, ...]
    finish: str | None = "stop"
    done: bool = True


Answer = Reply | Fail | Hang | Raw
Responder = Callable[[dict[str, Any]], Answer]


def call(call_id: str, name: str, args: dict[str, Any] | str) -> tuple[str, str, str]:
    return (call_id, name, args if isinstance(args, str) else json.dumps(args))


def _split(text: str, pieces: int) -> list[str]:
    if not text:
        return []
    size = max(1, -(-len(text) // max(1, pieces)))
    return [text[i : i + size] for i in range(0, len(text), size)]


class FakeOpenAI:
    """The server and its records; use :func:`serve` to run it."""

    def __init__(
        self,
        responder: Responder | Sequence[Answer],
        *,
        reject_later_system: bool = False,
        numbered_ids: bool = False,
    ):
        if callable(responder):
            self._responder: Responder = responder
        else:
            answers = list(responder)
            self._responder = lambda _: answers.pop(0) if answers else Reply(text="(script over)")
        self.reject_later_system = reject_later_system
        #: each unstreamed completion gets its own id (``chatcmpl-test-N``), as real servers do
        self.numbered_ids = numbered_ids
        self.requests: list[dict[str, Any]] = []
        self.auth: list[str] = []
        self.disconnects = 0
        #: (chat requests received before it, path) per slot action
        self.slot_actions: list[tuple[int, str]] = []
        #: what slot 0 holds: the last chat request's messages (a stand-in for its tokens)
        self.slot_cached = 0
        self.lock = threading.Lock()
        self.base_url = ""

    # -- what a test reads -----------------------------------------------------------

    def messages(self, index: int) -> list[dict[str, Any]]:
        return list(self.requests[index]["messages"])

    def count_in(self, index: int, text: str) -> int:
        """How many messages of request ``index`` hold ``text`` (any role)."""
        return sum(1 for m in self.messages(index) if text in str(m.get("content") or ""))

    # -- the HTTP side --------------------------------------------------------------------

    def handle(self, handler: BaseHTTPRequestHandler) -> None:
        length = int(handler.headers.get("Content-Length") or 0)
        body = json.loads(handler.rfile.read(length) or b"{}")
        if handler.path.startswith("/slots/"):
            self._slot_action(handler)
            return
        with self.lock:
            self.requests.append(body)
            self.slot_cached = len(body.get("messages", []))
            self.auth.append(handler.headers.get("Authorization", ""))
        if handler.path.rstrip("/") != "/v1/chat/completions":
            self._error(handler, Fail(status=404, message=f"no route {handler.path}"))
            return
        if self.reject_later_system and any(
            m.get("role") == "system" for m in body.get("messages", [])[1:]
        ):
            self._error(
                handler, Fail(status=400, message="System message must be at the beginning.")
            )
            return
        answer = self._responder(body)
        if isinstance(answer, Fail):
            self._error(handler, answer)
        elif isinstance(answer, Hang):
            self._hang(handler, body, answer)
        elif isinstance(answer, Raw):
            self._raw(handler, body, answer)
        elif body.get("stream"):
            self._stream(handler, body, answer)
        else:
            self._complete(handler, body, answer)

    def _slot_action(self, handler: BaseHTTPRequestHandler) -> None:
        """llama-server's ``POST /slots/:id_slot?action=erase``: the slot's cached tokens."""
        slot, _, query = handler.path[len("/slots/") :].partition("?")
        with self.lock:
            self.slot_actions.append((len(self.requests), handler.path))
            valid = query == "action=erase" and slot == "0"
            erased, self.slot_cached = (self.slot_cached, 0) if valid else (0, self.slot_cached)
        if not valid:
            self._error(handler, Fail(status=400, message=f"no slot action {handler.path}"))
            return
        self._send_json(handler, 200, {"id_slot": 0, "n_erased": erased})

    @staticmethod
    def _send_json(
        handler: BaseHTTPRequestHandler,
        status: int,
        data: Any,
        headers: Sequence[tuple[str, str]] = (),
    ) -> None:
        raw = json.dumps(data).encode()
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(raw)))
        for key, value in headers:
            handler.send_header(key, value)
        handler.end_headers()
        handler.wfile.write(raw)

    def _error(self, handler: BaseHTTPRequestHandler, fail: Fail) -> None:
        error = {"message": fail.message, "type": fail.type, "param": None, "code": fail.code}
        self._send_json(handler, fail.status, {"error": error}, fail.headers)

    @staticmethod
    def _chunk(
        body: dict[str, Any],
        delta: dict[str, Any] | None,
        finish: str | None = None,
        usage: Any = None,
    ) -> bytes:
        data: dict[str, Any] = {
            "id": "chatcmpl-test",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": body.get("model", ""),
            "choices": []
            if delta is None
            else [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
        if usage is not None:
            data["usage"] = usage
        return f"data: {json.dumps(data)}\n\n".encode()

    @staticmethod
    def _start_stream(handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", "text/event-stream")
        handler.send_header("Cache-Control", "no-cache")
        handler.end_headers()

    def _stream(self, handler: BaseHTTPRequestHandler, body: dict[str, Any], reply: Reply) -> None:
        self._start_stream(handler)
        out = handler.wfile
        out.write(self._chunk(body, {"role": "assistant", "content": ""}))
        for piece in _split(reply.text, reply.pieces):
            out.write(self._chunk(body, {"content": piece}))
            out.flush()
        for index, (call_id, name, arguments) in enumerate(reply.calls):
            first = {
                "index": index,
                "id": call_id,
                "type": "function",
                "function": {"name": name, "arguments": ""},
            }
            out.write(self._chunk(body, {"tool_calls": [first]}))
            for piece in _split(arguments, 2):
                function = {"arguments": piece} | ({"name": name} if reply.repeat_names else {})
                out.write(
                    self._chunk(body, {"tool_calls": [{"index": index, "function": function}]})
                )
        out.write(self._chunk(body, {}, "tool_calls" if reply.calls else "stop"))
        if (body.get("stream_options") or {}).get("include_usage"):
            out.write(self._chunk(body, None, usage=_usage(reply)))
        out.write(b"data: [DONE]\n\n")
        out.flush()

    def _raw(self, handler: BaseHTTPRequestHandler, body: dict[str, Any], raw: Raw) -> None:
        self._start_stream(handler)
        out = handler.wfile
        for event in raw.events:
            if isinstance(event, dict):
                out.write(self._chunk(body, event))
            elif isinstance(event, str):
                out.write(f"data: {event}\n\n".encode())
            else:
                out.write(event)
            out.flush()
        if raw.finish is not None:
            out.write(self._chunk(body, {}, raw.finish))
        if raw.done:
            out.write(b"data: [DONE]\n\n")
        out.flush()

    def _complete(
        self, handler: BaseHTTPRequestHandler, body: dict[str, Any], reply: Reply
    ) -> None:
        message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
        if reply.calls:
            message["tool_calls"] = [
                {"id": i, "type": "function", "function": {"name": n, "arguments": a}}
                for i, n, a in reply.calls
            ]
        data = {
            "id": f"chatcmpl-test-{len(self.requests)}" if self.numbered_ids else "chatcmpl-test",
            "object": "chat.completion",
            "created": 0,
            "model": body.get("model", ""),
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": "tool_calls" if reply.calls else "stop",
                }
            ],
            "usage": _usage(reply),
        }
        self._send_json(handler, 200, data)

    def _hang(self, handler: BaseHTTPRequestHandler, body: dict[str, Any], hang: Hang) -> None:
        self._start_stream(handler)
        handler.wfile.write(self._chunk(body, {"role": "assistant", "content": hang.text}))
        handler.wfile.flush()
        sock = handler.connection
        deadline = time.monotonic() + hang.limit_s
        while time.monotonic() < deadline:
            readable, _, _ = select.select([sock], [], [], 0.02)
            if readable:
                try:
                    data = sock.recv(1024)
                except OSError:
                    data = b""
                if not data:
                    with self.lock:
                        self.disconnects += 1
                    return


def _usage(reply: Reply) -> dict[str, int]:
    prompt, completion = reply.usage
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


@contextmanager
def serve(fake: FakeOpenAI) -> Iterator[FakeOpenAI]:
    """Run ``fake`` on 127.0.0.1 (a free port) for the ``with`` block."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"  # one request per connection; a stream ends at close

        def do_POST(self) -> None:
            try:
                fake.handle(self)
            except (BrokenPipeError, ConnectionResetError):
                with fake.lock:
                    fake.disconnects += 1

        def log_message(self, format: str, *args: Any) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    fake.base_url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    try:
        yield fake
    finally:
        server.shutdown()
        server.server_close()


# -- a scripted scenario, played over the wire ------------------------------------------


class ScenarioResponder:
    """Answers like ``session.model.ScriptedModel`` does, reading the request's messages.

    Its position comes from the chat messages alone (the prompt count, the model
    turns since the prompt or since the reminder), and its call ids are the
    scripted model's, so one scenario drives both providers to the same history.
    """

    def __init__(self, scenario: dict[str, Any]) -> None:
        prompts = scenario.get("prompts") or [scenario]
        self.prompts = [self._expand(p) for p in prompts]

    @staticmethod
    def _expand(prompt: dict[str, Any]) -> dict[str, Any]:
        def turns(items: list[dict[str, Any]] | None) -> list[dict[str, Any]] | None:
            if items is None:
                return None
            out: list[dict[str, Any]] = []
            for item in items:
                out.extend([item] * int(item.get("repeat", 1)))
            return out

        return {
            "turns": turns(prompt["turns"]),
            "on_reminder": turns(prompt.get("on_reminder")),
            "final_text": prompt.get("final_text", "Done."),
        }

    def __call__(self, body: dict[str, Any]) -> Answer:
        messages = body["messages"]
        starts = [
            i
            for i, m in enumerate(messages)
            if m["role"] == "user" and not str(m["content"]).startswith(QUEUED_INPUT_PREFIX)
        ]
        prompt_index = len(starts) - 1
        start = starts[-1]
        script = self.prompts[min(prompt_index, len(self.prompts) - 1)]
        turns, tag = script["turns"], "t"
        if script["on_reminder"] is not None:
            reminded = next(
                (
                    i
                    for i in range(start, len(messages))
                    if REPEATED_TOOL_FAILURE_REMINDER in str(messages[i].get("content") or "")
                    and messages[i]["role"] == "system"
                ),
                None,
            )
            if reminded is not None:
                start, turns, tag = reminded, script["on_reminder"], "r"
        position = sum(1 for m in messages[start:] if m["role"] == "assistant")
        if position >= len(turns):
            return Reply(text=script["final_text"])
        spec = turns[position]
        return Reply(
            text=spec.get("text", ""),
            calls=tuple(
                call(
                    c.get("id") or f"call-p{prompt_index}-{tag}{position}-{index}",
                    c["tool"],
                    c.get("args", {}),
                )
                for index, c in enumerate(spec.get("calls", []))
            ),
        )
