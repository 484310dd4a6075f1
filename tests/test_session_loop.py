"""The prompt loop in-process: telemetry calls and their isolation, todo continuation."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import pytest
from acp.exceptions import RequestError
from acp.schema import PermissionOption, RequestPermissionResponse, ToolCallUpdate
from session_harness import in_process_session, per_call_order

from tool_failure_guard.guard import (
    REPEATED_TOOL_FAILURE_REMINDER,
    BatchReceipt,
    Decision,
    GuardMode,
    RepeatedToolFailureGuard,
)
from tool_failure_guard.session.model.base import (
    ModelError,
    ScriptedModel,
    load_scenario,
    parse_scenario,
)
from tool_failure_guard.session.persistence.history import HistoryStore
from tool_failure_guard.session.pipeline.prompt import TODO_CONTINUATION_MESSAGE
from tool_failure_guard.session.pipeline.session import GuardedSession, SessionOptions
from tool_failure_guard.telemetry.sink import GuardTelemetry, NullTelemetry

READ_MISSING = {"tool": "read_file", "args": {"path": "missing.txt"}}


class FakeClient:
    def __init__(self) -> None:
        self.updates: list[Any] = []

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append(update.model_dump(mode="json", by_alias=True, exclude_none=True))

    async def request_permission(
        self, session_id: str, tool_call: ToolCallUpdate, options: list[PermissionOption], **_: Any
    ) -> RequestPermissionResponse:
        raise AssertionError("no permission expected")

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        return {"messages": [], "hasQueuedPrompt": False}


class RecordingTelemetry:
    def __init__(self, fail: bool = False) -> None:
        self.fail = fail
        self.decisions: list[tuple[str, int, int, int, int]] = []
        self.loops: list[tuple[str, str]] = []
        self.settled: list[tuple[str, str | None, str | None]] = []

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
    ) -> None:
        self.decisions.append(
            (
                decision.kind.value,
                failure_count_before,
                batch_count_before,
                guard.failure_count,
                guard.batch_count,
            )
        )
        if self.fail:
            raise RuntimeError("sink down")

    def loop_detected(self, *, prompt_id: str, loop_type: str) -> None:
        self.loops.append((prompt_id, loop_type))
        if self.fail:
            raise RuntimeError("sink down")

    def tool_call_settled(
        self, *, terminal_status: str, execution_status: str | None, tool_type: str | None
    ) -> None:
        self.settled.append((terminal_status, execution_status, tool_type))
        if self.fail:
            raise RuntimeError("sink down")


def run_prompt(
    tmp_path: Path, scenario: Any, mode: GuardMode, telemetry: GuardTelemetry
) -> tuple[GuardedSession, FakeClient, Any]:
    tmp_path.mkdir(parents=True, exist_ok=True)
    client = FakeClient()
    session = in_process_session(
        HistoryStore(tmp_path / "state"),
        tmp_path,
        client=client,
        model=ScriptedModel(scenario),
        mode=mode,
        telemetry=telemetry,
        options=SessionOptions(report_decisions=True),
    )
    response = asyncio.run(session.run_prompt(["go"], channel=False))
    return session, client, response


def test_telemetry_gets_counts_read_before_observe(tmp_path: Path) -> None:
    sink = RecordingTelemetry()
    _, _, response = run_prompt(tmp_path, load_scenario("read-loop"), GuardMode.ENFORCE, sink)

    assert sink.decisions == [
        ("tracked", 0, 0, 4, 1),
        ("warn", 4, 1, 8, 2),
        ("stop", 8, 2, 12, 3),
    ]
    assert [loop for _, loop in sink.loops] == ["repeated_tool_execution_failure"]
    assert sink.loops[0][0] == response.field_meta["toolFailureGuard"]["promptId"]
    assert sink.settled == [("error", "error", "native")] * 12


def test_off_mode_reports_no_decisions_but_still_settled_calls(tmp_path: Path) -> None:
    sink = RecordingTelemetry()
    run_prompt(tmp_path, load_scenario("read-loop"), GuardMode.OFF, sink)
    assert sink.decisions == [] and sink.loops == []
    assert len(sink.settled) == 20


@pytest.mark.parametrize("mode", [GuardMode.SHADOW, GuardMode.ENFORCE])
def test_a_failing_sink_never_changes_control_flow(tmp_path: Path, mode: GuardMode) -> None:
    _, quiet_client, quiet = run_prompt(
        tmp_path / "a", load_scenario("read-loop"), mode, NullTelemetry()
    )
    failing = RecordingTelemetry(fail=True)
    _, loud_client, loud = run_prompt(tmp_path / "b", load_scenario("read-loop"), mode, failing)

    assert per_call_order(loud_client.updates) == per_call_order(quiet_client.updates)
    assert loud.stop_reason == quiet.stop_reason
    assert loud.field_meta.get("loopType") == quiet.field_meta.get("loopType")
    assert failing.decisions  # the sink was called, and raised every time


def test_a_failing_sink_is_logged_once_per_call_site(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    failing = RecordingTelemetry(fail=True)
    with caplog.at_level(logging.DEBUG, logger="session.loop"):
        run_prompt(tmp_path, load_scenario("read-loop"), GuardMode.ENFORCE, failing)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(failing.decisions) >= 3 and failing.settled
    assert sorted(warnings) == [
        "telemetry sink failed in guard_decision",
        "telemetry sink failed in loop_detected",
        "telemetry sink failed in tool_call_settled",
    ]
    assert any(r.levelno == logging.DEBUG and "again" in r.getMessage() for r in caplog.records)


def test_todo_continuation_keeps_the_prompts_guard_mode_and_streak(tmp_path: Path) -> None:
    open_todo = [{"content": "read the file", "status": "pending"}]
    scenario = parse_scenario(
        {
            "turns": [
                {"calls": [READ_MISSING] * 4, "todos": open_todo},
                {"text": "I will stop here."},
                {"calls": [READ_MISSING] * 4},
                {"calls": [READ_MISSING] * 4},
            ],
            "final_text": "done",
        },
        "todo.json",
    )
    session, _, response = run_prompt(tmp_path, scenario, GuardMode.ENFORCE, NullTelemetry())

    rows = response.field_meta["toolFailureGuard"]["batches"]
    assert [(r["mode"], r["decision"], r["failureCount"]) for r in rows] == [
        ("enforce", "tracked", 4),
        ("enforce", "warn", 8),  # the streak survived the continuation
        ("enforce", "stop", 12),
    ]
    assert response.field_meta["loopType"] == "repeated_tool_execution_failure"
    kinds = [m.kind for m in session.history]
    assert kinds.count("continuation") == 1  # the stop suspended the todo stop guard
    assert session.history[kinds.index("continuation")].texts("system") == [
        TODO_CONTINUATION_MESSAGE
    ]
    first_results = next(m for m in session.history if m.kind == "tool_results")
    assert first_results.texts("system") == ["System: todo list has open items: read the file"]


def loop_across_a_continuation() -> Any:
    """Tracked, warned, then a continuation, then the same failure 30 batches long."""
    open_todo = [{"content": "read the file", "status": "pending"}]
    return parse_scenario(
        {
            "turns": [
                {"calls": [READ_MISSING] * 4, "todos": open_todo},
                {"calls": [READ_MISSING] * 4},
                {"text": "I will stop here."},
                {"calls": [READ_MISSING] * 4, "repeat": 30},
            ]
        },
        "continuation-loop.json",
    )


def test_a_continuation_never_lets_a_warned_loop_run_to_the_cap(tmp_path: Path) -> None:
    # Regression: the continuation used to swap in an `off` guard, and the same failure
    # then ran on to the 100-call cap (`tool_call_cap`) under enforce.
    session, _, response = run_prompt(
        tmp_path, loop_across_a_continuation(), GuardMode.ENFORCE, NullTelemetry()
    )
    rows = response.field_meta["toolFailureGuard"]["batches"]
    assert [(r["mode"], r["decision"]) for r in rows] == [
        ("enforce", "tracked"),
        ("enforce", "warn"),
        ("enforce", "stop"),
    ]
    assert response.field_meta["loopType"] == "repeated_tool_execution_failure"
    assert response.stop_reason == "end_turn"
    assert [m.kind for m in session.history].count("continuation") == 1


def test_a_shadow_continuation_keeps_recording_would_stop(tmp_path: Path) -> None:
    _, _, response = run_prompt(
        tmp_path, loop_across_a_continuation(), GuardMode.SHADOW, NullTelemetry()
    )
    rows = response.field_meta["toolFailureGuard"]["batches"]
    assert [(r["mode"], r["decision"]) for r in rows[:3]] == [
        ("shadow", "tracked"),
        ("shadow", "would_warn"),
        ("shadow", "would_stop"),
    ]
    assert response.field_meta["loopType"] == "turn_tool_call_cap"  # shadow never stops


def test_todo_continuations_are_capped_per_prompt(tmp_path: Path) -> None:
    open_todo = [{"content": "write the file", "status": "pending"}]
    scenario = parse_scenario({"turns": [{"text": "Thinking.", "todos": open_todo}]}, "t.json")
    session, _, response = run_prompt(tmp_path, scenario, GuardMode.ENFORCE, NullTelemetry())
    assert [m.kind for m in session.history].count("continuation") == 3
    assert response.stop_reason == "end_turn"


def test_a_stop_suspends_the_todo_stop_guard(tmp_path: Path) -> None:
    open_todo = [{"content": "read the file", "status": "in_progress"}]
    scenario = parse_scenario(
        {"turns": [{"calls": [READ_MISSING] * 4, "todos": open_todo, "repeat": 4}]}, "t.json"
    )
    session, _, response = run_prompt(tmp_path, scenario, GuardMode.ENFORCE, NullTelemetry())

    assert response.field_meta["loopType"] == "repeated_tool_execution_failure"
    assert [m.kind for m in session.history].count("continuation") == 0
    warned = [m for m in session.history if REPEATED_TOOL_FAILURE_REMINDER in m.texts("system")]
    assert len(warned) == 1
    # [function responses, todo reminder, REMINDER]
    assert [p.kind for p in warned[0].parts][-2:] == ["system", "system"]
    assert warned[0].parts[-1].text == REPEATED_TOOL_FAILURE_REMINDER


class _StreamsThenStalls:
    """Streams a first delta, then never finishes the turn (or fails, when asked)."""

    def __init__(self, fail: bool = False) -> None:
        self.fail = fail
        self.streamed = asyncio.Event()

    async def generate(self, history: Any) -> Any:
        raise AssertionError("a streaming model is asked through generate_streaming")

    async def generate_streaming(self, history: Any, *, tools: Any, on_text: Any) -> Any:
        await on_text("Let me look at ")
        self.streamed.set()
        if self.fail:
            raise ModelError("the stream broke")
        await asyncio.Event().wait()


def _streaming_session(tmp_path: Path, model: Any) -> tuple[GuardedSession, HistoryStore]:
    store = HistoryStore(tmp_path / "state")
    session = in_process_session(
        store, tmp_path, client=FakeClient(), model=model, mode=GuardMode.SHADOW
    )
    return session, store


def _model_texts(store: HistoryStore) -> list[str]:
    messages = store.load_session("s1").messages
    return [t for m in messages if m.role == "model" for t in m.texts("text")]


def test_text_streamed_before_a_cancel_is_persisted(tmp_path: Path) -> None:
    model = _StreamsThenStalls()
    session, store = _streaming_session(tmp_path, model)

    async def go() -> Any:
        prompt = asyncio.ensure_future(session.run_prompt(["go"], channel=False))
        await asyncio.wait_for(model.streamed.wait(), 10)
        session.cancel()
        return await asyncio.wait_for(prompt, 10)

    assert asyncio.run(go()).stop_reason == "cancelled"
    assert _model_texts(store) == ["Let me look at "]


def test_text_streamed_before_a_model_error_is_persisted(tmp_path: Path) -> None:
    session, store = _streaming_session(tmp_path, _StreamsThenStalls(fail=True))
    with pytest.raises(RequestError):
        asyncio.run(session.run_prompt(["go"], channel=False))
    assert _model_texts(store) == ["Let me look at "]
