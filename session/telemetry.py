"""The telemetry sink the session reports guard transitions to.

A sink observes; it never decides.  The session calls it after acting on a
decision is settled, and every public method of :class:`OpenTelemetrySink`
catches and swallows whatever goes wrong (reporting it to stderr at most
once), so that a failing sink or exporter cannot change a decision, a
transcript or a stop.

What leaves the process, and where (``docs/telemetry.md`` is the long form):

* :data:`GUARD_COUNTER` -- one increment per emitted guard transition, with
  exactly the low-cardinality attributes of :data:`GUARD_METRIC_ATTRIBUTE_VALUES`;
* :data:`GUARD_LOG_EVENT` -- one structured OpenTelemetry log record per
  emitted transition: the same fields plus ``prompt_id``,
  ``candidate_ordinal`` and the frozen ``execution_error_type``, which are
  never metric labels;
* :data:`LOOP_DETECTED_EVENT` / :data:`LOOP_DETECTED_COUNTER` -- the
  protection that stopped a prompt.  ``repeated_tool_execution_failure`` goes
  to OpenTelemetry only, never to the product-analytics destination;
* :data:`TOOL_CALL_COUNTER` -- one increment per settled tool call by
  ``execution_status``, for the execution SLI
  ``error / (success + error)``; cancellations never reach the numerator.

Deployment environment and service version belong to the OpenTelemetry
:class:`~opentelemetry.sdk.resources.Resource`, never to guard labels.  The
providers are the sink's own (no global provider is set), so tests can read
them through in-memory readers and exporters.
"""

from __future__ import annotations

import importlib
import os
import sys
import time
from collections.abc import Callable, Mapping
from importlib import metadata
from typing import TYPE_CHECKING, Any, Final, Protocol, runtime_checkable

import attrs
from opentelemetry._logs import LoggerProvider, SeverityNumber
from opentelemetry.metrics import MeterProvider

from guard import (
    BatchReceipt,
    Decision,
    DecisionKind,
    FailureKey,
    GuardMode,
    Phase,
    RepeatedToolFailureGuard,
    ResetReason,
)

if TYPE_CHECKING:
    from opentelemetry.sdk.resources import Resource

#: The route of the ACP session's foreground prompts.
ROUTE: Final = "acp_foreground"
#: The routes of the framework adapters (``tool_failure_guard.integrations``): one per host.
FRAMEWORK_ROUTES: Final = frozenset({"pydantic_ai", "openai_agents", "langchain"})
#: Every route the guard runs on: the ACP session's and each framework adapter's.
GUARD_ROUTES: Final = frozenset({ROUTE}) | FRAMEWORK_ROUTES


class GuardTelemetry(Protocol):
    """What the session reports.  Implementations must not raise (the session guards anyway)."""

    def guard_decision(
        self,
        *,
        prompt_id: str,
        mode: GuardMode,
        decision: Decision,
        guard: RepeatedToolFailureGuard,
        failure_count_before: int,
        batch_count_before: int,
        receipt: BatchReceipt,
        batch_ordinal: int = 0,
        route: str = ROUTE,
    ) -> None:
        """One guard transition whose decision kind is not ``none`` (mode is never off).

        ``batch_ordinal`` (1-based within the prompt; 0: not known) joins the
        transition to the prompt's per-call records; ``route`` names the host
        (:data:`GUARD_ROUTES`; anything else is labelled ``other``).
        """

    def loop_detected(self, *, prompt_id: str, loop_type: str) -> None:
        """The first protection that stopped a prompt, by loop type."""

    def tool_call_settled(
        self, *, terminal_status: str, execution_status: str | None, tool_type: str | None
    ) -> None:
        """One settled tool call, for the execution SLI (cancellations never count as failures)."""


@runtime_checkable
class OutcomeTelemetry(Protocol):
    """The records rollout analysis needs: one per prompt, per settled call, per closed session.

    A separate protocol from :class:`GuardTelemetry` so that sinks written
    before it (test doubles, other destinations) keep working: the session
    sends these records only to sinks that implement them.
    """

    def prompt_finished(self, outcome: PromptOutcome) -> None:
        """The end of one top-level prompt, whatever ended it (every mode, channel too)."""

    def call_settled(self, record: CallRecord) -> None:
        """One settled call of a batch (provider duplicates included), log only."""

    def session_closed(self, *, session_id: str, reason: str, prompts: int) -> None:
        """The session ended: ``clean`` (idle when the client left) or ``disconnect``."""


