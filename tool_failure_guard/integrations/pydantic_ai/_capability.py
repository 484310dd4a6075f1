"""``RepeatedToolFailureCapability``: the guard as a pydantic-ai capability.

Framework event -> core call, and core action -> framework effect:

- ``for_run``: a fresh :class:`GuardedRun` (one ``PromptProtection``) per run,
  in the mode read for that run; the history's answered calls seed the
  call-id de-duplicator;
- ``get_wrapper_toolset``: the execution boundary (:mod:`._toolset`);
- ``on_tool_validate_error``: invalid arguments (never this guard's to count);
- ``before_node_run`` of a ``CallToolsNode``: admit the response's function calls;
- ``after_node_run`` of a ``CallToolsNode``: every call is answered: settle the
  batch; ``Continue`` -> the reminder as a ``SystemPromptPart`` right after the
  batch's tool returns (kept in the history, so in every later request);
  ``Stop`` -> the tool returns and the stop text go into the history and the run
  ends without another model request: it raises :class:`ProtectionStopped`
  (``on_stop="error"``), or (``on_stop="end"``) goes on as the run's text answer;
- ``before_model_request``: after a stop, no request reaches the model, whatever
  asks for one (``SkipModelRequest`` with the stop text); a batch still open
  here was never settled: the fail-open warning, now;
- ``wrap_output_process``: after a stop the output is the stop text: the run ends
  with :class:`ProtectionStop` where the *run's* output is plain ``str``, else it
  raises :class:`ProtectionStopped`;
- ``wrap_run``: a batch cancelled or aborted mid-way settles as interrupted; the
  run's report (``report_of``), the per-run outcome record.

It overrides neither ``wrap_node_run`` nor ``wrap_model_request``: pydantic-ai
builds a wrapper chain around every node run and every model request of a run
for a capability that does, and a run pays for both on every step.
"""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
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
from pydantic_ai.messages import ModelRequest, ToolCallPart
from pydantic_ai.output import OutputContext
from pydantic_ai.tools import RunContext
from pydantic_ai.toolsets import AbstractToolset
from pydantic_graph import End

from tool_failure_guard.core import (
    Continue,
    FunctionCall,
    Stop,
    provider_duplicate,
)
from tool_failure_guard.framework_protection import (
    DEFAULT_INVALID_PARAMS_LIMIT,
    DEFAULT_TOOL_CALL_CAP,
)
from tool_failure_guard.guard import GuardMode
from tool_failure_guard.integrations._api import (
    GuardStop,
    StopBehaviour,
    WarnOnce,
    attach_report,
    limit_option,
    stop_behaviour,
)
from tool_failure_guard.integrations.pydantic_ai._history import answered_calls, has_user_input
from tool_failure_guard.integrations.pydantic_ai._parts import (
    answers_of,
    function_calls,
    requests_plain_text,
    stop_response,
    with_reminder,
)
from tool_failure_guard.integrations.pydantic_ai._results import Finished, remember
from tool_failure_guard.integrations.pydantic_ai._run import GuardedRun
from tool_failure_guard.integrations.pydantic_ai._stop import ProtectionStop, ProtectionStopped
from tool_failure_guard.integrations.pydantic_ai._toolset import ObservingToolset
from tool_failure_guard.modes import mode_for_run
from tool_failure_guard.telemetry.sink import GuardTelemetry, NullTelemetry


