"""The OpenTelemetry sink: labels, buckets, routing, the execution SLI, building it.

The guard is driven for real (``RepeatedToolFailureGuard.observe``) and the
sink is called the way the session calls it; what the sink emitted is read
back through the SDK's in-memory metric reader and log exporter.
"""

from __future__ import annotations

import logging
import re
import sys
import types
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, ClassVar

import pytest
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter
from opentelemetry.sdk.metrics.export import (
    MetricExporter,
    MetricExportResult,
)
from telemetry_harness import Harness

from tool_failure_guard.guard import (
    BatchReceipt,
    Decision,
    DecisionKind,
    GuardMode,
    InputBoundary,
    Observation,
    RepeatedToolFailureGuard,
)
from tool_failure_guard.telemetry import sink as telemetry
from tool_failure_guard.telemetry.build import (
    TelemetryConfigurationError,
    build_telemetry,
    telemetry_resource,
)
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
    batch_count_bucket,
    failure_count_bucket,
)


def fail(
    call_id: str, tool: str = "read_file", error: str = "file_not_found", tool_type: str = "native"
) -> Observation:
    return Observation(
        call_id=call_id,
        terminal_status="error",
        execution_status="error",
        execution_error_type=error,
        policy_tool_name=tool,
        tool_type=tool_type,
    )


def ok(call_id: str, tool: str = "read_file", tool_type: str = "native") -> Observation:
    return Observation(
        call_id=call_id,
        terminal_status="success",
        execution_status="success",
        policy_tool_name=tool,
        tool_type=tool_type,
    )


def failing_batch(prefix: str, count: int, **kwargs: str) -> BatchReceipt:
    return BatchReceipt([fail(f"{prefix}-{i}", **kwargs) for i in range(count)])


def run_prompt(
    sink: Any,
    mode: GuardMode,
    batches: Iterable[BatchReceipt | tuple[BatchReceipt, InputBoundary]],
    prompt_id: str = "prompt-1",
) -> list[Decision]:
    """Drive one prompt the way the session does; return every decision."""
    guard = RepeatedToolFailureGuard(mode)
    decisions: list[Decision] = []
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
        decisions.append(decision)
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
        if decision.kind is DecisionKind.STOP:
            sink.loop_detected(prompt_id=prompt_id, loop_type=REPEATED_TOOL_EXECUTION_FAILURE)
            break
    return decisions


# -- the documented finite sets -------------------------------------------------


def test_documented_label_sets_are_exactly_the_issues() -> None:
    assert {k: set(v) for k, v in telemetry.GUARD_METRIC_ATTRIBUTE_VALUES.items()} == {
        "route": {
            "acp_foreground",
            "pydantic_ai",
            "openai_agents",
            "langchain",
            "claude_agent_sdk",
            "claude_code_hook",
            "qwen_code_hook",
            "gemini_cli_hook",
            "codex_hook",
            "copilot_hook",
            "other",
        },
        "mode": {"shadow", "warn", "enforce"},
        "phase_before": {"idle", "tracking", "warned", "latched"},
        "phase_after": {"idle", "tracking", "warned", "latched"},
        "decision": {"reset", "tracked", "would_warn", "warned", "would_stop", "stopped"},
        "failure_count_bucket": {"0", "1-2", "3-4", "5-7", "8+"},
        "batch_count_bucket": {"0", "1", "2", "3+"},
        "reset_reason": {
            "success",
            "cancelled",
            "not_started",
            "post_execution_failure",
            "unknown",
            "mixed",
            "incomplete",
            "external_input",
            "queued_prompt",
            "unreliable_input",
            "contract_violation",
        },
        "terminal_status": {"error"},
        "execution_status": {"error"},
        "tool_type": {"native", "mcp"},
    }
    log_only = telemetry.GUARD_LOG_ONLY_FIELDS
    assert log_only == {
        "prompt_id",
        "candidate_ordinal",
        "execution_error_type",
        "batch_ordinal",
        "receipt_complete",
    }
    assert not telemetry.GUARD_LOG_ONLY_FIELDS & set(telemetry.GUARD_METRIC_ATTRIBUTE_VALUES)


