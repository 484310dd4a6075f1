"""Where the adapter plugs into the SDK: the tools, the hooks, the behaviour, the filters.

Each piece maps SDK events onto one :class:`~._run.GuardedRun` and applies the
core's actions; none decides anything itself:

- every ``FunctionTool`` of the agent is copied with an observing invoker
  (``_tools``); the agent clone carries the :class:`~._tools.Binding` its tools
  and behaviour report through, so a resumed run can take the clone over;
- run hooks (``on_llm_end``) open a batch per model response's function calls;
- the agent's ``tool_use_behavior`` closes the batch once the response's tool
  results are all in; when the core stops, it ends the run with the stop text
  (``on_stop="end"``, text output) or lets the run go on to its next turn;
- the run config's ``call_model_input_filter`` raises the stop there, before
  the next model request (``_stop``), and otherwise re-inserts every reminder
  at its place on each model request (the SDK does not keep filter edits); its
  ``tool_error_formatter`` sees unknown tools and rejected approvals;
- the run's ``error_handlers["max_turns"]``, which the SDK consults at its turn
  limit check in place of that request, raises the stop there too (and is
  otherwise the caller's own handler, or none).
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Mapping
from typing import Any

from agents import Agent, FunctionTool, RunConfig, RunHooks, ToolsToFinalOutputResult
from agents.handoffs import Handoff
from agents.items import ModelResponse
from agents.run_config import CallModelData, ModelInputData, ToolErrorFormatterArgs
from agents.run_error_handlers import RunErrorHandlerInput, RunErrorHandlers

from tool_failure_guard.core import FunctionCall, Stop
from tool_failure_guard.integrations.openai_agents import _outcomes as outcomes
from tool_failure_guard.integrations.openai_agents._run import GuardedRun, function_call
from tool_failure_guard.integrations.openai_agents._stop import ends_with_text, stopped
from tool_failure_guard.integrations.openai_agents._tools import Binding, observed_tool

#: The attribute of an agent clone of the adapter holding its :class:`Binding`.
_BINDING_ATTR = "_tool_failure_guard_binding"


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


def guarded_behaviour(binding: Binding) -> Callable[..., Any]:
    """The agent's ``tool_use_behavior``: close the batch, stop if the core says so, else defer.

    A stop ends the run here only with the stop text (``on_stop="end"``, a text
    output type); otherwise the run goes on to its next turn, whose input filter
    raises the stop before any model request (the SDK's ``MaxTurnsExceeded``
    place, so ``run_data`` holds this batch's settled items).
    """

    async def behaviour(context: Any, results: list[Any]) -> ToolsToFinalOutputResult:
        run = binding.run
        action = run.close()
        if isinstance(action, Stop) and run.stop is not None:
            if ends_with_text(run, binding.agent):
                return ToolsToFinalOutputResult(is_final_output=True, final_output=run.stop.notice)
            return ToolsToFinalOutputResult(is_final_output=False, final_output=None)
        return await _original_behaviour(binding.original_behaviour, context, results)

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
    """A per-run clone of ``agent``: observed tools, the guarded behaviour (armed)."""
    binding = Binding(run, agent)
    tools = [observed_tool(t, binding) if isinstance(t, FunctionTool) else t for t in agent.tools]
    clone = agent.clone(tools=tools, tool_use_behavior=guarded_behaviour(binding))
    setattr(clone, _BINDING_ATTR, binding)
    return clone


def binding_of(agent: Any) -> Binding | None:
    """The binding of an agent clone the adapter made (None for any other agent)."""
    binding = getattr(agent, _BINDING_ATTR, None)
    return binding if isinstance(binding, Binding) else None


def arm(agent: Agent[Any], run: GuardedRun) -> None:
    """Bind the adapter's clone ``agent`` to ``run`` and give it the guarded behaviour."""
    binding = binding_of(agent)
    if binding is None:  # pragma: no cover - only the adapter's clones are armed
        raise TypeError("not an agent clone of the guard's adapter")
    binding.run = run
    agent.tool_use_behavior = guarded_behaviour(binding)


def disarm(agent: Agent[Any]) -> None:
    """The run using the clone ``agent`` is over: it carries the agent's own behaviour again.

    So the ``RunState`` of an interrupted run (``result.to_state()``) accepts
    ``add_input`` exactly when the agent's own behaviour lets ``agents.Runner``'s do.
    """
    binding = binding_of(agent)
    if binding is not None:
        agent.tool_use_behavior = binding.original_behaviour


def stop_before_request(run: GuardedRun) -> None:
    """Raise the run's stop, if it has one, where the SDK would make its next model request.

    First the batch the SDK never handed to the agent's behaviour is closed (its
    action may be the stop).  Called from the two places the SDK passes before
    that request: the model-input filter, and (at the run's last allowed turn,
    where the SDK's ``max_turns`` check comes first) the max-turns handler.
    """
    run.close()
    if run.stop is not None:
        raise stopped(run)


def check_error_handlers(handlers: object) -> None:
    """Refuse a run's ``error_handlers`` that is not a dict keyed by error kind, by name."""
    if handlers is not None and not isinstance(handlers, Mapping):
        raise TypeError(
            "error_handlers must be a dict keyed by error kind (max_turns, model_refusal, "
            f"invalid_final_output); got {type(handlers).__name__}"
        )


def guarded_error_handlers(
    handlers: RunErrorHandlers[Any] | None, run: GuardedRun
) -> RunErrorHandlers[Any]:
    """The run's ``error_handlers`` with the guard's ``max_turns`` handler wrapping the caller's.

    The SDK consults ``max_turns`` at its turn-limit check, which comes before
    the model-input filter: a stop decided on the last allowed turn's batch is
    raised there (the protection decided first), so every way to run raises
    :class:`ProtectionStopped` for it and the caller's handler, the turn limit's,
    is never consulted for a protection's stop.  Without a stop it is the
    caller's handler (the SDK awaits an awaitable answer), or none: ``None``
    lets the SDK raise its own ``MaxTurnsExceeded``; either way the run ended at
    the SDK's limit (``GuardedRun.turn_limit``: the prompt's ``max_turn_requests``).
    """
    if handlers is None:
        handlers = {}
    caller = handlers.get("max_turns")

    def max_turns(data: RunErrorHandlerInput[Any]) -> Any:
        stop_before_request(run)
        run.turn_limit = True  # the SDK's limit ends the run, whatever the caller's handler says
        return caller(data) if caller is not None else None

    return {**handlers, "max_turns": max_turns}


def guarded_config(config: RunConfig | dict[str, Any] | None, run: GuardedRun) -> RunConfig:
    """The run config with the guard's input filter and error formatter before the caller's."""
    if config is None:
        config = RunConfig()
    elif isinstance(config, dict):
        config = RunConfig(**config)
    user_filter = config.call_model_input_filter
    user_formatter = config.tool_error_formatter

    async def input_filter(data: CallModelData[Any]) -> ModelInputData:
        stop_before_request(run)
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
