"""One guarded run: the core's :class:`PromptProtection` and what the SDK host adds to it.

A :class:`GuardedRun` lives exactly as long as one ``Runner.run`` (or
``run_sync``/``run_streamed``): the adapter creates it when the run starts and
finishes it when the run ends, so a second run never starts already stopped.
A run resumed live from an interrupted run's ``RunState`` is the same prompt:
:meth:`GuardedRun.continuing` carries its guard over.
It is the host side only: it turns SDK events into core calls (admit a model
response's calls, settle each outcome, close the batch) and keeps what the
core's actions ask for (the reminders, at their place; the stop).  Every rule
is the core's.  Telemetry is reported after an action is taken and never
changes it.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any

import attrs

from tool_failure_guard.core import (
    LOOP_REPEATED_TOOL_FAILURE,
    Action,
    BatchSettlement,
    CallOutcome,
    Continue,
    FunctionCall,
    Stop,
)
from tool_failure_guard.framework_protection import protection_for_run
from tool_failure_guard.guard import DecisionKind, GuardMode
from tool_failure_guard.integrations._api import (
    ActionLog,
    GuardStop,
    RunReport,
    StopBehaviour,
    holds_back_replays,
)
from tool_failure_guard.integrations.openai_agents._outcomes import (
    interrupted as interrupted_call,
)
from tool_failure_guard.integrations.openai_agents._outcomes import replayed, running_when_cut
from tool_failure_guard.telemetry import runs as _telemetry
from tool_failure_guard.telemetry.sink import (
    GuardTelemetry,
    NullTelemetry,
)

#: The ``route`` of this adapter's telemetry (``telemetry.names.FRAMEWORK_ROUTES``).
ROUTE = "openai_agents"
#: The logger of the adapter (the fail-open warning, swallowed telemetry errors).
LOGGER = logging.getLogger("tool_failure_guard.integrations.openai_agents")

_log = LOGGER
#: The decisions the action log records (the first reminder and the first stop of a run).
_LOGGED = frozenset(
    (DecisionKind.WOULD_WARN, DecisionKind.WARN, DecisionKind.WOULD_STOP, DecisionKind.STOP)
)


@attrs.frozen
class _Reminder:
    """A reminder and its place: right after the function responses of ``anchors``."""

    anchors: frozenset[str]
    text: str


def reminder_item(text: str) -> dict[str, Any]:
    """The reminder as the SDK's input item: a system message."""
    return {"role": "system", "content": text}


