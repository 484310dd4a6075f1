"""One tool batch: run every admitted call concurrently until all have settled.

This is the step between a model turn and the input boundary.  The client
sees each call start as ``pending`` (which covers awaiting permission), move to
``in_progress`` once it is allowed and about to run, and settle as
``completed`` or ``failed`` (a call that never starts goes from ``pending``
straight to ``failed``); the receipt builder gets exactly one record per
admitted call (provider duplicates included, never executed), so the
receipt's completeness can be proven when the batch is over.  Results are
returned in the model's call order, whatever order the calls settled in.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from acp import start_tool_call, text_block, tool_content, update_tool_call

from session.executor import CallOutcome, FunctionCall
from session.history import Part
from tool_failure_guard.core.protections import Admission
from tool_failure_guard.core.receipts import ReceiptBuilder

if TYPE_CHECKING:
    from session.loop import GuardedSession

_log = logging.getLogger("session.batch")


def settle(
    builder: ReceiptBuilder, ordinal: int, outcome: CallOutcome, *, provider_duplicate: bool = False
) -> None:
    """Queue the terminal record of ``outcome``: only the narrow receipt fields cross over."""
    builder.settle(
        ordinal=ordinal,
        call_id=outcome.call_id,
        policy_tool_name=outcome.policy_tool_name,
        tool_type=outcome.tool_type,
        terminal_status=outcome.terminal_status,
        execution_status=outcome.execution_status,
        execution_error_type=outcome.execution_error_type,
        provider_duplicate=provider_duplicate,
    )


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


def provider_duplicate_outcome(session: GuardedSession, call: FunctionCall) -> CallOutcome:
    """A replayed call id that history already answered: recorded, never executed."""
    tool = session.executor.resolve(call.name)
    return CallOutcome(
        call_id=call.call_id,
        name=call.name,
        policy_tool_name=tool.name if tool is not None else None,
        tool_type=tool.tool_type if tool is not None else None,
        terminal_status="error",
        execution_status="not_started",
        execution_error_type=None,
        error_type="duplicate_call_id",
        output="this call id was already answered; it was not executed again",
    )


async def tell(session: GuardedSession, update: Any) -> None:
    """Send one update; a closed connection is logged, never allowed to lose an outcome."""
    try:
        await session._emit(update)
    except (ConnectionError, OSError) as exc:
        _log.warning("could not send a tool call update: %s", exc)


async def run_batch(
    session: GuardedSession, admission: Admission
) -> tuple[list[CallOutcome | None], ReceiptBuilder]:
    """Run every admitted call concurrently; return outcomes in the model's order.

    An outcome is None only when its call raised instead of settling; the
    receipt then lacks that record and cannot be proven complete.
    """
    s = session
    builder = ReceiptBuilder(len(admission.calls))
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

    async def run_one(ordinal: int, call: FunctionCall) -> CallOutcome:
        if call.call_id in admission.provider_duplicates:
            outcome = provider_duplicate_outcome(s, call)
            settle(builder, ordinal, outcome, provider_duplicate=True)
            s.record_settled(response_part(outcome, duplicate=True))
            return outcome

        async def started() -> None:
            await tell(s, update_tool_call(call.call_id, status="in_progress"))

        # in_progress only once the call is allowed: it stays pending while asked.
        outcome = await s.executor.execute(call, s._cancelled, on_start=started)
        settle(builder, ordinal, outcome)
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
        *(run_one(ordinal, call) for ordinal, call in enumerate(admission.calls)),
        return_exceptions=True,
    )
    outcomes: list[CallOutcome | None] = []
    for call, result in zip(admission.calls, results, strict=True):
        if isinstance(result, BaseException):
            # No record for this call: the receipt cannot be proven complete.
            _log.error("call %s did not settle cleanly: %r", call.call_id, result)
            outcomes.append(None)
        else:
            outcomes.append(result)
    return outcomes, builder


def responses(admission: Admission, outcomes: Sequence[CallOutcome | None]) -> list[Part]:
    """One function response per admitted call, in the model's order."""
    parts = []
    for call, outcome in zip(admission.calls, outcomes, strict=True):
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
            parts.append(response_part(outcome, call.call_id in admission.provider_duplicates))
    return parts
