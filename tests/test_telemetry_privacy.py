"""Privacy and isolation of the telemetry sink, proven with sentinels and failing backends.

Every string that could leak -- prompt ids, call ids, tool names (which carry
MCP server names), execution error types, unknown statuses and loop types --
is a unique sentinel.  The real guard reduces the receipts and the sink is
called the way the session calls it.  Then:

* no sentinel appears anywhere in the exported metrics, and every metric
  attribute key and value lies in the documented finite sets;
* log records hold only the documented fields: the prompt id and the frozen
  execution error type may appear there (and only there), tool names and
  call ids never;
* a sink whose backends raise on every call, or whose exporters fail,
  changes no decision and no guard state.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator, Sequence
from typing import Any

import attrs
import pytest
from opentelemetry.sdk._logs import LoggerProvider, LogRecordProcessor
from opentelemetry.sdk._logs.export import (
    LogRecordExporter,
    SimpleLogRecordProcessor,
)
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import (
    MetricExporter,
    PeriodicExportingMetricReader,
)
from telemetry_harness import Harness

from tool_failure_guard.guard import (
    BatchReceipt,
    DecisionKind,
    GuardMode,
    InputBoundary,
    Observation,
    RepeatedToolFailureGuard,
)
from tool_failure_guard.telemetry import sink as telemetry
from tool_failure_guard.telemetry.sink import (
    GUARD_COUNTER,
    GUARD_LOG_EVENT,
    LOOP_DETECTED_COUNTER,
    LOOP_DETECTED_EVENT,
    REPEATED_TOOL_EXECUTION_FAILURE,
    TOOL_CALL_COUNTER,
    LoopDetectedEvent,
    NullTelemetry,
    OpenTelemetrySink,
)

# -- sentinels ----------------------------------------------------------------


class Sentinels:
    """Unique marker strings, one family per thing that could leak."""

    def __init__(self) -> None:
        tag = uuid.uuid4().hex[:12]
        self.tag = tag
        self.server = f"SENTINELserver{tag}"
        self.mcp_tool = f"mcp__{self.server}__SENTINELmcptool{tag}"
        self.native_tool = f"SENTINELnativetool{tag}"
        self.other_tool = f"SENTINELothertool{tag}"
        self.error_type = f"SENTINELerrortype{tag}"
        self.other_error_type = f"SENTINELothererror{tag}"
        self.unknown_status = f"SENTINELstatus{tag}"
        self.unknown_tool_type = f"SENTINELtooltype{tag}"
        self.unknown_loop = f"SENTINELloop{tag}"
        self._calls = 0

    def call(self) -> str:
        self._calls += 1
        return f"SENTINELcall{self.tag}n{self._calls}"

    def prompt(self, name: str) -> str:
        return f"SENTINELprompt{self.tag}{name}"

    def never_exported(self) -> list[str]:
        """Strings that may appear in no metric and no log record."""
        return [
            self.server,
            self.mcp_tool,
            self.native_tool,
            self.other_tool,
            f"SENTINELcall{self.tag}",
            self.unknown_status,
            self.unknown_tool_type,
            self.unknown_loop,
        ]

    def log_only(self) -> list[str]:
        """Strings that may appear in log records but never in metrics."""
        return [f"SENTINELprompt{self.tag}", self.error_type, self.other_error_type]


def fail(s: Sentinels, tool: str, error: str, tool_type: str = "mcp") -> Observation:
    return Observation(
        call_id=s.call(),
        terminal_status="error",
        execution_status="error",
        execution_error_type=error,
        policy_tool_name=tool,
        tool_type=tool_type,
    )


def ok(s: Sentinels, tool: str, tool_type: str = "native") -> Observation:
    return Observation(
        call_id=s.call(),
        terminal_status="success",
        execution_status="success",
        policy_tool_name=tool,
        tool_type=tool_type,
    )


def other(s: Sentinels, terminal: str, execution: str | None, tool: str) -> Observation:
    return Observation(
        call_id=s.call(),
        terminal_status=terminal,
        execution_status=execution,
        execution_error_type=s.other_error_type,
        policy_tool_name=tool,
        tool_type="native",
    )


Batch = BatchReceipt | tuple[BatchReceipt, InputBoundary]


def prompts(s: Sentinels) -> list[tuple[str, GuardMode, list[Batch]]]:
    """Prompts that together reach every decision kind and many reset reasons."""

    def failing(count: int, tool: str | None = None, error: str | None = None) -> BatchReceipt:
        return BatchReceipt(
            [fail(s, tool or s.mcp_tool, error or s.error_type) for _ in range(count)]
            + [ok(s, s.other_tool)]  # an unrelated tool's success never resets
        )

    enforce_stop = [failing(4), failing(4), failing(4)]
    shadow = [
        failing(4),
        failing(4),  # would_warn
        failing(1),  # would_stop, then latched
        failing(3),  # latched: nothing
    ]
    warn = [
        failing(5),
        failing(3),  # warned
        BatchReceipt([ok(s, s.mcp_tool, "mcp")]),  # the candidate's own success: reset
        failing(2, s.native_tool, s.other_error_type),  # a new candidate
        BatchReceipt([fail(s, s.mcp_tool, s.error_type), fail(s, s.native_tool, s.error_type)]),
        failing(1),
        (failing(1), InputBoundary(has_external_input=True)),
        failing(1),
        (failing(1), InputBoundary(has_queued_prompt=True)),
        failing(1),
        BatchReceipt([other(s, "cancelled", "error", s.mcp_tool)]),
        failing(1),
        BatchReceipt([other(s, "error", "not_started", s.native_tool)]),
        failing(1),
        BatchReceipt([other(s, "error", "success", s.native_tool)]),
        failing(1),
        BatchReceipt([other(s, "error", s.unknown_status, s.native_tool)]),
        failing(1),
        BatchReceipt([other(s, "success", "error", s.native_tool)]),
        failing(1),
        BatchReceipt([fail(s, s.mcp_tool, s.error_type)], complete=False),
        failing(1),
        (failing(1), InputBoundary(reliable=False)),
    ]
    return [
        (s.prompt("enforce"), GuardMode.ENFORCE, enforce_stop),
        (s.prompt("shadow"), GuardMode.SHADOW, shadow),
        (s.prompt("warn"), GuardMode.WARN, warn),
        (s.prompt("off"), GuardMode.OFF, enforce_stop),
    ]


# -- driving the sink like the session ------------------------------------------


@attrs.frozen
class Step:
    """The guard's observable answer to one batch: its decision and resulting state."""

    kind: DecisionKind
    reason: str | None
    phase: str
    failure_count: int
    batch_count: int
    candidate_ordinal: int
    enforcement_disabled: bool