# -- buckets ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("count", "bucket"),
    [
        (0, "0"),
        (1, "1-2"),
        (2, "1-2"),
        (3, "3-4"),
        (4, "3-4"),
        (5, "5-7"),
        (7, "5-7"),
        (8, "8+"),
        (9, "8+"),
        (1000, "8+"),
    ],
)
def test_failure_count_bucket_edges(count: int, bucket: str) -> None:
    assert failure_count_bucket(count) == bucket


@pytest.mark.parametrize(("count", "bucket"), [(0, "0"), (1, "1"), (2, "2"), (3, "3+"), (50, "3+")])
def test_batch_count_bucket_edges(count: int, bucket: str) -> None:
    assert batch_count_bucket(count) == bucket


# -- guard transitions ------------------------------------------------------------


def test_enforce_streak_emits_tracked_warned_stopped_with_candidate_labels() -> None:
    h = Harness()
    decisions = run_prompt(
        h.sink, GuardMode.ENFORCE, [failing_batch(f"b{n}", 4) for n in range(3)], "p-enforce"
    )
    assert [d.kind for d in decisions] == [
        DecisionKind.TRACKED,
        DecisionKind.WARN,
        DecisionKind.STOP,
    ]
    candidate = {
        "route": "acp_foreground",
        "mode": "enforce",
        "terminal_status": "error",
        "execution_status": "error",
        "tool_type": "native",
    }
    assert sorted(h.points(GUARD_COUNTER), key=lambda p: p[0]["phase_before"]) == [
        (
            candidate
            | {
                "phase_before": "idle",
                "phase_after": "tracking",
                "decision": "tracked",
                "failure_count_bucket": "3-4",
                "batch_count_bucket": "1",
            },
            1,
        ),
        (
            candidate
            | {
                "phase_before": "tracking",
                "phase_after": "warned",
                "decision": "warned",
                "failure_count_bucket": "8+",
                "batch_count_bucket": "2",
            },
            1,
        ),
        (
            candidate
            | {
                "phase_before": "warned",
                "phase_after": "latched",
                "decision": "stopped",
                "failure_count_bucket": "8+",
                "batch_count_bucket": "3+",
            },
            1,
        ),
    ]
    logs = h.logs(GUARD_LOG_EVENT)
    assert [log["decision"] for log in logs] == ["tracked", "warned", "stopped"]
    for log in logs:
        assert log["prompt_id"] == "p-enforce"
        assert log["candidate_ordinal"] == 1
        assert log["execution_error_type"] == "file_not_found"


@pytest.mark.parametrize(
    ("mode", "labels"),
    [
        (GuardMode.SHADOW, ["tracked", "would_warn", "would_stop"]),
        (GuardMode.WARN, ["tracked", "warned", "would_stop"]),
    ],
)
def test_shadow_and_warn_decision_labels(mode: GuardMode, labels: list[str]) -> None:
    h = Harness()
    run_prompt(h.sink, mode, [failing_batch(f"b{n}", 4) for n in range(5)])
    assert [log["decision"] for log in h.logs(GUARD_LOG_EVENT)] == labels
    assert {p[0]["mode"] for p in h.points(GUARD_COUNTER)} == {mode.value}
    # Latched prompts say nothing more: two extra batches added no transition.
    assert sum(value for _, value in h.points(GUARD_COUNTER)) == 3


def test_reset_buckets_come_from_the_state_before_the_reset() -> None:
    h = Harness()
    decisions = run_prompt(
        h.sink,
        GuardMode.SHADOW,
        [
            failing_batch("a", 1),
            failing_batch("b", 2),
            failing_batch("c", 2),
            BatchReceipt([ok("d-0")]),  # the candidate's own tool succeeds
        ],
    )
    assert [d.kind for d in decisions] == [DecisionKind.TRACKED] * 3 + [DecisionKind.RESET]
    tracked = [a for a, _ in h.points(GUARD_COUNTER) if a["decision"] == "tracked"]
    assert sorted((a["failure_count_bucket"], a["batch_count_bucket"]) for a in tracked) == [
        ("1-2", "1"),
        ("3-4", "2"),
        ("5-7", "3+"),
    ]
    (reset,) = [a for a, _ in h.points(GUARD_COUNTER) if a["decision"] == "reset"]
    assert reset == {
        "route": "acp_foreground",
        "mode": "shadow",
        "phase_before": "tracking",
        "phase_after": "idle",
        "decision": "reset",
        "failure_count_bucket": "5-7",
        "batch_count_bucket": "3+",
        "reset_reason": "success",
    }
    (reset_log,) = [log for log in h.logs(GUARD_LOG_EVENT) if log["decision"] == "reset"]
    assert "execution_error_type" not in reset_log
    # the guard reads 0 in idle; the reset's record names the streak it ended
    assert reset_log["candidate_ordinal"] == 1


