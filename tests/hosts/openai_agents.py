"""The OpenAI Agents SDK host: the real SDK over the real wire, to the project's test server.

An ``agents.Agent`` whose model is the SDK's own ``OpenAIChatCompletionsModel``
with an ``openai.AsyncOpenAI`` client pointed at :mod:`openai_server` on
127.0.0.1, run by :class:`~tool_failure_guard.integrations.openai_agents.GuardedRunner`
in one of the three ways (``run``, ``run_sync``, ``run_streamed``).  The SDK's
tracing export is disabled: nothing leaves the machine.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Literal

import openai
from agents import (
    Agent,
    FunctionTool,
    OpenAIChatCompletionsModel,
    RunConfig,
    function_tool,
    set_tracing_disabled,
)
from agents.result import RunResultBase
from host_behaviour import API_KEY, COMPLETED, MODEL_NAME, STOPPED, HostOutcome, Scenario

from tool_failure_guard.guard import GuardMode
from tool_failure_guard.integrations.openai_agents import GuardedRunner, ProtectionStopped

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


# -- the shared behaviour set's driver (tests/host_behaviour.py) ----------------------


def behaviour_tools(workspace: Path) -> list[FunctionTool]:
    """The tools every host gives the model, working in ``workspace``."""

    @function_tool
    def read_file(path: str) -> str:
        """Read a file of the workspace."""
        return (workspace / path).read_text(encoding="utf-8")

    @function_tool
    def list_directory(path: str = ".") -> str:
        """List a directory of the workspace, one entry a line."""
        return "\n".join(sorted(entry.name for entry in (workspace / path).iterdir()))

    @function_tool
    def write_file(path: str, content: str) -> str:
        """Write a file of the workspace (this host's user cancels every such call)."""
        raise asyncio.CancelledError("the user cancelled write_file")

    return [read_file, list_directory, write_file]


class OpenAIAgentsDriver:
    """Runs one scenario as one ``GuardedRunner.run`` of an SDK agent."""

    name = "openai_agents"
    #: ``write_file`` is cancelled while it runs (the tool's task sees CancelledError).
    capabilities = frozenset({"cancel_call"})
    limits_follow_mode = True

    def run(
        self, scenario: Scenario, mode: GuardMode, *, base_url: str, workspace: Path, scratch: Path
    ) -> HostOutcome:
        client = openai.AsyncOpenAI(base_url=base_url, api_key=API_KEY, max_retries=0)
        agent = Agent(
            name="coder",
            instructions="You are a careful coding agent.",
            model=OpenAIChatCompletionsModel(model=MODEL_NAME, openai_client=client),
            tools=list(behaviour_tools(workspace)),
        )
        try:  # the default stop behaviour: a stopped run raises
            result = run(GuardedRunner(mode=mode), agent, "go")
        except ProtectionStopped as stopped:
            assert stopped.run_data is not None  # the SDK's run details: the settled items
            return HostOutcome(
                ended=STOPPED,
                loop_type=stopped.loop_type,
                output=stopped.stop.notice,
                decisions=stopped.report.decisions,
                kept_call_ids=_output_ids(
                    item.to_input_item() for item in stopped.run_data.new_items
                ),
            )
        report = GuardedRunner.report_of(result)
        assert report is not None and report.stop is None
        return HostOutcome(
            ended=COMPLETED,
            loop_type=None,
            output=str(result.final_output),
            decisions=report.decisions,
            kept_call_ids=_output_ids(result.to_input_list()),
        )


def _output_ids(items: Iterable[Any]) -> frozenset[str]:
    """The call ids of the function-call outputs among a run's input items."""
    return frozenset(
        str(item["call_id"])
        for item in items
        if isinstance(item, dict) and item.get("type") == "function_call_output"
    )


DRIVER = OpenAIAgentsDriver()