@attrs.frozen(kw_only=True)
class PromptOutcome:
    """What one top-level prompt cost and how it ended: counts and enums, never text.

    ``mode`` is the effective guard mode the prompt started with (``off`` for
    channel prompts).  ``drain_supported`` is False when the host's pull
    drain was unavailable for the session or any input boundary of this
    prompt was unreliable: such prompts are counted apart from the
    supported-host baseline.  Token counts and model latency are None when
    the model reported no usage at all.
    """

    prompt_id: str
    route: str
    mode: str
    stop_reason: str
    loop_type: str | None
    model_turns: int
    tool_calls: int
    tool_call_cap: int
    batches: int
    input_tokens: int | None
    output_tokens: int | None
    model_latency_s: float | None
    wall_time_s: float
    drain_supported: bool


@attrs.frozen(kw_only=True)
class CallRecord:
    """One settled call: its statuses and tool type, never its name, arguments or result."""

    prompt_id: str
    batch_ordinal: int
    call_ordinal: int
    terminal_status: str
    execution_status: str | None
    execution_error_type: str | None
    tool_type: str | None
    provider_duplicate: bool


class NullTelemetry:
    """A sink that records nothing: the default when telemetry is not configured."""

    def guard_decision(
        self,
        *,
        prompt_id: str,
        mode: GuardMode,
        decision: Decision,
        guard: RepeatedToolFailureGuard,
        failure_count_before: int,
        batch_count_before: int,
        receipt: BatchReceipt,
        batch_ordinal: int = 0,
        route: str = ROUTE,
    ) -> None:
        return None

    def loop_detected(self, *, prompt_id: str, loop_type: str) -> None:
        return None

    def tool_call_settled(
        self, *, terminal_status: str, execution_status: str | None, tool_type: str | None
    ) -> None:
        return None

    def prompt_finished(self, outcome: PromptOutcome) -> None:
        return None

    def call_settled(self, record: CallRecord) -> None:
        return None

    def session_closed(self, *, session_id: str, reason: str, prompts: int) -> None:
        return None


#: Values of ``tool-failure-guard agent --telemetry`` (plus ``file:PATH``).
TELEMETRY_KINDS = ("none", "console", "otlp")
#: ``--telemetry file:PATH``: OTLP JSON lines, as the Collector's file exporter writes them.
FILE_KIND_PREFIX: Final = "file:"

# -- names ------------------------------------------------------------------

#: Instrumentation scope of every meter and logger the sink creates.
INSTRUMENTATION_SCOPE: Final = "tool_failure_guard"
#: Counter: one increment per emitted guard transition.
GUARD_COUNTER: Final = "tool_failure_guard.repeated_tool_failure_guard.count"
#: Log record event name: one record per emitted guard transition.
GUARD_LOG_EVENT: Final = "tool_failure_guard.repeated_tool_failure_guard"
#: Log record event name: the protection that stopped a prompt.
LOOP_DETECTED_EVENT: Final = "tool_failure_guard.loop_detected"
#: Counter: one increment per stopped prompt, by loop type.
LOOP_DETECTED_COUNTER: Final = "tool_failure_guard.loop_detected.count"
#: Log record event name: the outcome of one top-level prompt (rollout analysis).
PROMPT_EVENT: Final = "tool_failure_guard.prompt"
#: Log record event name: one settled call of a batch (rollout analysis; log only).
TOOL_CALL_EVENT: Final = "tool_failure_guard.tool_call"
#: Log record event name: a session ended, cleanly or by disconnect.
SESSION_CLOSED_EVENT: Final = "tool_failure_guard.session_closed"
#: Counter: one increment per settled tool call, by execution status (the execution SLI).
TOOL_CALL_COUNTER: Final = "tool_failure_guard.tool_call.execution.count"

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
        "tool_call_cap",
    }
)
_OTHER: Final = "other"
_UNKNOWN: Final = "unknown"
_MODES: Final = frozenset(mode.value for mode in GuardMode)

#: Guard decision kind -> telemetry ``decision`` label (``none`` is never emitted).
DECISION_LABELS: Final[Mapping[DecisionKind, str]] = {
    DecisionKind.RESET: "reset",
    DecisionKind.TRACKED: "tracked",
    DecisionKind.WOULD_WARN: "would_warn",
    DecisionKind.WARN: "warned",
    DecisionKind.WOULD_STOP: "would_stop",
    DecisionKind.STOP: "stopped",
}
_CANDIDATE_KINDS: Final = frozenset(DECISION_LABELS) - {DecisionKind.RESET}

