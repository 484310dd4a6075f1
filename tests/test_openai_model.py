"""The provider in-process against the test server (real SDK, real HTTP): deltas in, a turn out."""

from __future__ import annotations

import asyncio
from typing import Any

from openai_server import FakeOpenAI, Reply, call, serve

from session.history import Message, Part
from session.model import ModelTurn
from session.openai_model import OpenAIChatModel, OpenAISettings
from session.tools import default_tools

HISTORY = [Message(role="user", kind="prompt", parts=(Part(kind="text", text="go"),))]


def generate(answers: list[Any]) -> tuple[ModelTurn, list[str], FakeOpenAI]:
    shown: list[str] = []

    async def on_text(delta: str) -> None:
        shown.append(delta)

    with serve(FakeOpenAI(answers)) as fake:
        model = OpenAIChatModel(
            OpenAISettings(model="m", base_url=fake.base_url, api_key="k", max_retries=0)
        )
        turn = asyncio.run(
            model.generate_streaming(HISTORY, tools=list(default_tools().values()), on_text=on_text)
        )
    return turn, shown, fake


def test_text_deltas_and_several_tool_calls_are_assembled_in_order() -> None:
    reply = Reply(
        text="Two reads.",
        pieces=2,
        calls=(
            call("a", "read_file", {"path": "x.txt"}),
            call("b", "list_directory", {"path": "src"}),
        ),
        usage=(40, 9),
    )
    turn, shown, _ = generate([reply])
    assert shown == ["Two r", "eads."]
    assert turn.text == "Two reads."
    assert [(c.call_id, c.name, dict(c.args)) for c in turn.calls] == [
        ("a", "read_file", {"path": "x.txt"}),
        ("b", "list_directory", {"path": "src"}),
    ]
    assert turn.usage is not None
    assert (turn.usage.input_tokens, turn.usage.output_tokens) == (40, 9)


def test_a_name_repeated_in_every_delta_is_not_doubled() -> None:
    reply = Reply(
        calls=(call("a", "read_file", {"path": "a-long-file-name.txt"}),), repeat_names=True
    )
    turn, _, _ = generate([reply])
    assert [c.name for c in turn.calls] == ["read_file"]
    assert dict(turn.calls[0].args) == {"path": "a-long-file-name.txt"}


def test_the_plain_generate_entry_sends_no_tools() -> None:
    with serve(FakeOpenAI([Reply(text="plain")])) as fake:
        model = OpenAIChatModel(OpenAISettings(model="m", base_url=fake.base_url, api_key="k"))
        turn = asyncio.run(model.generate(HISTORY))
    assert turn.text == "plain"
    assert "tools" not in fake.requests[0]
