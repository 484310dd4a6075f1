"""The OpenAI Agents SDK host: the real SDK over the real wire, to the project's test server.

An ``agents.Agent`` whose model is the SDK's own ``OpenAIChatCompletionsModel``
with an ``openai.AsyncOpenAI`` client pointed at :mod:`openai_server` on
127.0.0.1, run by :class:`~tool_failure_guard.integrations.openai_agents.GuardedRunner`
in one of the three ways (``run``, ``run_sync``, ``run_streamed``).  The SDK's
tracing export is disabled: nothing leaves the machine.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, Literal

import openai
from agents import Agent, OpenAIChatCompletionsModel, RunConfig, set_tracing_disabled
from agents.result import RunResultBase

from tool_failure_guard.integrations.openai_agents import GuardedRunner

set_tracing_disabled(True)

Way = Literal["run", "run_sync", "run_streamed"]
WAYS: tuple[Way, ...] = ("run", "run_sync", "run_streamed")
#: The route this host's telemetry carries.
ROUTE = "openai_agents"


def chat_model(base_url: str) -> OpenAIChatCompletionsModel:
    """The SDK's chat-completions model over a real socket to ``base_url``."""
    client = openai.AsyncOpenAI(base_url=base_url, api_key="test-key", max_retries=0)
    return OpenAIChatCompletionsModel(model="fake-model", openai_client=client)


def make_agent(base_url: str, tools: Sequence[Any], **options: Any) -> Agent[Any]:
    options.setdefault("instructions", "You are a careful coding agent.")
    options.setdefault("name", "coder")
    return Agent(model=chat_model(base_url), tools=list(tools), **options)


def run_config(**options: Any) -> RunConfig:
    return RunConfig(tracing_disabled=True, **options)


async def _drain(result: Any) -> None:
    async for _event in result.stream_events():
        pass


def run(
    runner: GuardedRunner,
    agent: Agent[Any],
    prompt: str,
    way: Way = "run",
    *,
    timeout: float = 60,
    **options: Any,
) -> RunResultBase:
    """One guarded run to its end, in ``way``; bounded so a broken run cannot hang the suite."""
    options.setdefault("run_config", run_config())
    options.setdefault("max_turns", 40)
    if way == "run_sync":
        return runner.run_sync(agent, prompt, **options)

    async def go() -> RunResultBase:
        if way == "run":
            return await runner.run(agent, prompt, **options)
        result = runner.run_streamed(agent, prompt, **options)
        await _drain(result)
        return result

    return asyncio.run(asyncio.wait_for(go(), timeout))
