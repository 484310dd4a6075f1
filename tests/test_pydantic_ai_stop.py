"""How a stopped pydantic-ai run ends: ``on_stop`` in pydantic-ai's own idiom for a limit.

Real agents over the real wire (``tests/pydantic_ai_harness.py``); the shared
API set (``tests/test_adapter_api.py``) covers what every adapter shares.
"""

from __future__ import annotations

import asyncio
import pickle
from typing import Any

import pydantic
import pytest
from openai_server import FakeOpenAI, Reply, call, serve
from pydantic_ai import Agent, TextOutput, ToolFailed, capture_run_messages
from pydantic_ai.exceptions import AgentRunError, UsageLimitExceeded
from pydantic_ai.messages import ModelResponse, TextPart
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider
from pydantic_ai.tools import DeferredToolRequests
from pydantic_ai_harness import batches, guarded_run, kept_call_ids

from tool_failure_guard.core import LOOP_REPEATED_TOOL_FAILURE
from tool_failure_guard.core.actions import shown_text
from tool_failure_guard.guard import REPEATED_TOOL_FAILURE_STOP_MESSAGE, FailureKey
from tool_failure_guard.integrations.pydantic_ai import (
    STOP_MODEL_NAME,
    ProtectionStop,
    ProtectionStopped,
    RepeatedToolFailureCapability,
    report_of,
    stop_of,
)

LOOP = [("fetch", {"key": "k"})] * 4
KEY = FailureKey("fetch", "record_missing")


class Missing(ToolFailed):
    error_type = "record_missing"


def fetch(key: str) -> str:
    """Fetch a record (always fails, typed)."""
    raise Missing(f"no record {key}")


class Summary(pydantic.BaseModel):
    text: str


def stopped_run(**options: Any) -> ProtectionStopped:
    with pytest.raises(ProtectionStopped) as raised:
        guarded_run(batches(*[LOOP] * 5), [fetch], on_stop="error", **options)
    return raised.value


def test_the_default_stop_is_pydantic_ais_limit_error_with_the_runs_history() -> None:
    error = stopped_run()
    assert isinstance(error, UsageLimitExceeded) and isinstance(error, AgentRunError)
    assert str(error) == error.stop.notice == shown_text(REPEATED_TOOL_FAILURE_STOP_MESSAGE)
    assert "raising the limit" not in str(error)  # not pydantic-ai's usage-limit hint
    assert (error.loop_type, error.key) == (LOOP_REPEATED_TOOL_FAILURE, KEY)
    assert error.report.decisions == ("tracked", "warn", "stop")
    assert error.report.tool_calls == 12 and error.report.observed == 12
    messages = error.all_messages()
    # the stopping batch's results are kept, then the model-facing stop notice
    assert kept_call_ids(messages)[-4:] == [f"b3c{i}" for i in range(4)]
    last = messages[-1]
    assert isinstance(last, ModelResponse) and last.model_name == STOP_MODEL_NAME
    assert [p.content for p in last.parts if isinstance(p, TextPart)] == [
        REPEATED_TOOL_FAILURE_STOP_MESSAGE
    ]
    assert stop_of(error) == error.stop and report_of(error) == error.report


def test_the_stopped_history_continues_the_conversation_with_a_fresh_guard() -> None:
    error = stopped_run()
    follow_up = guarded_run(
        [Reply(text="Sorry, I will stop.")], [fetch], history=error.all_messages()
    )
    assert follow_up.result.output == "Sorry, I will stop."
    sent = follow_up.requests[0]["messages"]
    assert any(m.get("content") == REPEATED_TOOL_FAILURE_STOP_MESSAGE for m in sent)


def test_the_error_pickles_with_its_stop_report_and_messages() -> None:
    error = stopped_run()
    again = pickle.loads(pickle.dumps(error))
    assert type(again) is ProtectionStopped
    assert (again.stop, again.report, str(again)) == (error.stop, error.report, str(error))
    assert len(again.all_messages()) == len(error.all_messages())


def test_capture_run_messages_and_the_agent_run_keep_the_history_as_for_any_limit() -> None:
    def agent_at(fake: FakeOpenAI) -> Agent[None, str]:
        model = OpenAIChatModel(
            "test-model", provider=OpenAIProvider(base_url=fake.base_url, api_key="k")
        )
        guard = RepeatedToolFailureCapability(mode="enforce")
        return Agent(model, tools=[fetch], capabilities=[guard])

    with serve(FakeOpenAI(batches(*[LOOP] * 5))) as fake:
        with capture_run_messages() as captured, pytest.raises(UsageLimitExceeded) as raised:
            agent_at(fake).run_sync("go")
        assert len(fake.requests) == 3  # none after the stop
    assert isinstance(raised.value, ProtectionStopped)
    assert captured == raised.value.all_messages()

    runs: list[Any] = []

    async def iterate(agent: Agent[None, str]) -> None:
        async with agent.iter("go") as run:
            runs.append(run)
            async for _ in run:
                pass

    with serve(FakeOpenAI(batches(*[LOOP] * 5))) as fake, pytest.raises(ProtectionStopped):
        asyncio.run(iterate(agent_at(fake)))
    assert runs[0].all_messages()[-1].model_name == STOP_MODEL_NAME
    report = report_of(runs[0])
    assert report is not None and report.stop is not None and report.stop.key == KEY


