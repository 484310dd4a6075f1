"""The telemetry vocabulary: every record name, label and closed value set, and the buckets.

One declaration, read by the sink (:mod:`~tool_failure_guard.telemetry.sink`), the privacy
tests and rollout analysis; ``docs/telemetry.md`` is the long form.
Re-exported by :mod:`~tool_failure_guard.telemetry.sink`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from importlib import metadata
from typing import Final

import attrs

from tool_failure_guard.guard import (
    Decision,
    DecisionKind,
    FailureKey,
    GuardMode,
    Phase,
    RepeatedToolFailureGuard,
    ResetReason,
)

#: Instrumentation scope of every meter and logger the sink creates: this library's, not
#: the original's ``qwen-code`` (a scope names the instrumenting code; rollout analysis
#: tells this agent's records from Qwen Code's same-named ones by it).
INSTRUMENTATION_SCOPE: Final = "tool_failure_guard"
#: The log record attribute holding the event name, as the original writes it (it sets no
#: OTLP ``eventName``); the sink writes both.
EVENT_NAME_ATTRIBUTE: Final = "event.name"

# The original's names (Qwen Code 0.24.4: ``packages/core/src/telemetry/constants.ts`` and
# ``metrics.ts``, ``LoopDetectedEvent``), for the signals it has: fleets' dashboards and
# alerts read them, so ours carry them too (docs/telemetry.md, "Names").
#: Counter: one increment per emitted guard transition.
GUARD_COUNTER: Final = "qwen-code.repeated_tool_failure_guard.count"
#: Log record event name: one record per emitted guard transition.
GUARD_LOG_EVENT: Final = "qwen-code.repeated_tool_failure_guard"
#: Log record event name: the protection that stopped a prompt.
LOOP_DETECTED_EVENT: Final = "loop_detected"
#: Counter: one increment per settled tool call, by execution status (the execution SLI).
TOOL_CALL_COUNTER: Final = "qwen-code.tool.execution.count"

#: Attributes of the original's records this sink never writes: the record's own timestamp
#: carries the time, and the loop record's ``prompt_id`` starts with the session id.
ORIGINAL_ONLY_ATTRIBUTES: Final = frozenset({"event.timestamp", "session.id"})
#: The names above: the signals whose name comes from the original.
ORIGINAL_NAMES: Final = frozenset(
    {GUARD_COUNTER, GUARD_LOG_EVENT, LOOP_DETECTED_EVENT, TOOL_CALL_COUNTER}
)

# Signals the original does not have: the project's own namespace.
#: Counter: one increment per stopped prompt, by loop type.
LOOP_DETECTED_COUNTER: Final = "tool_failure_guard.loop_detected.count"
#: Log record event name: the outcome of one top-level prompt (rollout analysis).
PROMPT_EVENT: Final = "tool_failure_guard.prompt"
#: Log record event name: one settled call of a batch (rollout analysis; log only).
TOOL_CALL_EVENT: Final = "tool_failure_guard.tool_call"
#: Log record event name: a session ended, cleanly or by disconnect.
SESSION_CLOSED_EVENT: Final = "tool_failure_guard.session_closed"
#: The prefix of every name in the project's own namespace.
OWN_PREFIX: Final = "tool_failure_guard."

#: Names earlier builds wrote -> the name written now.  Rollout analysis reads log records
#: under either (:mod:`~tool_failure_guard.rollout.sql`), so earlier exports stay readable;
#: the counters are listed for the dashboards that move (docs/telemetry.md, "Names").
EARLIER_NAMES: Final[Mapping[str, str]] = {
    "tool_failure_guard.repeated_tool_failure_guard": GUARD_LOG_EVENT,
    "tool_failure_guard.loop_detected": LOOP_DETECTED_EVENT,
    "tool_failure_guard.repeated_tool_failure_guard.count": GUARD_COUNTER,
    "tool_failure_guard.tool_call.execution.count": TOOL_CALL_COUNTER,
}
#: Attribute values earlier builds wrote -> the value written now, per attribute key (the
#: one table of earlier values, as :data:`EARLIER_NAMES` is of names): rollout analysis reads
#: a record carrying an earlier value as if it carried the value written now, so a fleet
#: whose window spans the rename passes its gates (docs/telemetry.md, "Names").
EARLIER_VALUES: Final[Mapping[str, Mapping[str, str]]] = {
    # the cap's loop type took the original's name (Qwen Code 0.24.4's loopType)
    "loop_type": {"tool_call_cap": "turn_tool_call_cap"},
}
#: The log record event names of :data:`EARLIER_NAMES` (what rollout analysis aliases).
EARLIER_EVENT_NAMES: Final[Mapping[str, str]] = {
    old: new for old, new in EARLIER_NAMES.items() if new in (GUARD_LOG_EVENT, LOOP_DETECTED_EVENT)
}


def guard_log_body(decision: str) -> str:
    """The guard log record's body, the original's words (``logRepeatedToolFailureGuard``)."""
    return f"Repeated tool failure guard decision: {decision}."


def loop_log_body(loop_type: str) -> str:
    """The loop record's body, the original's words (``logLoopDetected``)."""
    return f"Loop detected. Type: {loop_type}."


#: The route of the ACP session's foreground prompts.
ROUTE: Final = "acp_foreground"
#: The routes of the framework adapters (``tool_failure_guard.integrations``): one per host.
FRAMEWORK_ROUTES: Final = frozenset(
    {"pydantic_ai", "openai_agents", "langchain", "claude_agent_sdk"}
)
#: The routes of the coding-CLI hooks (``tool_failure_guard.hooks``): one per CLI.
HOOK_ROUTES: Final = frozenset(
    {"claude_code_hook", "qwen_code_hook", "gemini_cli_hook", "codex_hook", "copilot_hook"}
)
#: Every route the guard runs on: the ACP session's, each framework adapter's, each hook's.
GUARD_ROUTES: Final = frozenset({ROUTE}) | FRAMEWORK_ROUTES | HOOK_ROUTES
#: The loop type of this guard's stop: OpenTelemetry only, never product analytics.
REPEATED_TOOL_EXECUTION_FAILURE: Final = "repeated_tool_execution_failure"
#: Loop types whose event must never reach the product-analytics destination.
OTEL_ONLY_LOOP_TYPES: Final = frozenset({REPEATED_TOOL_EXECUTION_FAILURE})
#: Loop types the session may report; anything else is labelled ``other``.
LOOP_TYPES: Final = frozenset(
    {
        REPEATED_TOOL_EXECUTION_FAILURE,
        "invalid_tool_params_stagnation",
        "global_tool_call_duplicate",
        "turn_tool_call_cap",
    }
)
OTHER: Final = "other"
UNKNOWN: Final = "unknown"
MODES: Final = frozenset(mode.value for mode in GuardMode)

#: Guard decision kind -> telemetry ``decision`` label (``none`` is never emitted).
DECISION_LABELS: Final[Mapping[DecisionKind, str]] = {
    DecisionKind.RESET: "reset",
    DecisionKind.TRACKED: "tracked",
    DecisionKind.WOULD_WARN: "would_warn",
    DecisionKind.WARN: "warned",
    DecisionKind.WOULD_STOP: "would_stop",
    DecisionKind.STOP: "stopped",
}
CANDIDATE_KINDS: Final = frozenset(DECISION_LABELS) - {DecisionKind.RESET}

#: Every attribute key the guard counter may carry, with its finite set of values.
#: ``route`` ... ``batch_count_bucket`` are always present; ``reset_reason`` only on
#: resets; ``terminal_status``/``execution_status`` only when the batch had exactly one
#: eligible key; ``tool_type`` only then and only when its entries all agree.
GUARD_METRIC_ATTRIBUTE_VALUES: Final[Mapping[str, frozenset[str]]] = {
    "route": GUARD_ROUTES | {OTHER},
    "mode": frozenset({GuardMode.SHADOW.value, GuardMode.WARN.value, GuardMode.ENFORCE.value}),
    "phase_before": frozenset(phase.value for phase in Phase),
    "phase_after": frozenset(phase.value for phase in Phase),
    "decision": frozenset(DECISION_LABELS.values()),
    "failure_count_bucket": frozenset({"0", "1-2", "3-4", "5-7", "8+"}),
    "batch_count_bucket": frozenset({"0", "1", "2", "3+"}),
    "reset_reason": frozenset(reason.value for reason in ResetReason),
    "terminal_status": frozenset({"error"}),
    "execution_status": frozenset({"error"}),
    "tool_type": frozenset({"native", "mcp"}),
}
#: Fields of a guard log record beyond the metric attributes (never metric labels).
GUARD_LOG_ONLY_FIELDS: Final = frozenset(
    {"prompt_id", "candidate_ordinal", "execution_error_type", "batch_ordinal", "receipt_complete"}
)

#: Attribute values of the execution SLI counter.
TOOL_CALL_ATTRIBUTE_VALUES: Final[Mapping[str, frozenset[str]]] = {
    "execution_status": frozenset({"success", "error", "cancelled", "not_started", UNKNOWN}),
    "terminal_status": frozenset({"success", "error", "cancelled", UNKNOWN}),
    "tool_type": frozenset({"native", "mcp", UNKNOWN}),
}
#: Routes of the prompt record: the guard's route, or a channel bridge's prompt (mode off).
PROMPT_ROUTES: Final = GUARD_ROUTES | {"channel"}
#: Stop reasons of the prompt record (ACP's, plus ``error`` for a prompt that raised).
PROMPT_STOP_REASONS: Final = frozenset(
    {"end_turn", "max_tokens", "max_turn_requests", "refusal", "cancelled", "error"}
)
#: The ``input_boundary`` values of the prompt record: the kind actually used for the prompt
#: (a host's declared ``drain`` or ``prompt-only``, or ``unsupported`` when its host lacked or
#: failed the drain; the ACP agent's declaration: ``session.config.declared_boundary``).
INPUT_BOUNDARY_RECORD_VALUES: Final = ("drain", "prompt-only", "unsupported")
#: Input boundary kinds of the prompt record (the kind actually used for the prompt).
PROMPT_INPUT_BOUNDARIES: Final = frozenset(INPUT_BOUNDARY_RECORD_VALUES)
#: Close reasons of the session-closed record.
SESSION_CLOSE_REASONS: Final = frozenset({"clean", "disconnect"})
#: Every field each new log record may carry (the privacy tests hold the sink to these).
PROMPT_LOG_FIELDS: Final = frozenset(
    {
        "prompt_id",
        "route",
        "mode",
        "stop_reason",
        "loop_type",
        "model_turns",
        "tool_calls",
        "tool_call_cap",
        "batches",
        "input_tokens",
        "output_tokens",
        "model_latency_ms",
        "wall_time_ms",
        "drain_supported",
        "input_boundary",
    }
)
TOOL_CALL_LOG_FIELDS: Final = frozenset(
    {
        "prompt_id",
        "batch_ordinal",
        "call_ordinal",
        "terminal_status",
        "execution_status",
        "execution_error_type",
        "tool_type",
        "provider_duplicate",
    }
)
SESSION_CLOSED_LOG_FIELDS: Final = frozenset({"session_id", "close_reason", "prompts"})

#: Attribute values of the loop-detected counter.
LOOP_DETECTED_ATTRIBUTE_VALUES: Final[Mapping[str, frozenset[str]]] = {
    "loop_type": LOOP_TYPES | {OTHER},
}


# -- buckets ----------------------------------------------------------------


def failure_count_bucket(count: int) -> str:
    """Bucket an eligible-failure count: ``0``, ``1-2``, ``3-4``, ``5-7``, ``8+``.

    The edges put the threshold (8) at the start of the last bucket, so
    ``8+`` means "reached the failure threshold".
    """
    if count <= 0:
        return "0"
    if count <= 2:
        return "1-2"
    if count <= 4:
        return "3-4"
    if count <= 7:
        return "5-7"
    return "8+"


def batch_count_bucket(count: int) -> str:
    """Bucket a batch count: ``0``, ``1``, ``2``, ``3+`` (2 is the batch threshold)."""
    if count <= 0:
        return "0"
    if count <= 2:
        return str(count)
    return "3+"


# -- the product-analytics destination ---------------------------------------


@attrs.frozen
class LoopDetectedEvent:
    """What the product-analytics destination receives for a stopped prompt.

    Only loop types outside :data:`OTEL_ONLY_LOOP_TYPES` are ever built into
    one: the guard's own stop stays out of product analytics by design.
    """

    prompt_id: str
    loop_type: str


#: A product-analytics destination (the counterpart of the original's QwenLogger/RUM).
ProductAnalytics = Callable[[LoopDetectedEvent], None]


# -- one transition's labels ------------------------------------------------


def transition_fields(
    mode: GuardMode,
    decision: Decision,
    guard: RepeatedToolFailureGuard,
    failure_count_before: int,
    batch_count_before: int,
    route: str = ROUTE,
) -> tuple[dict[str, str], FailureKey | None] | None:
    """The metric labels of one transition and its candidate key; None if nothing is emitted."""
    mode_label = GuardMode(mode).value
    label = DECISION_LABELS.get(decision.kind)
    if label is None or mode_label not in GUARD_METRIC_ATTRIBUTE_VALUES["mode"]:
        return None
    if decision.kind is DecisionKind.RESET:
        # A reset zeroes the streak: the counts worth bucketing are the ones it ended.
        failures, batches = failure_count_before, batch_count_before
    else:
        failures, batches = guard.failure_count, guard.batch_count
    labels = {
        "route": route if route in GUARD_ROUTES else OTHER,
        "mode": mode_label,
        "phase_before": Phase(decision.phase_before).value,
        "phase_after": Phase(decision.phase_after).value,
        "decision": label,
        "failure_count_bucket": failure_count_bucket(failures),
        "batch_count_bucket": batch_count_bucket(batches),
    }
    key: FailureKey | None = None
    if decision.kind is DecisionKind.RESET:
        if decision.reason is not None:
            labels["reset_reason"] = ResetReason(decision.reason).value
    elif decision.kind in CANDIDATE_KINDS and guard.key is not None:
        # These kinds happen exactly when the batch had one eligible key, now guard.key;
        # an eligible failure is terminal error + execution error by definition.
        key = guard.key
        labels["terminal_status"] = "error"
        labels["execution_status"] = "error"
        tool_type = guard.candidate_tool_type
        if tool_type is not None:
            labels["tool_type"] = tool_type
    return labels, key


def logged_ordinal(decision: Decision, guard: RepeatedToolFailureGuard) -> int:
    """The log's ``candidate_ordinal``: the active candidate's, or on a reset the ended one's.

    The guard's ``candidate_ordinal`` is 0 once a reset returned it to idle; the
    reset's record names the streak that reset ended instead (0 when it ended
    none: an idle prompt's first downgrade).
    """
    if decision.kind is DecisionKind.RESET:
        if decision.phase_before is Phase.IDLE:
            return 0
        return int(guard.last_candidate_ordinal)
    return int(guard.candidate_ordinal)


def package_version() -> str:
    """The installed version of tool-failure-guard (the default ``service.version``)."""
    try:
        return metadata.version("tool-failure-guard")
    except metadata.PackageNotFoundError:
        return "0+unknown"
