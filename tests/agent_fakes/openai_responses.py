"""The OpenAI Responses API as the Codex CLI calls it: ``POST /v1/responses``, streamed.

A request is answered with the script's turn at the position of how many
assistant turns its ``input`` already holds (a turn ends with a
``function_call`` item, or is an assistant ``message``; consecutive calls
count once).  The stream is the published event sequence:
``response.created``, per output item ``response.output_item.added`` /
``response.output_text.delta`` / ``response.output_item.done``, then
``response.completed`` with ``usage``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler
from typing import Any

from .script import Recorder, Turn, arguments_json, send_events, send_json, serve


def position(items: Sequence[Any]) -> int:
    """How many assistant turns ``input`` holds: runs of model-authored items, each one turn."""
    turns = 0
    in_turn = False
    for item in items:
        if not isinstance(item, dict):
            continue
        kind = item.get("type")
        authored = kind in (
            "function_call",
            "custom_tool_call",
            "local_shell_call",
            "reasoning",
        ) or (kind == "message" and item.get("role") == "assistant")
        if authored and not in_turn:
            turns += 1
        in_turn = authored
    return turns


def _output(turn: Turn, number: int) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    if turn.text:
        items.append(
            {
                "type": "message",
                "id": f"msg_{number:04d}fake",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": turn.text, "annotations": []}],
            }
        )
    for index, call in enumerate(turn.calls):
        item = {
            "type": "function_call",
            "id": f"fc_{number:02d}{index:02d}fake",
            "call_id": f"call_{number:02d}{index:02d}fake",
            "name": call.name,
            "arguments": arguments_json(call),
            "status": "completed",
        }
        if call.name.startswith("mcp__") and call.name.count("__") >= 2:
            # an MCP tool is offered inside a namespace (``mcp__<server>``); the call names both
            namespace, _, name = call.name.rpartition("__")
            item.update(namespace=namespace, name=name)
        items.append(item)
    return items


def _events(turn: Turn, number: int, model: str) -> list[tuple[str, Any]]:
    response: dict[str, Any] = {
        "id": f"resp_{number:04d}fake",
        "object": "response",
        "created_at": 0,
        "status": "in_progress",
        "model": model,
        "output": [],
    }
    events: list[tuple[str, Any]] = [
        ("response.created", {"type": "response.created", "response": response})
    ]
    output = _output(turn, number)
    for index, item in enumerate(output):
        added = dict(item, status="in_progress")
        if item["type"] == "message":
            added["content"] = []
        events.append(
            (
                "response.output_item.added",
                {"type": "response.output_item.added", "output_index": index, "item": added},
            )
        )
        if item["type"] == "message":
            events.append(
                (
                    "response.output_text.delta",
                    {
                        "type": "response.output_text.delta",
                        "item_id": item["id"],
                        "output_index": index,
                        "content_index": 0,
                        "delta": turn.text,
                    },
                )
            )
        events.append(
            (
                "response.output_item.done",
                {"type": "response.output_item.done", "output_index": index, "item": item},
            )
        )
    done = dict(response, status="completed", output=output)
    done["usage"] = {
        "input_tokens": turn.usage[0],
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": turn.usage[1],
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": turn.usage[0] + turn.usage[1],
    }
    events.append(("response.completed", {"type": "response.completed", "response": done}))
    return events


class FakeResponses:
    """Plays ``turns``; records every request."""

    def __init__(self, turns: Sequence[Turn], *, final: str | None = "Done.") -> None:
        self.turns = list(turns)
        #: the answer after the script; None: a 400 error instead (the run ends in error)
        self.final = final
        self.recorder = Recorder()
        self.base_url = ""

    def handle(self, handler: BaseHTTPRequestHandler, method: str, body: Any) -> None:
        path = handler.path.split("?", 1)[0]
        if method == "GET" and path.endswith("/models"):
            send_json(handler, 200, {"object": "list", "data": []})
            return
        if method != "POST" or not path.endswith("/responses"):
            send_json(handler, 404, {"error": {"message": f"no route {path}", "type": "not_found"}})
            return
        request = body if isinstance(body, dict) else {}
        at = position(request.get("input") or [])
        if at < len(self.turns):
            turn = self.turns[at]
        elif self.final is None:
            error = {"message": "scripted failure", "type": "invalid_request_error", "code": None}
            send_json(handler, 400, {"error": error})
            return
        else:
            turn = Turn(text=self.final, usage=(150, 12))
        send_events(handler, _events(turn, at + 1, str(request.get("model") or "test-model")))


@contextmanager
def serve_responses(fake: FakeResponses) -> Iterator[FakeResponses]:
    with serve(fake.handle, fake.recorder) as url:
        fake.base_url = url + "/v1"
        yield fake
