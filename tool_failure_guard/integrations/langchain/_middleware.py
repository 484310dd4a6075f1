"""``RepeatedToolFailureMiddleware``: the guard as a LangChain v1 agent middleware.

The hooks, in the order ``create_agent`` runs them in one agent loop:

- ``before_agent``: a fresh :class:`~._run.GuardedRun` for this run (one per
  ``invoke``/``ainvoke``/``stream``), its id kept in the run's state;
- ``wrap_tool_call``: the first call of a new ``AIMessage`` admits its tool
  calls as the next batch (:mod:`._batches`; by the core: a replayed call id
  is never run, nor a call past the tool-call cap); each call is observed at
  the tool itself (:mod:`._observe`) and at the end of the handler chain,
  settled on its path (:mod:`._outcomes`);
- ``wrap_model_call``: the tools node has put every ``ToolMessage`` of the
  batch in state, so the batch is over: the core's action is applied.  The
  reminder goes into this request after the results and, before the model's
  answer, into the state; the stop makes no request at all and ends the run
  as ``on_stop`` says (:mod:`._stop`);
- ``after_agent``: the last ``AIMessage`` is admitted if it was not (a run
  that ends with it), the run's report goes into state; telemetry is finished.

The guard has no ``before_model`` or ``after_model`` hook: each would be one
more graph node in every turn of the agent loop (``create_agent`` makes a node
of each such hook; a wrapper runs inside the model and tools nodes).
"""

from __future__ import annotations

import inspect
import threading
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, NotRequired

from langchain.agents.middleware import AgentMiddleware, AgentState
from langchain.agents.middleware.types import (
    ModelCallResult,
    ModelRequest,
    PrivateStateAttr,
)
from langchain_core.messages import AIMessage, ToolMessage
from langgraph.errors import GraphBubbleUp
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.runtime import Runtime
from langgraph.types import Command

from tool_failure_guard.core import Action, CallOutcome, FunctionCall, Stop
from tool_failure_guard.framework_protection import (
    DEFAULT_INVALID_PARAMS_LIMIT,
    DEFAULT_TOOL_CALL_CAP,
)
from tool_failure_guard.guard import GuardMode
from tool_failure_guard.integrations._api import (
    StopBehaviour,
    WarnOnce,
    limit_option,
    stop_behaviour,
)
from tool_failure_guard.integrations.langchain._batches import (
    catch_up,
    last_ai_message,
    messages_of,
    settle_human_answers,
)
from tool_failure_guard.integrations.langchain._model_call import reminders_of, with_reminders
from tool_failure_guard.integrations.langchain._observe import (
    PROBE,
    ObservedTools,
    Probe,
    with_tool,
)
from tool_failure_guard.integrations.langchain._outcomes import outcome_of
from tool_failure_guard.integrations.langchain._report import (
    REPORT_KEY,
    report_of,
    report_to_state,
    stop_of,
)
from tool_failure_guard.integrations.langchain._run import LOGGER, GuardedRun
from tool_failure_guard.integrations.langchain._stop import (
    PLAIN_EXCEPTION_WARNING,
    ProtectionStopped,
    ends_with_text,
    stop_message,
)
from tool_failure_guard.modes import mode_for_run
from tool_failure_guard.telemetry.sink import GuardTelemetry

#: The state key of the live run's id (private: never in the agent's input or output).
RUN_KEY = "tool_failure_guard_run"
#: Runs kept while they wait for their ``after_agent`` (an interrupted run may never come back).
MAX_LIVE_RUNS = 1024

ToolResult = ToolMessage | Command[Any]


class GuardState(AgentState[Any]):
    """The agent state keys this middleware adds."""

    tool_failure_guard: NotRequired[dict[str, Any] | None]
    tool_failure_guard_run: NotRequired[Annotated[str | None, PrivateStateAttr]]


