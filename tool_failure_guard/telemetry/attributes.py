"""What each record the sink emits carries: its attributes, every value held to its closed set.

Pure functions from the session's facts to the attribute dicts of
:class:`~tool_failure_guard.telemetry.sink.OpenTelemetrySink`'s counters and
log records.  A value outside its closed set (:mod:`~tool_failure_guard.telemetry.names`)
becomes ``unknown`` or ``other``, so no label or field can carry free text;
prompt and session ids appear in log records only, never as metric labels.
"""

from __future__ import annotations

from tool_failure_guard.guard import (
    BatchReceipt,
    Decision,
    FailureKey,
    RepeatedToolFailureGuard,
)
from tool_failure_guard.telemetry.names import (
    LOOP_TYPES,
    MODES,
    OTHER,
    PROMPT_INPUT_BOUNDARIES,
    PROMPT_ROUTES,
    PROMPT_STOP_REASONS,
    SESSION_CLOSE_REASONS,
    TOOL_CALL_ATTRIBUTE_VALUES,
    UNKNOWN,
    logged_ordinal,
)
from tool_failure_guard.telemetry.records import CallRecord, PromptOutcome

Attributes = dict[str, str | int | bool]


def bounded(value: str | None, allowed: frozenset[str], fallback: str = UNKNOWN) -> str:
    """``value`` if it is in ``allowed``, else ``fallback``."""
    return value if value is not None and value in allowed else fallback


def guard_record(
    labels: dict[str, str],
    key: FailureKey | None,
    *,
    prompt_id: str,
    decision: Decision,
    guard: RepeatedToolFailureGuard,
    batch_ordinal: int,
    receipt: BatchReceipt,
) -> Attributes:
    """A transition's log record: its metric labels plus the fields never used as labels."""
    record: Attributes = dict(labels)
    record["prompt_id"] = str(prompt_id)
    record["candidate_ordinal"] = logged_ordinal(decision, guard)
    record["batch_ordinal"] = int(batch_ordinal)
    record["receipt_complete"] = bool(receipt.complete)
    if key is not None:
        record["execution_error_type"] = key.execution_error_type
    return record


def loop_label(loop_type: str) -> str:
    """The ``loop_type`` label of a stop."""
    return bounded(loop_type, LOOP_TYPES, OTHER)


def tool_call_labels(
    terminal_status: str, execution_status: str | None, tool_type: str | None
) -> dict[str, str]:
    """The execution-SLI counter's labels of one settled call.

    The terminal status arbitrates cancellation: a call whose terminal status
    is ``cancelled`` is counted as ``execution_status=cancelled`` whatever its
    frozen execution status, so a cancellation racing an execution error never
    lands in the SLI numerator.
    """
    terminal = bounded(terminal_status, TOOL_CALL_ATTRIBUTE_VALUES["terminal_status"])
    if terminal == "cancelled":
        execution = "cancelled"
    else:
        execution = bounded(execution_status, TOOL_CALL_ATTRIBUTE_VALUES["execution_status"])
    kind = bounded(tool_type, TOOL_CALL_ATTRIBUTE_VALUES["tool_type"])
    return {"execution_status": execution, "terminal_status": terminal, "tool_type": kind}


def prompt_record(outcome: PromptOutcome) -> Attributes:
    """A prompt's outcome record (``PROMPT_EVENT``)."""
    record: Attributes = {
        "prompt_id": str(outcome.prompt_id),
        "route": bounded(outcome.route, PROMPT_ROUTES, OTHER),
        "mode": bounded(outcome.mode, MODES, UNKNOWN),
        "stop_reason": bounded(outcome.stop_reason, PROMPT_STOP_REASONS, OTHER),
        "model_turns": int(outcome.model_turns),
        "tool_calls": int(outcome.tool_calls),
        "tool_call_cap": int(outcome.tool_call_cap),
        "batches": int(outcome.batches),
        "wall_time_ms": round(outcome.wall_time_s * 1000),
        "drain_supported": bool(outcome.drain_supported),
        "input_boundary": bounded(outcome.input_boundary, PROMPT_INPUT_BOUNDARIES, UNKNOWN),
    }
    if outcome.loop_type is not None:
        record["loop_type"] = loop_label(outcome.loop_type)
    if outcome.input_tokens is not None:
        record["input_tokens"] = int(outcome.input_tokens)
    if outcome.output_tokens is not None:
        record["output_tokens"] = int(outcome.output_tokens)
    if outcome.model_latency_s is not None:
        record["model_latency_ms"] = round(outcome.model_latency_s * 1000)
    return record


def call_record(record: CallRecord) -> Attributes:
    """One settled call's record (``TOOL_CALL_EVENT``): statuses and tool type only."""
    values = TOOL_CALL_ATTRIBUTE_VALUES
    fields: Attributes = {
        "prompt_id": str(record.prompt_id),
        "batch_ordinal": int(record.batch_ordinal),
        "call_ordinal": int(record.call_ordinal),
        # The raw terminal status (bounded): invariants must see a cancelled call
        # as cancelled, exactly as the receipt did.
        "terminal_status": bounded(record.terminal_status, values["terminal_status"]),
        "execution_status": bounded(record.execution_status, values["execution_status"]),
        "tool_type": bounded(record.tool_type, values["tool_type"]),
        "provider_duplicate": bool(record.provider_duplicate),
    }
    if record.execution_error_type is not None:
        # The frozen, classified error type (an enum-like code), never error text.
        fields["execution_error_type"] = str(record.execution_error_type)
    return fields


def session_closed_record(*, session_id: str, reason: str, prompts: int) -> Attributes:
    """The end of a session (``SESSION_CLOSED_EVENT``)."""
    return {
        "session_id": str(session_id),
        "close_reason": bounded(reason, SESSION_CLOSE_REASONS, UNKNOWN),
        "prompts": int(prompts),
    }