def test_reset_from_idle_on_unreliable_input_carries_zero_buckets_and_reason() -> None:
    h = Harness()
    unreliable = InputBoundary(reliable=False)
    decisions = run_prompt(h.sink, GuardMode.ENFORCE, [(failing_batch("a", 1), unreliable)])
    assert [d.kind for d in decisions] == [DecisionKind.RESET]
    ((attributes, _),) = h.points(GUARD_COUNTER)
    assert attributes["reset_reason"] == "unreliable_input"
    assert (attributes["failure_count_bucket"], attributes["batch_count_bucket"]) == ("0", "0")
    assert "terminal_status" not in attributes and "tool_type" not in attributes
    (log,) = h.logs(GUARD_LOG_EVENT)
    assert log["candidate_ordinal"] == 0  # the reset ended no streak


def test_reset_logs_the_ended_streaks_ordinal_and_the_next_candidate_the_next() -> None:
    h = Harness()
    run_prompt(
        h.sink,
        GuardMode.SHADOW,
        [
            failing_batch("a", 2),
            BatchReceipt([ok("b-0")]),  # the candidate's own tool succeeds: reset
            BatchReceipt([ok("c-0")]),  # idle: none, nothing emitted
            failing_batch("d", 2),
            failing_batch("e", 1, tool="run_shell", error="exit_nonzero"),
            (failing_batch("f", 1), InputBoundary(has_external_input=True)),
        ],
    )
    assert [(log["decision"], log["candidate_ordinal"]) for log in h.logs(GUARD_LOG_EVENT)] == [
        ("tracked", 1),
        ("reset", 1),
        ("tracked", 2),
        ("tracked", 3),
        ("reset", 3),
    ]


def test_tool_type_only_when_every_matching_entry_agrees() -> None:
    h = Harness()
    mixed = BatchReceipt(
        [
            fail("m-0", tool="mcp__srv__query", error="mcp_tool_error", tool_type="mcp"),
            fail("m-1", tool="mcp__srv__query", error="mcp_tool_error", tool_type="native"),
            ok("m-2", tool="edit", tool_type="native"),
        ]
    )
    agreeing = BatchReceipt(
        [
            fail("a-0", tool="mcp__srv__query", error="mcp_tool_error", tool_type="mcp"),
            ok("a-1", tool="edit", tool_type="native"),  # another tool: does not count
        ]
    )
    run_prompt(h.sink, GuardMode.SHADOW, [mixed], "p-mixed")
    run_prompt(h.sink, GuardMode.SHADOW, [agreeing], "p-agree")
    by_prompt = {log["prompt_id"]: log for log in h.logs(GUARD_LOG_EVENT)}
    assert "tool_type" not in by_prompt["p-mixed"]
    assert by_prompt["p-mixed"]["terminal_status"] == "error"
    assert by_prompt["p-agree"]["tool_type"] == "mcp"
    assert {a.get("tool_type") for a, _ in h.points(GUARD_COUNTER)} == {None, "mcp"}


def test_new_candidate_gets_a_new_ordinal_in_logs_only() -> None:
    h = Harness()
    run_prompt(
        h.sink,
        GuardMode.SHADOW,
        [
            failing_batch("a", 2, tool="read_file"),
            failing_batch("b", 2, tool="run_shell", error="exit_nonzero"),
        ],
    )
    logs = h.logs(GUARD_LOG_EVENT)
    assert [(log["candidate_ordinal"], log["execution_error_type"]) for log in logs] == [
        (1, "file_not_found"),
        (2, "exit_nonzero"),
    ]
    for attributes, _ in h.points(GUARD_COUNTER):
        assert not set(attributes) & {"candidate_ordinal", "prompt_id", "execution_error_type"}