def run(sink: Any, s: Sentinels) -> list[Step]:
    steps: list[Step] = []
    for prompt_id, mode, batches in prompts(s):
        guard = RepeatedToolFailureGuard(mode)
        for item in batches:
            receipt, boundary = item if isinstance(item, tuple) else (item, None)
            for observation in receipt.observations:
                sink.tool_call_settled(
                    terminal_status=observation.terminal_status,
                    execution_status=observation.execution_status,
                    tool_type=observation.tool_type,
                )
            if mode is GuardMode.OFF:
                continue
            failures_before, batches_before = guard.failure_count, guard.batch_count
            decision = guard.observe(receipt, boundary)
            if decision.kind is not DecisionKind.NONE:
                sink.guard_decision(
                    prompt_id=prompt_id,
                    mode=mode,
                    decision=decision,
                    guard=guard,
                    failure_count_before=failures_before,
                    batch_count_before=batches_before,
                    receipt=receipt,
                )
            steps.append(
                Step(
                    decision.kind,
                    decision.reason,
                    guard.phase,
                    guard.failure_count,
                    guard.batch_count,
                    guard.candidate_ordinal,
                    guard.enforcement_disabled,
                )
            )
            if decision.kind is DecisionKind.STOP:
                sink.loop_detected(prompt_id=prompt_id, loop_type=REPEATED_TOOL_EXECUTION_FAILURE)
                break
    # Other protections' loop events, and calls whose strings no receipt would accept.
    sink.loop_detected(prompt_id=s.prompt("cap"), loop_type="turn_tool_call_cap")
    sink.loop_detected(prompt_id=s.prompt("odd"), loop_type=s.unknown_loop)
    sink.tool_call_settled(
        terminal_status=s.unknown_status,
        execution_status=s.unknown_status,
        tool_type=s.unknown_tool_type,
    )
    outcome_records(sink, s)
    return steps