#: Every attribute key the guard counter may carry, with its finite set of values.
#: ``route`` ... ``batch_count_bucket`` are always present; ``reset_reason`` only on
#: resets; ``terminal_status``/``execution_status`` only when the batch had exactly one
#: eligible key; ``tool_type`` only then and only when its entries all agree.
GUARD_METRIC_ATTRIBUTE_VALUES: Final[Mapping[str, frozenset[str]]] = {
    "route": GUARD_ROUTES | {_OTHER},
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
    "execution_status": frozenset({"success", "error", "cancelled", "not_started", _UNKNOWN}),
    "terminal_status": frozenset({"success", "error", "cancelled", _UNKNOWN}),
    "tool_type": frozenset({"native", "mcp", _UNKNOWN}),
}
#: Routes of the prompt record: the guard's route, or a channel bridge's prompt (mode off).
PROMPT_ROUTES: Final = GUARD_ROUTES | {"channel"}
#: Stop reasons of the prompt record (ACP's, plus ``error`` for a prompt that raised).
PROMPT_STOP_REASONS: Final = frozenset(
    {"end_turn", "max_tokens", "max_turn_requests", "refusal", "cancelled", "error"}
)
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
    "loop_type": LOOP_TYPES | {_OTHER},
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


# -- the OpenTelemetry sink ---------------------------------------------------


def _bounded(value: str | None, allowed: frozenset[str], fallback: str = _UNKNOWN) -> str:
    return value if value is not None and value in allowed else fallback


