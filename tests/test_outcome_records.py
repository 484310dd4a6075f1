"""The rollout records through a real GuardedSession: prompt outcome, settled calls, close.

And ``--telemetry file:PATH``: what it writes parses back as OTLP protobuf
requests, with the OTLP/JSON rules (hex ids, int64 as strings, integer enums).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from acp.exceptions import RequestError
from google.protobuf import json_format
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)
from session_harness import in_process_session
from telemetry_harness import Harness
from test_session_loop import FakeClient

from tool_failure_guard.guard import GuardMode
from tool_failure_guard.session.model.base import (
    ModelTurn,
    ModelUsage,
    ScriptedModel,
    load_scenario,
)
from tool_failure_guard.session.persistence.history import HistoryStore
from tool_failure_guard.session.pipeline.session import GuardedSession, SessionOptions
from tool_failure_guard.telemetry.build import build_telemetry
from tool_failure_guard.telemetry.otlp_file import otlp_json
from tool_failure_guard.telemetry.sink import (
    GUARD_LOG_EVENT,
    LOOP_DETECTED_COUNTER,
    PROMPT_EVENT,
    PROMPT_LOG_FIELDS,
    SESSION_CLOSED_EVENT,
    TOOL_CALL_COUNTER,
    TOOL_CALL_EVENT,
    TOOL_CALL_LOG_FIELDS,
    OpenTelemetrySink,
)


class NoDrainClient(FakeClient):
    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        raise RequestError.method_not_found(method)


def make_session(
    tmp_path: Path,
    model: Any,
    mode: GuardMode,
    sink: Any,
    client: FakeClient | None = None,
) -> GuardedSession:
    tmp_path.mkdir(parents=True, exist_ok=True)
    return in_process_session(
        HistoryStore(tmp_path / "state"),
        tmp_path,
        client=client or FakeClient(),
        model=model,
        mode=mode,
        telemetry=sink,
        options=SessionOptions(tool_call_cap=100),
    )


@pytest.mark.parametrize("mode", list(GuardMode))
def test_every_prompt_gets_one_outcome_record_in_every_mode(
    tmp_path: Path, mode: GuardMode
) -> None:
    harness = Harness()
    session = make_session(tmp_path, ScriptedModel(load_scenario("read-loop")), mode, harness.sink)
    response = asyncio.run(session.run_prompt(["go"], channel=False))

    (record,) = harness.logs(PROMPT_EVENT)
    assert set(record) <= PROMPT_LOG_FIELDS
    assert record["prompt_id"] == "s1########0"
    assert record["mode"] == mode.value
    assert record["route"] == "acp_foreground"
    assert record["stop_reason"] == response.stop_reason
    calls = harness.logs(TOOL_CALL_EVENT)
    assert record["tool_calls"] == len(calls)
    assert record["batches"] == max(c["batch_ordinal"] for c in calls)
    assert record["model_turns"] >= record["batches"]
    assert record["drain_supported"] is True
    assert "input_tokens" not in record  # the scripted model reports no usage
    if mode is GuardMode.ENFORCE:
        assert record["loop_type"] == "repeated_tool_execution_failure"
        assert record["tool_calls"] == 12
    else:
        assert "loop_type" not in record or record["loop_type"] != (
            "repeated_tool_execution_failure"
        )
    for call in calls:
        assert set(call) <= TOOL_CALL_LOG_FIELDS
        assert call["prompt_id"] == record["prompt_id"]
        assert (call["terminal_status"], call["execution_status"]) == ("error", "error")
        assert call["provider_duplicate"] is False
    # The guard log joins the calls on (prompt_id, batch_ordinal).
    ordinals = {c["batch_ordinal"] for c in calls}
    for event in harness.logs(GUARD_LOG_EVENT):
        assert event["batch_ordinal"] in ordinals
        assert event["receipt_complete"] is True


def test_channel_prompts_are_recorded_with_mode_off(tmp_path: Path) -> None:
    harness = Harness()
    session = make_session(
        tmp_path, ScriptedModel(load_scenario("read-loop")), GuardMode.ENFORCE, harness.sink
    )
    asyncio.run(session.run_prompt(["go"], channel=True))
    (record,) = harness.logs(PROMPT_EVENT)
    assert (record["route"], record["mode"]) == ("channel", "off")


class UsageModel:
    """Reports usage on each of its two turns, then raises on the third prompt's turn."""

    def __init__(self) -> None:
        self.turns = 0

    async def generate(self, history: Any) -> ModelTurn:
        self.turns += 1
        if self.turns > 1:
            from tool_failure_guard.session.model.base import ModelError

            raise ModelError("provider down")
        return ModelTurn(
            text="hi", usage=ModelUsage(input_tokens=100, output_tokens=7, latency_s=0.25)
        )


