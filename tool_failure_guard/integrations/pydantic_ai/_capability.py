"""``RepeatedToolFailureCapability``: the guard as a pydantic-ai capability.

Framework event -> core call, and core action -> framework effect:

- ``for_run``: a fresh :class:`GuardedRun` (one ``PromptProtection``) per run;
- ``get_wrapper_toolset``: the execution boundary (:mod:`._toolset`);
- ``on_tool_validate_error``: invalid arguments (never this guard's to count);
- ``before_node_run`` of a ``CallToolsNode``: admit the response's function calls;
- ``after_node_run`` of a ``CallToolsNode``: every call is answered: settle the
  batch; ``Continue`` -> the reminder as a ``SystemPromptPart`` right after the
  batch's tool returns (kept in the history, so in every later request);
  ``Stop`` -> the tool returns and the stop text go into the history and the run
  ends with :class:`ProtectionStop` as its output, without another model request;
- ``before_model_request``: after a stop, no request reaches the model, whatever
  asks for one (``SkipModelRequest`` with the stop text);
- ``wrap_run``: a batch cancelled or aborted mid-way settles as interrupted; the
  per-run outcome record, and the fail-open warning.

It overrides neither ``wrap_node_run`` nor ``wrap_model_request``: pydantic-ai
builds a wrapper chain around every node run and every model request of a run
for a capability that does, and a run pays for both on every step.
"""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic_ai._agent_graph import CallToolsNode, ModelRequestNode
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.exceptions import (
    RunCancelled,
    SkipModelRequest,
    SkipToolExecution,
    UsageLimitExceeded,
)
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.result import FinalResult
from pydantic_ai.tools import RunContext
from pydantic_ai.toolsets import AbstractToolset
from pydantic_graph import End

from tool_failure_guard.core import (
    DEFAULT_TOOL_CALL_CAP,
    Action,
    Continue,
    FunctionCall,
    Stop,
    provider_duplicate,
)
from tool_failure_guard.guard import GuardMode
from tool_failure_guard.integrations.pydantic_ai._run import (
    GuardedRun,
    answered_call_ids,
    has_user_input,
)
from tool_failure_guard.integrations.pydantic_ai._stop import ProtectionStop
from tool_failure_guard.integrations.pydantic_ai._toolset import ObservingToolset, tool_type_of
from tool_failure_guard.modes import mode_for_run
from tool_failure_guard.telemetry.sink import GuardTelemetry, NullTelemetry

#: ``metadata`` key marking the parts and responses this adapter added to a history.
METADATA_KEY = "tool_failure_guard"
#: ``model_name`` of the stop response (no model produced it).
STOP_MODEL_NAME = "tool-failure-guard"