@pytest.mark.parametrize(
    "output_type",
    [str, str | None, [str, DeferredToolRequests], [str, Summary]],
    ids=["str", "optional", "with-deferred", "str-or-model"],
)
def test_end_gives_the_stop_text_where_the_output_type_accepts_a_str(output_type: Any) -> None:
    ran = guarded_run(
        batches(*[LOOP] * 5), [fetch], on_stop="end", agent_options={"output_type": output_type}
    )
    output = ran.result.output
    assert isinstance(output, ProtectionStop) and output.stop.key == KEY
    assert stop_of(ran.result) == output.stop == stop_of(output)
    assert len(ran.requests) == 3


def shout(text: str) -> int:
    """An output function: what the run outputs is its return, never the text."""
    return len(text)


@pytest.mark.parametrize(
    "output_type", [Summary, TextOutput(shout), int], ids=["model", "text-function", "int"]
)
def test_end_raises_where_the_stop_text_would_be_the_wrong_type(output_type: Any) -> None:
    with pytest.raises(ProtectionStopped) as raised:
        guarded_run(
            batches(*[LOOP] * 5),
            [fetch],
            on_stop="end",
            agent_options={"output_type": output_type},
        )
    assert raised.value.key == KEY


def test_end_raises_for_a_run_given_a_structured_output_type_at_run_time() -> None:
    with serve(FakeOpenAI(batches(*[LOOP] * 5))) as fake:
        model = OpenAIChatModel(
            "test-model", provider=OpenAIProvider(base_url=fake.base_url, api_key="k")
        )
        guard = RepeatedToolFailureCapability(mode="enforce", on_stop="end")
        agent = Agent(model, tools=[fetch], capabilities=[guard])  # declared str
        with pytest.raises(ProtectionStopped):
            agent.run_sync("go", output_type=Summary)
        fake_final = [*batches(*[LOOP] * 5)[:3]]
    with serve(FakeOpenAI(fake_final)) as fake:
        agent = Agent(
            OpenAIChatModel(
                "test-model", provider=OpenAIProvider(base_url=fake.base_url, api_key="k")
            ),
            tools=[fetch],
            capabilities=[guard],
        )
        assert isinstance(agent.run_sync("go").output, ProtectionStop)  # the same guard: text


@pytest.mark.parametrize(
    "run_output_type",
    [TextOutput(shout), [TextOutput(shout), Summary]],
    ids=["text-function", "text-function-or-model"],
)
def test_end_raises_for_a_text_agent_given_a_text_function_at_run_time(
    run_output_type: Any,
) -> None:
    """The run's output type decides, not the agent's: ``output_type=`` of the run wins."""
    with serve(FakeOpenAI(batches(*[LOOP] * 5))) as fake:
        model = OpenAIChatModel(
            "test-model", provider=OpenAIProvider(base_url=fake.base_url, api_key="k")
        )
        guard = RepeatedToolFailureCapability(mode="enforce", on_stop="end")
        agent = Agent(model, tools=[fetch], capabilities=[guard])  # declared str
        with pytest.raises(ProtectionStopped) as raised:
            agent.run_sync("go", output_type=run_output_type)
        assert len(fake.requests) == 3  # none after the stop
    assert raised.value.key == KEY
    assert raised.value.all_messages()[-1].model_name == STOP_MODEL_NAME  # type: ignore[union-attr]


def test_end_gives_the_stop_text_to_a_structured_agent_run_as_plain_text() -> None:
    with serve(FakeOpenAI(batches(*[LOOP] * 5))) as fake:
        model = OpenAIChatModel(
            "test-model", provider=OpenAIProvider(base_url=fake.base_url, api_key="k")
        )
        guard = RepeatedToolFailureCapability(mode="enforce", on_stop="end")
        agent = Agent(model, tools=[fetch], capabilities=[guard], output_type=Summary)
        output = agent.run_sync("go", output_type=str).output
        assert len(fake.requests) == 3
    assert isinstance(output, ProtectionStop) and output.stop.key == KEY


def test_a_typed_run_that_is_not_stopped_keeps_its_typed_output() -> None:
    answers = [*batches(LOOP)[:1], Reply(calls=(call("o", "final_result", {"text": "ok"}),))]
    ran = guarded_run(answers, [fetch], on_stop="end", agent_options={"output_type": Summary})
    assert ran.result.output == Summary(text="ok")
    assert stop_of(ran.result) is None
    assert report_of(ran.result).decisions == ("tracked",)  # type: ignore[union-attr]
