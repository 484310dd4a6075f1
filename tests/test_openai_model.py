"""The provider in-process against the test server (real SDK, real HTTP): deltas in, a turn out."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from openai_server import Fail, FakeOpenAI, Reply, call, serve

from tool_failure_guard.session.model.base import ModelError, ModelTurn
from tool_failure_guard.session.model.openai import OpenAIChatModel, OpenAISettings
from tool_failure_guard.session.persistence.messages import Message, Part
from tool_failure_guard.session.tools.builtin import default_tools

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


def fail_with(answers: list[Any], max_retries: int = 2) -> tuple[str, FakeOpenAI]:
    with serve(FakeOpenAI(answers)) as fake:
        model = OpenAIChatModel(
            OpenAISettings(model="m", base_url=fake.base_url, api_key="k", max_retries=max_retries)
        )
        with pytest.raises(ModelError) as raised:
            asyncio.run(model.generate_streaming(HISTORY, tools=(), on_text=ignore))
    return str(raised.value), fake


async def ignore(_: str) -> None:
    return None


@pytest.mark.parametrize(
    ("fail", "cause"),
    [
        (Fail(status=401, message="bad key"), "authentication failed (HTTP 401)"),
        (Fail(status=403, message="no"), "permission denied (HTTP 403) for model 'm'"),
        (
            Fail(status=404, message="no such model"),
            "unknown model 'm' or wrong endpoint (HTTP 404)",
        ),
        (
            Fail(status=400, message="too long", code="context_length_exceeded"),
            "exceeds the context length of model 'm' (context_length_exceeded)",
        ),
        (Fail(status=422, message="odd"), "the model endpoint answered HTTP 422: odd"),
    ],
)
def test_each_fatal_answer_is_one_request_and_an_error_naming_its_cause(
    fail: Fail, cause: str
) -> None:
    message, fake = fail_with([fail, Reply(text="never")])
    assert cause in message
    assert len(fake.requests) == 1  # not retried


def test_retries_are_bounded_by_max_retries() -> None:
    slow = Fail(status=429, message="slow down", headers=(("retry-after-ms", "5"),))
    message, fake = fail_with([slow] * 5, max_retries=1)
    assert message.startswith("rate limited (HTTP 429) after 1 retries")
    assert len(fake.requests) == 2
    broken = Fail(status=502, message="bad gateway", headers=(("retry-after-ms", "5"),))
    message, fake = fail_with([broken] * 5, max_retries=2)
    assert message.startswith("server error (HTTP 502) after 2 retries")
    assert len(fake.requests) == 3


def test_an_unreachable_endpoint_is_named() -> None:
    with serve(FakeOpenAI([])) as fake:
        url = fake.base_url  # closed when the block ends: nothing listens there any more
    model = OpenAIChatModel(OpenAISettings(model="m", base_url=url, api_key="k", max_retries=0))
    with pytest.raises(ModelError, match=r"cannot reach the model endpoint http://127\.0\.0\.1"):
        asyncio.run(model.generate_streaming(HISTORY, tools=(), on_text=ignore))