@dataclass
class RepeatedToolFailureCapability(AbstractCapability[Any]):
    """Repeated tool-call protection for one agent: a fresh guard for every run.

    ``mode``: ``off``/``shadow``/``warn``/``enforce`` (a
    :class:`~tool_failure_guard.guard.GuardMode`
    or its name); None reads ``QWEN_CODE_ACP_REPEATED_TOOL_FAILURE_GUARD`` once,
    here, with the agent's default ``shadow``.  ``telemetry``: a sink of the
    agent's (``tool_failure_guard.telemetry.build.build_telemetry``); records carry ``route``
    ``pydantic_ai``.  ``tool_call_cap``: the per-run tool-call cap.
    ``on_batch``: called with each settled batch's 1-based ordinal and the
    core's action (``.decision`` is the guard's, None when it was not
    consulted); it observes only, and what it raises is logged and ignored.
    """

    mode: GuardMode | str | None = None
    telemetry: GuardTelemetry | None = field(default=None, repr=False)
    tool_call_cap: int = DEFAULT_TOOL_CALL_CAP
    on_batch: Callable[[int, Action], None] | None = field(default=None, repr=False)
    _mode: GuardMode = field(init=False, repr=False, compare=False)
    _run: GuardedRun | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.defer_loading:
            raise ValueError(
                "RepeatedToolFailureCapability cannot be deferred (defer_loading=True): its hooks "
                "would miss every tool call made before it is loaded"
            )
        if not isinstance(self.tool_call_cap, int) or self.tool_call_cap < 1:
            raise ValueError(
                f"tool_call_cap must be an int of at least 1; got {self.tool_call_cap!r}"
            )
        self._mode = mode_for_run(self.mode)

    @property
    def resolved_mode(self) -> GuardMode:
        """The mode every run of this capability uses."""
        return self._mode

    async def for_run(self, ctx: RunContext[Any]) -> AbstractCapability[Any]:
        fresh = dataclasses.replace(self, mode=self._mode)
        fresh._run = GuardedRun(
            mode=self._mode,
            telemetry=self.telemetry if self.telemetry is not None else NullTelemetry(),
            tool_call_cap=self.tool_call_cap,
            prompt_id=ctx.run_id or str(uuid.uuid4()),
            answered=answered_call_ids(ctx.messages),
            on_batch=self.on_batch,
        )
        return fresh

    def get_wrapper_toolset(self, toolset: AbstractToolset[Any]) -> AbstractToolset[Any] | None:
        if self._run is None:
            return None
        return ObservingToolset(toolset, run=self._run)

    # -- the calls of one response --------------------------------------------------

    async def before_node_run(self, ctx: RunContext[Any], *, node: Any) -> Any:
        run = self._run
        if run is not None and isinstance(node, CallToolsNode) and run.stop is None:
            calls, tools = _function_calls(ctx, node.model_response)
            if calls:
                run.admit(calls, tools, node.model_response)
        return node

    async def on_tool_validate_error(
        self, ctx: RunContext[Any], *, call: ToolCallPart, tool_def: Any, args: Any, error: Any
    ) -> Any:
        if self._run is not None:
            self._run.invalid(call.tool_call_id)
        raise error

    async def wrap_tool_execute(
        self, ctx: RunContext[Any], *, call: ToolCallPart, tool_def: Any, args: Any, handler: Any
    ) -> Any:
        run = self._run
        if run is not None and run.is_provider_duplicate(call.tool_call_id):
            # A replay of a call the history already answered: never executed again.
            replay = FunctionCall(call_id=call.tool_call_id, name=call.tool_name)
            raise SkipToolExecution(provider_duplicate(replay).output)
        return await handler(args)

    # -- the batch is over ----------------------------------------------------------

    async def after_node_run(self, ctx: RunContext[Any], *, node: Any, result: Any) -> Any:
        run = self._run
        if run is None:
            return result
        if isinstance(node, ModelRequestNode) and run.stop is None:
            run.model_turns += 1
        if not isinstance(node, CallToolsNode):
            return result
        if not run.open_batch:
            if run.stop is None:
                return result
            # Redirected after the stop (a queued message): the stop text already answered.
            return End(FinalResult(ProtectionStop(run.stop.notice, run.stop.loop_type)))
        answers = _answers(ctx.messages, node.model_response, result)
        queued = [
            message
            for pending in ctx.pending_messages or ()
            if pending.priority == "asap"
            for message in pending.messages
        ]
        action = run.settle(answers, user_input=has_user_input([*answers, *queued]))
        if isinstance(action, Stop):
            request = result.request if isinstance(result, ModelRequestNode) else None
            return self._end(ctx, action, persist=request)
        if (
            isinstance(action, Continue)
            and action.system_texts
            and isinstance(result, ModelRequestNode)
        ):
            return _with_reminder(result, action.system_texts)
        return result

    async def before_model_request(self, ctx: RunContext[Any], request_context: Any) -> Any:
        run = self._run
        if run is not None and run.stop is not None:
            # Stopped: whatever asks for another request (a queued message, a redirect),
            # the model is not called; the stop text answers instead.
            raise SkipModelRequest(_stop_response(ctx, run.stop))
        return request_context

    async def wrap_run(self, ctx: RunContext[Any], *, handler: Any) -> Any:
        run = self._run
        stop_reason = "error"
        try:
            result = await handler()
            stop_reason = "end_turn"
            return result
        except (asyncio.CancelledError, RunCancelled, KeyboardInterrupt, GeneratorExit):
            stop_reason = "cancelled"
            raise
        except UsageLimitExceeded:
            stop_reason = "max_turn_requests"
            raise
        finally:
            if run is not None and stop_reason != "end_turn" and run.open_response is not None:
                # The run ended inside a batch (cancelled, or an exception in its tools node):
                # what settled counts, the rest is interrupted.
                answers = _answers(ctx.messages, run.open_response, None)
                run.settle(answers, interrupted=True)
            if run is not None:
                usage = ctx.usage
                run.finished(
                    stop_reason=stop_reason,
                    input_tokens=usage.input_tokens if usage.requests else None,
                    output_tokens=usage.output_tokens if usage.requests else None,
                )

    def _end(
        self, ctx: RunContext[Any], stop: Stop, *, persist: ModelRequest | None
    ) -> End[FinalResult[Any]]:
        """End the run on ``stop``: the settled tool returns, then the stop text, in the history."""
        if persist is not None:
            ctx.messages.append(
                dataclasses.replace(persist, run_id=ctx.run_id, conversation_id=ctx.conversation_id)
            )
        ctx.messages.append(_stop_response(ctx, stop))
        return End(FinalResult(ProtectionStop(stop.notice, stop.loop_type)))


