"""The OpenAI Agents SDK driver of the shared API set (``tests/adapter_api.py``).

A real ``agents.Agent`` with the SDK's ``OpenAIChatCompletionsModel`` over
``openai.AsyncOpenAI`` to the 127.0.0.1 test server, run once by
:class:`~tool_failure_guard.integrations.openai_agents.GuardedRunner`.  A typed
run sets ``output_type=Summary``: the SDK asks for a JSON schema answer and
parses the model's JSON text into a ``Summary``.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import openai
from adapter_api import API_KEY, FINAL_TEXT, MODEL_NAME, ApiOutcome, Summary, passed
from agents import (
    Agent,
    MaxTurnsExceeded,
    OpenAIChatCompletionsModel,
    RunConfig,
    function_tool,
    set_tracing_disabled,
)
from openai_server import Reply

from tool_failure_guard.integrations.openai_agents import GuardedRunner, report_of, stop_of
from tool_failure_guard.integrations.openai_agents import ProtectionStopped as AdapterStopped

set_tracing_disabled(True)


class OpenAIAgentsApiDriver:
    name = "openai_agents"
    framework_error: type[BaseException] = MaxTurnsExceeded

    def guard(self, *, mode: str | None, on_stop: str | None) -> object:
        return GuardedRunner(**passed(mode=mode, on_stop=on_stop))

    def final_reply(self, typed_output: bool) -> Reply:
        if typed_output:
            return Reply(text=json.dumps({"text": FINAL_TEXT}))
        return Reply(text=FINAL_TEXT)

    def run(
        self, guard: object, *, base_url: str, workspace: Path, typed_output: bool
    ) -> ApiOutcome:
        assert isinstance(guard, GuardedRunner)

        @function_tool
        def read_file(path: str) -> str:
            """Read a file of the workspace."""
            return (workspace / path).read_text(encoding="utf-8")  # missing: FileNotFoundError

        client = openai.AsyncOpenAI(base_url=base_url, api_key=API_KEY, max_retries=0)
        agent: Agent[Any] = Agent(
            name="coder",
            instructions="You are a careful coding agent.",
            model=OpenAIChatCompletionsModel(model=MODEL_NAME, openai_client=client),
            tools=[read_file],
            output_type=Summary if typed_output else None,
        )

        async def go() -> Any:
            return await guard.run(agent, "go", run_config=RunConfig(tracing_disabled=True))

        try:
            result = asyncio.run(asyncio.wait_for(go(), 60))
        except AdapterStopped as error:
            return ApiOutcome(raised=error, output=None, stop=None, report=error.report)
        except Exception as error:  # reported, never hidden: the shared test names it
            return ApiOutcome(raised=error, output=None, stop=None, report=None)
        return ApiOutcome(
            raised=None,
            output=result.final_output,
            stop=stop_of(result),
            report=report_of(result),
        )


DRIVER = OpenAIAgentsApiDriver()