def outcome_records(sink: Any, s: Sentinels) -> None:
    """The rollout records, fed every string a careless caller could pass them."""
    if not isinstance(sink, telemetry.OutcomeTelemetry):
        return
    for prompt_id, mode, batches in prompts(s):
        for ordinal, item in enumerate(batches, start=1):
            receipt = item[0] if isinstance(item, tuple) else item
            for index, observation in enumerate(receipt.observations):
                sink.call_settled(
                    telemetry.CallRecord(
                        prompt_id=prompt_id,
                        batch_ordinal=ordinal,
                        call_ordinal=index,
                        terminal_status=observation.terminal_status,
                        execution_status=observation.execution_status,
                        execution_error_type=observation.execution_error_type,
                        tool_type=observation.tool_type,
                        provider_duplicate=False,
                    )
                )
        sink.prompt_finished(
            telemetry.PromptOutcome(
                prompt_id=prompt_id,
                route=s.unknown_status,  # an unknown route/stop reason/loop type is bounded
                mode=mode.value,
                stop_reason=s.unknown_status,
                loop_type=s.unknown_loop,
                model_turns=3,
                tool_calls=12,
                tool_call_cap=100,
                batches=len(batches),
                input_tokens=10,
                output_tokens=2,
                model_latency_s=0.5,
                wall_time_s=1.25,
                drain_supported=True,
                input_boundary="drain",
            )
        )
    sink.session_closed(session_id=s.prompt("session"), reason=s.unknown_status, prompts=4)


class Recorded(Harness):
    """The shared in-memory sink, with the whole export as JSON for sentinel searches."""

    def __init__(self) -> None:
        super().__init__("privacy-test")

    def metrics(self) -> tuple[str, dict[str, list[dict[str, Any]]]]:
        """(the whole export as JSON, metric name -> attribute dicts of its points)."""
        data = self.reader.get_metrics_data()
        assert data is not None
        points: dict[str, list[dict[str, Any]]] = {}
        for rm in data.resource_metrics:
            for sm in rm.scope_metrics:
                for metric in sm.metrics:
                    points.setdefault(metric.name, []).extend(
                        dict(point.attributes or {}) for point in metric.data.data_points
                    )
        return data.to_json(), points


@pytest.fixture
def recorded() -> Iterator[tuple[Recorded, Sentinels, list[Step]]]:
    s = Sentinels()
    rec = Recorded()
    steps = run(rec.sink, s)
    yield rec, s, steps


# -- the receipt cannot carry what must not leak ----------------------------------


def test_receipt_entries_have_no_room_for_arguments_results_or_error_text() -> None:
    assert set(attrs.fields_dict(Observation)) == {
        "call_id",
        "terminal_status",
        "execution_status",
        "execution_error_type",
        "policy_tool_name",
        "tool_type",
        "provider_duplicate",
    }


# -- metrics ---------------------------------------------------------------------


def test_scenario_reaches_every_decision_label(
    recorded: tuple[Recorded, Sentinels, list[Step]],
) -> None:
    rec, _, _ = recorded
    _, points = rec.metrics()
    decisions = {p["decision"] for p in points[GUARD_COUNTER]}
    assert decisions == set(telemetry.DECISION_LABELS.values())
    reasons = {p["reset_reason"] for p in points[GUARD_COUNTER] if "reset_reason" in p}
    assert reasons == {
        "success",
        "mixed",
        "external_input",
        "queued_prompt",
        "cancelled",
        "not_started",
        "post_execution_failure",
        "unknown",
        "contract_violation",
        "incomplete",
        "unreliable_input",
    }


def test_no_sentinel_in_any_exported_metric(
    recorded: tuple[Recorded, Sentinels, list[Step]],
) -> None:
    rec, s, _ = recorded
    exported, _ = rec.metrics()
    for sentinel in s.never_exported() + s.log_only() + ["SENTINEL"]:
        assert sentinel not in exported


def test_every_metric_attribute_lies_in_the_documented_sets(
    recorded: tuple[Recorded, Sentinels, list[Step]],
) -> None:
    rec, _, _ = recorded
    _, points = rec.metrics()
    documented = {
        GUARD_COUNTER: telemetry.GUARD_METRIC_ATTRIBUTE_VALUES,
        TOOL_CALL_COUNTER: telemetry.TOOL_CALL_ATTRIBUTE_VALUES,
        LOOP_DETECTED_COUNTER: telemetry.LOOP_DETECTED_ATTRIBUTE_VALUES,
    }
    assert set(points) == set(documented)
    always = {
        "route",
        "mode",
        "phase_before",
        "phase_after",
        "decision",
        "failure_count_bucket",
        "batch_count_bucket",
    }
    for name, attribute_sets in points.items():
        for attributes in attribute_sets:
            for key, value in attributes.items():
                assert key in documented[name], (name, key)
                assert value in documented[name][key], (name, key, value)
    for attributes in points[GUARD_COUNTER]:
        assert always <= set(attributes)
        optional = set(attributes) - always
        # Either the reset reason, or the candidate's statuses (and maybe its tool type).
        assert optional in (
            {"reset_reason"},
            {"terminal_status", "execution_status"},
            {"terminal_status", "execution_status", "tool_type"},
        )
        assert (attributes["decision"] == "reset") == (optional == {"reset_reason"})