def test_nothing_is_emitted_for_mode_off_or_none_decisions() -> None:
    h = Harness()
    run_prompt(h.sink, GuardMode.OFF, [failing_batch(f"b{n}", 4) for n in range(3)])
    # A batch of unrelated successes is a `none` decision: the driver does not report it,
    # and the sink refuses it if called anyway; so does a transition reported under `off`.
    guard = RepeatedToolFailureGuard(GuardMode.SHADOW)
    quiet = BatchReceipt([ok("q-0", tool="edit")])
    none = guard.observe(quiet)
    assert none.kind is DecisionKind.NONE
    tracked = guard.observe(failing_batch("t", 1))
    assert tracked.kind is DecisionKind.TRACKED
    for mode, decision in [(GuardMode.SHADOW, none), (GuardMode.OFF, tracked)]:
        h.sink.guard_decision(
            prompt_id="p",
            mode=mode,
            decision=decision,
            guard=guard,
            failure_count_before=0,
            batch_count_before=0,
            receipt=quiet,
        )
    assert h.points(GUARD_COUNTER) == []
    assert h.logs(GUARD_LOG_EVENT) == []
    # The SLI still counts the off-mode calls: it is not guard telemetry.
    assert sum(value for _, value in h.points(TOOL_CALL_COUNTER)) == 12


def test_idle_to_idle_resets_emit_nothing() -> None:
    h = Harness()
    cancelled = Observation(
        call_id="c-0", terminal_status="cancelled", execution_status="cancelled"
    )
    decisions = run_prompt(h.sink, GuardMode.SHADOW, [BatchReceipt([cancelled])])
    assert [d.kind for d in decisions] == [DecisionKind.NONE]
    assert h.points(GUARD_COUNTER) == []


# -- the loop event --------------------------------------------------------------


def test_guard_stop_loop_event_goes_to_opentelemetry_only() -> None:
    h = Harness()
    run_prompt(h.sink, GuardMode.ENFORCE, [failing_batch(f"b{n}", 4) for n in range(3)], "p-loop")
    assert h.analytics == []
    assert h.logs(LOOP_DETECTED_EVENT) == [
        {"loop_type": "repeated_tool_execution_failure", "prompt_id": "p-loop"}
    ]
    assert h.points(LOOP_DETECTED_COUNTER) == [
        ({"loop_type": "repeated_tool_execution_failure"}, 1)
    ]


def test_other_loop_types_keep_reaching_product_analytics() -> None:
    h = Harness()
    for loop_type in [
        "invalid_tool_params_stagnation",
        REPEATED_TOOL_EXECUTION_FAILURE,
        "global_tool_call_duplicate",
        "turn_tool_call_cap",
        "some_future_loop",
    ]:
        h.sink.loop_detected(prompt_id=f"p-{loop_type}", loop_type=loop_type)
    assert h.analytics == [
        LoopDetectedEvent("p-invalid_tool_params_stagnation", "invalid_tool_params_stagnation"),
        LoopDetectedEvent("p-global_tool_call_duplicate", "global_tool_call_duplicate"),
        LoopDetectedEvent("p-turn_tool_call_cap", "turn_tool_call_cap"),
        LoopDetectedEvent("p-some_future_loop", "some_future_loop"),
    ]
    assert [log["loop_type"] for log in h.logs(LOOP_DETECTED_EVENT)] == [
        "invalid_tool_params_stagnation",
        "repeated_tool_execution_failure",
        "global_tool_call_duplicate",
        "turn_tool_call_cap",
        "other",  # an unknown loop type never becomes a new label value
    ]


def test_analytics_routing_survives_a_failing_opentelemetry_pipeline() -> None:
    analytics: list[LoopDetectedEvent] = []
    sink = OpenTelemetrySink(
        meter_provider=RaisingMeterProvider(),
        logger_provider=RaisingLoggerProvider(),
        product_analytics=analytics.append,
    )
    sink.loop_detected(prompt_id="p", loop_type="turn_tool_call_cap")
    sink.loop_detected(prompt_id="p", loop_type=REPEATED_TOOL_EXECUTION_FAILURE)
    assert analytics == [LoopDetectedEvent("p", "turn_tool_call_cap")]