def test_usage_is_summed_and_a_failed_prompt_is_still_recorded(tmp_path: Path) -> None:
    harness = Harness()
    session = make_session(tmp_path, UsageModel(), GuardMode.WARN, harness.sink)
    ticks = iter([10.0, 12.5, 20.0, 20.125])
    session.clock = lambda: next(ticks)
    asyncio.run(session.run_prompt(["one"], channel=False))
    with pytest.raises(RequestError):
        asyncio.run(session.run_prompt(["two"], channel=False))
    first, second = harness.logs(PROMPT_EVENT)
    assert (first["input_tokens"], first["output_tokens"], first["model_latency_ms"]) == (
        100,
        7,
        250,
    )
    assert first["wall_time_ms"] == 2500
    assert first["stop_reason"] == "end_turn"
    assert second["stop_reason"] == "error"
    assert second["wall_time_ms"] == 125
    assert second["prompt_id"] == "s1########1"


def test_a_host_without_drain_marks_its_prompts_unsupported(tmp_path: Path) -> None:
    harness = Harness()
    session = make_session(
        tmp_path,
        ScriptedModel(load_scenario("read-loop")),
        GuardMode.ENFORCE,
        harness.sink,
        NoDrainClient(),
    )
    asyncio.run(session.run_prompt(["go"], channel=False))
    (record,) = harness.logs(PROMPT_EVENT)
    assert record["drain_supported"] is False
    assert record.get("loop_type") != "repeated_tool_execution_failure"  # enforce acts as warn


def test_session_closed_reports_clean_or_disconnect(tmp_path: Path) -> None:
    harness = Harness()
    session = make_session(
        tmp_path, ScriptedModel(load_scenario("read-loop")), GuardMode.SHADOW, harness.sink
    )
    asyncio.run(session.run_prompt(["go"], channel=False))
    session.report_closed("clean")
    session.report_closed("disconnect")
    assert harness.logs(SESSION_CLOSED_EVENT) == [
        {"session_id": "s1", "close_reason": "clean", "prompts": 1},
        {"session_id": "s1", "close_reason": "disconnect", "prompts": 1},
    ]


def test_agent_reports_a_disconnect_for_a_session_mid_prompt(tmp_path: Path) -> None:
    from tool_failure_guard.session.transport.agent import AgentConfig, GuardedAgent

    harness = Harness()
    agent = GuardedAgent(
        AgentConfig(
            model_factory=lambda: ScriptedModel(load_scenario("read-loop")),
            state_dir=tmp_path / "state",
            telemetry=harness.sink,
        )
    )

    async def scenario() -> None:
        idle = await agent.new_session(cwd=str(tmp_path))
        busy = await agent.new_session(cwd=str(tmp_path))
        agent.sessions[busy.session_id]._running = True  # as if a prompt were running
        agent.close_sessions()
        closed = {r["session_id"]: r["close_reason"] for r in harness.logs(SESSION_CLOSED_EVENT)}
        assert closed == {idle.session_id: "clean", busy.session_id: "disconnect"}

    asyncio.run(scenario())


class _HangingModel:
    """A model request that never answers: the prompt is mid-flight until cancelled."""

    async def generate(self, history: Any) -> ModelTurn:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")


def test_a_disconnect_that_ended_the_prompt_is_still_reported_as_a_disconnect(
    tmp_path: Path,
) -> None:
    """``disconnect`` cancels the running prompt first; the close still says it was mid-prompt."""
    from tool_failure_guard.session.transport.agent import AgentConfig, GuardedAgent

    harness = Harness()
    agent = GuardedAgent(
        AgentConfig(
            model_factory=_HangingModel, state_dir=tmp_path / "state", telemetry=harness.sink
        )
    )

    async def scenario() -> None:
        idle = await agent.new_session(cwd=str(tmp_path))
        busy = await agent.new_session(cwd=str(tmp_path))
        agent.sessions[busy.session_id].client = FakeClient()
        prompt = asyncio.ensure_future(
            agent.sessions[busy.session_id].run_prompt(["go"], channel=False)
        )
        await asyncio.sleep(0.05)
        assert agent.sessions[busy.session_id].running
        await agent.disconnect()
        assert (await prompt).stop_reason == "cancelled"
        assert not agent.sessions[busy.session_id].running
        agent.close_sessions()
        closed = {r["session_id"]: r["close_reason"] for r in harness.logs(SESSION_CLOSED_EVENT)}
        assert closed == {idle.session_id: "clean", busy.session_id: "disconnect"}

    asyncio.run(scenario())


