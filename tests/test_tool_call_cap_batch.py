"""A batch never starts more calls than the tool-call cap leaves; tool processes are bounded.

The core marks the calls past what the cap leaves (``Admission.over_cap``); the
session settles them not_started (``tool_call_cap``), never runs them, and the
cap stops the prompt after that batch.  The end-to-end test runs a real agent
process whose model answers with 300 shell calls at once.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from acp import text_block
from e2e_helpers import Box, run

from tool_failure_guard.core import outcomes
from tool_failure_guard.core.prompt import PromptProtection
from tool_failure_guard.core.protections import (
    LOOP_REPEATED_TOOL_FAILURE,
    LOOP_TOOL_CALL_CAP,
    CallIdDeduplicator,
    PromptProtections,
)
from tool_failure_guard.core.settlement import settle_all
from tool_failure_guard.guard import GuardMode
from tool_failure_guard.session.tools.executor import FunctionCall
from tool_failure_guard.session.tools.shell_output import MAX_CONCURRENT_SHELL_PROCESSES
from tool_failure_guard.session.transport.client import RecordingClient, spawn_guarded_agent


def calls(count: int, prefix: str = "c") -> list[FunctionCall]:
    return [FunctionCall(call_id=f"{prefix}{i}", name="read_file") for i in range(count)]


def test_the_core_marks_the_calls_past_what_the_cap_leaves() -> None:
    protections = PromptProtections(CallIdDeduplicator(), tool_call_cap=5)
    first = protections.admit(calls(3, "a"))
    assert first.over_cap == frozenset()
    assert protections.after_guard(3) is None
    second = protections.admit(calls(4, "b"))
    assert [c.call_id for c in second.runnable] == ["b0", "b1"]  # the model's order
    assert second.over_cap == {"b2", "b3"}


def test_skipped_calls_are_not_started_and_the_cap_stops_after_the_batch() -> None:
    protection = PromptProtection(GuardMode.ENFORCE, tool_call_cap=2)
    admission = protection.admit(calls(5))
    assert admission.over_cap == {"c2", "c3", "c4"}
    settled = [
        outcomes.skipped_by_cap(call, tool="read_file")
        if call.call_id in admission.over_cap
        else outcomes.succeeded(call, "ok")
        for call in admission.calls
    ]
    skipped = settled[2]
    assert (skipped.terminal_status, skipped.execution_status) == ("error", "not_started")
    assert skipped.execution_error_type == outcomes.TOOL_CALL_CAP_SKIPPED
    batch = settle_all(admission, settled)
    assert batch.executed == 2  # the skipped calls never ran
    action = protection.after_batch(batch)
    assert getattr(action, "loop_type", None) == LOOP_TOOL_CALL_CAP


def test_an_earlier_protection_still_stops_first() -> None:
    # The guard (protection 3) stops before the cap (4) records anything.
    protection = PromptProtection(GuardMode.ENFORCE, tool_call_cap=100)
    loop_types = []
    for index in range(6):
        admission = protection.admit(calls(30, f"p{index}-"))
        settled = [
            outcomes.skipped_by_cap(call, tool="read_file")
            if call.call_id in admission.over_cap
            else outcomes.failed(call, "file_not_found", "missing", tool="read_file")
            for call in admission.calls
        ]
        action = protection.after_batch(settle_all(admission, settled))
        loop_type = getattr(action, "loop_type", None)
        if loop_type is not None:
            loop_types.append(loop_type)
            break
    assert loop_types == [LOOP_REPEATED_TOOL_FAILURE]


@pytest.fixture
def box(tmp_path: Path) -> Box:
    return Box(tmp_path)


def test_300_shell_calls_at_once_start_at_most_the_cap_and_run_bounded(box: Box) -> None:
    events = box.root / "events"
    command = f"echo start >> {events}; sleep 0.2; echo end >> {events}"
    scenario = box.scenario(
        {
            "turns": [
                {"calls": [{"tool": "run_shell_command", "args": {"command": command}}] * 300}
            ],
            "final_text": "done",
        }
    )

    async def go() -> tuple[object, str]:
        async with spawn_guarded_agent(
            RecordingClient(), mode="shadow", state_dir=box.state, home=box.home, scenario=scenario
        ) as conn:
            sid = (await conn.new_session(cwd=str(box.project), mcp_servers=[])).session_id
            response = await conn.prompt(session_id=sid, prompt=[text_block("go")])
            return response, sid

    response, sid = run(go(), timeout=240)
    lines = events.read_text().split()
    assert lines.count("start") == 100  # the default cap, never 300
    running, most = 0, 0
    for line in lines:
        running += 1 if line == "start" else -1
        most = max(most, running)
    assert most <= MAX_CONCURRENT_SHELL_PROCESSES
    assert response.field_meta["loopType"] == LOOP_TOOL_CALL_CAP  # type: ignore[attr-defined]
    [results] = [m for m in box.history(sid) if m.kind == "tool_results"]
    responses = [p for p in results.parts if p.kind == "function_response"]
    assert len(responses) == 300  # every call answered exactly once
    types = [p.error_type for p in responses]
    assert types[:100] == [None] * 100
    assert types[100:] == [outcomes.TOOL_CALL_CAP_SKIPPED] * 200