# -- the execution SLI -------------------------------------------------------------


def test_execution_sli_counts_and_cancellations_never_fail() -> None:
    h = Harness()
    calls: Sequence[tuple[str, str | None, str | None]] = [
        ("success", "success", "native"),
        ("success", "success", "mcp"),
        ("success", "success", "native"),
        ("error", "error", "native"),
        ("error", "error", "mcp"),
        ("cancelled", "error", "native"),  # cancellation raced an execution error
        ("error", "cancelled", "native"),
        ("cancelled", None, None),
        ("error", "not_started", None),
        ("success", None, "native"),
        ("error", "brand_new_status", "native"),
        ("weird", "success", "plugin"),
    ]
    for terminal, execution, tool_type in calls:
        h.sink.tool_call_settled(
            terminal_status=terminal, execution_status=execution, tool_type=tool_type
        )
    by_status: dict[str, int] = {}
    for attributes, value in h.points(TOOL_CALL_COUNTER):
        assert set(attributes) == {"execution_status", "terminal_status", "tool_type"}
        for key, allowed in telemetry.TOOL_CALL_ATTRIBUTE_VALUES.items():
            assert attributes[key] in allowed
        by_status[attributes["execution_status"]] = (
            by_status.get(attributes["execution_status"], 0) + value
        )
    assert by_status == {
        "success": 4,
        "error": 2,
        "cancelled": 3,
        "not_started": 1,
        "unknown": 2,
    }
    sli = by_status["error"] / (by_status["success"] + by_status["error"])
    assert sli == pytest.approx(2 / 6)
    (cancelled_race,) = [
        a
        for a, _ in h.points(TOOL_CALL_COUNTER)
        if a["terminal_status"] == "cancelled" and a["tool_type"] == "native"
    ]
    assert cancelled_race["execution_status"] == "cancelled"


# -- failing backends ------------------------------------------------------------


class Boom(RuntimeError):
    pass


class RaisingCounter:
    def add(self, *args: object, **kwargs: object) -> None:
        raise Boom("counter")


class RaisingMeter:
    def create_counter(self, *args: object, **kwargs: object) -> RaisingCounter:
        return RaisingCounter()


class RaisingMeterProvider:
    def get_meter(self, *args: object, **kwargs: object) -> RaisingMeter:
        return RaisingMeter()

    def force_flush(self) -> bool:
        raise Boom("flush")

    def shutdown(self) -> None:
        raise Boom("shutdown")


class RaisingLogger:
    def emit(self, *args: object, **kwargs: object) -> None:
        raise Boom("emit")


class RaisingLoggerProvider:
    def get_logger(self, *args: object, **kwargs: object) -> RaisingLogger:
        return RaisingLogger()


# -- building the sink -------------------------------------------------------------


def test_build_none_is_the_null_sink_and_unknown_kinds_are_refused() -> None:
    assert isinstance(build_telemetry("none"), NullTelemetry)
    with pytest.raises(ValueError, match="'stdout'"):
        build_telemetry("stdout")


def test_console_writes_metrics_and_logs_to_stderr_never_stdout(
    capsys: pytest.CaptureFixture[str],
) -> None:
    sink = build_telemetry("console")
    assert isinstance(sink, OpenTelemetrySink)
    run_prompt(sink, GuardMode.ENFORCE, [failing_batch(f"b{n}", 4) for n in range(3)], "p-c")
    sink.shutdown()
    out, err = capsys.readouterr()
    assert out == ""
    for name in [GUARD_COUNTER, GUARD_LOG_EVENT, LOOP_DETECTED_EVENT, TOOL_CALL_COUNTER]:
        assert name in err
    assert '"decision": "stopped"' in err


def test_resource_honours_otel_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OTEL_RESOURCE_ATTRIBUTES", raising=False)
    monkeypatch.delenv("OTEL_SERVICE_NAME", raising=False)
    default = telemetry_resource().attributes
    assert default["service.name"] == "tool-failure-guard"
    assert default["service.version"] == telemetry.package_version() != ""
    assert "deployment.environment" not in default  # never invented
    monkeypatch.setenv(
        "OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=internal,service.version=9.9.9"
    )
    monkeypatch.setenv("OTEL_SERVICE_NAME", "acp-guard")
    configured = telemetry_resource().attributes
    assert configured["deployment.environment"] == "internal"
    assert configured["service.version"] == "9.9.9"
    assert configured["service.name"] == "acp-guard"


