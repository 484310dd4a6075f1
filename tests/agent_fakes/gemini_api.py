"""The Gemini API as Gemini CLI calls it: ``generateContent`` / ``streamGenerateContent``.

Gemini CLI (``GOOGLE_GEMINI_BASE_URL`` at this fake, ``GEMINI_API_KEY`` set)
posts ``/v1beta/models/<model>:streamGenerateContent?alt=sse`` for its main
loop and ``:generateContent`` for side requests (a routing or next-speaker
check, a title), and may ``:countTokens``.  A request whose ``contents`` end
in the user's turn is answered with the script's turn at the position of how
many ``model`` turns its ``contents`` already hold (text, then one
``functionCall`` part per call; ``finishReason`` ``STOP``).  Streamed, the
whole candidate is one ``data:`` event (the published SSE shape: one
``GenerateContentResponse`` JSON per event); unstreamed, it is the JSON body.
A side request that offers no tools gets a short text.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler
from typing import Any

from .script import Recorder, Turn, send_json, serve

MODEL = "gemini-2.5-flash"


def position(contents: Sequence[Any]) -> int:
    """How many model turns ``contents`` holds (consecutive model entries count once)."""
    turns = 0
    previous = None
    for item in contents:
        role = item.get("role") if isinstance(item, dict) else None
        if role == "model" and previous != "model":
            turns += 1
        previous = role
    return turns


def _parts(turn: Turn) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    if turn.text:
        parts.append({"text": turn.text})
    for call in turn.calls:
        args = call.arguments if isinstance(call.arguments, dict) else {"raw": call.arguments}
        parts.append({"functionCall": {"name": call.name, "args": args}})
    return parts


def response(turn: Turn, model: str = MODEL) -> dict[str, Any]:
    """One ``GenerateContentResponse`` carrying ``turn`` whole."""
    return {
        "candidates": [
            {
                "content": {"role": "model", "parts": _parts(turn) or [{"text": ""}]},
                "finishReason": "STOP",
                "index": 0,
            }
        ],
        "usageMetadata": {
            "promptTokenCount": turn.usage[0],
            "candidatesTokenCount": turn.usage[1],
            "totalTokenCount": turn.usage[0] + turn.usage[1],
        },
        "modelVersion": model,
    }


def _send_sse(handler: BaseHTTPRequestHandler, data: Any) -> None:
    handler.send_response(200)
    handler.send_header("Content-Type", "text/event-stream")
    handler.send_header("Cache-Control", "no-cache")
    handler.send_header("Connection", "close")
    handler.end_headers()
    handler.wfile.write(f"data: {json.dumps(data)}\r\n\r\n".encode())
    handler.wfile.flush()
    handler.close_connection = True


class FakeGemini:
    """Plays ``turns``; records every request (``recorder``) and the main-loop ones (``loop``)."""

    def __init__(self, turns: Sequence[Turn], *, final: str = "Done.") -> None:
        self.turns = list(turns)
        self.final = final
        self.recorder = Recorder()
        self.base_url = ""

    def loop_requests(self) -> list[dict[str, Any]]:
        """The bodies of the main loop's requests (those offering tools), in arrival order."""
        return [
            body
            for method, path, body in self.recorder.requests
            if method == "POST" and "GenerateContent" in path and _offers_tools(body)
        ]

    def handle(self, handler: BaseHTTPRequestHandler, method: str, body: Any) -> None:
        path = handler.path.split("?", 1)[0]
        if method != "POST":
            send_json(handler, 404, {"error": {"code": 404, "message": f"no route {path}"}})
            return
        request = body if isinstance(body, dict) else {}
        model = path.rsplit("/", 1)[-1].split(":", 1)[0] or MODEL
        if path.endswith(":countTokens"):
            send_json(handler, 200, {"totalTokens": 100})
            return
        if not path.endswith(("GenerateContent", "generateContent")):
            send_json(handler, 404, {"error": {"code": 404, "message": f"no route {path}"}})
            return
        if _offers_tools(request):
            at = position(request.get("contents") or [])
            turn = self.turns[at] if at < len(self.turns) else Turn(text=self.final)
        else:
            turn = Turn(text='{"next_speaker": "user", "reasoning": "done"}')
        data = response(turn, model)
        if path.endswith(":streamGenerateContent"):
            _send_sse(handler, data)
        else:
            send_json(handler, 200, data)


def _offers_tools(body: Any) -> bool:
    return isinstance(body, dict) and bool(body.get("tools"))


@contextmanager
def serve_gemini(fake: FakeGemini) -> Iterator[FakeGemini]:
    with serve(fake.handle, fake.recorder) as url:
        fake.base_url = url
        yield fake
