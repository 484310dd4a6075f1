"""One guarded run: the core's :class:`PromptProtection` and what the LangChain host adds.

A :class:`GuardedRun` lives exactly as long as one agent run (from the
middleware's ``before_agent`` to its ``after_agent``: one ``invoke``,
``ainvoke`` or ``stream``), so a second run never starts already stopped.  It
is the host side only: it admits one ``AIMessage``'s tool calls as a batch,
keeps each call's last observed outcome (tool calls run in parallel threads
or tasks, so under a lock), settles them into the batch when the next model
request is about to be made, and keeps the core's action.  Every rule is the
core's.  Telemetry is reported after an action is taken and never changes it.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any

import attrs

from tool_failure_guard.core import (
    DEFAULT_TOOL_CALL_CAP,
    Action,
    BatchSettlement,
    CallOutcome,
    Continue,
    FunctionCall,
    PromptProtection,
    Stop,
)
from tool_failure_guard.guard import GuardMode
from tool_failure_guard.integrations import _telemetry
from tool_failure_guard.integrations.langchain._outcomes import replayed
from tool_failure_guard.telemetry.sink import (
    GuardTelemetry,
    NullTelemetry,
)

#: The ``route`` of this adapter's telemetry (``telemetry.names.FRAMEWORK_ROUTES``).
ROUTE = "langchain"
#: The logger of the adapter (the fail-open warning, swallowed telemetry errors).
LOGGER = logging.getLogger("tool_failure_guard.integrations.langchain")


@attrs.frozen(kw_only=True)
class GuardStop:
    """The typed signal of a run the guard stopped: test it, never the text.

    ``loop_type`` is the protection that stopped the run
    (``repeated_tool_execution_failure`` for this guard); ``notice`` is the
    fixed text the run ended with (its last message, an ``AIMessage``).
    """

    loop_type: str
    notice: str
    mode: GuardMode

    def to_state(self) -> dict[str, str]:
        return {"loop_type": self.loop_type, "notice": self.notice, "mode": self.mode.value}

    @classmethod
    def from_state(cls, value: Any) -> GuardStop | None:
        if not isinstance(value, dict):
            return None
        return cls(
            loop_type=str(value["loop_type"]),
            notice=str(value["notice"]),
            mode=GuardMode(value["mode"]),
        )


@attrs.frozen(kw_only=True)
class RunReport:
    """What the guard did in one run: for logs, dashboards and tests (no tool names)."""

    mode: GuardMode
    decisions: tuple[str, ...]  #: the guard decision kind of every batch it reduced, in order
    batches: int  #: settled batches (ones a protection stopped before the guard included)
    tool_calls: int
    observed: int  #: call outcomes the adapter saw
    stop: GuardStop | None


class GuardedRun:
    """The protection of one agent run and the host state around it."""

    def __init__(
        self,
        mode: GuardMode,
        *,
        telemetry: GuardTelemetry | None = None,
        tool_call_cap: int = DEFAULT_TOOL_CALL_CAP,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.mode = mode
        self.run_id = uuid.uuid4().hex
        self.protection = PromptProtection(mode, tool_call_cap=tool_call_cap)
        self.telemetry: GuardTelemetry = telemetry if telemetry is not None else NullTelemetry()
        self.tool_call_cap = tool_call_cap
        self._clock = clock
        self._started = clock()
        self._lock = threading.Lock()
        self._batch: BatchSettlement | None = None
        self._calls: dict[str, FunctionCall] = {}
        self._outcomes: dict[str, CallOutcome] = {}
        self.stop: GuardStop | None = None
        self.decisions: list[str] = []
        self.model_turns = 0
        self.tool_calls = 0
        self.observed = 0
        self.input_tokens: int | None = None
        self.output_tokens: int | None = None
        self.finished = False
        #: The last ``AIMessage`` admitted (or the guard's own stop message, or the history's
        #: last before this run), and the lock the middleware admits the next one under.
        self.last_message: Any = None
        self.catch_up_lock = threading.Lock()

    # -- the framework's events ---------------------------------------------------------

    def model_response(self, calls: Sequence[FunctionCall], usage: Any = None) -> None:
        """One ``AIMessage``'s tool calls, admitted by the middleware: the next batch."""
        self.model_turns += 1
        self._count_usage(usage)
        if self._batch is not None:  # its tools never reported back: reduce what was seen
            self.close()
        if not calls or self.protection.stopped is not None:
            return
        admission = self.protection.admit(calls)
        with self._lock:
            self._batch = self.protection.open_batch(admission)
            self._calls = {call.call_id: call for call in admission.calls}
            self._outcomes = {}
        self.tool_calls += len(admission.executable)

    def call(self, call_id: str) -> FunctionCall | None:
        """The open batch's call ``call_id`` (None: not one of its calls)."""
        with self._lock:
            return self._calls.get(call_id)

    def is_replay(self, call_id: str) -> bool:
        with self._lock:
            batch = self._batch
            return batch is not None and batch.is_provider_duplicate(call_id)

    def record(self, call_id: str, outcome: CallOutcome | None) -> None:
        """The latest outcome of ``call_id`` (a retried call's last attempt wins)."""
        if outcome is None:
            return
        with self._lock:
            if call_id in self._calls:
                self._outcomes[call_id] = outcome

    def record_if_missing(
        self, call_id: str, outcome_of: Callable[[FunctionCall], CallOutcome]
    ) -> None:
        """Settle ``call_id`` with ``outcome_of(call)`` unless an outcome was already seen."""
        with self._lock:
            call = self._calls.get(call_id)
            if call is not None and call_id not in self._outcomes:
                self._outcomes[call_id] = outcome_of(call)

    def record_replay(self, call_id: str) -> CallOutcome | None:
        call = self.call(call_id)
        if call is None:
            return None
        outcome = replayed(call)
        self.record(call_id, outcome)
        return outcome

    def close(self) -> Action | None:
        """The open batch is over (the next model call): settle what was seen, the core's action."""
        with self._lock:
            batch, outcomes = self._batch, self._outcomes
            self._batch, self._calls, self._outcomes = None, {}, {}
        if batch is None:
            return None
        for call in batch.calls:  # in the model's order; a call never seen stays missing
            outcome = outcomes.get(call.call_id)
            if outcome is not None and batch.settle(outcome) is not None:
                self.observed += 1
                _telemetry.report_settled(LOGGER, self.telemetry, outcome)
        action = self.protection.after_batch(batch)
        step = action.guard_step if isinstance(action, Continue | Stop) else None
        if step is not None:
            self.decisions.append(step.decision.kind.value)
        if isinstance(action, Stop):
            self.stop = GuardStop(loop_type=action.loop_type, notice=action.notice, mode=self.mode)
        _telemetry.report_batch(
            LOGGER,
            self.telemetry,
            prompt_id=self.run_id,
            protection=self.protection,
            batch=batch,
            action=action,
            route=ROUTE,
        )
        return action

    def report(self) -> RunReport:
        return RunReport(
            mode=self.mode,
            decisions=tuple(self.decisions),
            batches=self.protection.batches,
            tool_calls=self.tool_calls,
            observed=self.observed,
            stop=self.stop,
        )

    # -- the end of the run ---------------------------------------------------------

    def finish(self, stop_reason: str = "end_turn") -> None:
        """The run ended (``after_agent``); a batch still open is reduced for the record."""
        if self.finished:
            return
        if self._batch is not None and self.protection.stopped is None:
            self.close()  # e.g. a return_direct tool ended the run: no request can follow
        self.finished = True
        if self.tool_calls and not self.observed:
            LOGGER.warning(
                "tool_failure_guard.integrations.langchain: the run executed %d tool call(s) "
                "but RepeatedToolFailureMiddleware observed none of their outcomes; the guard "
                "is not protecting this agent (does another middleware answer the calls "
                "without invoking the tools?)",
                self.tool_calls,
            )
        _telemetry.report_prompt_only_outcome(
            LOGGER,
            self.telemetry,
            prompt_id=self.run_id,
            route=ROUTE,
            mode=self.mode,
            stop_reason=stop_reason,
            loop_type=self.stop.loop_type if self.stop is not None else None,
            model_turns=self.model_turns,
            tool_calls=self.tool_calls,
            tool_call_cap=self.tool_call_cap,
            batches=self.protection.batches,
            input_tokens=self.input_tokens,
            output_tokens=self.output_tokens,
            wall_time_s=max(0.0, self._clock() - self._started),
        )

    def _count_usage(self, usage: Any) -> None:
        if not isinstance(usage, dict):
            return
        for field in ("input_tokens", "output_tokens"):
            value = usage.get(field)
            if isinstance(value, int):
                setattr(self, field, (getattr(self, field) or 0) + value)