_HTTP_METRIC = "opentelemetry.exporter.otlp.proto.http.metric_exporter"
_HTTP_LOG = "opentelemetry.exporter.otlp.proto.http._log_exporter"
_GRPC_METRIC = "opentelemetry.exporter.otlp.proto.grpc.metric_exporter"


def test_otlp_without_the_exporter_package_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_PROTOCOL", raising=False)
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_METRICS_PROTOCOL", raising=False)
    monkeypatch.setitem(sys.modules, _HTTP_METRIC, None)  # makes the import fail
    with pytest.raises(TelemetryConfigurationError, match="otlp-proto-http"):
        build_telemetry("otlp")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
    monkeypatch.setitem(sys.modules, _GRPC_METRIC, None)
    with pytest.raises(TelemetryConfigurationError, match="otlp-proto-grpc"):
        build_telemetry("otlp")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "carrier-pigeon")
    with pytest.raises(TelemetryConfigurationError, match="carrier-pigeon"):
        build_telemetry("otlp")


def test_agent_cli_reports_a_missing_otlp_exporter_as_a_bad_option(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from tool_failure_guard.commands.cli import main

    root = logging.getLogger()
    monkeypatch.setattr(root, "handlers", [])  # the agent's basicConfig stays in this test
    monkeypatch.setattr(root, "level", root.level)
    assert issubclass(TelemetryConfigurationError, ValueError)  # what the CLI catches
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_PROTOCOL", raising=False)
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_METRICS_PROTOCOL", raising=False)
    monkeypatch.setitem(sys.modules, _HTTP_METRIC, None)
    assert main(["agent", "--telemetry", "otlp"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert "opentelemetry-exporter-otlp-proto-http" in err


class FakeOTLPMetricExporter(MetricExporter):
    exported: ClassVar[list[Any]] = []

    def __init__(self) -> None:
        super().__init__()

    def export(self, metrics_data: Any, timeout_millis: float = 10_000, **kwargs: Any) -> Any:
        type(self).exported.append(metrics_data)
        return MetricExportResult.SUCCESS

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        return True

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
        return None


class FakeOTLPLogExporter(InMemoryLogRecordExporter):
    instances: ClassVar[list[FakeOTLPLogExporter]] = []

    def __init__(self) -> None:
        super().__init__()
        type(self).instances.append(self)


def test_otlp_wires_the_standard_exporters(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_PROTOCOL", raising=False)
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_METRICS_PROTOCOL", raising=False)
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_LOGS_PROTOCOL", raising=False)
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=public")
    metric_module = types.ModuleType(_HTTP_METRIC)
    metric_module.OTLPMetricExporter = FakeOTLPMetricExporter  # type: ignore[attr-defined]
    log_module = types.ModuleType(_HTTP_LOG)
    log_module.OTLPLogExporter = FakeOTLPLogExporter  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, _HTTP_METRIC, metric_module)
    monkeypatch.setitem(sys.modules, _HTTP_LOG, log_module)
    FakeOTLPMetricExporter.exported = []
    FakeOTLPLogExporter.instances = []

    sink = build_telemetry("otlp")
    assert isinstance(sink, OpenTelemetrySink)
    run_prompt(sink, GuardMode.SHADOW, [failing_batch("a", 1)], "p-otlp")
    sink.shutdown()

    (log_exporter,) = FakeOTLPLogExporter.instances
    (record,) = log_exporter.get_finished_logs()
    assert record.log_record.event_name == GUARD_LOG_EVENT
    assert record.resource.attributes["deployment.environment"] == "public"
    names = {
        metric.name
        for data in FakeOTLPMetricExporter.exported
        for rm in data.resource_metrics
        for sm in rm.scope_metrics
        for metric in sm.metrics
    }
    assert {GUARD_COUNTER, TOOL_CALL_COUNTER} <= names


def test_otel_sdk_disabled_silences_the_console_sink(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("OTEL_SDK_DISABLED", "true")
    sink = build_telemetry("console")
    run_prompt(sink, GuardMode.ENFORCE, [failing_batch(f"b{n}", 4) for n in range(3)])
    sink.loop_detected(prompt_id="p", loop_type="turn_tool_call_cap")
    sink.shutdown()
    assert capsys.readouterr() == ("", "")


# -- docs/telemetry.md stays true ----------------------------------------------------

_DOC = Path(__file__).resolve().parent.parent / "docs" / "telemetry.md"


def _doc_table(name: str) -> list[list[str]]:
    text = _DOC.read_text(encoding="utf-8")
    body = text.split(f"<!-- {name}:begin -->", 1)[1].split(f"<!-- {name}:end -->", 1)[0]
    rows = [line for line in body.strip().splitlines() if line.startswith("|")]
    return [[cell.strip() for cell in row.strip("|").split("|")] for row in rows[2:]]


def _ticked(cell: str) -> set[str]:
    return set(re.findall(r"`([^`]+)`", cell))


def test_doc_signal_names_match_the_code() -> None:
    rows = _doc_table("telemetry-signals")
    names = {name for _, _, cell, _ in rows for name in _ticked(cell)}
    # "Name from": the original's names are exactly ORIGINAL_NAMES, the rest are our own.
    origin = {name: source for _, _, cell, source in rows for name in _ticked(cell)}
    assert {n for n, source in origin.items() if source == "the original"} == (
        telemetry.ORIGINAL_NAMES
    )
    assert (
        {n for n, source in origin.items() if source == "this project"}
        == {n for n in names if n.startswith(telemetry.OWN_PREFIX)}
        == names - telemetry.ORIGINAL_NAMES
    )
    assert names == {
        GUARD_COUNTER,
        GUARD_LOG_EVENT,
        LOOP_DETECTED_COUNTER,
        LOOP_DETECTED_EVENT,
        TOOL_CALL_COUNTER,
        telemetry.PROMPT_EVENT,
        telemetry.TOOL_CALL_EVENT,
        telemetry.SESSION_CLOSED_EVENT,
    }


def test_doc_earlier_names_table_is_the_alias_table() -> None:
    table = {_ticked(old).pop(): _ticked(new).pop() for old, new in _doc_table("earlier-names")}
    assert table == dict(telemetry.EARLIER_NAMES)
    assert set(table.values()) == telemetry.ORIGINAL_NAMES
    assert all(old.startswith(telemetry.OWN_PREFIX) for old in table)


def test_doc_earlier_values_table_is_the_value_alias_table() -> None:
    table: dict[str, dict[str, str]] = {}
    for key, old, new in _doc_table("earlier-values"):
        table.setdefault(_ticked(key).pop(), {})[_ticked(old).pop()] = _ticked(new).pop()
    assert table == {k: dict(v) for k, v in telemetry.EARLIER_VALUES.items()}
    assert table["loop_type"]["tool_call_cap"] in telemetry.LOOP_TYPES


def test_doc_rollout_record_tables_match_the_code() -> None:
    prompt: set[str] = set()
    for field, *_ in _doc_table("prompt-fields"):
        prompt |= _ticked(field)
    assert prompt == telemetry.PROMPT_LOG_FIELDS
    calls = {_ticked(field).pop() for field, _ in _doc_table("call-fields")}
    assert calls == telemetry.TOOL_CALL_LOG_FIELDS


def test_doc_guard_field_table_matches_the_code() -> None:
    labels: dict[str, set[str]] = {}
    log_only: set[str] = set()
    for field, values, metric, log, _ in _doc_table("guard-fields"):
        (name,) = _ticked(field)
        assert log == "yes"
        if metric == "yes":
            labels[name] = _ticked(values)
        else:
            assert metric == "**never**"
            log_only.add(name)
    assert labels == {k: set(v) for k, v in telemetry.GUARD_METRIC_ATTRIBUTE_VALUES.items()}
    assert log_only == telemetry.GUARD_LOG_ONLY_FIELDS


def test_doc_sli_table_matches_the_code() -> None:
    table = {_ticked(label).pop(): _ticked(values) for label, values in _doc_table("sli-labels")}
    assert table == {k: set(v) for k, v in telemetry.TOOL_CALL_ATTRIBUTE_VALUES.items()}
