"""What every host without a mid-run input path reports: the framework adapters and the
coding-CLI hooks, through their own sinks (one module below both, so neither imports the other).

A sink observes; it never changes a run: each emit is wrapped so a failing sink
logs one warning on the adapter's logger and the run goes on.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from tool_failure_guard.core import (
    Action,
    BatchSettlement,
    CallOutcome,
    Continue,
    GuardStep,
    PromptProtection,
    Stop,
)
from tool_failure_guard.guard import DecisionKind, ExecutionStatus, GuardMode
from tool_failure_guard.telemetry.sink import (
    CallRecord,
    GuardTelemetry,
    NullTelemetry,
    OutcomeTelemetry,
    PromptOutcome,
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
    replays_held_back: bool = True,
) -> None:
    """One settled-call record per call of ``batch`` whose outcome was seen.

    ``provider_duplicate`` says the call was a replay answered without running it.
    A host that lets a replay run (a framework adapter in ``off``/``shadow``:
    ``replays_held_back`` False) records the one that ran as what it was, an
    executed call; the decision the mode held back is the run's shadow record
    (``would_stop_loop_type``, the would-stop log line), not this flag.  Where
    replays are held back, an executed one keeps the flag: rollout's
    ``protections_changed`` counts exactly those.
    """
    # The null sink (no telemetry configured) records nothing: build no record for it, and
    # skip the runtime Protocol check, which costs more than the rest of this batch's report.
    if type(telemetry) is NullTelemetry or not isinstance(telemetry, OutcomeTelemetry):
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
            provider_duplicate=batch.is_provider_duplicate(call.call_id)
            and (replays_held_back or outcome.execution_status == ExecutionStatus.NOT_STARTED),
        )
        report(log, lambda record=record: sink.call_settled(record))  # type: ignore[misc]


def report_settled(log: logging.Logger, telemetry: GuardTelemetry, outcome: CallOutcome) -> None:
    """The execution-SLI counter of one settled call."""
    report(
        log,
        lambda: telemetry.tool_call_settled(
            terminal_status=outcome.terminal_status,
            execution_status=outcome.execution_status,
            tool_type=outcome.tool_type,
        ),
    )


def report_batch(
    log: logging.Logger,
    telemetry: GuardTelemetry,
    *,
    prompt_id: str,
    protection: PromptProtection,
    batch: BatchSettlement,
    action: Action,
    route: str,
    replays_held_back: bool = True,
) -> None:
    """What one closed batch reports once the core answered it with ``action``.

    The per-call records, the guard transition, and on the first stop of a loop
    type the loop-detected event.  Called after the action is known: reporting
    never takes part in deciding it.
    """
    report_calls(
        log,
        telemetry,
        prompt_id=prompt_id,
        batch=batch,
        batch_ordinal=protection.batches,
        replays_held_back=replays_held_back,
    )
    step = action.guard_step if isinstance(action, Continue | Stop) else None
    if step is not None:
        report_step(
            log, telemetry, prompt_id=prompt_id, protection=protection, step=step, route=route
        )
    if isinstance(action, Stop) and action.first:
        report(
            log, lambda: telemetry.loop_detected(prompt_id=prompt_id, loop_type=action.loop_type)
        )


def report_prompt_only_outcome(
    log: logging.Logger,
    telemetry: GuardTelemetry,
    *,
    prompt_id: str,
    route: str,
    mode: GuardMode,
    stop_reason: str,
    loop_type: str | None,
    model_turns: int,
    tool_calls: int,
    tool_call_cap: int,
    batches: int,
    input_tokens: int | None,
    output_tokens: int | None,
    wall_time_s: float,
) -> None:
    """The per-run outcome record of a framework with no mid-run input path.

    No user input reaches such a run while it goes on: like a plain ACP host
    declared prompt-only, every boundary is reliably quiet, and rollout keeps
    these runs in the prompt-only cohort, apart from drain hosts.
    """
    if not isinstance(telemetry, OutcomeTelemetry):
        return
    sink = telemetry
    outcome = PromptOutcome(
        prompt_id=prompt_id,
        route=route,
        mode=mode.value,
        stop_reason=stop_reason,
        loop_type=loop_type,
        model_turns=model_turns,
        tool_calls=tool_calls,
        tool_call_cap=tool_call_cap,
        batches=batches,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        model_latency_s=None,
        wall_time_s=wall_time_s,
        drain_supported=False,
        input_boundary="prompt-only",
    )
    report(log, lambda: sink.prompt_finished(outcome))