class RepeatedToolFailureMiddleware(AgentMiddleware[GuardState, Any]):
    """The repeated tool-failure guard for ``create_agent``: a fresh guard per run.

    ``mode`` (a :class:`~tool_failure_guard.guard.GuardMode` or its name) is the embedding
    application's explicit choice and wins over the environment; without it
    ``QWEN_CODE_ACP_REPEATED_TOOL_FAILURE_GUARD`` is read afresh for every run,
    default ``shadow``.  ``telemetry`` is the agent's own sink
    (``telemetry.sink.OpenTelemetrySink``), reported with ``route="langchain"``.
    ``on_stop`` is how a stopped run ends: ``"error"`` (the default) raises
    :class:`~._stop.ProtectionStopped` (a ``ToolCallLimitExceededError``);
    ``"end"`` ends it with the stop text as its final ``AIMessage``, unless the
    agent has a ``response_format`` (then it raises all the same).
    ``tool_call_cap`` (calls past it never run) and ``invalid_params_limit`` (calls of
    one tool failing before they run, e.g. a wrong argument name, that stop the run) are
    off (None) by default: LangGraph's ``recursion_limit`` and
    ``ToolCallLimitMiddleware`` are LangChain's own.  Every protection follows the
    mode: ``off`` changes nothing, ``shadow`` changes nothing a run does (its
    ``RunReport`` says what would have stopped it), ``warn``/``enforce`` act.
    """

    state_schema = GuardState

    def __init__(
        self,
        *,
        mode: GuardMode | str | None = None,
        telemetry: GuardTelemetry | None = None,
        on_stop: StopBehaviour = "error",
        tool_call_cap: int | None = DEFAULT_TOOL_CALL_CAP,
        invalid_params_limit: int | None = DEFAULT_INVALID_PARAMS_LIMIT,
    ) -> None:
        super().__init__()
        mode_for_run(mode)  # a bad explicit mode fails here, naming the valid ones
        self._mode = mode
        self._telemetry = telemetry
        self._on_stop = stop_behaviour(on_stop)
        self._tool_call_cap = limit_option("tool_call_cap", tool_call_cap)
        self._invalid_params_limit = limit_option("invalid_params_limit", invalid_params_limit)
        self._lock = threading.Lock()
        self._runs: OrderedDict[str, GuardedRun] = OrderedDict()
        self._unknown_warned = False
        self._plain_exception_warning = WarnOnce()
        self._observed = ObservedTools()
        self.tools = []
        for name in _HOOKS:  # what create_agent wraps: see _plain_hook
            setattr(self, name, _plain_hook(self, name))

    @property
    def mode(self) -> GuardMode:
        """The mode the next run starts with (without ``mode=``, the environment's now)."""
        return mode_for_run(self._mode)

    @property
    def on_stop(self) -> StopBehaviour:
        return self._on_stop

    stop_of = staticmethod(stop_of)
    report_of = staticmethod(report_of)

    # -- the live runs ----------------------------------------------------------------

    def _start(self, state: Any) -> dict[str, Any]:
        run = GuardedRun(
            mode_for_run(self._mode),
            telemetry=self._telemetry,
            tool_call_cap=self._tool_call_cap,
            invalid_params_limit=self._invalid_params_limit,
        )
        # What the history held before this run is not this run's (a thread's earlier runs).
        earlier = last_ai_message(messages_of(state))
        run.last_message = earlier[1] if earlier is not None else None
        with self._lock:
            self._runs[run.run_id] = run
            while len(self._runs) > MAX_LIVE_RUNS:
                self._runs.popitem(last=False)
        return {RUN_KEY: run.run_id, REPORT_KEY: None}

    def _run(self, state: Any) -> GuardedRun | None:
        run_id = state.get(RUN_KEY) if isinstance(state, dict) else None
        # One lookup is atomic (the lock keeps _start's and _end's updates whole).
        run = self._runs.get(run_id) if isinstance(run_id, str) else None
        if run is None and not self._unknown_warned:
            self._unknown_warned = True  # once per middleware: a state it did not start
            LOGGER.warning(
                "tool_failure_guard.integrations.langchain: RepeatedToolFailureMiddleware has "
                "no guarded run for this agent state (before_agent did not run in this "
                "process); the run is not protected"
            )
        return run

    def _end(self, run: GuardedRun) -> None:
        with self._lock:
            self._runs.pop(run.run_id, None)
        run.finish()

    # -- node hooks -------------------------------------------------------------------

    def before_agent(self, state: GuardState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        return self._start(state)

    async def abefore_agent(
        self, state: GuardState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        return self._start(state)

    def _close(self, request: ModelRequest) -> tuple[GuardedRun, Action] | None:
        """The open batch is over (the next model call): settle it; the core's action."""
        run = self._run(request.state)
        if run is None:
            return None
        messages = catch_up(run, request.state)
        settle_human_answers(run, messages)  # they never reach wrap_tool_call
        action = run.close()
        if isinstance(action, Stop):
            self._stopping(run, request)
        return (run, action) if action is not None else None

    def _stopping(self, run: GuardedRun, request: ModelRequest) -> None:
        """Raise the stop, unless it ends the run with its text (then the caller answers it)."""
        stop = run.stop
        if stop is None or ends_with_text(self._on_stop, request.response_format):
            return
        self._end(run)  # no after_agent follows an exception: the run ends here
        raise ProtectionStopped(stop, run.report())

    def _stopped(self, run: GuardedRun) -> AIMessage:
        assert run.stop is not None
        message = stop_message(run.stop)
        run.last_message = message  # the guard's own message: no model turn
        return message

    def wrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], ModelCallResult]
    ) -> ModelCallResult:
        closed = self._close(request)
        if closed is None:
            return handler(request)
        run, action = closed
        if isinstance(action, Stop):
            return self._stopped(run)
        reminders = reminders_of(action)
        if not reminders:
            return handler(request)
        return with_reminders(
            handler(request.override(messages=[*request.messages, *reminders])), reminders
        )

    async def awrap_model_call(
        self,
        request: ModelRequest,
        handler: Callable[[ModelRequest], Awaitable[ModelCallResult]],
    ) -> ModelCallResult:
        closed = self._close(request)
        if closed is None:
            return await handler(request)
        run, action = closed
        if isinstance(action, Stop):
            return self._stopped(run)
        reminders = reminders_of(action)
        if not reminders:
            return await handler(request)
        response = await handler(request.override(messages=[*request.messages, *reminders]))
        return with_reminders(response, reminders)

    def after_agent(self, state: GuardState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        run = self._run(state)
        if run is None:
            return None
        catch_up(run, state)
        self._end(run)
        return {REPORT_KEY: report_to_state(run.report())}

    async def aafter_agent(self, state: GuardState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        return self.after_agent(state, runtime)

    # -- tool calls -------------------------------------------------------------------

    def wrap_tool_call(
        self, request: ToolCallRequest, handler: Callable[[ToolCallRequest], ToolResult]
    ) -> ToolResult:
        run = self._run(request.state)
        if run is None:
            return handler(request)
        catch_up(run, request.state)
        call, answered = run.tool_call(request.tool_call)
        if answered is not None:
            return _answer(request, answered)
        probe = Probe()
        token = PROBE.set(probe)
        try:
            result = handler(self._observing(request))
        except BaseException as error:
            _settle(run, call, request, probe, None, error)
            self._escaped(request, error)
            raise
        finally:
            PROBE.reset(token)
        _settle(run, call, request, probe, result, None)
        return result

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolResult]],
    ) -> ToolResult:
        run = self._run(request.state)
        if run is None:
            return await handler(request)
        catch_up(run, request.state)
        call, answered = run.tool_call(request.tool_call)
        if answered is not None:
            return _answer(request, answered)
        probe = Probe()
        token = PROBE.set(probe)
        try:
            result = await handler(self._observing(request))
        except BaseException as error:
            _settle(run, call, request, probe, None, error)
            self._escaped(request, error)
            raise
        finally:
            PROBE.reset(token)
        _settle(run, call, request, probe, result, None)
        return result

    def _escaped(self, request: ToolCallRequest, error: BaseException) -> None:
        """A tool's exception nothing inside answered: it ends the run.  Say so, once."""
        if isinstance(error, Exception) and not isinstance(error, GraphBubbleUp):
            name = str(request.tool_call.get("name") or "")
            self._plain_exception_warning.warn(
                LOGGER, PLAIN_EXCEPTION_WARNING, name, type(error).__name__
            )

    def _observing(self, request: ToolCallRequest) -> ToolCallRequest:
        """``request`` with the observed copy of its tool (:mod:`._observe`)."""
        tool = request.tool
        if tool is None:
            return request
        return with_tool(request, self._observed.observed(tool))


