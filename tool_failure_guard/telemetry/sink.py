"""The telemetry sink the session reports guard transitions to.

A sink observes; it never decides.  The session calls it after acting on a
decision is settled, and every public method of :class:`OpenTelemetrySink`
catches and swallows whatever goes wrong (reporting it to stderr at most
once), so that a failing sink or exporter cannot change a decision, a
transcript or a stop.

What leaves the process, and where (``docs/telemetry.md`` is the long form):

Where the released original (Qwen Code) has the signal, the name is the original's
(:data:`GUARD_COUNTER`, :data:`GUARD_LOG_EVENT`, :data:`LOOP_DETECTED_EVENT`,
:data:`TOOL_CALL_COUNTER`); the rest are in the project's own namespace.

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

This module is the OpenTelemetry sink; the rest lives beside it and is
re-exported here, so ``from tool_failure_guard.telemetry.sink import X`` finds each name:
:mod:`~tool_failure_guard.telemetry.records` (the protocols and records),
:mod:`~tool_failure_guard.telemetry.names` (names, closed value sets, buckets, labels);
:mod:`~tool_failure_guard.telemetry.attributes` builds each record's attributes, bounded.
:mod:`~tool_failure_guard.telemetry.build` builds the sink ``--telemetry`` names on top of
this one (it imports this module, never the other way round).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

from opentelemetry._logs import LoggerProvider, SeverityNumber
from opentelemetry.metrics import MeterProvider

from tool_failure_guard.guard import (
    BatchReceipt,
    Decision,
    GuardMode,
    RepeatedToolFailureGuard,
)
from tool_failure_guard.telemetry import attributes
from tool_failure_guard.telemetry.names import (
    DECISION_LABELS,
    EARLIER_EVENT_NAMES,
    EARLIER_NAMES,
    EARLIER_VALUES,
    EVENT_NAME_ATTRIBUTE,
    FRAMEWORK_ROUTES,
    GUARD_COUNTER,
    GUARD_LOG_EVENT,
    GUARD_LOG_ONLY_FIELDS,
    GUARD_METRIC_ATTRIBUTE_VALUES,
    GUARD_ROUTES,
    HOOK_ROUTES,
    INSTRUMENTATION_SCOPE,
    LOOP_DETECTED_ATTRIBUTE_VALUES,
    LOOP_DETECTED_COUNTER,
    LOOP_DETECTED_EVENT,
    LOOP_TYPES,
    ORIGINAL_NAMES,
    ORIGINAL_ONLY_ATTRIBUTES,
    OTEL_ONLY_LOOP_TYPES,
    OWN_PREFIX,
    PROMPT_EVENT,
    PROMPT_INPUT_BOUNDARIES,
    PROMPT_LOG_FIELDS,
    PROMPT_ROUTES,
    PROMPT_STOP_REASONS,
    REPEATED_TOOL_EXECUTION_FAILURE,
    ROUTE,
    SESSION_CLOSE_REASONS,
    SESSION_CLOSED_EVENT,
    SESSION_CLOSED_LOG_FIELDS,
    TOOL_CALL_ATTRIBUTE_VALUES,
    TOOL_CALL_COUNTER,
    TOOL_CALL_EVENT,
    TOOL_CALL_LOG_FIELDS,
    LoopDetectedEvent,
    ProductAnalytics,
    batch_count_bucket,
    failure_count_bucket,
    guard_log_body,
    loop_log_body,
    package_version,
    transition_fields,
)
from tool_failure_guard.telemetry.records import (
    CallRecord,
    GuardTelemetry,
    NullTelemetry,
    OutcomeTelemetry,
    PromptOutcome,
)

#: Everything ``from session.telemetry import ...`` offered before the split.
__all__ = [
    "DECISION_LABELS",
    "EARLIER_EVENT_NAMES",
    "EARLIER_NAMES",
    "EARLIER_VALUES",
    "EVENT_NAME_ATTRIBUTE",
    "FRAMEWORK_ROUTES",
    "GUARD_COUNTER",
    "GUARD_LOG_EVENT",
    "GUARD_LOG_ONLY_FIELDS",
    "GUARD_METRIC_ATTRIBUTE_VALUES",
    "GUARD_ROUTES",
    "HOOK_ROUTES",
    "INSTRUMENTATION_SCOPE",
    "LOOP_DETECTED_ATTRIBUTE_VALUES",
    "LOOP_DETECTED_COUNTER",
    "LOOP_DETECTED_EVENT",
    "LOOP_TYPES",
    "ORIGINAL_NAMES",
    "ORIGINAL_ONLY_ATTRIBUTES",
    "OTEL_ONLY_LOOP_TYPES",
    "OWN_PREFIX",
    "PROMPT_EVENT",
    "PROMPT_INPUT_BOUNDARIES",
    "PROMPT_LOG_FIELDS",
    "PROMPT_ROUTES",
    "PROMPT_STOP_REASONS",
    "REPEATED_TOOL_EXECUTION_FAILURE",
    "ROUTE",
    "SESSION_CLOSED_EVENT",
    "SESSION_CLOSED_LOG_FIELDS",
    "SESSION_CLOSE_REASONS",
    "TOOL_CALL_ATTRIBUTE_VALUES",
    "TOOL_CALL_COUNTER",
    "TOOL_CALL_EVENT",
    "TOOL_CALL_LOG_FIELDS",
    "CallRecord",
    "GuardTelemetry",
    "LoopDetectedEvent",
    "NullTelemetry",
    "OpenTelemetrySink",
    "OutcomeTelemetry",
    "ProductAnalytics",
    "PromptOutcome",
    "batch_count_bucket",
    "failure_count_bucket",
    "guard_log_body",
    "loop_log_body",
    "package_version",
]


# -- the OpenTelemetry sink ---------------------------------------------------


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
            fields = transition_fields(
                mode, decision, guard, failure_count_before, batch_count_before, route
            )
            if fields is None:
                return
            labels, key = fields
            self._guard_counter.add(1, labels)
            record = attributes.guard_record(
                labels,
                key,
                prompt_id=prompt_id,
                decision=decision,
                guard=guard,
                batch_ordinal=batch_ordinal,
                receipt=receipt,
            )
            self._log(GUARD_LOG_EVENT, record, body=guard_log_body(labels["decision"]))
        except Exception as error:
            self._report(error)

    def loop_detected(self, *, prompt_id: str, loop_type: str) -> None:
        """Record the stop in OpenTelemetry; forward it to product analytics unless OTel-only."""
        try:
            label = attributes.loop_label(loop_type)
            self._loop_counter.add(1, {"loop_type": label})
            self._log(
                LOOP_DETECTED_EVENT,
                {"loop_type": label, "prompt_id": str(prompt_id)},
                SeverityNumber.WARN,
                body=loop_log_body(label),
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
        """Count one settled call for the execution SLI (a cancelled call as ``cancelled``)."""
        try:
            self._tool_call_counter.add(
                1, attributes.tool_call_labels(terminal_status, execution_status, tool_type)
            )
        except Exception as error:
            self._report(error)

    # -- OutcomeTelemetry (log records only: prompt ids are never metric labels) --

    def prompt_finished(self, outcome: PromptOutcome) -> None:
        """Log the prompt's outcome record (``PROMPT_EVENT``)."""
        try:
            self._log(PROMPT_EVENT, attributes.prompt_record(outcome))
        except Exception as error:
            self._report(error)

    def call_settled(self, record: CallRecord) -> None:
        """Log one settled call (``TOOL_CALL_EVENT``): statuses and tool type only."""
        try:
            self._log(TOOL_CALL_EVENT, attributes.call_record(record))
        except Exception as error:
            self._report(error)

    def session_closed(self, *, session_id: str, reason: str, prompts: int) -> None:
        """Log the end of a session (``SESSION_CLOSED_EVENT``)."""
        try:
            self._log(
                SESSION_CLOSED_EVENT,
                attributes.session_closed_record(
                    session_id=session_id, reason=reason, prompts=prompts
                ),
            )
        except Exception as error:
            self._report(error)

    def _log(
        self,
        event: str,
        record: attributes.Attributes,
        severity: SeverityNumber = SeverityNumber.INFO,
        *,
        body: str | None = None,
    ) -> None:
        # The name twice: OTLP's eventName, and the ``event.name`` attribute the original
        # writes (and fleets filter on); the body is the original's text where it has one.
        self._logger.emit(
            timestamp=self._clock_ns(),
            event_name=event,
            severity_number=severity,
            severity_text=severity.name,  # "INFO", "WARN"
            body=event if body is None else body,
            attributes={**record, EVENT_NAME_ATTRIBUTE: event},
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