@dataclass
class RepeatedToolFailureCapability(AbstractCapability[Any]):
    """Repeated tool-call protection for one agent: a fresh guard for every run.

    ``mode``: ``off``/``shadow``/``warn``/``enforce`` (a
    :class:`~tool_failure_guard.guard.GuardMode` or its name) wins over the
    environment; None reads ``QWEN_CODE_ACP_REPEATED_TOOL_FAILURE_GUARD`` afresh
    for every run (default ``shadow``).  ``telemetry``: a sink of the agent's
    (``telemetry.build.build_telemetry``); records carry ``route``
    ``pydantic_ai``.  ``on_stop``: how a stopped run ends, ``"error"`` (raise
    :class:`ProtectionStopped`, a ``UsageLimitExceeded``) or ``"end"`` (the
    output is the :class:`ProtectionStop` text where the run's own output
    type is plain ``str``; otherwise it raises all the same).
    ``tool_call_cap`` (calls past it never run) and ``invalid_params_limit`` (calls of
    one tool rejected before they run, e.g. arguments that fail validation, that stop the
    run): off (None) by default, since pydantic-ai's ``UsageLimits`` and each tool's
    ``retries`` are its own limits.  Every protection follows the mode: ``off`` changes
    nothing, ``shadow`` changes nothing a run does, ``warn``/``enforce`` act.
    ``report_of(result)`` / ``stop_of(result)`` say what the guard did in a run.
    """

    mode: GuardMode | str | None = None
    telemetry: GuardTelemetry | None = field(default=None, repr=False)
    on_stop: StopBehaviour = "error"
    tool_call_cap: int | None = DEFAULT_TOOL_CALL_CAP
    invalid_params_limit: int | None = DEFAULT_INVALID_PARAMS_LIMIT
    #: one warning per capability (shared by the per-run copies ``for_run`` makes)
    _plain_exception_warning: WarnOnce = field(
        default_factory=WarnOnce, repr=False, compare=False, kw_only=True
    )
    _run: GuardedRun | None = field(default=None, init=False, repr=False, compare=False)
    #: the run's model requests accept a plain text output (None: no request seen yet)
    _requests_text: bool | None = field(default=None, init=False, repr=False, compare=False)
    #: keep each batch's core action for ``_results.finished_of`` (a seam for tests only)
    _keep_actions: bool = field(default=False, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.defer_loading:
            raise ValueError(
                "RepeatedToolFailureCapability cannot be deferred (defer_loading=True): its hooks "
                "would miss every tool call made before it is loaded"
            )
        self.tool_call_cap = limit_option("tool_call_cap", self.tool_call_cap)
        self.invalid_params_limit = limit_option("invalid_params_limit", self.invalid_params_limit)
        self.on_stop = stop_behaviour(self.on_stop)
        if self.mode is not None:
            mode_for_run(self.mode)  # a bad explicit mode fails here, naming the valid ones

    @property
    def resolved_mode(self) -> GuardMode:
        """The mode the next run starts with (without ``mode``: the environment, read now)."""
        return mode_for_run(self.mode)

    async def for_run(self, ctx: RunContext[Any]) -> AbstractCapability[Any]:
        mode = mode_for_run(self.mode)
        fresh = dataclasses.replace(self, mode=mode)
        fresh._run = GuardedRun(
            mode=mode,
            telemetry=self.telemetry if self.telemetry is not None else NullTelemetry(),
            tool_call_cap=self.tool_call_cap,
            invalid_params_limit=self.invalid_params_limit,
            plain_exception_warning=self._plain_exception_warning,
            prompt_id=ctx.run_id or str(uuid.uuid4()),
            answered=answered_calls(ctx.messages),
            keep_actions=self._keep_actions,
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
            calls, tools = function_calls(ctx, node.model_response)
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
            if run.stop is None or run.guard_stop is None or isinstance(result, End):
                # (after a stop, an End is the stop text's, through ``wrap_output_process``)
                return result
            # After the stop, the stop text was not taken as the output: the run cannot end with it.
            raise self._stopped(ctx, run, run.guard_stop)
        answers = answers_of(ctx.messages, node.model_response, result)
        queued = [
            message
            for pending in ctx.pending_messages or ()
            if pending.priority == "asap"
            for message in pending.messages
        ]
        action = run.settle(answers, user_input=has_user_input([*answers, *queued]))
        if isinstance(action, Stop):
            request = result.request if isinstance(result, ModelRequestNode) else None
            return self._end(ctx, run, action, persist=request)
        if (
            isinstance(action, Continue)
            and action.system_texts
            and isinstance(result, ModelRequestNode)
        ):
            return with_reminder(result, action.system_texts)
        return result

    async def before_model_request(self, ctx: RunContext[Any], request_context: Any) -> Any:
        run = self._run
        if run is None:
            return request_context
        if run.stop is not None:
            # Stopped: whatever asks for another request (a queued message, a redirect),
            # the model is not called; the stop text answers instead.
            raise SkipModelRequest(stop_response(ctx, run.stop))
        if run.open_batch and not run.unobserved_reported:
            run.unobserved(
                "a batch of tool calls was never settled before the next model request "
                "(after_node_run was not reached)"
            )
        if self._requests_text is None:
            self._requests_text = requests_plain_text(request_context.model_request_parameters)
        return request_context

    async def wrap_output_process(
        self, ctx: RunContext[Any], *, output_context: OutputContext, output: Any, handler: Any
    ) -> Any:
        run = self._run
        if run is None or run.guard_stop is None:
            return await handler(output)
        # After a stop no model answers: the output is the stop text, and the run's own
        # output type (not the agent's) says whether the run can end with it.
        plain_text = output_context.output_type is str and not output_context.has_function
        if self.on_stop == "end" and plain_text:
            return ProtectionStop(run.guard_stop)
        if ctx.partial_output:
            return output  # a streamed preview; the final output decides
        raise self._stopped(ctx, run, run.guard_stop)

    async def wrap_run(self, ctx: RunContext[Any], *, handler: Any) -> Any:
        run = self._run
        stop_reason = "error"
        escaped: Exception | None = None  # the run's own error: it carries the report
        try:
            result = await handler()
            stop_reason = "end_turn"
            return result
        except ProtectionStopped:
            stop_reason = "end_turn"  # a protection's stop, as the agent reports it
            raise
        except (asyncio.CancelledError, RunCancelled, KeyboardInterrupt, GeneratorExit):
            stop_reason = "cancelled"
            raise
        except UsageLimitExceeded as error:
            stop_reason = "max_turn_requests"
            escaped = error
            raise
        except Exception as error:  # e.g. UnexpectedModelBehavior: a tool's retries ran out
            escaped = error
            raise
        finally:
            if run is not None:
                self._finish(ctx, run, stop_reason)
                if escaped is not None:
                    attach_report(escaped, run.report())

    def _finish(self, ctx: RunContext[Any], run: GuardedRun, stop_reason: str) -> None:
        """The run is over, however it ended: its report for ``report_of``, its outcome record."""
        if stop_reason != "end_turn" and run.open_response is not None:
            # The run ended inside a batch (cancelled, or an exception in its tools node):
            # what settled counts, the rest is interrupted.
            run.settle(answers_of(ctx.messages, run.open_response, None), interrupted=True)
        usage = ctx.usage
        if ctx.run_id:
            # Every view of the run (result, streamed result, AgentRun, RunCancelled) shares
            # its usage object: the report lives as long as the run's state does.
            remember(ctx.run_id, Finished(run.report(), tuple(run.actions or ())), usage)
        run.finished(
            stop_reason=stop_reason,
            input_tokens=usage.input_tokens if usage.requests else None,
            output_tokens=usage.output_tokens if usage.requests else None,
        )

    def _end(
        self, ctx: RunContext[Any], run: GuardedRun, stop: Stop, *, persist: ModelRequest | None
    ) -> CallToolsNode[Any, Any]:
        """End the run on ``stop``: the settled tool returns, then the stop text, in the history.

        Then the run raises :class:`ProtectionStopped`, or (``on_stop="end"``, the
        run's model requests accept text) the stop text is handled as the run's text
        answer, which ``wrap_output_process`` ends with as the output where the run's
        output is plain text.
        """
        if persist is not None:
            ctx.messages.append(
                dataclasses.replace(persist, run_id=ctx.run_id, conversation_id=ctx.conversation_id)
            )
        answer = stop_response(ctx, stop)
        ctx.messages.append(answer)
        guard_stop = run.guard_stop
        if guard_stop is None:  # pragma: no cover - the settle that returned ``stop`` set it
            raise RuntimeError("a stopped run without its GuardStop")
        if self.on_stop == "end" and self._requests_text:
            # The stop text goes the way of a text answer, so the run's own output type
            # decides (``wrap_output_process``): plain text ends with it, anything else raises.
            return CallToolsNode(model_response=answer)
        raise self._stopped(ctx, run, guard_stop)

    def _stopped(self, ctx: RunContext[Any], run: GuardedRun, stop: GuardStop) -> ProtectionStopped:
        return ProtectionStopped(stop, run.report(), messages=ctx.messages, run_id=ctx.run_id)
