"""``RepeatedToolFailureMiddleware``: the guard as a LangChain v1 agent middleware.

The hooks, in the order ``create_agent`` runs them in one agent loop:

- ``before_agent``: a fresh :class:`~._run.GuardedRun` for this run (one per
  ``invoke``/``ainvoke``/``stream``), its id kept in the run's state;
- ``wrap_tool_call``: the first call of a new ``AIMessage`` admits its tool
  calls as the next batch (by the core: a replayed call id is never run); each
  call is observed at the tool itself (``._observe``) and at the end of the
  handler chain, settled on its path (``._outcomes``);
- ``wrap_model_call``: the tools node has put every ``ToolMessage`` of the
  batch in state, so the batch is over (a batch no tool call reached, all of
  its calls answered by a human say, is admitted here): the core's action is
  applied.  The reminder goes into this request after the results and, before
  the model's answer, into the state; the stop makes no request at all: its
  text answers in the model's place, an ``AIMessage`` without tool calls, so
  the agent loop ends there;
- ``after_agent``: the last ``AIMessage`` is admitted if it was not (a run
  that ends with it), the run's report goes into state; telemetry is finished.

The guard has no ``before_model`` or ``after_model`` hook: each would be one
more graph node in every turn of the agent loop (``create_agent`` makes a node
of each such hook; a wrapper runs inside the model and tools nodes), and the
state that ``wrap_tool_call`` and ``wrap_model_call`` see already holds the
``AIMessage`` as every ``after_model`` hook left it.
"""

from __future__ import annotations

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
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.runtime import Runtime
from langgraph.types import Command

from tool_failure_guard.core import (
    DEFAULT_TOOL_CALL_CAP,
    Action,
    CallOutcome,
    FunctionCall,
    Stop,
    invalid_arguments,
    rejected,
)
from tool_failure_guard.guard import GuardMode
from tool_failure_guard.integrations.langchain._model_call import (
    reminders_of,
    stopped,
    with_reminders,
)
from tool_failure_guard.integrations.langchain._observe import ObservedTools, Probe, probing
from tool_failure_guard.integrations.langchain._outcomes import (
    decided_call,
    function_call,
    human_decision,
    invalid_call,
    outcome_of,
)
from tool_failure_guard.integrations.langchain._run import (
    LOGGER,
    GuardedRun,
    GuardStop,
    RunReport,
)
from tool_failure_guard.modes import mode_for_run
from tool_failure_guard.telemetry.sink import GuardTelemetry

#: The state key of the run's report (public: :func:`stop_of`, :func:`report_of` read it).
REPORT_KEY = "tool_failure_guard"
#: The state key of the live run's id (private: never in the agent's input or output).
RUN_KEY = "tool_failure_guard_run"
#: Runs kept while they wait for their ``after_agent`` (an interrupted run may never come back).
MAX_LIVE_RUNS = 1024

ToolResult = ToolMessage | Command[Any]


class GuardState(AgentState[Any]):
    """The agent state keys this middleware adds."""

    tool_failure_guard: NotRequired[dict[str, Any] | None]
    tool_failure_guard_run: NotRequired[Annotated[str | None, PrivateStateAttr]]


def report_to_state(report: RunReport) -> dict[str, Any]:
    return {
        "mode": report.mode.value,
        "decisions": list(report.decisions),
        "batches": report.batches,
        "tool_calls": report.tool_calls,
        "observed": report.observed,
        "stop": report.stop.to_state() if report.stop is not None else None,
    }


def report_of(state: Any) -> RunReport | None:
    """What the guard did in the run whose final state is ``state`` (None: not guarded)."""
    value = state.get(REPORT_KEY) if isinstance(state, dict) else None
    if not isinstance(value, dict):
        return None
    return RunReport(
        mode=GuardMode(value["mode"]),
        decisions=tuple(value["decisions"]),
        batches=int(value["batches"]),
        tool_calls=int(value["tool_calls"]),
        observed=int(value["observed"]),
        stop=GuardStop.from_state(value.get("stop")),
    )


def stop_of(state: Any) -> GuardStop | None:
    """The typed stop signal of a run's final state: None unless a protection stopped it."""
    report = report_of(state)
    return report.stop if report is not None else None