def _function_calls(
    ctx: RunContext[Any], response: ModelResponse
) -> tuple[list[ToolCallPart], dict[str, tuple[str | None, str]]]:
    """The response's calls the guard settles (output tools excluded) and each name's identity."""
    manager = ctx.tool_manager
    registered = getattr(manager, "tools", None) if manager is not None else None
    calls: list[ToolCallPart] = []
    tools: dict[str, tuple[str | None, str]] = {}
    for part in response.tool_calls:
        name = part.tool_name
        tool = registered.get(name) if registered is not None else None
        if tool is not None and tool.tool_def.kind == "output":
            continue
        calls.append(part)
        if tool is not None:
            tools[name] = (name, tool_type_of(tool.toolset))
        elif registered is None:
            tools[name] = (name, "native")  # the registry was not readable: trust the name
        else:
            tools[name] = (None, "native")
    return calls, tools


def _answers(
    messages: list[ModelMessage], response: ModelResponse, result: Any
) -> list[ModelMessage]:
    """The requests that answer ``response``: the next node's, and any already in the history."""
    answers: list[ModelMessage] = []
    if isinstance(result, ModelRequestNode):
        answers.append(result.request)
    for index in range(len(messages) - 1, -1, -1):
        if messages[index] is response:
            answers.extend(m for m in messages[index + 1 :] if isinstance(m, ModelRequest))
            break
    return answers


def _with_reminder(
    result: ModelRequestNode[Any, Any], texts: tuple[str, ...]
) -> ModelRequestNode[Any, Any]:
    """The next request with the reminder right after the batch's tool returns."""
    parts = list(result.request.parts)
    last_return = max(
        (i for i, part in enumerate(parts) if isinstance(part, ToolReturnPart)),
        default=len(parts) - 1,
    )
    reminders = [SystemPromptPart(text, metadata={METADATA_KEY: "reminder"}) for text in texts]
    parts[last_return + 1 : last_return + 1] = reminders
    return dataclasses.replace(result, request=dataclasses.replace(result.request, parts=parts))


def _stop_response(ctx: RunContext[Any], stop: Stop) -> ModelResponse:
    return ModelResponse(
        parts=[TextPart(stop.notice)],
        model_name=STOP_MODEL_NAME,
        run_id=ctx.run_id,
        conversation_id=ctx.conversation_id,
        metadata={METADATA_KEY: {"stop": stop.loop_type}},
    )
