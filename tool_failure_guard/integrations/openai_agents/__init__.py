"""The repeated tool-failure guard for the OpenAI Agents SDK (the ``[openai-agents]`` extra).

One entry point, :class:`GuardedRunner`: it runs an existing ``Agent`` exactly
like ``agents.Runner`` does (``run``, ``run_sync``, ``run_streamed``, the same
arguments), with a fresh guard for every run; on the class, as ``Runner``'s are
called, or on an instance with an explicit configuration::

    from tool_failure_guard.integrations.openai_agents import GuardedRunner

    # the mode: QWEN_CODE_ACP_REPEATED_TOOL_FAILURE_GUARD (GuardedRunner(mode=...).run: explicit)
    try:
        result = await GuardedRunner.run(agent, "Fix the build")  # was: Runner.run(agent, ...)
    except ProtectionStopped as stopped:  # also an agents.MaxTurnsExceeded
        ...  # a protection stopped the run: stopped.loop_type, stopped.key, stopped.report
    else:
        report = report_of(result)  # what the guard did, in every mode

``GuardedRunner(on_stop="end")`` ends a stopped run with the stop text as its
``final_output`` instead, where the agent's output type is text (``_stop``);
``stop_of(result)`` then returns the typed stop.

``docs/integrations.md`` ("OpenAI Agents SDK") documents how every SDK
outcome maps onto the outcome contract, where the reminder goes and how a
stop ends the run.  Never imported by the agent or the core.
"""

from __future__ import annotations

from tool_failure_guard._extras import require_extra

require_extra("openai-agents", "agents")  # else: pip install hint

import asyncio
import weakref
from collections.abc import Mapping, Sequence
from typing import Any, TypeAlias, Unpack

from agents import (
    Agent,
    MaxTurnsExceeded,
    Runner,
    RunResult,
    RunResultStreaming,
    RunState,
    TResponseInputItem,
)
from agents.result import RunResultBase
from agents.run_config import RunOptions

from tool_failure_guard.framework_protection import (
    DEFAULT_INVALID_PARAMS_LIMIT,
    DEFAULT_TOOL_CALL_CAP,
)
from tool_failure_guard.guard import GuardMode
from tool_failure_guard.integrations._api import (
    GuardStop,
    RunReport,
    StopBehaviour,
    attach_report,
    attached_report,
    limit_option,
    stop_behaviour,
)
from tool_failure_guard.integrations.openai_agents._either import either
from tool_failure_guard.integrations.openai_agents._outcomes import OUTCOME_ROWS, OutcomeRow
from tool_failure_guard.integrations.openai_agents._resume import field, resumed_run
from tool_failure_guard.integrations.openai_agents._run import ROUTE, GuardedRun
from tool_failure_guard.integrations.openai_agents._stop import ProtectionStopped
from tool_failure_guard.integrations.openai_agents._wiring import (
    GuardHooks,
    check_error_handlers,
    disarm,
    guarded_agent,
    guarded_config,
    guarded_error_handlers,
)
from tool_failure_guard.modes import mode_for_run
from tool_failure_guard.telemetry.sink import GuardTelemetry

__all__ = [
    "OUTCOME_ROWS",
    "ROUTE",
    "GuardStop",
    "GuardedRunner",
    "OutcomeRow",
    "ProtectionStopped",
    "RunReport",
    "report_of",
    "stop_of",
]

#: What ``Runner.run`` takes as input: a prompt, input items, or a run state to resume.
RunInput: TypeAlias = "str | list[TResponseInputItem] | RunState[Any]"

#: The run behind each live result a guarded run returned (``stop_of``), by identity:
#: the SDK's results are unhashable dataclasses; an entry leaves with its result.
_RUNS: dict[int, GuardedRun] = {}


def _remember(result: RunResultBase, run: GuardedRun) -> None:
    key = id(result)
    _RUNS[key] = run
    weakref.finalize(result, _RUNS.pop, key, None)


def stop_of(result: RunResultBase) -> GuardStop | None:
    """The typed stop of a guarded run's result: None unless a protection stopped it.

    Only a run that ended with the stop text (``on_stop="end"``) has a result to
    ask; otherwise the stop is the raised :class:`ProtectionStopped`'s ``stop``.
    For ``run_streamed`` read it once the stream is over.
    """
    run = _RUNS.get(id(result))
    return run.stop if run is not None else None