class RepeatedToolFailureMiddleware(AgentMiddleware[GuardState, Any]):
    """The repeated tool-failure guard for ``create_agent``: a fresh guard per run.

    ``mode`` (a :class:`~tool_failure_guard.guard.GuardMode` or its name) is the embedding
    application's explicit choice; without it the environment variable
    ``QWEN_CODE_ACP_REPEATED_TOOL_FAILURE_GUARD`` decides per run, default
    ``shadow``.  ``telemetry`` is the agent's own sink
    (``tool_failure_guard.telemetry.sink.OpenTelemetrySink``), reported with ``route="langchain"``.
    """

    state_schema = GuardState

    def __init__(
        self,
        *,
        mode: GuardMode | str | None = None,
        telemetry: GuardTelemetry | None = None,
        tool_call_cap: int = DEFAULT_TOOL_CALL_CAP,
    ) -> None:
        super().__init__()
        mode_for_run(mode)  # a bad explicit mode fails here, naming the valid ones
        self._mode = mode
        self._telemetry = telemetry
        self._tool_call_cap = tool_call_cap
        self._lock = threading.Lock()
        self._runs: OrderedDict[str, GuardedRun] = OrderedDict()
        self._unknown_warned = False
        self._observed = ObservedTools()
        self.tools = []

    @property
    def mode(self) -> GuardMode:
        """The mode the next run starts with (the environment is read per run)."""
        return mode_for_run(self._mode)

    stop_of = staticmethod(stop_of)
    report_of = staticmethod(report_of)

    # -- the live runs ----------------------------------------------------------------

    def _start(self, state: Any) -> dict[str, Any]:
        run = GuardedRun(
            mode_for_run(self._mode), telemetry=self._telemetry, tool_call_cap=self._tool_call_cap
        )
        # What the history held before this run is not this run's (a thread's earlier runs).
        earlier = _last_ai_message(_messages(state))
        run.last_message = earlier[1] if earlier is not None else None
        with self._lock:
            self._runs[run.run_id] = run
            while len(self._runs) > MAX_LIVE_RUNS:
                self._runs.popitem(last=False)
        return {RUN_KEY: run.run_id, REPORT_KEY: None}

    def _run(self, state: Any) -> GuardedRun | None:
        run_id = state.get(RUN_KEY) if isinstance(state, dict) else None
        with self._lock:
            run = self._runs.get(run_id) if isinstance(run_id, str) else None
        if run is None and not self._unknown_warned:
            self._unknown_warned = True  # once per middleware: a state it did not start
            LOGGER.warning(
                "tool_failure_guard.integrations.langchain: RepeatedToolFailureMiddleware has "
                "no guarded run for this agent state (before_agent did not run in this "
                "process); the run is not protected"
            )
        return run

    # -- node hooks -------------------------------------------------------------------

    def before_agent(self, state: GuardState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        return self._start(state)

    async def abefore_agent(
        self, state: GuardState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        return self._start(state)

    def _catch_up(self, run: GuardedRun, state: Any) -> list[BaseMessage]:
        """Admit the state's last ``AIMessage`` unless it was; the state's messages."""
        messages = _messages(state)
        with run.catch_up_lock:  # a batch's parallel calls all get here first
            last = _last_ai_message(messages)
            if last is None or _same(last[1], run.last_message):
                return messages
            at, message = last
            run.last_message = message
            self._admit(run, messages, at, message)
        return messages

    def _admit(
        self, run: GuardedRun, messages: list[BaseMessage], at: int, message: AIMessage
    ) -> None:
        """``message``'s tool calls, as every ``after_model`` hook left them, are the batch."""
        # A human-in-the-loop middleware took its rejected calls out of the AIMessage and
        # answered them itself: they are still this batch's calls.
        answers = [m for m in messages[at + 1 :] if isinstance(m, ToolMessage)]
        decided = [m for m in answers if human_decision(m) is not None]
        # Calls the model node answered itself (a structured-output tool) never reach the
        # tools node: they are not tool executions, so not part of the batch.
        answered = {m.tool_call_id for m in answers if human_decision(m) is None}
        calls = [
            function_call(item) for item in message.tool_calls if item.get("id") not in answered
        ]
        known = {call.call_id for call in calls}
        human = [decided_call(m) for m in decided if m.tool_call_id not in known]
        invalid = [invalid_call(item) for item in message.invalid_tool_calls]
        run.model_response([*calls, *human, *invalid], message.usage_metadata)
        for call in human:  # never run: a human refused it, or answered in its place
            run.record(call.call_id, _human_rejected(call))
        for call in invalid:  # the tools node never runs these: settled here
            run.record(call.call_id, invalid_arguments(call, call.arguments_error or ""))

    def _close(self, state: Any) -> tuple[GuardedRun, Action] | None:
        """The open batch is over (the next model call): settle it; the core's action."""
        run = self._run(state)
        if run is None:
            return None
        messages = self._catch_up(run, state)
        # Calls a human answered in the tool's place never reach wrap_tool_call.
        for message in reversed(messages):
            if isinstance(message, AIMessage):
                break
            if isinstance(message, ToolMessage) and human_decision(message) is not None:
                run.record_if_missing(message.tool_call_id, _human_rejected)
        action = run.close()
        return (run, action) if action is not None else None

    def wrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], ModelCallResult]
    ) -> ModelCallResult:
        closed = self._close(request.state)
        if closed is None:
            return handler(request)
        run, action = closed
        if isinstance(action, Stop):
            return stopped(run, action)
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
        closed = self._close(request.state)
        if closed is None:
            return await handler(request)
        run, action = closed
        if isinstance(action, Stop):
            return stopped(run, action)
        reminders = reminders_of(action)
        if not reminders:
            return await handler(request)
        response = await handler(request.override(messages=[*request.messages, *reminders]))
        return with_reminders(response, reminders)

    def after_agent(self, state: GuardState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        run = self._run(state)
        if run is None:
            return None
        self._catch_up(run, state)
        with self._lock:
            self._runs.pop(run.run_id, None)
        run.finish()
        return {REPORT_KEY: report_to_state(run.report())}

    async def aafter_agent(self, state: GuardState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        return self.after_agent(state, runtime)

    # -- tool calls -------------------------------------------------------------------

    def _replay(self, run: GuardedRun, request: ToolCallRequest) -> ToolMessage | None:
        call_id = str(request.tool_call.get("id") or "")
        if not run.is_replay(call_id):
            return None
        outcome = run.record_replay(call_id)
        return ToolMessage(
            content=outcome.output if outcome is not None else "",
            name=request.tool_call.get("name"),
            tool_call_id=call_id,
            status="error",
        )

    def wrap_tool_call(
        self, request: ToolCallRequest, handler: Callable[[ToolCallRequest], ToolResult]
    ) -> ToolResult:
        run = self._run(request.state)
        if run is None:
            return handler(request)
        self._catch_up(run, request.state)
        replay = self._replay(run, request)
        if replay is not None:
            return replay
        probe, observed = self._observing(request)
        with probing(probe):
            try:
                result = handler(observed)
            except BaseException as error:
                _settle(run, request, probe, error=error)
                raise
        _settle(run, request, probe, result=result)
        return result

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolResult]],
    ) -> ToolResult:
        run = self._run(request.state)
        if run is None:
            return await handler(request)
        self._catch_up(run, request.state)
        replay = self._replay(run, request)
        if replay is not None:
            return replay
        probe, observed = self._observing(request)
        with probing(probe):
            try:
                result = await handler(observed)
            except BaseException as error:
                _settle(run, request, probe, error=error)
                raise
        _settle(run, request, probe, result=result)
        return result

    def _observing(self, request: ToolCallRequest) -> tuple[Probe, ToolCallRequest]:
        probe = Probe()
        if request.tool is None:
            return probe, request
        return probe, request.override(tool=self._observed.observed(request.tool))


