"""A scripted model: the turns a fake plays, and the server thread both fakes share."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import attrs


@attrs.frozen(kw_only=True)
class Call:
    """One tool call of a scripted turn: the tool's name and its arguments."""

    name: str
    arguments: dict[str, Any] | str  #: a str is sent as it is (arguments that are not JSON)


@attrs.frozen(kw_only=True)
class Turn:
    """One assistant message: its text, then its tool calls (none: the final answer)."""

    text: str = ""
    calls: tuple[Call, ...] = ()
    usage: tuple[int, int] = (120, 30)  #: (input, output) tokens reported for this turn


def arguments_json(call: Call) -> str:
    return call.arguments if isinstance(call.arguments, str) else json.dumps(call.arguments)


@attrs.define
class Recorder:
    """Every request a fake received: (method, path, JSON body or None)."""

    requests: list[tuple[str, str, Any]] = attrs.field(factory=list)
    lock: threading.Lock = attrs.field(factory=threading.Lock)

    def add(self, method: str, path: str, body: Any) -> None:
        with self.lock:
            self.requests.append((method, path, body))


Handle = Callable[[BaseHTTPRequestHandler, str, Any], None]


@contextmanager
def serve(handle: Handle, recorder: Recorder) -> Iterator[str]:
    """Run ``handle`` on 127.0.0.1 (a free port); yields ``http://127.0.0.1:PORT``."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _body(self) -> Any:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                return json.loads(raw) if raw else None
            except ValueError:
                return None

        def do_POST(self) -> None:
            body = self._body()
            recorder.add("POST", self.path, body)
            with suppress(BrokenPipeError, ConnectionResetError):
                handle(self, "POST", body)

        def do_GET(self) -> None:
            recorder.add("GET", self.path, None)
            handle(self, "GET", None)

        def do_HEAD(self) -> None:
            recorder.add("HEAD", self.path, None)
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def send_json(handler: BaseHTTPRequestHandler, status: int, data: Any) -> None:
    raw = json.dumps(data).encode()
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(raw)))
    handler.end_headers()
    handler.wfile.write(raw)


def send_events(handler: BaseHTTPRequestHandler, events: Sequence[tuple[str, Any]]) -> None:
    """A complete server-sent-event stream: ``event:`` / ``data:`` pairs, then close."""
    handler.send_response(200)
    handler.send_header("Content-Type", "text/event-stream")
    handler.send_header("Cache-Control", "no-cache")
    handler.send_header("Connection", "close")
    handler.end_headers()
    for name, data in events:
        handler.wfile.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
    handler.wfile.flush()
    handler.close_connection = True