class GuardedRun:
    """The protection of one SDK run and the host state around it."""

    def __init__(
        self,
        mode: GuardMode,
        *,
        telemetry: GuardTelemetry | None = None,
        tool_call_cap: int | None = None,
        invalid_params_limit: int | None = None,
        on_stop: StopBehaviour = "error",
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.mode = mode
        self.on_stop: StopBehaviour = on_stop
        self.prompt_id = uuid.uuid4().hex
        self.protection = protection_for_run(
            mode, tool_call_cap=tool_call_cap, invalid_params_limit=invalid_params_limit
        )
        #: off and shadow let a replayed call run when the SDK invokes it (the run is the same)
        self.holds_back_replays = holds_back_replays(mode)
        self.telemetry: GuardTelemetry = telemetry if telemetry is not None else NullTelemetry()
        self.tool_call_cap = tool_call_cap
        self.invalid_params_limit = invalid_params_limit
        self._clock = clock
        self._started = clock()
        self._batch: BatchSettlement | None = None
        self._calls: dict[str, FunctionCall] = {}
        self._running: dict[str, None] = {}  # started, not settled (in start order)
        self._reminders: list[_Reminder] = []
        self.stop: GuardStop | None = None
        #: The SDK's own ``max_turns`` limit ended the run (raised, or its handler's output).
        self.turn_limit = False
        self.decisions: list[str] = []
        self.model_turns = 0
        self.tool_calls = 0
        self.observed = 0
        self.input_tokens: int | None = None
        self.output_tokens: int | None = None
        self.actions = ActionLog(ROUTE)
        self._blind_warned = False  # the fail-open warning was logged
        self._finished = False

    @classmethod
    def continuing(
        cls,
        previous: GuardedRun,
        *,
        telemetry: GuardTelemetry | None = None,
        on_stop: StopBehaviour | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> GuardedRun:
        """The next run of ``previous``'s prompt (a live resume from its ``RunState``).

        The prompt's guard continues: the same protection (the streak, the stop,
        the tool-call count against the cap), mode and prompt id, and every
        reminder it gave so far, which the new run's model requests keep at their
        place, and its action log (one record per prompt).  The counters of
        :meth:`report` are this run's own; ``on_stop`` is the resuming runner's.
        """
        run = cls(
            previous.mode,
            telemetry=telemetry,
            tool_call_cap=previous.tool_call_cap,
            invalid_params_limit=previous.invalid_params_limit,
            on_stop=previous.on_stop if on_stop is None else on_stop,
            clock=clock,
        )
        run.prompt_id = previous.prompt_id
        run.protection = previous.protection
        run._reminders = list(previous._reminders)
        run.stop = previous.stop
        run.actions = previous.actions
        return run

    @property
    def finished(self) -> bool:
        """Whether the run this guards has ended."""
        return self._finished

    # -- the SDK's events -----------------------------------------------------------

    def model_response(self, calls: Sequence[FunctionCall], usage: Any = None) -> None:
        """One model response arrived: its function calls are the next batch."""
        self.model_turns += 1
        self._count_usage(usage)
        self.open(calls)

    def open(self, calls: Sequence[FunctionCall]) -> None:
        """``calls`` are the next batch (a model response's, or a resumed run's pending ones)."""
        if self._batch is not None:  # its tools never reported back: reduce what was seen
            self.close()
        if not calls or self.protection.stopped is not None:
            return
        admission = self.protection.admit(calls)
        self._batch = self.protection.open_batch(admission)
        self._calls = {call.call_id: call for call in admission.calls}
        self._running = {}
        self.tool_calls += len(admission.executable)
        # A replayed answered call id: the SDK skips most itself.  In warn/enforce it is
        # never executed, so its record is settled now (the invoker refuses it if the SDK
        # does not).  In off/shadow the invoker lets it run as the bare SDK would: its
        # record is what really happened, the outcome it runs to, or, if the SDK skipped
        # it, the replay record when the batch closes (:meth:`_unrun_replays`).
        if self.holds_back_replays:
            for call_id in admission.provider_duplicates:
                self.settle(call_id, replayed)

    def is_replay(self, call_id: str) -> bool:
        """``call_id`` is a replay the invoker answers without running it (warn, enforce)."""
        batch = self._batch
        return (
            self.holds_back_replays and batch is not None and batch.is_provider_duplicate(call_id)
        )

    def started(self, call_id: str) -> None:
        """The open batch's call ``call_id`` started running (its tool was invoked)."""
        if call_id in self._calls:
            self._running[call_id] = None
            batch = self._batch
            if batch is not None and batch.is_provider_duplicate(call_id):
                self.tool_calls += 1  # a replay run again (off/shadow): an executed call

    def _unrun_replays(self, batch: BatchSettlement) -> None:
        """Settle the replays the SDK skipped (off/shadow): never executed, so replay records."""
        for call in batch.missing():
            if batch.is_provider_duplicate(call.call_id):
                self.settle(call.call_id, replayed)

    def settle(self, call_id: str, outcome_of: Callable[[FunctionCall], CallOutcome]) -> None:
        """Settle the open batch's call ``call_id`` (ignored when no batch holds it)."""
        batch, call = self._batch, self._calls.get(call_id)
        if batch is None or call is None:
            return
        self._running.pop(call_id, None)
        outcome = outcome_of(call)
        if batch.settle(outcome) is None:
            return  # a late duplicate: never counted
        self.observed += 1
        _telemetry.report_settled(_log, self.telemetry, outcome)

    def pending(self) -> tuple[FunctionCall, ...]:
        """The open batch's calls whose outcome has not been seen."""
        return self._batch.missing() if self._batch is not None else ()

    def close(self, *, cancelled: bool = False) -> Action | None:
        """The open batch is over (its calls all settled, or never seen): the core's action."""
        batch = self._batch
        if batch is None:
            return None
        self._unrun_replays(batch)
        self._batch, self._calls, self._running = None, {}, {}
        action = self.protection.after_batch(batch, cancelled=cancelled)
        step = action.guard_step if isinstance(action, Continue | Stop) else None
        if step is not None:
            kind = step.decision.kind
            self.decisions.append(kind.value)
            if kind in _LOGGED:
                self.actions.decided(
                    kind, self.mode, batch=step.batch_ordinal, loop_type=LOOP_REPEATED_TOOL_FAILURE
                )
        if isinstance(action, Continue) and action.system_texts:
            anchors = frozenset(call.call_id for call in batch.calls)
            self._reminders.extend(_Reminder(anchors, text) for text in action.system_texts)
        if isinstance(action, Stop):
            self._stopped(action)
        held_back = self.protection.would_stop
        if held_back is not None:  # a stop the mode held back (logged once per prompt)
            self.actions.decided(
                DecisionKind.WOULD_STOP,
                self.mode,
                batch=self.protection.batches,
                loop_type=held_back,
            )
        if not self.observed and not self._blind_warned and self.tool_calls:
            self._warn_blind("so far")  # said during the run: the guard protects nothing
        _telemetry.report_batch(
            _log,
            self.telemetry,
            prompt_id=self.prompt_id,
            protection=self.protection,
            batch=batch,
            action=action,
            route=ROUTE,
            replays_held_back=self.holds_back_replays,
        )
        return action

    def _stopped(self, action: Stop) -> None:
        self.stop = GuardStop.of(action, self.protection)
        self.actions.decided(
            DecisionKind.STOP, self.mode, batch=self.protection.batches, loop_type=action.loop_type
        )

    def _warn_blind(self, when: str) -> None:
        self._blind_warned = True
        _log.warning(
            "tool_failure_guard.integrations.openai_agents: the run executed %d tool "
            "call(s) %s but the guard observed none of their outcomes; the guard is not "
            "protecting this agent (are its tools FunctionTools of the guarded agent?)",
            self.tool_calls,
            when,
        )

    def model_input(self, items: list[Any]) -> list[Any]:
        """``items`` with every reminder of this run re-inserted at its original place.

        The SDK does not keep an input filter's edits, so each model request is
        rebuilt: each reminder goes right after the last function response of
        its batch; one whose batch is no longer in the input (a filter trimmed
        it) goes at the end, so no reminder is ever dropped.
        """
        out = list(items)
        for reminder in self._reminders:
            place = len(out)
            for index, item in enumerate(out):
                if _output_call_id(item) in reminder.anchors:
                    place = index + 1
            out.insert(place, reminder_item(reminder.text))
        return out

    def report(self) -> RunReport:
        return RunReport(
            mode=self.mode,
            decisions=tuple(self.decisions),
            batches=self.protection.batches,
            tool_calls=self.tool_calls,
            observed=self.observed,
            stop=self.stop,
            would_stop_loop_type=self.protection.would_stop,
        )

    # -- the end of the run ----------------------------------------------------------

    def finish(self, stop_reason: str, *, interrupted: Sequence[str] = ()) -> None:
        """The run ended (``end_turn``, ``cancelled``, ``error``, ``max_turn_requests``)."""
        if self._finished:
            return
        self._finished = True
        batch = self._batch
        if batch is not None:
            # The run is over: no decision can act any more; report what settled.
            for call_id in interrupted:
                self.settle(call_id, interrupted_call)
            if stop_reason == "cancelled":
                # the SDK does not wait for a cancelled run's tool tasks: a call that started
                # and has not settled was cancelled while running (its own settle comes late)
                for call_id in list(self._running):
                    self.settle(call_id, running_when_cut)
            self._unrun_replays(batch)
            self._batch, self._calls, self._running = None, {}, {}
            _telemetry.report_calls(
                _log,
                self.telemetry,
                prompt_id=self.prompt_id,
                batch=batch,
                batch_ordinal=self.protection.batches,
                replays_held_back=self.holds_back_replays,
            )
        if self.tool_calls and not self.observed and not self._blind_warned:
            self._warn_blind("in all")
        _telemetry.report_prompt_only_outcome(
            _log,
            self.telemetry,
            prompt_id=self.prompt_id,
            route=ROUTE,
            mode=self.mode,
            stop_reason=stop_reason,
            loop_type=self.stop.loop_type if self.stop is not None else None,
            model_turns=self.model_turns,
            tool_calls=self.tool_calls,
            tool_call_cap=self.tool_call_cap or 0,  # 0: no cap
            batches=self.protection.batches,
            input_tokens=self.input_tokens,
            output_tokens=self.output_tokens,
            wall_time_s=max(0.0, self._clock() - self._started),
        )

    def _count_usage(self, usage: Any) -> None:
        if usage is None:
            return
        for field, attr in (("input_tokens", "input_tokens"), ("output_tokens", "output_tokens")):
            value = getattr(usage, attr, None)
            if isinstance(value, int):
                setattr(self, field, (getattr(self, field) or 0) + value)


def function_call(call_id: str, name: str, arguments: str) -> FunctionCall:
    """A :class:`FunctionCall` from a model response's function-call item."""
    try:
        args = json.loads(arguments) if arguments else {}
    except ValueError as error:
        return FunctionCall(call_id=call_id, name=name, arguments_error=str(error)[:200])
    if not isinstance(args, dict):
        return FunctionCall(call_id=call_id, name=name, arguments_error="not a JSON object")
    return FunctionCall(call_id=call_id, name=name, args=args)


def _output_call_id(item: Any) -> str | None:
    """The call id of a function-call output input item, else None."""
    if isinstance(item, dict):
        if item.get("type") == "function_call_output":
            value = item.get("call_id")
            return value if isinstance(value, str) else None
        return None
    if getattr(item, "type", None) == "function_call_output":
        value = getattr(item, "call_id", None)
        return value if isinstance(value, str) else None
    return None
