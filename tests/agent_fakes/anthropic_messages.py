"""The Anthropic Messages API as Claude Code calls it: ``POST /v1/messages``, streamed.

A request that offers tools is an agent loop's: it is answered with the
script's turn at the position of how many assistant messages it already holds
(text, then ``tool_use`` blocks whose input is streamed as ``input_json_delta``
pieces; ``stop_reason`` ``tool_use`` or ``end_turn``).  A subagent's requests
are told apart by their first user message (the prompt the main agent gave the
``Agent`` call): one holding a marker of ``agents`` plays that script instead.
Every call gets its own ``tool_use`` id (the main loop's ``toolu_PPIIfake``, a
subagent's ``toolu_aKPPIIfake``: the CLIs' ids never repeat across agents).
Any other request (a title, a quota probe) gets a short text.  ``stream: false`` requests get the
same message as one JSON body.  Wire format: the published streaming events
(``message_start``, ``content_block_start/delta/stop``, ``message_delta``,
``message_stop``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler
from typing import Any

from .script import Recorder, Turn, arguments_json, send_events, send_json, serve

MODEL = "claude-sonnet-4-5"


def _message(turn: Turn, number: int, model: str, tag: str = "") -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    if turn.text:
        content.append({"type": "text", "text": turn.text})
    for index, call in enumerate(turn.calls):
        content.append(
            {
                "type": "tool_use",
                "id": f"toolu_{tag}{number:02d}{index:02d}fake",
                "name": call.name,
                "input": call.arguments if isinstance(call.arguments, dict) else {},
            }
        )
    return {
        "id": f"msg_{tag}{number:04d}fake",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": "tool_use" if turn.calls else "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": turn.usage[0], "output_tokens": turn.usage[1]},
    }


def _events(turn: Turn, number: int, model: str, tag: str = "") -> list[tuple[str, Any]]:
    whole = _message(turn, number, model, tag)
    start = dict(whole, content=[], stop_reason=None)
    start["usage"] = {"input_tokens": turn.usage[0], "output_tokens": 1}
    events: list[tuple[str, Any]] = [("message_start", {"type": "message_start", "message": start})]
    index = 0
    if turn.text:
        events.append(
            (
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": 0,
                    "content_block": {"type": "text", "text": ""},
                },
            )
        )
        events.append(
            (
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": 0,
                    "delta": {"type": "text_delta", "text": turn.text},
                },
            )
        )
        events.append(("content_block_stop", {"type": "content_block_stop", "index": 0}))
        index = 1
    for offset, call in enumerate(turn.calls):
        block = whole["content"][index]
        raw = arguments_json(call)
        events.append(
            (
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": index,
                    "content_block": {
                        "type": "tool_use",
                        "id": block["id"],
                        "name": call.name,
                        "input": {},
                    },
                },
            )
        )
        half = len(raw) // 2
        for piece in (raw[:half], raw[half:]):
            events.append(
                (
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": index,
                        "delta": {"type": "input_json_delta", "partial_json": piece},
                    },
                )
            )
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
        index += 1
        del offset
    events.append(
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": whole["stop_reason"], "stop_sequence": None},
                "usage": {"output_tokens": turn.usage[1]},
            },
        )
    )
    events.append(("message_stop", {"type": "message_stop"}))
    return events


class FakeAnthropic:
    """Plays ``turns`` to the main loop and ``agents[marker]`` to the subagent whose first
    user message holds ``marker``; records every request."""

    def __init__(
        self,
        turns: Sequence[Turn],
        *,
        final: str = "Done.",
        agents: Mapping[str, Sequence[Turn]] | None = None,
    ) -> None:
        self.turns = list(turns)
        self.final = final
        self.agents = {marker: list(script) for marker, script in (agents or {}).items()}
        self.recorder = Recorder()
        self.base_url = ""

    def agent_of(self, body: Any) -> str | None:
        """The marker of the subagent whose request ``body`` is (None: not a subagent's)."""
        messages = body.get("messages") if isinstance(body, dict) else None
        first = next((m for m in messages or () if m.get("role") == "user"), None)
        text = json.dumps(first.get("content")) if first else ""
        return next((marker for marker in self.agents if marker in text), None)

    def _loop_requests(self, marker: str | None) -> list[dict[str, Any]]:
        return [
            body
            for method, path, body in self.recorder.requests
            if method == "POST"
            and path.startswith("/v1/messages")
            and not path.endswith("/count_tokens")
            and isinstance(body, dict)
            and body.get("tools")
            and self.agent_of(body) == marker
        ]

    def main_requests(self) -> list[dict[str, Any]]:
        """The main loop's model requests, in the order they came."""
        return self._loop_requests(None)

    def agent_requests(self, marker: str) -> list[dict[str, Any]]:
        """The model requests of the subagent ``marker`` names, in the order they came."""
        return self._loop_requests(marker)

    def _turn(self, body: dict[str, Any]) -> tuple[Turn, int, str]:
        if not body.get("tools"):
            number = 900 + len(self.recorder.requests)
            return Turn(text="Scripted session", usage=(10, 3)), number, ""
        position = sum(1 for m in body.get("messages", []) if m.get("role") == "assistant")
        marker = self.agent_of(body)
        if marker is not None:
            tag = f"a{list(self.agents).index(marker)}"
            script, final = self.agents[marker], f"{marker} finished."
        else:
            tag, script, final = "", self.turns, self.final
        if position < len(script):
            return script[position], position + 1, tag
        return Turn(text=final, usage=(150, 12)), position + 1, tag

    def handle(self, handler: BaseHTTPRequestHandler, method: str, body: Any) -> None:
        path = handler.path.split("?", 1)[0]
        if method != "POST" or not path.startswith("/v1/messages"):
            send_json(
                handler,
                404,
                {"type": "error", "error": {"type": "not_found_error", "message": path}},
            )
            return
        if path.endswith("/count_tokens"):
            send_json(handler, 200, {"input_tokens": 100})
            return
        turn, number, tag = self._turn(body if isinstance(body, dict) else {})
        model = str((body or {}).get("model") or MODEL)
        if isinstance(body, dict) and body.get("stream"):
            send_events(handler, _events(turn, number, model, tag))
        else:
            send_json(handler, 200, _message(turn, number, model, tag))


@contextmanager
def serve_anthropic(fake: FakeAnthropic) -> Iterator[FakeAnthropic]:
    with serve(fake.handle, fake.recorder) as url:
        fake.base_url = url
        yield fake


def dump_requests(fake: FakeAnthropic) -> str:
    return "\n".join(
        f"{m} {p} {json.dumps(b)[:300] if b else ''}" for m, p, b in fake.recorder.requests
    )
