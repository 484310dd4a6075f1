"""The adapter bench's model over HTTP: a scripted OpenAI-compatible server on 127.0.0.1.

Bench only (``make bench`` must not import the tests): it answers ``POST
/v1/chat/completions`` with one JSON completion (no streaming; the bench's
runs never ask for one).  The script is the bench's: while the conversation
holds fewer than ``batches`` assistant messages with tool calls, the answer is
the next batch's calls (:func:`batch_calls`); then a final text.  How many
batches a run asks for rides in the request's ``model`` name
(``bench-<batches>-<workload>``), so one server serves every run.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

#: Calls per batch (the issue's figure: 4 parallel calls).
CALLS = 4
#: The bench's workloads: ``mixed`` (three successes and one failure of a tool that
#: alternates between two, so no streak grows and enforce never stops) and ``failing``
#: (every call of every batch fails the same way: enforce stops the run).
WORKLOADS = ("mixed", "failing")
FINAL_TEXT = "Done."
_BODY_LIMIT = 8 * 1024 * 1024


def batch_calls(batch: int, workload: str) -> list[tuple[str, str, dict[str, Any]]]:
    """(call id, tool name, arguments) of the 1-based ``batch``'s calls."""
    if workload == "failing":
        names = ["fail_a"] * CALLS
    else:
        names = ["ok"] * (CALLS - 1) + ["fail_a" if batch % 2 else "fail_b"]
    return [(f"b{batch}c{i}", name, {"n": batch * 10 + i}) for i, name in enumerate(names)]


def model_name(batches: int, workload: str) -> str:
    return f"bench-{batches}-{workload}"


def parse_model_name(name: str) -> tuple[int, str]:
    _, batches, workload = name.split("-", 2)
    if workload not in WORKLOADS:
        raise ValueError(f"unknown workload {workload!r}")
    return int(batches), workload


def _completion(body: dict[str, Any]) -> dict[str, Any]:
    batches, workload = parse_model_name(str(body.get("model")))
    done = sum(
        1
        for message in body.get("messages") or ()
        if isinstance(message, dict)
        and message.get("role") == "assistant"
        and message.get("tool_calls")
    )
    message: dict[str, Any] = {"role": "assistant", "content": None}
    if done < batches:
        message["tool_calls"] = [
            {
                "id": call_id,
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(arguments)},
            }
            for call_id, name, arguments in batch_calls(done + 1, workload)
        ]
        finish = "tool_calls"
    else:
        message["content"] = FINAL_TEXT
        finish = "stop"
    return {
        "id": f"chatcmpl-{done}",
        "object": "chat.completion",
        "created": 0,
        "model": body.get("model"),
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18},
    }


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: the clients pool their connections

    def setup(self) -> None:
        super().setup()
        # Headers and body are two writes: without this, Nagle meets the client's delayed
        # ACK and every answer waits ~40 ms.
        self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if not self.path.endswith("/chat/completions") or not 0 < length <= _BODY_LIMIT:
            self._answer(404, {"error": {"message": "not found", "type": "not_found"}})
            return
        try:
            body = json.loads(self.rfile.read(length))
            if body.get("stream"):
                raise ValueError("streaming is not served by the bench")
            answer = _completion(body)
        except (ValueError, TypeError, AttributeError) as exc:
            self._answer(400, {"error": {"message": str(exc), "type": "invalid_request_error"}})
            return
        self._answer(200, answer)

    def _answer(self, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        return


@contextmanager
def serve() -> Iterator[str]:
    """The server, running in a thread while the block runs; yields its ``/v1`` base URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, name="bench-wire", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