# -- logs ------------------------------------------------------------------------


def test_logs_hold_only_documented_fields_and_no_private_strings(
    recorded: tuple[Recorded, Sentinels, list[Step]],
) -> None:
    rec, s, _ = recorded
    records = rec.exporter.get_finished_logs()
    guard_fields = set(telemetry.GUARD_METRIC_ATTRIBUTE_VALUES) | telemetry.GUARD_LOG_ONLY_FIELDS
    seen_log_only: set[str] = set()
    for record in records:
        serialised = record.to_json()
        for sentinel in s.never_exported():
            assert sentinel not in serialised
        attributes = dict(record.log_record.attributes or {})
        # The name twice (OTLP's eventName, the original's event.name attribute), nothing else.
        assert attributes.pop(telemetry.EVENT_NAME_ATTRIBUTE) == record.log_record.event_name
        assert not telemetry.ORIGINAL_ONLY_ATTRIBUTES & set(attributes)
        # A body of constant text: the original's words with a closed-set label, else the name.
        assert record.log_record.body == {
            GUARD_LOG_EVENT: telemetry.guard_log_body(str(attributes.get("decision"))),
            LOOP_DETECTED_EVENT: telemetry.loop_log_body(str(attributes.get("loop_type"))),
        }.get(record.log_record.event_name, record.log_record.event_name)
        if record.log_record.event_name == GUARD_LOG_EVENT:
            assert set(attributes) <= guard_fields
            assert {"prompt_id", "candidate_ordinal"} <= set(attributes)
            for key, value in attributes.items():
                if key in telemetry.GUARD_METRIC_ATTRIBUTE_VALUES:
                    assert value in telemetry.GUARD_METRIC_ATTRIBUTE_VALUES[key]
            assert attributes["prompt_id"].startswith(f"SENTINELprompt{s.tag}")
            assert isinstance(attributes["candidate_ordinal"], int)
            if "execution_error_type" in attributes:
                assert attributes["decision"] != "reset"
                assert attributes["execution_error_type"] in (s.error_type, s.other_error_type)
                seen_log_only.add(attributes["execution_error_type"])
            seen_log_only.add(attributes["prompt_id"])
        elif record.log_record.event_name == telemetry.PROMPT_EVENT:
            assert set(attributes) <= telemetry.PROMPT_LOG_FIELDS
            assert attributes["route"] == "other"
            assert attributes["stop_reason"] == "other"
            assert attributes["loop_type"] == "other"
            seen_log_only.add(attributes["prompt_id"])
        elif record.log_record.event_name == telemetry.TOOL_CALL_EVENT:
            assert set(attributes) <= telemetry.TOOL_CALL_LOG_FIELDS
            for key in ("terminal_status", "execution_status", "tool_type"):
                assert attributes[key] in telemetry.TOOL_CALL_ATTRIBUTE_VALUES[key]
            if "execution_error_type" in attributes:
                seen_log_only.add(attributes["execution_error_type"])
        elif record.log_record.event_name == telemetry.SESSION_CLOSED_EVENT:
            assert set(attributes) == telemetry.SESSION_CLOSED_LOG_FIELDS
            assert attributes["close_reason"] == "unknown"
        else:
            assert record.log_record.event_name == LOOP_DETECTED_EVENT
            assert set(attributes) == {"loop_type", "prompt_id"}
            assert attributes["loop_type"] in telemetry.LOOP_DETECTED_ATTRIBUTE_VALUES["loop_type"]
    # The detector works: the log-only sentinels really are in the logs.
    assert {s.error_type, s.other_error_type, s.prompt("enforce"), s.prompt("warn")} <= (
        seen_log_only
    )
    # Off prompts get no guard record, but every prompt gets its outcome record.
    guard_only = [r.to_json() for r in records if r.log_record.event_name != telemetry.PROMPT_EVENT]
    assert s.prompt("off") not in json.dumps(
        [j for j in guard_only if telemetry.TOOL_CALL_EVENT not in j]
    )
    events = {r.log_record.event_name for r in records}
    assert {telemetry.PROMPT_EVENT, telemetry.TOOL_CALL_EVENT, telemetry.SESSION_CLOSED_EVENT} <= (
        events
    )


