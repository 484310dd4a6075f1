"""The per-prompt outcome record and the per-call settled records, for rollout analysis.

The steps of a prompt tally what the prompt cost (:class:`PromptTally`);
:func:`run_reported` runs the prompt's loop and, from one place and whatever
ended it (a response, a cancel, an exception), reports one
:class:`~tool_failure_guard.telemetry.records.PromptOutcome`.  :func:`report_calls` reports
one :class:`~tool_failure_guard.telemetry.records.CallRecord` per settled call of a batch.

Like every telemetry call these go through ``GuardedSession.report``: they
observe, they never change a decision or the control flow.  Sinks that do not
implement :class:`~tool_failure_guard.telemetry.records.OutcomeTelemetry` simply get
nothing.

This module sees the session and the prompt only through the narrow
:class:`ReportingSession` and :class:`ReportedPrompt` protocols, so it imports
neither.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from acp.schema import PromptResponse

from tool_failure_guard.core.protections import Admission
from tool_failure_guard.core.settlement import BatchSettlement
from tool_failure_guard.guard import GuardMode
from tool_failure_guard.session.model.base import ModelTurn
from tool_failure_guard.session.pipeline.drain import MidTurnInput
from tool_failure_guard.telemetry.sink import (
    ROUTE,
    CallRecord,
    GuardTelemetry,
    OutcomeTelemetry,
    PromptOutcome,
)

#: ``_meta`` key of a prompt response naming its loop type (as in session.prompt).
_LOOP_TYPE_META_KEY = "loopType"


class PromptTally:
    """What one prompt cost so far: model turns and usage, batches, executed calls."""

    def __init__(self) -> None:
        self.model_turns = 0
        self.input_tokens: int | None = None
        self.output_tokens: int | None = None
        self.model_latency_s: float | None = None
        self.batches = 0
        self.tool_calls = 0

    def turn(self, turn: ModelTurn) -> None:
        """Count one model turn and add the usage it reported, if any."""
        self.model_turns += 1
        usage = turn.usage
        if usage is None:
            return
        if usage.input_tokens is not None:
            self.input_tokens = (self.input_tokens or 0) + usage.input_tokens
        if usage.output_tokens is not None:
            self.output_tokens = (self.output_tokens or 0) + usage.output_tokens
        self.model_latency_s = (self.model_latency_s or 0.0) + usage.latency_s

    def batch(self, admission: Admission) -> int:
        """Count one settled batch and its executed calls; return its 1-based ordinal."""
        self.batches += 1
        self.tool_calls += len(admission.runnable)  # calls past the cap never ran
        return self.batches


class ReportingSession(Protocol):
    """What the outcome records need of the session."""

    @property
    def telemetry(self) -> GuardTelemetry: ...

    @property
    def drain(self) -> MidTurnInput: ...

    @property
    def tool_call_cap(self) -> int: ...

    def clock(self) -> float: ...

    def report(self, label: str, call: Callable[[], object]) -> None: ...


class _Reliability(Protocol):
    @property
    def reliable_input(self) -> bool: ...


class ReportedPrompt(Protocol):
    """What the outcome record needs of the prompt it reports."""

    @property
    def prompt_id(self) -> str: ...

    @property
    def initial_mode(self) -> GuardMode: ...

    @property
    def tally(self) -> PromptTally: ...

    @property
    def reports(self) -> Sequence[_Reliability]: ...

    async def loop(self) -> PromptResponse: ...


def _sink(session: ReportingSession) -> OutcomeTelemetry | None:
    telemetry = session.telemetry
    return telemetry if isinstance(telemetry, OutcomeTelemetry) else None


def report_calls(
    session: ReportingSession, prompt_id: str, tally: PromptTally, batch: BatchSettlement
) -> None:
    """Count the batch and report one record per settled call (a call that raised has none)."""
    ordinal = tally.batch(batch.admission)
    sink = _sink(session)
    if sink is None:
        return
    records = [
        CallRecord(
            prompt_id=prompt_id,
            batch_ordinal=ordinal,
            call_ordinal=index,
            terminal_status=outcome.terminal_status,
            execution_status=outcome.execution_status,
            execution_error_type=outcome.execution_error_type,
            tool_type=outcome.tool_type,
            provider_duplicate=batch.is_provider_duplicate(call.call_id),
        )
        for index, (call, outcome) in enumerate(zip(batch.calls, batch.outcomes(), strict=True))
        if outcome is not None
    ]

    def emit() -> None:
        for record in records:
            sink.call_settled(record)

    session.report("call_settled", emit)


def drain_supported(session: ReportingSession, run: ReportedPrompt) -> bool:
    """Whether this prompt had a host drain it could trust at every boundary.

    False when pulling was unavailable for the session (no connection,
    "method not found", the third timeout) or any boundary the guard saw in
    this prompt was unreliable.
    """
    return not session.drain.pull_disabled and all(r.reliable_input for r in run.reports)


async def run_reported(
    session: ReportingSession, run: ReportedPrompt, *, channel: bool
) -> PromptResponse:
    """Run the prompt's loop; report its outcome record however it ends."""
    started = session.clock()
    stop_reason = "error"
    loop_type: str | None = None
    try:
        response = await run.loop()
        stop_reason = str(response.stop_reason)
        meta = response.field_meta or {}
        found = meta.get(_LOOP_TYPE_META_KEY)
        loop_type = str(found) if found is not None else None
        return response
    finally:
        sink = _sink(session)
        if sink is not None:
            tally = run.tally
            supported = drain_supported(session, run)
            outcome = PromptOutcome(
                prompt_id=run.prompt_id,
                route="channel" if channel else ROUTE,
                mode=run.initial_mode.value,
                stop_reason=stop_reason,
                loop_type=loop_type,
                model_turns=tally.model_turns,
                tool_calls=tally.tool_calls,
                tool_call_cap=session.tool_call_cap,
                batches=tally.batches,
                input_tokens=tally.input_tokens,
                output_tokens=tally.output_tokens,
                model_latency_s=tally.model_latency_s,
                wall_time_s=max(0.0, session.clock() - started),
                drain_supported=supported,
                input_boundary=session.drain.record_value(supported),
            )
            session.report("prompt_finished", lambda: sink.prompt_finished(outcome))