def _messages(state: Any) -> list[BaseMessage]:
    messages = state.get("messages") if isinstance(state, dict) else None
    return messages if isinstance(messages, list) else list(messages or ())


def _last_ai_message(messages: list[BaseMessage]) -> tuple[int, AIMessage] | None:
    for at in range(len(messages) - 1, -1, -1):
        message = messages[at]
        if isinstance(message, AIMessage):
            return at, message
    return None


def _same(message: AIMessage, seen: AIMessage | None) -> bool:
    """``message`` is ``seen`` (the state's reducer gives every message an id)."""
    if seen is None:
        return False
    return message is seen or (message.id is not None and message.id == seen.id)


def _human_rejected(call: FunctionCall) -> CallOutcome:
    return rejected(call, "a human rejected the call or answered it in the tool's place")


def _settle(
    run: GuardedRun,
    request: ToolCallRequest,
    probe: Probe,
    *,
    result: Any = None,
    error: BaseException | None = None,
) -> None:
    try:
        call_id = str(request.tool_call.get("id") or "")
        call = run.call(call_id)
        if call is None:
            return  # not one of the open batch's calls (a middleware's own tool call)
        outcome = outcome_of(
            call,
            tool_known=request.tool is not None,
            attempt=probe.last,
            result=result,
            error=error,
        )
        run.record(call_id, outcome)
    finally:
        probe.forget()  # an exception kept past here would keep its frames alive
