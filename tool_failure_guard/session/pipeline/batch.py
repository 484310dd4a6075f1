"""One tool batch: run every admitted call concurrently until all have settled.

This is the step between a model turn and the input boundary.  A call the
core marked ``over_cap`` (past what the per-prompt tool-call cap leaves) is
never started: it settles ``error`` / ``not_started`` / ``tool_call_cap``.  The client
sees each call start as ``pending`` (which covers awaiting permission), move to
``in_progress`` once it is allowed and about to run, and settle as
``completed`` or ``failed`` (a call that never starts goes from ``pending``
straight to ``failed``); the receipt builder gets exactly one record per
admitted call (provider duplicates included, never executed), so the
receipt's completeness can be proven when the batch is over (the core's
:class:`~tool_failure_guard.core.settlement.BatchSettlement`).  Results are
returned in the model's call order, whatever order the calls settled in.

The step needs only a :class:`BatchHost` (the session satisfies it): it never
imports the session or the prompt.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any, Protocol

from acp import start_tool_call, text_block, tool_content, update_tool_call

from tool_failure_guard.core import outcomes
from tool_failure_guard.core.settlement import BatchSettlement
from tool_failure_guard.session.persistence.messages import Part
from tool_failure_guard.session.tools.executor import CallOutcome, Executor, FunctionCall
from tool_failure_guard.telemetry.sink import GuardTelemetry

_log = logging.getLogger("session.batch")


class BatchHost(Protocol):
    """What running a batch needs of its session."""

    @property
    def executor(self) -> Executor: ...

    @property
    def cancel_event(self) -> asyncio.Event: ...

    @property
    def telemetry(self) -> GuardTelemetry: ...

    async def emit(self, update: Any) -> None: ...

    def record_settled(self, part: Part) -> None: ...

    def report(self, label: str, call: Callable[[], object]) -> None: ...


def response_part(outcome: CallOutcome, duplicate: bool = False) -> Part:
    """The persisted function response of one settled call."""
    return Part(
        kind="function_response",
        call_id=outcome.call_id,
        name=outcome.name,
        status=outcome.terminal_status,
        error_type=outcome.error_type,
        text=outcome.output,
        duplicate=duplicate,
    )


def tool_status(outcome: CallOutcome) -> str:
    """ACP has no ``cancelled`` tool-call status: everything but success is ``failed``."""
    return "completed" if outcome.terminal_status == "success" else "failed"


def provider_duplicate_outcome(executor: Executor, call: FunctionCall) -> CallOutcome:
    """A replayed call id that history already answered: recorded, never executed."""
    tool = executor.resolve(call.name)
    if tool is None:
        return outcomes.provider_duplicate(call)
    return outcomes.provider_duplicate(call, tool=tool.name, tool_type=tool.tool_type)


def skipped_outcome(executor: Executor, call: FunctionCall) -> CallOutcome:
    """A call past what the tool-call cap leaves (the core's ``over_cap``): never started."""
    tool = executor.resolve(call.name)
    if tool is None:
        return outcomes.skipped_by_cap(call, tool_type=None)
    return outcomes.skipped_by_cap(call, tool=tool.name, tool_type=tool.tool_type)


async def tell(host: BatchHost, update: Any) -> None:
    """Send one update; a closed connection is logged, never allowed to lose an outcome."""
    try:
        await host.emit(update)
    except (ConnectionError, OSError) as exc:
        _log.warning("could not send a tool call update: %s", exc)


async def run_batch(host: BatchHost, batch: BatchSettlement) -> None:
    """Run every call of ``batch`` concurrently, settling each into it.

    A call that raised instead of settling has no outcome in ``batch``: the
    receipt then cannot be proven complete.
    """
    s = host
    admission = batch.admission
    for call in admission.executable:
        tool = s.executor.resolve(call.name)
        await tell(
            s,
            start_tool_call(
                call.call_id,
                tool.title(call.args) if tool is not None else call.name,
                kind=tool.kind if tool is not None else "other",
                status="pending",
                raw_input=dict(call.args),
            ),
        )

    async def run_one(call: FunctionCall) -> CallOutcome:
        if call.call_id in admission.provider_duplicates:
            outcome = provider_duplicate_outcome(s.executor, call)
            batch.settle(outcome)
            s.record_settled(response_part(outcome, duplicate=True))
            return outcome

        async def started() -> None:
            await tell(s, update_tool_call(call.call_id, status="in_progress"))

        if call.call_id in admission.over_cap:  # the cap leaves no room: never started
            outcome = skipped_outcome(s.executor, call)
        else:
            # in_progress only once the call is allowed: it stays pending while asked.
            outcome = await s.executor.execute(call, s.cancel_event, on_start=started)
        batch.settle(outcome)
        s.record_settled(response_part(outcome))  # durable before anyone is told
        s.report(
            "tool_call_settled",
            lambda: s.telemetry.tool_call_settled(
                terminal_status=outcome.terminal_status,
                execution_status=outcome.execution_status,
                tool_type=outcome.tool_type,
            ),
        )
        await tell(
            s,
            update_tool_call(
                call.call_id,
                status=tool_status(outcome),  # type: ignore[arg-type]
                content=[tool_content(text_block(outcome.output))],
                raw_output={
                    "terminalStatus": outcome.terminal_status,
                    "errorType": outcome.error_type,
                },
            ),
        )
        return outcome

    results = await asyncio.gather(
        *(run_one(call) for call in admission.calls), return_exceptions=True
    )
    for call, result in zip(admission.calls, results, strict=True):
        if isinstance(result, BaseException):
            # No record for this call: the receipt cannot be proven complete.
            _log.error("call %s did not settle cleanly: %r", call.call_id, result)


def responses(batch: BatchSettlement) -> list[Part]:
    """One function response per admitted call, in the model's order."""
    parts = []
    for call, outcome in zip(batch.calls, batch.outcomes(), strict=True):
        if outcome is None:
            parts.append(
                Part(
                    kind="function_response",
                    call_id=call.call_id,
                    name=call.name,
                    status="error",
                    error_type="internal_error",
                    text="the call did not settle",
                )
            )
        else:
            parts.append(response_part(outcome, batch.is_provider_duplicate(call.call_id)))
    return parts
