"""The framework hosts of the adapter bench: each bare, and guarded by this project's adapter.

Bench only (:mod:`benches.adapters` runs them).  Each host
builds one agent per (variant, transport) and returns a :class:`Runner` whose
``run`` makes one whole run of it: ``batches`` model turns of
:data:`~benches.wire.CALLS` parallel tool calls each (the
script of :func:`~benches.wire.batch_calls`), then a final
text.  The model is scripted, in process (the framework's own test-model
extension point: a ``BaseChatModel``, pydantic-ai's ``FunctionModel``, an
Agents SDK ``Model``) or over HTTP to :mod:`~benches.wire`
(the framework's own OpenAI chat-completions client).  The tools are the
framework's idiomatic ones: ``ok`` returns; ``fail_a``/``fail_b`` fail the way
that framework's tools fail (``ToolException`` answered by the tool's
``handle_tool_error``, ``ToolFailed``, a raised exception the SDK turns into
an error message).

What a run returns (:class:`Ran`) says how many batches ran and whether the
guard reduced them and stopped the run, so the bench can check that a
guarded run really was guarded.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from typing import Any

import attrs

from benches.adapters import TRANSPORTS, VARIANTS
from benches.wire import CALLS, FINAL_TEXT, batch_calls, model_name

API_KEY = "bench-key"

os.environ["LANGSMITH_TRACING"] = "false"
os.environ.pop("LANGCHAIN_TRACING_V2", None)


@attrs.frozen
class Ran:
    """One run: batches the model asked for, batches the guard reduced (None: bare), stop."""

    batches: int
    guarded: int | None
    stopped: bool


@attrs.frozen
class Runner:
    """One agent, ready: ``run()`` makes one whole run; ``close()`` releases its loop/clients."""

    run: Callable[[], Ran]
    close: Callable[[], None] = lambda: None


def _closing(loop: asyncio.AbstractEventLoop, *clients: Any) -> Callable[[], None]:
    def close() -> None:
        for client in clients:
            loop.run_until_complete(client.close())
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()

    return close


def _check(variant: str, transport: str) -> None:
    if variant not in VARIANTS or transport not in TRANSPORTS:
        raise ValueError(f"unknown variant {variant!r} or transport {transport!r}")


# -- LangChain v1 -----------------------------------------------------------------------


def langchain(
    variant: str, transport: str, *, batches: int, workload: str, base_url: str = ""
) -> Runner:
    from langchain.agents import create_agent
    from langchain_core.language_models import BaseChatModel
    from langchain_core.messages import AIMessage, BaseMessage
    from langchain_core.outputs import ChatGeneration, ChatResult
    from langchain_core.tools import StructuredTool, ToolException

    from tool_failure_guard.integrations.langchain import (
        ProtectionStopped,
        RepeatedToolFailureMiddleware,
    )

    _check(variant, transport)

    class ScriptedChat(BaseChatModel):
        """The bench's model, in process: the next batch's calls, then the final text."""

        @property
        def _llm_type(self) -> str:
            return "bench-scripted"

        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            return self

        def _generate(self, messages: list[BaseMessage], *a: Any, **k: Any) -> ChatResult:
            done = sum(1 for m in messages if isinstance(m, AIMessage) and m.tool_calls)
            if done < batches:
                calls = [
                    {"id": i, "name": name, "args": args, "type": "tool_call"}
                    for i, name, args in batch_calls(done + 1, workload)
                ]
                message = AIMessage(content="", tool_calls=calls)
            else:
                message = AIMessage(content=FINAL_TEXT)
            return ChatResult(generations=[ChatGeneration(message=message)])

    def ok(n: int) -> str:
        """Answer n."""
        return f"ok {n}"

    def fail(n: int) -> str:
        """Fail on n."""
        raise ToolException(f"no such item: {n}")

    tools = [
        StructuredTool.from_function(ok, name="ok"),
        StructuredTool.from_function(fail, name="fail_a", handle_tool_error=True),
        StructuredTool.from_function(fail, name="fail_b", handle_tool_error=True),
    ]
    if transport == "inproc":
        model: Any = ScriptedChat()
    else:
        from langchain_openai import ChatOpenAI

        model = ChatOpenAI(
            model=model_name(batches, workload),
            base_url=base_url,
            api_key=API_KEY,  # type: ignore[arg-type]
            max_retries=0,
        )
    middleware = [] if variant == "bare" else [RepeatedToolFailureMiddleware(mode=variant)]
    agent = create_agent(model, tools, middleware=middleware)
    state_in: Any = {"messages": [{"role": "user", "content": "go"}]}
    config: Any = {"recursion_limit": 4 * batches + 20}

    def run() -> Ran:
        try:
            state = agent.invoke(state_in, config)
        except ProtectionStopped as stopped:  # the default on_stop: every batch was asked
            done = stopped.report.batches
            return Ran(batches=done, guarded=done, stopped=True)
        asked = sum(1 for m in state["messages"] if isinstance(m, AIMessage) and m.tool_calls)
        report = RepeatedToolFailureMiddleware.report_of(state)
        return Ran(
            batches=asked,
            guarded=report.batches if report is not None else None,
            stopped=report is not None and report.stop is not None,
        )

    return Runner(run)


# -- pydantic-ai ------------------------------------------------------------------------


def pydantic_ai(
    variant: str, transport: str, *, batches: int, workload: str, base_url: str = ""
) -> Runner:
    from pydantic_ai import Agent, Tool, ToolFailed
    from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    from tool_failure_guard.integrations.pydantic_ai import (
        ProtectionStopped,
        RepeatedToolFailureCapability,
        RunReport,
        report_of,
    )

    _check(variant, transport)

    def script(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        done = sum(1 for m in messages if isinstance(m, ModelResponse) and m.tool_calls)
        if done < batches:
            return ModelResponse(
                parts=[
                    ToolCallPart(name, args, tool_call_id=i)
                    for i, name, args in batch_calls(done + 1, workload)
                ]
            )
        return ModelResponse(parts=[TextPart(FINAL_TEXT)])

    def ok(n: int) -> str:
        """Answer n."""
        return f"ok {n}"

    def fail(n: int) -> str:
        """Fail on n."""
        raise ToolFailed(f"no such item: {n}")

    clients: list[Any] = []
    if transport == "inproc":
        model: Any = FunctionModel(script)
    else:
        import openai
        from pydantic_ai.models.openai import OpenAIChatModel
        from pydantic_ai.providers.openai import OpenAIProvider

        client = openai.AsyncOpenAI(base_url=base_url, api_key=API_KEY, max_retries=0)
        clients.append(client)
        model = OpenAIChatModel(
            model_name(batches, workload), provider=OpenAIProvider(openai_client=client)
        )
    capabilities: list[Any] = []
    if variant != "bare":
        capabilities.append(RepeatedToolFailureCapability(mode=variant))
    tools = [
        Tool(ok, name="ok"),
        Tool(fail, name="fail_a"),
        Tool(fail, name="fail_b"),
    ]
    agent = Agent(model, tools=tools, capabilities=capabilities)
    loop = asyncio.new_event_loop()

    def run() -> Ran:
        report: RunReport | None
        try:
            result = loop.run_until_complete(agent.run("go"))
        except ProtectionStopped as stopped:  # on_stop="error", the default
            messages, report = stopped.all_messages(), stopped.report
        else:
            messages, report = result.all_messages(), report_of(result)
        asked = sum(1 for m in messages if isinstance(m, ModelResponse) and m.tool_calls)
        return Ran(
            batches=asked,
            guarded=report.batches if report is not None else None,
            stopped=report is not None and report.stop is not None,
        )

    return Runner(run, _closing(loop, *clients))


# -- OpenAI Agents SDK ------------------------------------------------------------------


def openai_agents(
    variant: str, transport: str, *, batches: int, workload: str, base_url: str = ""
) -> Runner:
    import json

    from agents import Agent, RunConfig, function_tool, set_tracing_disabled
    from agents import Runner as SDKRunner
    from agents.items import ModelResponse
    from agents.models.interface import Model
    from agents.usage import Usage
    from openai.types.responses import (
        ResponseFunctionToolCall,
        ResponseOutputMessage,
        ResponseOutputText,
    )

    from tool_failure_guard.integrations.openai_agents import GuardedRunner, ProtectionStopped

    _check(variant, transport)
    set_tracing_disabled(True)

    class ScriptedModel(Model):
        """The bench's model, in process: the next batch's calls, then the final text."""

        async def get_response(self, *args: Any, **kwargs: Any) -> Any:
            given = args[1] if len(args) > 1 else kwargs.get("input")
            items = given if isinstance(given, list) else []
            calls = sum(1 for item in items if _item_type(item) == "function_call")
            done = calls // CALLS
            output: list[Any]
            if done < batches:
                output = [
                    ResponseFunctionToolCall(
                        type="function_call",
                        id=f"fc_{i}",
                        call_id=i,
                        name=name,
                        arguments=json.dumps(args),
                    )
                    for i, name, args in batch_calls(done + 1, workload)
                ]
            else:
                text = ResponseOutputText(type="output_text", text=FINAL_TEXT, annotations=[])
                output = [
                    ResponseOutputMessage(
                        type="message",
                        id="msg",
                        role="assistant",
                        status="completed",
                        content=[text],
                    )
                ]
            return ModelResponse(output=output, usage=Usage(), response_id=None)

        def stream_response(self, *a: Any, **k: Any) -> Any:
            raise NotImplementedError("the bench never streams")

    @function_tool
    def ok(n: int) -> str:
        """Answer n."""
        return f"ok {n}"

    @function_tool
    def fail_a(n: int) -> str:
        """Fail on n."""
        raise LookupError(f"no such item: {n}")

    @function_tool
    def fail_b(n: int) -> str:
        """Fail on n."""
        raise LookupError(f"no such item: {n}")

    clients: list[Any] = []
    if transport == "inproc":
        model: Any = ScriptedModel()
    else:
        import openai
        from agents import OpenAIChatCompletionsModel

        client = openai.AsyncOpenAI(base_url=base_url, api_key=API_KEY, max_retries=0)
        clients.append(client)
        model = OpenAIChatCompletionsModel(
            model=model_name(batches, workload), openai_client=client
        )
    agent = Agent(name="bench", instructions="Bench.", model=model, tools=[ok, fail_a, fail_b])
    runner: Any = SDKRunner if variant == "bare" else GuardedRunner(mode=variant)
    config = RunConfig(tracing_disabled=True)
    loop = asyncio.new_event_loop()

    def run() -> Ran:
        try:
            result = loop.run_until_complete(
                runner.run(agent, "go", run_config=config, max_turns=batches + 5)
            )
        except ProtectionStopped as stopped:  # the default stop behaviour: raised
            items = stopped.run_data.new_items if stopped.run_data is not None else []
            made = sum(1 for item in items if item.type == "tool_call_item")
            return Ran(batches=made // CALLS, guarded=stopped.report.batches, stopped=True)
        calls = sum(1 for item in result.to_input_list() if _item_type(item) == "function_call")
        report = GuardedRunner.report_of(result) if variant != "bare" else None
        return Ran(
            batches=calls // CALLS,
            guarded=report.batches if report is not None else None,
            stopped=report is not None and report.stop is not None,
        )

    return Runner(run, _closing(loop, *clients))


def _item_type(item: Any) -> Any:
    return item.get("type") if isinstance(item, dict) else getattr(item, "type", None)


HOSTS: dict[str, Callable[..., Runner]] = {
    "langchain": langchain,
    "pydantic_ai": pydantic_ai,
    "openai_agents": openai_agents,
}
