"""Where the adapter plugs into the SDK: the tools, the hooks, the behaviour, the filters.

Each piece maps SDK events onto one :class:`~._run.GuardedRun` and applies the
core's actions; none decides anything itself:

- every ``FunctionTool`` of the agent is copied with an observing invoker
  (:class:`_ObservedInvoker`): it sees the tool's raised exception *inside* the
  SDK's failure handling, so a tool with its own ``failure_error_function``
  is observed too, and the tool's error text reaches the model unchanged;
- run hooks (``on_llm_end``) open a batch per model response's function calls;
- the agent's ``tool_use_behavior`` closes the batch once the response's tool
  results are all in, and ends the run with the stop text when the core stops;
- the run config's ``call_model_input_filter`` re-inserts every reminder at
  its place on each model request (the SDK does not keep filter edits), and its
  ``tool_error_formatter`` sees unknown tools and rejected approvals.
"""

from __future__ import annotations

import asyncio
import contextvars
import copy
import dataclasses
import inspect
from collections.abc import Awaitable, Callable
from typing import Any

from agents import Agent, FunctionTool, RunConfig, RunHooks, ToolsToFinalOutputResult
from agents.exceptions import AgentsException
from agents.handoffs import Handoff
from agents.items import ModelResponse
from agents.run_config import CallModelData, ModelInputData, ToolErrorFormatterArgs
from agents.tool import (
    _DEFAULT_FAILURE_HANDLED_ATTR,
    _FailureHandlingFunctionToolInvoker,
    _invoke_function_tool_with_metadata,
)
from agents.tool_context import ToolContext

from tool_failure_guard.core import FunctionCall, Stop
from tool_failure_guard.integrations.openai_agents import _outcomes as outcomes
from tool_failure_guard.integrations.openai_agents._run import GuardedRun, function_call

#: What a replayed call id is answered with (it is never executed again).
REPLAY_TEXT = "this call id was already answered; it was not executed again"
#: Markers the SDK reads off a function tool's invocation implementation.
_IMPL_MARKERS = ("__agents_prepare_arguments__", "__agents_function_tool_wrapped_callable__")
_SYNC_MARKER = "__agents_sync_function_tool__"

#: The exception the tool's body raised, for the invoker that called it (one per call).
_RAISED: contextvars.ContextVar[list[BaseException] | None] = contextvars.ContextVar(
    "tool_failure_guard_openai_agents_raised", default=None
)

Invoke = Callable[[ToolContext[Any], str], Awaitable[Any]]


def _observing(impl: Invoke) -> Invoke:
    """``impl`` that notes what it raised before the SDK's failure handling turns it to text."""

    async def observed(ctx: ToolContext[Any], input: str) -> Any:
        try:
            return await impl(ctx, input)
        except BaseException as exc:
            box = _RAISED.get()
            if box is not None:
                box.append(exc)
            raise

    for marker in _IMPL_MARKERS:
        if hasattr(impl, marker):
            setattr(observed, marker, getattr(impl, marker))
    return observed


class _Observer:
    """Settles one tool's calls in the run (shared by the invoker and its rebinds).

    A tool with ``timeout_seconds`` runs under the SDK's own timeout handling
    (``agents.tool._invoke_function_tool_with_metadata``: ``asyncio.wait_for``, then
    ``ToolTimeoutError`` or the timeout text), called from here instead of around
    here, so its verdict is seen: ``ToolTimeoutError`` raised, or the tool's body
    cancelled and the SDK answering anyway (only its timeout branch does that).  The
    copy the SDK runs has ``timeout_seconds`` None, so the timeout is applied once.
    A clock comparison cannot tell: the SDK's timer starts before the body does.
    """

    def __init__(self, run: GuardedRun, tool: FunctionTool) -> None:
        self.run = run
        self.timed = tool if tool.timeout_seconds is not None else None

    async def invoke(self, ctx: ToolContext[Any], input: str, call: Invoke) -> Any:
        call_id = ctx.tool_call_id
        if self.run.is_replay(call_id):
            self.run.settle(call_id, outcomes.replayed)
            return REPLAY_TEXT
        self.run.started(call_id)
        box: list[BaseException] = []
        token = _RAISED.set(box)
        timed_out = False
        try:
            if self.timed is None:
                result = await call(ctx, input)
            else:
                result, timed_out = await self._sdk_timed(self.timed, ctx, input, call)
        except BaseException as escaped:  # ToolTimeoutError (raise_exception), a cancellation
            self._settle_raised(call_id, escaped)
            raise
        finally:
            _RAISED.reset(token)
        if timed_out:  # the SDK answered the model with its timeout result
            self.run.settle(call_id, outcomes.timed_out)
        elif box:  # the tool raised; its failure handler answered the model with text
            self._settle_raised(call_id, box[0])
        else:
            self.run.settle(call_id, lambda c: outcomes.returned(c, result))
        return result

    def _settle_raised(self, call_id: str, exc: BaseException) -> None:
        self.run.settle(call_id, lambda c: outcomes.from_exception(c, exc))

    @staticmethod
    async def _sdk_timed(
        timed: FunctionTool, ctx: ToolContext[Any], input: str, call: Invoke
    ) -> tuple[Any, bool]:
        """``call`` under the SDK's timeout handling of ``timed``; and whether it timed out.

        The SDK returns (rather than raises) after cancelling the body only in its
        timeout branch, so a cancelled body and a returned answer is a timeout.
        """
        tool = copy.copy(timed)
        cancelled: list[bool] = []

        async def body(inner: ToolContext[Any], arguments: str) -> Any:
            try:
                return await call(inner, arguments)
            except asyncio.CancelledError:
                cancelled.append(True)
                raise

        tool.on_invoke_tool = body
        answer = await _invoke_function_tool_with_metadata(
            function_tool=tool, context=ctx, arguments=input
        )
        if answer.is_sdk_generated_error:  # the SDK's own text: pass its mark on, as it would
            setattr(ctx, _DEFAULT_FAILURE_HANDLED_ATTR, True)
        return answer.output, bool(cancelled)