def _answer(request: ToolCallRequest, outcome: CallOutcome) -> ToolMessage:
    """The guard's answer in the tool's place: the call never runs."""
    return ToolMessage(
        content=outcome.output,
        name=request.tool_call.get("name"),
        tool_call_id=str(request.tool_call.get("id") or ""),
        status="error",
    )


# ``create_agent`` wraps every ``wrap_*`` hook in LangSmith's ``traceable``, which asks
# ``inspect.signature`` of the hook on every call, traced or not (issue 26: the guard's
# cost per call).  Its cheapest case is a plain function carrying ``__signature__`` (a
# bound method's is re-derived from its function's each time), so each instance gets its
# hooks as such functions, calling the class's methods.
_HOOKS = ("wrap_model_call", "awrap_model_call", "wrap_tool_call", "awrap_tool_call")


def _without_self(function: Callable[..., Any]) -> inspect.Signature:
    signature = inspect.signature(function)
    return signature.replace(parameters=list(signature.parameters.values())[1:])


_SIGNATURES = {name: _without_self(getattr(RepeatedToolFailureMiddleware, name)) for name in _HOOKS}


def _plain_hook(middleware: RepeatedToolFailureMiddleware, name: str) -> Callable[..., Any]:
    method = getattr(type(middleware), name)
    hook: Callable[..., Any]
    if inspect.iscoroutinefunction(method):

        async def hook(request: Any, handler: Any) -> Any:
            return await method(middleware, request, handler)

    else:

        def hook(request: Any, handler: Any) -> Any:
            return method(middleware, request, handler)

    named: Any = hook
    named.__name__, named.__qualname__, named.__doc__ = name, method.__qualname__, method.__doc__
    named.__signature__ = _SIGNATURES[name]
    return hook


def _settle(
    run: GuardedRun,
    call: FunctionCall | None,
    request: ToolCallRequest,
    probe: Probe,
    result: Any,
    error: BaseException | None,
) -> None:
    attempts = probe.attempts
    try:
        if call is None:
            return  # not one of the open batch's calls (a middleware's own tool call)
        attempt = attempts[-1] if attempts else None
        outcome = outcome_of(call, request.tool is not None, attempt, result, error)
        run.record(call.call_id, outcome)
    finally:
        if attempts:
            probe.forget()  # an exception kept past here would keep its frames alive