def test_file_telemetry_writes_otlp_json_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(
        "OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=test,enduser.pseudo.id=owner-1"
    )
    path = tmp_path / "telemetry.jsonl"
    sink = build_telemetry(f"file:{path}")
    assert isinstance(sink, OpenTelemetrySink)
    session = make_session(
        tmp_path, ScriptedModel(load_scenario("read-loop")), GuardMode.ENFORCE, sink
    )
    asyncio.run(session.run_prompt(["go"], channel=False))
    sink.shutdown()

    lines = path.read_text(encoding="utf-8").splitlines()
    events: list[str] = []
    saw_metrics = False
    for line in lines:
        data = json.loads(line)
        if "resourceLogs" in data:
            request = json_format.ParseDict(data, ExportLogsServiceRequest())
            for rl in request.resource_logs:
                attrs = {a.key: a.value.string_value for a in rl.resource.attributes}
                assert attrs["deployment.environment"] == "test"
                assert attrs["enduser.pseudo.id"] == "owner-1"
                for sl in rl.scope_logs:
                    events.extend(r.event_name for r in sl.log_records)
            first = data["resourceLogs"][0]["scopeLogs"][0]["logRecords"][0]
            assert isinstance(first["timeUnixNano"], str)  # int64 as a decimal string
            assert isinstance(first["severityNumber"], int)  # enums as integers
        else:
            json_format.ParseDict(data, ExportMetricsServiceRequest())
            saw_metrics = True
    assert saw_metrics
    assert events.count(PROMPT_EVENT) == 1
    assert events.count(TOOL_CALL_EVENT) == 12


_EXIT_WITHOUT_SHUTDOWN = """
import sys
from tool_failure_guard.telemetry.build import build_telemetry
sink = build_telemetry("file:" + sys.argv[1])
sink.tool_call_settled(terminal_status="error", execution_status="error", tool_type="native")
sink.loop_detected(prompt_id="p########1", loop_type="turn_tool_call_cap")
"""


def test_file_telemetry_keeps_the_last_metrics_when_the_process_just_exits(
    tmp_path: Path,
) -> None:
    """The agent never shuts the sink down itself: the providers do at interpreter exit,
    the logger provider (created last) first.  The metric reader's last export, after the
    log exporter's shutdown, must still reach the shared file."""
    import subprocess
    import sys

    path = tmp_path / "telemetry.jsonl"
    subprocess.run([sys.executable, "-c", _EXIT_WITHOUT_SHUTDOWN, str(path)], check=True)
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    metrics = {
        metric["name"]
        for line in lines
        for rm in line.get("resourceMetrics", ())
        for sm in rm["scopeMetrics"]
        for metric in sm["metrics"]
    }
    assert metrics == {TOOL_CALL_COUNTER, LOOP_DETECTED_COUNTER}
    assert any("resourceLogs" in line for line in lines)


def test_trace_and_span_ids_are_hex_not_base64() -> None:
    from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord, ResourceLogs, ScopeLogs

    record = LogRecord(trace_id=bytes(range(16)), span_id=bytes(range(8)), time_unix_nano=2**62)
    request = ExportLogsServiceRequest(
        resource_logs=[ResourceLogs(scope_logs=[ScopeLogs(log_records=[record])])]
    )
    data = json.loads(otlp_json(request))
    out = data["resourceLogs"][0]["scopeLogs"][0]["logRecords"][0]
    assert out["traceId"] == bytes(range(16)).hex()
    assert out["spanId"] == bytes(range(8)).hex()
    assert out["timeUnixNano"] == str(2**62)


def test_an_unwritable_file_target_is_a_configuration_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="cannot open"):
        build_telemetry(f"file:{tmp_path / 'missing-dir' / 'x.jsonl'}")
    with pytest.raises(ValueError, match="needs a path"):
        build_telemetry("file:")
