"""The agent's function tools, observed: every call's outcome settles in the run.

Every ``FunctionTool`` of the agent is copied with an observing invoker
(:class:`_ObservedInvoker`): it sees the tool's raised exception *inside* the
SDK's failure handling, so a tool with its own ``failure_error_function`` is
observed too, and the tool's error text reaches the model unchanged.  The copy
settles into whatever run its :class:`Binding` holds when it is called, so an
agent clone left in a ``RunState`` by an interrupted run is guarded by the run
that resumes it.
"""

from __future__ import annotations

import asyncio
import contextvars
import copy
from collections.abc import Awaitable, Callable
from typing import Any

from agents import FunctionTool
from agents.tool import (
    _DEFAULT_FAILURE_HANDLED_ATTR,
    _FailureHandlingFunctionToolInvoker,
    _invoke_function_tool_with_metadata,
)
from agents.tool_context import ToolContext

from tool_failure_guard.integrations.openai_agents import _outcomes as outcomes
from tool_failure_guard.integrations.openai_agents._run import GuardedRun


class Binding:
    """The run an agent clone's tools and behaviour report to (a resume rebinds it).

    ``original_behaviour`` is the agent's own ``tool_use_behavior``: the clone
    carries it while no run of the adapter is using it (so ``RunState.add_input``
    sees what ``agents.Runner`` would), and the guarded one while a run is.
    """

    def __init__(self, run: GuardedRun, agent: Any) -> None:
        self.run = run
        self.agent = agent  #: the application's agent the clone was made of
        self.original_behaviour = agent.tool_use_behavior


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

    def __init__(self, binding: Binding, tool: FunctionTool) -> None:
        self.binding = binding
        self.timed = tool if tool.timeout_seconds is not None else None

    async def invoke(self, ctx: ToolContext[Any], input: str, call: Invoke) -> Any:
        run = self.binding.run  # the run that is calling the tool (the same until it settles)
        call_id = ctx.tool_call_id
        if run.is_replay(call_id):
            run.settle(call_id, outcomes.replayed)
            return REPLAY_TEXT
        run.started(call_id)
        box: list[BaseException] = []
        token = _RAISED.set(box)
        timed_out = False
        try:
            if self.timed is None:
                result = await call(ctx, input)
            else:
                result, timed_out = await self._sdk_timed(self.timed, ctx, input, call)
        except BaseException as escaped:  # ToolTimeoutError (raise_exception), a cancellation
            _settle_raised(run, call_id, escaped)
            raise
        finally:
            _RAISED.reset(token)
        if timed_out:  # the SDK answered the model with its timeout result
            run.settle(call_id, outcomes.timed_out)
        elif box:  # the tool raised; its failure handler answered the model with text
            _settle_raised(run, call_id, box[0])
        else:
            run.settle(call_id, lambda c: outcomes.returned(c, result))
        return result

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


def _settle_raised(run: GuardedRun, call_id: str, exc: BaseException) -> None:
    run.settle(call_id, lambda c: outcomes.from_exception(c, exc))


def observed_tool(tool: FunctionTool, binding: Binding) -> FunctionTool:
    """A copy of ``tool`` whose every call settles in ``binding.run`` (the original untouched)."""
    clone = copy.copy(tool)
    observer = _Observer(binding, tool)
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
