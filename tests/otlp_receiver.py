"""An OTLP/HTTP receiver on 127.0.0.1 that writes what the Collector's ``file`` exporter would.

Qwen Code's OTLP exporter (``telemetry.otlpProtocol: "http"``) POSTs
``/v1/logs``, ``/v1/metrics`` and ``/v1/traces``; its JavaScript exporters send
OTLP/JSON (``application/json``), the Python ones protobuf
(``application/x-protobuf``): both are accepted.  Each logs or metrics request
is decoded into the OTLP protobuf message (OTLP/JSON's hex ``traceId``/``spanId``
turned into bytes first: a generic JSON-to-protobuf parse would read them as
base64 and silently garble them) and appended as one line of OTLP/JSON, the
encoding of the Collector's ``file`` exporter (the project's own
:func:`~tool_failure_guard.telemetry.otlp_file.otlp_json`).  Traces
are answered and dropped.  Answers are the empty ``Export*ServiceResponse``
in the request's encoding, as a Collector answers.
"""

from __future__ import annotations

import base64
import gzip
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from google.protobuf import json_format
from google.protobuf.message import Message
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsServiceRequest,
    ExportLogsServiceResponse,
)
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from tool_failure_guard.telemetry.otlp_file import otlp_json

_ID_FIELDS = frozenset({"traceId", "spanId", "parentSpanId"})
_ROUTES: dict[str, tuple[type[Message] | None, type[Message]]] = {
    "/v1/logs": (ExportLogsServiceRequest, ExportLogsServiceResponse),
    "/v1/metrics": (ExportMetricsServiceRequest, ExportMetricsServiceResponse),
    "/v1/traces": (None, ExportTraceServiceResponse),
}
MAX_BODY = 64 * 1024 * 1024


def _base64_ids(node: Any) -> Any:
    """OTLP/JSON hex ids -> the base64 that protobuf's JSON parser reads for bytes."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key in _ID_FIELDS and isinstance(value, str):
                node[key] = base64.b64encode(bytes.fromhex(value)).decode("ascii")
            else:
                _base64_ids(value)
    elif isinstance(node, list):
        for item in node:
            _base64_ids(item)
    return node


def _body(handler: BaseHTTPRequestHandler) -> bytes:
    """The request body: ``Content-Length`` or chunked, gzip-decoded when so encoded."""
    if handler.headers.get("Transfer-Encoding", "").lower() == "chunked":
        parts = []
        total = 0
        while True:
            size = int(handler.rfile.readline().split(b";")[0].strip() or b"0", 16)
            if size == 0:
                handler.rfile.readline()
                break
            total += size
            if total > MAX_BODY:
                raise ValueError("request body too large")
            parts.append(handler.rfile.read(size))
            handler.rfile.readline()
        body = b"".join(parts)
    else:
        body = handler.rfile.read(min(int(handler.headers.get("Content-Length") or 0), MAX_BODY))
    if handler.headers.get("Content-Encoding", "").lower() == "gzip":
        body = gzip.decompress(body)
    return body


class Receiver:
    """The receiver's output file and what it was sent (paths and content types)."""

    def __init__(self, out: Path) -> None:
        self.out = out
        self.requests: list[tuple[str, str]] = []
        self.lock = threading.Lock()
        self.endpoint = ""

    def lines(self) -> list[dict[str, Any]]:
        with self.lock:
            text = self.out.read_text(encoding="utf-8") if self.out.exists() else ""
        return [json.loads(line) for line in text.splitlines() if line.strip()]

    def handle(self, handler: BaseHTTPRequestHandler) -> None:
        body = _body(handler)
        kind = (handler.headers.get("Content-Type") or "").split(";")[0].strip()
        path = handler.path.split("?")[0].rstrip("/")
        with self.lock:
            self.requests.append((path, kind))
        route = _ROUTES.get(path)
        if route is None:
            handler.send_response(404)
            handler.end_headers()
            return
        request_type, response_type = route
        if request_type is not None:
            message = request_type()
            if kind == "application/json":
                json_format.ParseDict(_base64_ids(json.loads(body)), message)
            else:
                message.ParseFromString(body)
            with self.lock, self.out.open("a", encoding="utf-8") as sink:
                sink.write(otlp_json(message) + "\n")
        response = response_type()
        data = (
            json_format.MessageToJson(response).encode("utf-8")
            if kind == "application/json"
            else response.SerializeToString()
        )
        handler.send_response(200)
        handler.send_header("Content-Type", kind or "application/x-protobuf")
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)


@contextmanager
def receive(out: Path) -> Iterator[Receiver]:
    """Run a receiver writing ``out`` on 127.0.0.1 (a free port) for the ``with`` block."""
    receiver = Receiver(out)

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            receiver.handle(self)

        def log_message(self, format: str, *args: Any) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    receiver.endpoint = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield receiver
    finally:
        server.shutdown()
        server.server_close()