def test_the_guard_stop_never_reaches_product_analytics(
    recorded: tuple[Recorded, Sentinels, list[Step]],
) -> None:
    rec, s, steps = recorded
    assert DecisionKind.STOP in {step.kind for step in steps}
    assert rec.analytics == [
        LoopDetectedEvent(s.prompt("cap"), "turn_tool_call_cap"),
        LoopDetectedEvent(s.prompt("odd"), s.unknown_loop),
    ]


# -- failure isolation -------------------------------------------------------------


class Boom(RuntimeError):
    pass


class RaisingInstrument:
    def add(self, *args: object, **kwargs: object) -> None:
        raise Boom("add")


class RaisingMeter:
    def create_counter(self, *args: object, **kwargs: object) -> RaisingInstrument:
        return RaisingInstrument()


class RaisingMeterProvider:
    def get_meter(self, *args: object, **kwargs: object) -> RaisingMeter:
        return RaisingMeter()

    def force_flush(self, *args: object) -> bool:
        raise Boom("flush")

    def shutdown(self, *args: object) -> None:
        raise Boom("shutdown")


class RaisingLogger:
    def emit(self, *args: object, **kwargs: object) -> None:
        raise Boom("emit")


class RaisingLoggerProvider:
    def get_logger(self, *args: object, **kwargs: object) -> RaisingLogger:
        return RaisingLogger()

    def force_flush(self, *args: object) -> bool:
        raise Boom("flush")

    def shutdown(self, *args: object) -> None:
        raise Boom("shutdown")


def raising_analytics(event: LoopDetectedEvent) -> None:
    raise Boom("analytics")


class RaisingMetricExporter(MetricExporter):
    def export(self, metrics_data: Any, timeout_millis: float = 10_000, **kwargs: Any) -> Any:
        raise Boom("export")

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        raise Boom("flush")

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
        raise Boom("shutdown")


class RaisingLogExporter(LogRecordExporter):
    def export(self, batch: Sequence[Any]) -> Any:
        raise Boom("export")

    def shutdown(self) -> None:
        raise Boom("shutdown")

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        raise Boom("flush")


class RaisingProcessor(LogRecordProcessor):
    def on_emit(self, log_record: Any) -> None:
        raise Boom("on_emit")

    def shutdown(self) -> None:
        raise Boom("shutdown")

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        raise Boom("flush")


def failing_sdk_sink() -> OpenTelemetrySink:
    """Real SDK providers whose exporters and a processor raise on every call."""
    logger_provider = LoggerProvider(shutdown_on_exit=False)
    logger_provider.add_log_record_processor(SimpleLogRecordProcessor(RaisingLogExporter()))
    logger_provider.add_log_record_processor(RaisingProcessor())
    meter_provider = MeterProvider(
        metric_readers=[
            PeriodicExportingMetricReader(RaisingMetricExporter(), export_interval_millis=1e12)
        ],
        shutdown_on_exit=False,
    )
    return OpenTelemetrySink(
        meter_provider=meter_provider,
        logger_provider=logger_provider,
        product_analytics=raising_analytics,
    )


def test_a_sink_that_raises_on_every_call_changes_no_decision(
    capsys: pytest.CaptureFixture[str],
) -> None:
    s = Sentinels()
    baseline = run(NullTelemetry(), s)
    recording = run(Recorded().sink, s)
    broken = OpenTelemetrySink(
        meter_provider=RaisingMeterProvider(),  # type: ignore[arg-type]
        logger_provider=RaisingLoggerProvider(),  # type: ignore[arg-type]
        product_analytics=raising_analytics,
    )
    failing = run(broken, s)
    sdk = failing_sdk_sink()
    failing_sdk = run(sdk, s)
    assert len(baseline) > 20
    assert recording == baseline
    assert failing == baseline
    assert failing_sdk == baseline
    assert broken.force_flush() is False
    broken.shutdown()
    sdk.force_flush()
    sdk.shutdown()
    out, err = capsys.readouterr()
    assert out == ""
    # Each failing sink reported once, naming the exception type only.
    assert err.count("tool-failure-guard: telemetry error ignored (Boom)") == 2
    for sentinel in s.never_exported():
        assert sentinel not in err