class _ObservedInvoker(_FailureHandlingFunctionToolInvoker):
    """The SDK's failure-handling invoker, observed: same handling, every outcome seen."""

    def __init__(
        self,
        impl: Invoke,
        on_handled_error: Any,
        *,
        observer: _Observer,
        function_tool: FunctionTool | None = None,
    ) -> None:
        super().__init__(impl, on_handled_error, function_tool=function_tool)
        self._observer = observer

    def __agents_bind_function_tool__(self, function_tool: FunctionTool) -> _ObservedInvoker:
        if self._function_tool is function_tool:
            return self
        bound = _ObservedInvoker(
            self._invoke_tool_impl,
            self._on_handled_error,
            observer=self._observer,
            function_tool=function_tool,
        )
        if getattr(self, _SYNC_MARKER, False):
            setattr(bound, _SYNC_MARKER, True)
        return bound

    async def __call__(self, ctx: ToolContext[Any], input: str) -> Any:
        parent = super().__call__
        return await self._observer.invoke(ctx, input, parent)


def observed_tool(tool: FunctionTool, run: GuardedRun) -> FunctionTool:
    """A copy of ``tool`` whose every call settles in ``run`` (the original is untouched)."""
    clone = copy.copy(tool)
    observer = _Observer(run, tool)
    clone.timeout_seconds = None  # applied by the observer, through the SDK's own handling
    invoker = clone.on_invoke_tool
    if isinstance(invoker, _FailureHandlingFunctionToolInvoker):
        wrapped = _ObservedInvoker(
            _observing(invoker._invoke_tool_impl),
            invoker._on_handled_error,
            observer=observer,
            function_tool=clone,
        )
        if getattr(invoker, _SYNC_MARKER, False):
            setattr(wrapped, _SYNC_MARKER, True)
        clone.on_invoke_tool = wrapped
    else:  # a hand-built FunctionTool: its invoker's raise or return is the outcome

        async def plain(ctx: ToolContext[Any], input: str) -> Any:
            return await observer.invoke(ctx, input, invoker)

        clone.on_invoke_tool = plain
    return clone


def handoff_names(agent: Agent[Any]) -> frozenset[str]:
    """The function names of ``agent``'s handoffs (those calls are not tool calls)."""
    names: set[str] = set()
    for item in agent.handoffs:
        if isinstance(item, Handoff):
            names.add(item.tool_name)
        elif isinstance(item, Agent):
            names.add(Handoff.default_tool_name(item))
    return frozenset(names)


def response_calls(agent: Agent[Any], response: ModelResponse) -> list[FunctionCall]:
    """One model response's function calls, in the model's order (handoffs excluded)."""
    skip = handoff_names(agent)
    calls: list[FunctionCall] = []
    for item in response.output:
        if getattr(item, "type", None) != "function_call":
            continue
        name = str(getattr(item, "name", ""))
        if name in skip:
            continue
        calls.append(
            function_call(
                str(getattr(item, "call_id", "") or ""),
                name,
                str(getattr(item, "arguments", "") or ""),
            )
        )
    return calls


