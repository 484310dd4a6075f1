"""Telemetry of one pydantic-ai run, through the agent's own sinks, with its own route.

The records are the ACP session's (``docs/telemetry.md``): the guard counter and
log record per transition, the loop-detected event, the execution-SLI counter
and the per-call record per settled call, and one per-prompt outcome record per
run, all with ``route`` :data:`ROUTE`.  Reporting observes; it never decides:
every call is guarded, so a failing sink cannot change an action.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from tool_failure_guard.core import Action, CallOutcome, Stop
from tool_failure_guard.guard import DecisionKind, RepeatedToolFailureGuard
from tool_failure_guard.session.telemetry.sink import CallRecord as SettledCall
from tool_failure_guard.session.telemetry.sink import (
    GuardTelemetry,
    OutcomeTelemetry,
    PromptOutcome,
)

#: The route value of every record this adapter emits.
ROUTE = "pydantic_ai"

_log = logging.getLogger("tool_failure_guard.integrations.pydantic_ai")


def _guarded(what: str, emit: Callable[[], None]) -> None:
    try:
        emit()
    except Exception as error:  # a sink must never change the run
        _log.warning("telemetry %s failed (%s); ignored", what, type(error).__name__)


class RunReport:
    """The telemetry of one run, sent to ``sink``."""

    def __init__(self, sink: GuardTelemetry, prompt_id: str) -> None:
        self._sink = sink
        self._prompt_id = prompt_id

    def batch(
        self,
        ordinal: int,
        action: Action,
        outcomes: Sequence[CallOutcome | None],
        duplicates: frozenset[str],
        guard: RepeatedToolFailureGuard,
    ) -> None:
        """One settled batch: its settled calls, the guard step, the first stop's loop type."""
        sink = self._sink
        settled = [outcome for outcome in outcomes if outcome is not None]
        for settled_outcome in settled:
            _guarded("tool_call_settled", _settled_counter(sink, settled_outcome))
        if isinstance(sink, OutcomeTelemetry):
            for index, outcome in enumerate(outcomes):
                if outcome is None:
                    continue
                record = SettledCall(
                    prompt_id=self._prompt_id,
                    batch_ordinal=ordinal,
                    call_ordinal=index,
                    terminal_status=outcome.terminal_status,
                    execution_status=outcome.execution_status,
                    execution_error_type=outcome.execution_error_type,
                    tool_type=outcome.tool_type,
                    provider_duplicate=outcome.call_id in duplicates,
                )
                _guarded("call_settled", _record_emitter(sink, record))
        step = getattr(action, "guard_step", None)
        if step is not None and step.decision.kind is not DecisionKind.NONE:
            _guarded(
                "guard_decision",
                lambda: sink.guard_decision(
                    prompt_id=self._prompt_id,
                    mode=step.mode,
                    decision=step.decision,
                    guard=guard,
                    failure_count_before=step.failure_count_before,
                    batch_count_before=step.batch_count_before,
                    receipt=step.receipt,
                    batch_ordinal=ordinal,
                    route=ROUTE,
                ),
            )
        if isinstance(action, Stop) and action.first:
            _guarded(
                "loop_detected",
                lambda: sink.loop_detected(prompt_id=self._prompt_id, loop_type=action.loop_type),
            )

    def finished(self, outcome: PromptOutcome) -> None:
        """The run's outcome record, however it ended."""
        sink = self._sink
        if isinstance(sink, OutcomeTelemetry):
            _guarded("prompt_finished", lambda: sink.prompt_finished(outcome))


def _settled_counter(sink: GuardTelemetry, outcome: CallOutcome) -> Callable[[], None]:
    def emit() -> None:
        sink.tool_call_settled(
            terminal_status=outcome.terminal_status,
            execution_status=outcome.execution_status,
            tool_type=outcome.tool_type,
        )

    return emit


def _record_emitter(sink: OutcomeTelemetry, record: SettledCall) -> Callable[[], None]:
    return lambda: sink.call_settled(record)
