"""What every framework adapter reports, through the agent's own sinks.

A sink observes; it never changes a run: each emit is wrapped so a failing sink
logs one warning on the adapter's logger and the run goes on.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from tool_failure_guard.core import BatchSettlement, GuardStep, PromptProtection
from tool_failure_guard.guard import DecisionKind
from tool_failure_guard.session.telemetry.sink import (
    CallRecord,
    GuardTelemetry,
    OutcomeTelemetry,
)


def report(log: logging.Logger, emit: Callable[[], None]) -> None:
    """Run one telemetry call; whatever it raises is logged, never propagated."""
    try:
        emit()
    except Exception as error:  # a sink must never change a run
        log.warning("telemetry error ignored (%s)", type(error).__name__)


def report_step(
    log: logging.Logger,
    telemetry: GuardTelemetry,
    *,
    prompt_id: str,
    protection: PromptProtection,
    step: GuardStep,
    route: str,
) -> None:
    """One guard transition (nothing for ``none``), labelled with the adapter's route."""
    if step.decision.kind is DecisionKind.NONE:
        return
    guard = protection.guard
    report(
        log,
        lambda: telemetry.guard_decision(
            prompt_id=prompt_id,
            mode=step.mode,
            decision=step.decision,
            guard=guard,
            failure_count_before=step.failure_count_before,
            batch_count_before=step.batch_count_before,
            receipt=step.receipt,
            batch_ordinal=step.batch_ordinal,
            route=route,
        ),
    )


def report_calls(
    log: logging.Logger,
    telemetry: GuardTelemetry,
    *,
    prompt_id: str,
    batch: BatchSettlement,
    batch_ordinal: int,
) -> None:
    """One settled-call record per call of ``batch`` whose outcome was seen."""
    if not isinstance(telemetry, OutcomeTelemetry):
        return
    sink = telemetry
    for index, (call, outcome) in enumerate(zip(batch.calls, batch.outcomes(), strict=True)):
        if outcome is None:
            continue
        record = CallRecord(
            prompt_id=prompt_id,
            batch_ordinal=batch_ordinal,
            call_ordinal=index,
            terminal_status=outcome.terminal_status,
            execution_status=outcome.execution_status,
            execution_error_type=outcome.execution_error_type,
            tool_type=outcome.tool_type,
            provider_duplicate=batch.is_provider_duplicate(call.call_id),
        )
        report(log, lambda record=record: sink.call_settled(record))  # type: ignore[misc]