class OpenTelemetrySink:
    """The :class:`GuardTelemetry` sink backed by OpenTelemetry metrics and logs.

    It takes its providers as arguments instead of using global ones, so the
    CLI and the tests each build exactly the pipeline they mean.  The
    optional ``product_analytics`` destination receives loop events except
    the guard's own (:data:`OTEL_ONLY_LOOP_TYPES`).

    Nothing here can raise into the session: each public method catches
    every exception, reports the first one to stderr (the exception type
    only: messages may carry data) and drops the emission.
    """

    def __init__(
        self,
        *,
        meter_provider: MeterProvider,
        logger_provider: LoggerProvider,
        product_analytics: ProductAnalytics | None = None,
        clock_ns: Callable[[], int] = time.time_ns,
    ) -> None:
        self._meter_provider = meter_provider
        self._clock_ns = clock_ns
        self._logger_provider = logger_provider
        self._product_analytics = product_analytics
        self._reported = False
        version = package_version()
        meter = meter_provider.get_meter(INSTRUMENTATION_SCOPE, version)
        self._guard_counter = meter.create_counter(
            GUARD_COUNTER,
            unit="{transition}",
            description="Repeated tool-failure guard transitions (decisions other than none).",
        )
        self._loop_counter = meter.create_counter(
            LOOP_DETECTED_COUNTER,
            unit="{prompt}",
            description="Prompts stopped by a loop protection, by loop type.",
        )
        self._tool_call_counter = meter.create_counter(
            TOOL_CALL_COUNTER,
            unit="{call}",
            description=(
                "Settled tool calls by frozen execution status; execution SLI = "
                "execution_status=error / execution_status in {success, error}."
            ),
        )
        self._logger = logger_provider.get_logger(INSTRUMENTATION_SCOPE, version)

    # -- GuardTelemetry ------------------------------------------------------

    def guard_decision(
        self,
        *,
        prompt_id: str,
        mode: GuardMode,
        decision: Decision,
        guard: RepeatedToolFailureGuard,
        failure_count_before: int,
        batch_count_before: int,
        receipt: BatchReceipt,
        batch_ordinal: int = 0,
        route: str = ROUTE,
    ) -> None:
        """Count the transition and log it; ``none`` and mode ``off`` emit nothing."""
        try:
            fields = self._transition_fields(
                mode, decision, guard, failure_count_before, batch_count_before, route
            )
            if fields is None:
                return
            labels, key = fields
            self._guard_counter.add(1, labels)
            record: dict[str, str | int | bool] = dict(labels)
            record["prompt_id"] = str(prompt_id)
            record["candidate_ordinal"] = _logged_ordinal(decision, guard)
            record["batch_ordinal"] = int(batch_ordinal)
            record["receipt_complete"] = bool(receipt.complete)
            if key is not None:
                record["execution_error_type"] = key.execution_error_type
            self._logger.emit(
                timestamp=self._clock_ns(),
                event_name=GUARD_LOG_EVENT,
                severity_number=SeverityNumber.INFO,
                severity_text="INFO",
                body=GUARD_LOG_EVENT,
                attributes=record,
            )
        except Exception as error:
            self._report(error)

    def loop_detected(self, *, prompt_id: str, loop_type: str) -> None:
        """Record the stop in OpenTelemetry; forward it to product analytics unless OTel-only."""
        try:
            label = _bounded(loop_type, LOOP_TYPES, _OTHER)
            self._loop_counter.add(1, {"loop_type": label})
            self._logger.emit(
                timestamp=self._clock_ns(),
                event_name=LOOP_DETECTED_EVENT,
                severity_number=SeverityNumber.WARN,
                severity_text="WARN",
                body=LOOP_DETECTED_EVENT,
                attributes={"loop_type": label, "prompt_id": str(prompt_id)},
            )
        except Exception as error:
            self._report(error)
        # A separate try: analytics keep their routing even if OpenTelemetry failed.
        try:
            analytics = self._product_analytics
            if analytics is not None and loop_type not in OTEL_ONLY_LOOP_TYPES:
                analytics(LoopDetectedEvent(prompt_id=prompt_id, loop_type=loop_type))
        except Exception as error:
            self._report(error)

    def tool_call_settled(
        self, *, terminal_status: str, execution_status: str | None, tool_type: str | None
    ) -> None:
        """Count one settled call for the execution SLI.

        The terminal status arbitrates cancellation: a call whose terminal
        status is ``cancelled`` is counted as ``execution_status=cancelled``
        whatever its frozen execution status, so a cancellation racing an
        execution error never lands in the SLI numerator.
        """
        try:
            terminal = _bounded(terminal_status, TOOL_CALL_ATTRIBUTE_VALUES["terminal_status"])
            if terminal == "cancelled":
                execution = "cancelled"
            else:
                execution = _bounded(
                    execution_status, TOOL_CALL_ATTRIBUTE_VALUES["execution_status"]
                )
            kind = _bounded(tool_type, TOOL_CALL_ATTRIBUTE_VALUES["tool_type"])
            self._tool_call_counter.add(
                1,
                {"execution_status": execution, "terminal_status": terminal, "tool_type": kind},
            )
        except Exception as error:
            self._report(error)

    # -- OutcomeTelemetry (log records only: prompt ids are never metric labels) --

    def prompt_finished(self, outcome: PromptOutcome) -> None:
        """Log the prompt's outcome record (``PROMPT_EVENT``)."""
        try:
            record: dict[str, str | int | bool] = {
                "prompt_id": str(outcome.prompt_id),
                "route": _bounded(outcome.route, PROMPT_ROUTES, _OTHER),
                "mode": _bounded(outcome.mode, _MODES, _UNKNOWN),
                "stop_reason": _bounded(outcome.stop_reason, PROMPT_STOP_REASONS, _OTHER),
                "model_turns": int(outcome.model_turns),
                "tool_calls": int(outcome.tool_calls),
                "tool_call_cap": int(outcome.tool_call_cap),
                "batches": int(outcome.batches),
                "wall_time_ms": round(outcome.wall_time_s * 1000),
                "drain_supported": bool(outcome.drain_supported),
            }
            if outcome.loop_type is not None:
                record["loop_type"] = _bounded(outcome.loop_type, LOOP_TYPES, _OTHER)
            if outcome.input_tokens is not None:
                record["input_tokens"] = int(outcome.input_tokens)
            if outcome.output_tokens is not None:
                record["output_tokens"] = int(outcome.output_tokens)
            if outcome.model_latency_s is not None:
                record["model_latency_ms"] = round(outcome.model_latency_s * 1000)
            self._log(PROMPT_EVENT, record)
        except Exception as error:
            self._report(error)

    def call_settled(self, record: CallRecord) -> None:
        """Log one settled call (``TOOL_CALL_EVENT``): statuses and tool type only."""
        try:
            values = TOOL_CALL_ATTRIBUTE_VALUES
            fields: dict[str, str | int | bool] = {
                "prompt_id": str(record.prompt_id),
                "batch_ordinal": int(record.batch_ordinal),
                "call_ordinal": int(record.call_ordinal),
                # The raw terminal status (bounded): invariants must see a cancelled call
                # as cancelled, exactly as the receipt did.
                "terminal_status": _bounded(record.terminal_status, values["terminal_status"]),
                "execution_status": _bounded(record.execution_status, values["execution_status"]),
                "tool_type": _bounded(record.tool_type, values["tool_type"]),
                "provider_duplicate": bool(record.provider_duplicate),
            }
            if record.execution_error_type is not None:
                # The frozen, classified error type (an enum-like code), never error text.
                fields["execution_error_type"] = str(record.execution_error_type)
            self._log(TOOL_CALL_EVENT, fields)
        except Exception as error:
            self._report(error)

    def session_closed(self, *, session_id: str, reason: str, prompts: int) -> None:
        """Log the end of a session (``SESSION_CLOSED_EVENT``)."""
        try:
            self._log(
                SESSION_CLOSED_EVENT,
                {
                    "session_id": str(session_id),
                    "close_reason": _bounded(reason, SESSION_CLOSE_REASONS, _UNKNOWN),
                    "prompts": int(prompts),
                },
            )
        except Exception as error:
            self._report(error)

    def _log(self, event: str, attributes: dict[str, str | int | bool]) -> None:
        self._logger.emit(
            timestamp=self._clock_ns(),
            event_name=event,
            severity_number=SeverityNumber.INFO,
            severity_text="INFO",
            body=event,
            attributes=attributes,
        )

    # -- lifecycle -----------------------------------------------------------

    def force_flush(self) -> bool:
        """Export what is pending now; False if anything failed (never raises)."""
        ok = True
        for provider in (self._meter_provider, self._logger_provider):
            try:
                flush = getattr(provider, "force_flush", None)
                if flush is not None and flush() is False:
                    ok = False
            except Exception as error:
                ok = False
                self._report(error)
        return ok

    def shutdown(self) -> None:
        """Flush and stop both providers (also done at interpreter exit); never raises."""
        for provider in (self._meter_provider, self._logger_provider):
            try:
                stop = getattr(provider, "shutdown", None)
                if stop is not None:
                    stop()
            except Exception as error:
                self._report(error)

    # -- internals -----------------------------------------------------------

    def _transition_fields(
        self,
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
            "route": _bounded(route, GUARD_ROUTES, _OTHER),
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
        elif decision.kind in _CANDIDATE_KINDS and guard.key is not None:
            # These kinds happen exactly when the batch had one eligible key, now guard.key;
            # an eligible failure is terminal error + execution error by definition.
            key = guard.key
            labels["terminal_status"] = "error"
            labels["execution_status"] = "error"
            tool_type = guard.candidate_tool_type
            if tool_type is not None:
                labels["tool_type"] = tool_type
        return labels, key

    def _report(self, error: BaseException) -> None:
        """Tell stderr once that telemetry failed; the type only, never the message."""
        if self._reported:
            return
        self._reported = True
        try:
            sys.stderr.write(
                "tool-failure-guard: telemetry error ignored "
                f"({type(error).__name__}); further telemetry errors are not reported\n"
            )
            sys.stderr.flush()
        except Exception:
            pass


def _logged_ordinal(decision: Decision, guard: RepeatedToolFailureGuard) -> int:
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


# -- building the sink the CLI asks for ---------------------------------------


def package_version() -> str:
    """The installed version of tool-failure-guard (the default ``service.version``)."""
    try:
        return metadata.version("tool-failure-guard")
    except metadata.PackageNotFoundError:
        return "0+unknown"


def telemetry_resource() -> Resource:
    """The OpenTelemetry Resource: SDK defaults, our service name/version, then the env.

    ``OTEL_RESOURCE_ATTRIBUTES`` and ``OTEL_SERVICE_NAME`` win over the
    defaults, so operators set ``deployment.environment`` there; the
    runtime never invents a deployment environment.
    """
    from opentelemetry.sdk.resources import OTELResourceDetector, Resource

    defaults = {"service.name": "tool-failure-guard", "service.version": package_version()}
    return Resource.create(defaults).merge(OTELResourceDetector().detect())


_OTLP_PACKAGES: Final[Mapping[str, tuple[str, str, str]]] = {
    # protocol -> (distribution, metric exporter module, log exporter module)
    "http/protobuf": (
        "opentelemetry-exporter-otlp-proto-http",
        "opentelemetry.exporter.otlp.proto.http.metric_exporter",
        "opentelemetry.exporter.otlp.proto.http._log_exporter",
    ),
    "grpc": (
        "opentelemetry-exporter-otlp-proto-grpc",
        "opentelemetry.exporter.otlp.proto.grpc.metric_exporter",
        "opentelemetry.exporter.otlp.proto.grpc._log_exporter",
    ),
}


class TelemetryConfigurationError(ValueError):
    """The requested telemetry cannot be built (unsupported protocol, missing exporter).

    A ``ValueError`` so that the CLI reports it like any other bad option value.
    """


def _otlp_protocol(signal: str) -> str:
    """The OTLP protocol for ``signal`` per the standard variables (default http/protobuf)."""
    value = os.environ.get(f"OTEL_EXPORTER_OTLP_{signal}_PROTOCOL") or os.environ.get(
        "OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"
    )
    protocol = value.strip().lower()
    if protocol not in _OTLP_PACKAGES:
        raise TelemetryConfigurationError(
            f"OTLP protocol {value!r} is not supported; expected one of {sorted(_OTLP_PACKAGES)}"
        )
    return protocol


def _otlp_exporter(signal: str, class_name: str) -> Any:
    """Import and build the OTLP exporter for ``signal``; it reads OTEL_EXPORTER_OTLP_* itself."""
    distribution, metric_module, log_module = _OTLP_PACKAGES[_otlp_protocol(signal)]
    module_name = metric_module if signal == "METRICS" else log_module
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise TelemetryConfigurationError(
            f"--telemetry otlp needs the package {distribution!r}, which is not installed "
            f"(pip install {distribution})"
        ) from error
    return getattr(module, class_name)()


def build_telemetry(
    kind: str, *, product_analytics: ProductAnalytics | None = None
) -> GuardTelemetry:
    """Build the sink named by ``--telemetry``.

    ``none`` records nothing.  ``console`` prints metrics (at each export
    interval and at exit) and log records to **stderr**: stdout carries the
    ACP protocol.  ``otlp`` exports through the OTLP exporters, configured
    by the standard ``OTEL_EXPORTER_OTLP_*`` variables.  ``file:PATH``
    appends OTLP JSON lines to PATH (:mod:`session.otlp_file`).  The
    providers shut down (and flush) at interpreter exit.
    """
    if kind == "none":
        return NullTelemetry()
    file_path = kind[len(FILE_KIND_PREFIX) :] if kind.startswith(FILE_KIND_PREFIX) else None
    if file_path is not None and not file_path:
        raise ValueError("--telemetry file:PATH needs a path")
    if file_path is None and kind not in TELEMETRY_KINDS:
        raise ValueError(f"--telemetry {kind!r} is not one of {TELEMETRY_KINDS}")

    from opentelemetry.sdk._logs import LoggerProvider as SdkLoggerProvider
    from opentelemetry.sdk._logs.export import (
        BatchLogRecordProcessor,
        ConsoleLogRecordExporter,
        SimpleLogRecordProcessor,
    )
    from opentelemetry.sdk.metrics import MeterProvider as SdkMeterProvider
    from opentelemetry.sdk.metrics.export import (
        ConsoleMetricExporter,
        PeriodicExportingMetricReader,
    )

    resource = telemetry_resource()
    if file_path is not None:
        from pathlib import Path

        from session.otlp_file import OtlpJsonFile, OtlpJsonLogExporter, OtlpJsonMetricExporter

        try:
            target = OtlpJsonFile(Path(file_path))
        except OSError as error:
            raise TelemetryConfigurationError(
                f"--telemetry file: cannot open {file_path!r} for appending "
                f"({error.strerror or type(error).__name__})"
            ) from error
        metric_exporter: Any = OtlpJsonMetricExporter(target)
        log_processor: Any = BatchLogRecordProcessor(OtlpJsonLogExporter(target))
    elif kind == "console":
        metric_exporter = ConsoleMetricExporter(out=sys.stderr)
        log_processor = SimpleLogRecordProcessor(ConsoleLogRecordExporter(out=sys.stderr))
    else:
        metric_exporter = _otlp_exporter("METRICS", "OTLPMetricExporter")
        log_processor = BatchLogRecordProcessor(_otlp_exporter("LOGS", "OTLPLogExporter"))
    meter_provider = SdkMeterProvider(
        resource=resource, metric_readers=[PeriodicExportingMetricReader(metric_exporter)]
    )
    logger_provider = SdkLoggerProvider(resource=resource)
    logger_provider.add_log_record_processor(log_processor)
    return OpenTelemetrySink(
        meter_provider=meter_provider,
        logger_provider=logger_provider,
        product_analytics=product_analytics,
    )