class GuardHooks(RunHooks[Any]):
    """The run hooks: every model response opens a batch; the caller's hooks still run."""

    def __init__(self, run: GuardedRun, inner: RunHooks[Any] | None) -> None:
        self._run = run
        self._inner = inner if inner is not None else RunHooks()

    async def on_llm_start(self, context: Any, agent: Any, *args: Any) -> None:
        await self._inner.on_llm_start(context, agent, *args)

    async def on_llm_end(self, context: Any, agent: Any, response: ModelResponse) -> None:
        self._run.model_response(response_calls(agent, response), response.usage)
        await self._inner.on_llm_end(context, agent, response)

    async def on_agent_start(self, context: Any, agent: Any) -> None:
        await self._inner.on_agent_start(context, agent)

    async def on_agent_end(self, context: Any, agent: Any, output: Any) -> None:
        await self._inner.on_agent_end(context, agent, output)

    async def on_handoff(self, context: Any, from_agent: Any, to_agent: Any) -> None:
        await self._inner.on_handoff(context, from_agent, to_agent)

    async def on_tool_start(self, context: Any, agent: Any, tool: Any) -> None:
        await self._inner.on_tool_start(context, agent, tool)

    async def on_tool_end(self, context: Any, agent: Any, tool: Any, result: Any) -> None:
        await self._inner.on_tool_end(context, agent, tool, result)


class RepeatedToolFailureStopped(AgentsException):
    """The core stopped the run at a batch the SDK never handed to ``tool_use_behavior``.

    The SDK skips the agent's ``tool_use_behavior`` when a response has no
    function-tool result (every call named an unknown tool) or came with a
    handoff; a stop decided for such a batch is applied before the next model
    request by raising this, so no request is made.  ``stop`` is the same
    typed signal :meth:`GuardedRunner.stop_of` returns; the SDK attaches the
    settled items as ``run_data``.
    """

    def __init__(self, stop: Any) -> None:
        super().__init__(stop.notice)
        self.stop = stop


def guarded_behaviour(run: GuardedRun, original: Any) -> Callable[..., Any]:
    """The agent's ``tool_use_behavior``: close the batch, stop if the core says so, else defer."""

    async def behaviour(context: Any, results: list[Any]) -> ToolsToFinalOutputResult:
        action = run.close()
        if isinstance(action, Stop):
            return ToolsToFinalOutputResult(is_final_output=True, final_output=action.notice)
        return await _original_behaviour(original, context, results)

    return behaviour


async def _original_behaviour(
    original: Any, context: Any, results: list[Any]
) -> ToolsToFinalOutputResult:
    """What the agent's own ``tool_use_behavior`` decides for ``results`` (the SDK's rules)."""
    if original == "run_llm_again" or not results:
        return ToolsToFinalOutputResult(is_final_output=False, final_output=None)
    if original == "stop_on_first_tool":
        return ToolsToFinalOutputResult(is_final_output=True, final_output=results[0].output)
    if isinstance(original, dict):
        names = original.get("stop_at_tool_names", [])
        for result in results:
            if result.tool.name in names or result.tool.qualified_name in names:
                return ToolsToFinalOutputResult(is_final_output=True, final_output=result.output)
        return ToolsToFinalOutputResult(is_final_output=False, final_output=None)
    answer = original(context, results)
    if inspect.isawaitable(answer):
        answer = await answer
    return answer  # type: ignore[no-any-return]


def guarded_agent(agent: Agent[Any], run: GuardedRun) -> Agent[Any]:
    """A per-run clone of ``agent``: observed tools, the guarded behaviour."""
    tools = [observed_tool(t, run) if isinstance(t, FunctionTool) else t for t in agent.tools]
    return agent.clone(
        tools=tools, tool_use_behavior=guarded_behaviour(run, agent.tool_use_behavior)
    )


def guarded_config(config: RunConfig | dict[str, Any] | None, run: GuardedRun) -> RunConfig:
    """The run config with the guard's input filter and error formatter before the caller's."""
    if config is None:
        config = RunConfig()
    elif isinstance(config, dict):
        config = RunConfig(**config)
    user_filter = config.call_model_input_filter
    user_formatter = config.tool_error_formatter

    async def input_filter(data: CallModelData[Any]) -> ModelInputData:
        leftover = run.close()  # a batch the SDK never handed to the agent's behaviour
        if isinstance(leftover, Stop) and run.stop is not None:
            raise RepeatedToolFailureStopped(run.stop)
        model_data = data.model_data
        if user_filter is not None:
            answer = user_filter(data)
            model_data = await answer if inspect.isawaitable(answer) else answer
        return ModelInputData(
            input=run.model_input(list(model_data.input)), instructions=model_data.instructions
        )

    async def error_formatter(args: ToolErrorFormatterArgs[Any]) -> str | None:
        if args.kind == "tool_not_found":
            run.settle(args.call_id, outcomes.not_registered)
        elif args.kind == "approval_rejected":
            run.settle(args.call_id, outcomes.approval_rejected)
        if user_formatter is None:
            return None
        answer = user_formatter(args)
        return await answer if inspect.isawaitable(answer) else answer

    return dataclasses.replace(
        config, call_model_input_filter=input_filter, tool_error_formatter=error_formatter
    )