def report_of(result: RunResultBase | BaseException) -> RunReport | None:
    """What the guard did in the run behind ``result``, in every mode (None: not guarded).

    ``result`` is a run's result, or the error that ended it: :class:`ProtectionStopped`,
    or the SDK's own (``MaxTurnsExceeded``) raised by ``run`` / ``run_sync``; a streamed
    run's report is its result's (``report_of(result)`` once the stream is over).
    """
    if isinstance(result, BaseException):
        if isinstance(result, ProtectionStopped):
            return result.report
        return attached_report(result)
    run = _RUNS.get(id(result))
    return run.report() if run is not None else None


class GuardedRunner:
    """``agents.Runner`` with the repeated tool-failure guard: one fresh guard per run.

    ``mode`` (a :class:`~tool_failure_guard.guard.GuardMode` or its name) is the embedding
    application's explicit choice and wins over the environment; without it the
    environment variable ``QWEN_CODE_ACP_REPEATED_TOOL_FAILURE_GUARD`` decides, read
    afresh for every run, default ``shadow``.  ``on_stop`` is how a stopped run
    ends: ``"error"`` (default) raises :class:`ProtectionStopped`; ``"end"`` ends
    it with the stop text where the agent's output type is text (else raises).
    ``telemetry`` is the agent's own sink (``tool_failure_guard.telemetry.sink.OpenTelemetrySink``:
    the OTel counter, the diagnostic log, the per-prompt outcome record), with
    ``route="openai_agents"``.  The agent passed to a run is never changed: the
    run uses a clone whose function tools are observed.  ``tool_call_cap`` and
    ``invalid_params_limit`` are off (None) by default: the SDK's ``max_turns`` is its
    own limit.  Every protection follows the mode: ``off`` changes nothing, ``shadow``
    changes nothing a run does, ``warn``/``enforce`` act.
    """

    def __init__(
        self,
        *,
        mode: GuardMode | str | None = None,
        telemetry: GuardTelemetry | None = None,
        on_stop: StopBehaviour = "error",
        tool_call_cap: int | None = DEFAULT_TOOL_CALL_CAP,
        invalid_params_limit: int | None = DEFAULT_INVALID_PARAMS_LIMIT,
    ) -> None:
        self._mode = mode
        self._telemetry = telemetry
        self._on_stop = stop_behaviour(on_stop)  # a bad one fails here, naming the valid ones
        self._tool_call_cap = limit_option("tool_call_cap", tool_call_cap)
        self._invalid_params_limit = limit_option("invalid_params_limit", invalid_params_limit)
        mode_for_run(mode)  # a bad explicit mode fails here, naming the valid ones

    @property
    def mode(self) -> GuardMode:
        """The mode the next run starts with (the environment is read per run)."""
        return mode_for_run(self._mode)

    #: :func:`stop_of` and :func:`report_of`, on the runner as well.
    stop_of = staticmethod(stop_of)
    report_of = staticmethod(report_of)

    # -- the three ways to run ---------------------------------------------------------

    @either
    async def run(
        self,
        starting_agent: Agent[Any],
        input: RunInput,
        **kwargs: Unpack[RunOptions[Any]],
    ) -> RunResult:
        """``Runner.run`` with a fresh guard (same arguments; on the class or an instance)."""
        run, agent, options, clone = self._prepare(starting_agent, input, kwargs)
        try:
            result = await Runner.run(agent, input, **options)
        except BaseException as error:
            _end(run, clone, _stop_reason(error))
            attach_report(error, run.report())  # report_of(MaxTurnsExceeded) answers
            raise
        return self._finished(run, clone, result)

    @either
    def run_sync(
        self,
        starting_agent: Agent[Any],
        input: RunInput,
        **kwargs: Unpack[RunOptions[Any]],
    ) -> RunResult:
        """``Runner.run_sync`` with a fresh guard (same arguments; on the class or an instance)."""
        run, agent, options, clone = self._prepare(starting_agent, input, kwargs)
        try:
            result = Runner.run_sync(agent, input, **options)
        except BaseException as error:
            _end(run, clone, _stop_reason(error))
            attach_report(error, run.report())  # report_of(MaxTurnsExceeded) answers
            raise
        return self._finished(run, clone, result)

    @either
    def run_streamed(
        self,
        starting_agent: Agent[Any],
        input: RunInput,
        **kwargs: Unpack[RunOptions[Any]],
    ) -> RunResultStreaming:
        """``Runner.run_streamed`` with a fresh guard (same arguments; class or instance)."""
        run, agent, options, clone = self._prepare(starting_agent, input, kwargs)
        try:
            result = Runner.run_streamed(agent, input, **options)
        except BaseException as error:
            _end(run, clone, _stop_reason(error))
            raise
        _remember(result, run)
        task = result.run_loop_task
        if task is None:  # pragma: no cover - the SDK always starts one
            _end(run, clone, "end_turn")
            return result

        def done(finished: asyncio.Task[Any]) -> None:
            if finished.cancelled():
                _end(run, clone, "cancelled")
            elif finished.exception() is not None:
                _end(run, clone, _stop_reason(finished.exception()))
            else:  # the SDK's own limit too: stream_events() raises it, the task does not
                _end(run, clone, _ended_reason(run), interrupted=_interrupted(result))

        task.add_done_callback(done)
        return result

    # -- internals ---------------------------------------------------------------------

    def _prepare(
        self, starting_agent: Agent[Any], input: RunInput, options: Mapping[str, Any]
    ) -> tuple[GuardedRun, Agent[Any], dict[str, Any], Agent[Any] | None]:
        """The run's guard, the agent to hand the SDK, its options, the adapter's clone."""
        if not isinstance(starting_agent, Agent):
            raise TypeError(
                f"GuardedRunner runs an agents.Agent; got {type(starting_agent).__name__}"
            )
        check_error_handlers(options.get("error_handlers"))  # before the run takes anything over

        def fresh() -> GuardedRun:
            mode = mode_for_run(self._mode)  # explicit, else the environment now
            return GuardedRun(
                mode,
                telemetry=self._telemetry,
                tool_call_cap=self._tool_call_cap,
                invalid_params_limit=self._invalid_params_limit,
                on_stop=self._on_stop,
            )

        agent: Agent[Any]
        if isinstance(input, RunState):
            # The SDK runs the state's own agent: guard that one (_resume.py).
            run, clone = resumed_run(input, starting_agent, fresh, self._telemetry, self._on_stop)
            agent = starting_agent
        else:
            run = fresh()
            clone = agent = guarded_agent(starting_agent, run)
        kwargs = dict(options)
        kwargs["hooks"] = GuardHooks(run, kwargs.get("hooks"))
        kwargs["run_config"] = guarded_config(kwargs.get("run_config"), run)
        kwargs["error_handlers"] = guarded_error_handlers(kwargs.get("error_handlers"), run)
        return run, agent, kwargs, clone

    @staticmethod
    def _finished(run: GuardedRun, clone: Agent[Any] | None, result: RunResult) -> RunResult:
        _remember(result, run)
        _end(run, clone, _ended_reason(run), interrupted=_interrupted(result))
        return result


def _end(
    run: GuardedRun, clone: Agent[Any] | None, stop_reason: str, *, interrupted: Sequence[str] = ()
) -> None:
    """The run is over: finish its guard; the clone carries the agent's own behaviour again."""
    if clone is not None:
        disarm(clone)
    run.finish(stop_reason, interrupted=interrupted)


def _interrupted(result: RunResultBase) -> list[str]:
    """The call ids a run stopped on to ask for approval."""
    ids: list[str] = []
    for item in getattr(result, "interruptions", None) or ():
        call_id = field(getattr(item, "raw_item", None), "call_id")
        if isinstance(call_id, str):
            ids.append(call_id)
    return ids


def _ended_reason(run: GuardedRun) -> str:
    """The stop reason of a run that ended without raising (a final output, or the stream over)."""
    return "max_turn_requests" if run.turn_limit else "end_turn"


def _stop_reason(error: BaseException | None) -> str:
    if isinstance(error, ProtectionStopped):
        return "end_turn"  # stopped by a protection: the prompt record's loop_type says which
    if isinstance(error, asyncio.CancelledError | KeyboardInterrupt):
        return "cancelled"
    if isinstance(error, MaxTurnsExceeded):
        return "max_turn_requests"
    return "error"
