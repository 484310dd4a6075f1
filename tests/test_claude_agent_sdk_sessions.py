"""One Claude Agent SDK guard shared by concurrent queries: each query's outcome is its own
session's, and no session stays in memory after its query (bundled CLI, local fake API).

The interleavings that matter are forced, not hoped for: a healthy query's fake holds
a model response until the stopped query has ended its stream's last event, and the
consumers of the streams hold at their ``ResultMessage`` until the others have done what
the case needs (the guard's decision reads the stream's end, which the consumer drives).
"""

from __future__ import annotations

import asyncio
import threading
import tracemalloc
from collections.abc import Callable
from contextlib import ExitStack
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import attrs
import pytest
from agent_fakes.anthropic_messages import FakeAnthropic, serve_anthropic
from agent_fakes.script import Turn
from claude_agent_sdk import ResultMessage
from claude_hook_harness import read
from claude_sdk_harness import Workspace, sdk_options

from tool_failure_guard.integrations.claude_agent_sdk import (
    ProtectionStopped,
    RepeatedToolFailureHooks,
)
from tool_failure_guard.integrations.claude_agent_sdk._sessions import MAX_FINISHED, MAX_LIVE


class GatedFake(FakeAnthropic):
    """The fake, holding its answer to the main loop's ``at``-th request until ``gate`` opens."""

    def __init__(self, turns: list[Turn], *, at: int, gate: threading.Event) -> None:
        super().__init__(turns)
        self.at, self.gate = at, gate
        self.reached = threading.Event()  #: set when the held request has come

    def handle(self, handler: BaseHTTPRequestHandler, method: str, body: Any) -> None:
        if isinstance(body, dict) and body.get("tools"):
            position = sum(1 for m in body.get("messages", []) if m.get("role") == "assistant")
            if position >= self.at:
                self.reached.set()
                if not self.gate.wait(timeout=120):
                    raise TimeoutError("the gate of the fake never opened")
        super().handle(handler, method, body)


def _stubborn(place: Workspace) -> list[Turn]:
    """Fails 4 Reads of a missing file per response: enforce reminds, then stops at batch 3."""
    return [Turn(text="Reading.", calls=(read(place.missing),) * 4)] * 6


def _healthy(place: Workspace) -> list[Turn]:
    """Reads a present file twice per response for 4 responses: nothing to remind or stop."""
    return [Turn(text="Reading.", calls=(read(place.present),) * 2)] * 4


@attrs.define
class Query:
    """One query of the shared guard: its fake, and what its consumer saw."""

    name: str
    fake: FakeAnthropic
    place: Workspace
    hold: asyncio.Event | None = None  #: the consumer waits at the ResultMessage until set
    result_seen: asyncio.Event = attrs.field(factory=asyncio.Event)
    done: asyncio.Event = attrs.field(factory=asyncio.Event)
    session_id: str | None = None
    raised: ProtectionStopped | None = None
    completed: bool = False

    async def consume(self, guard: RepeatedToolFailureHooks) -> None:
        try:
            async for message in guard.query(
                prompt="Read the file", options=sdk_options(self.fake, self.place)
            ):
                if isinstance(message, ResultMessage):
                    self.session_id = message.session_id
                    self.result_seen.set()
                    if self.hold is not None:
                        await self.hold.wait()
        except ProtectionStopped as stopped:
            self.raised = stopped
        else:
            self.completed = True
        finally:
            self.done.set()


def _queries(
    base: Path, count: int, gate: threading.Event, gated: Callable[[int], bool]
) -> list[Query]:
    """Query 0 is the stubborn one; query ``i`` is gated at its 2nd response when ``gated(i)``."""
    made = []
    for index in range(count):
        place = Workspace.make(base)
        if index == 0:
            fake: FakeAnthropic = FakeAnthropic(_stubborn(place))
        elif gated(index):
            fake = GatedFake(_healthy(place), at=1, gate=gate)
        else:
            fake = FakeAnthropic(_healthy(place))
        made.append(Query(f"q{index}", fake, place, hold=asyncio.Event()))
    return made


def _run_all(
    guard: RepeatedToolFailureHooks, queries: list[Query], steps: Callable[[], Any]
) -> None:
    """Every query at once against its own served fake, ``steps`` ordering what matters."""

    async def run() -> None:
        tasks = [asyncio.create_task(query.consume(guard)) for query in queries]
        try:
            await asyncio.wait_for(steps(), timeout=300)
            await asyncio.wait_for(asyncio.gather(*tasks), timeout=300)
        finally:
            for task in tasks:
                task.cancel()

    with ExitStack() as stack:
        for query in queries:
            stack.enter_context(serve_anthropic(query.fake))
        asyncio.run(run())


def _check(queries: list[Query], guard: RepeatedToolFailureHooks) -> None:
    stubborn, healthy = queries[0], queries[1:]
    ended = {q.name: "raised" if q.raised else "completed" if q.completed else "?" for q in queries}
    assert ended == {q.name: "raised" if q is stubborn else "completed" for q in queries}
    assert stubborn.raised is not None
    assert stubborn.raised.loop_type == "repeated_tool_execution_failure"
    assert stubborn.raised.report.decisions == ("tracked", "warn", "stop")
    assert guard.report_of(stubborn.session_id).stop == stubborn.raised.stop
    sessions = {q.session_id for q in queries}
    assert None not in sessions and len(sessions) == len(queries)
    for query in healthy:
        assert query.completed and query.raised is None, query.name
        report = guard.report_of(query.session_id)
        assert report.stop is None and not report.would_stop and report.batches == 4
    assert guard.sessions == 0  # every query's live state released at its end


def test_two_concurrent_queries_each_end_as_their_own_session(tmp_path: Path) -> None:
    """The healthy query's events come after the stubborn one's stop, before its stream ends."""
    gate = threading.Event()
    queries = _queries(tmp_path, 2, gate, gated=lambda index: True)
    stubborn, healthy = queries
    healthy.hold = None
    guard = RepeatedToolFailureHooks(mode="enforce")

    async def steps() -> None:
        await stubborn.result_seen.wait()  # the stop is decided; its stream not yet ended
        gate.set()  # the healthy query's batches go on
        await healthy.result_seen.wait()
        await asyncio.sleep(0.2)
        stubborn.hold.set()  # type: ignore[union-attr]

    _run_all(guard, queries, steps)
    _check(queries, guard)


def test_ten_concurrent_queries_one_stopped(tmp_path: Path) -> None:
    """Healthy streams that end right after the stop, and healthy events after it, both."""
    gate, stop_gate = threading.Event(), threading.Event()
    queries = _queries(tmp_path, 10, gate, gated=lambda index: index <= 4)
    stubborn, late, early = queries[0], queries[1:5], queries[5:]
    place = stubborn.place
    stubborn.fake = GatedFake(_stubborn(place), at=2, gate=stop_gate)  # holds its last batch
    for query in late:
        query.hold = None
    guard = RepeatedToolFailureHooks(mode="enforce")

    async def steps() -> None:
        for query in early:  # the early healthy queries reach their results
            await query.result_seen.wait()
        for query in (stubborn, *late):  # the others wait at their fakes
            assert isinstance(query.fake, GatedFake)
            await asyncio.to_thread(query.fake.reached.wait, 120)
        stop_gate.set()  # the stubborn query's last batch: the stop, the last event seen
        await stubborn.result_seen.wait()
        for query in early:  # the early streams end now
            query.hold.set()  # type: ignore[union-attr]
            await query.done.wait()
        gate.set()  # the late healthy queries' batches come after the stop
        for query in late:
            await query.done.wait()
        stubborn.hold.set()  # type: ignore[union-attr]

    _run_all(guard, queries, steps)
    _check(queries, guard)


def test_report_of_in_the_querying_task_is_that_querys(tmp_path: Path) -> None:
    """``report_of()`` without an id, after a query in the same task, names that query's."""
    gate = threading.Event()
    gate.set()
    queries = _queries(tmp_path, 2, gate, gated=lambda index: False)
    guard = RepeatedToolFailureHooks(mode="enforce", on_stop="end")
    seen: dict[str, Any] = {}

    async def one(query: Query) -> None:
        query.hold = None
        await query.consume(guard)
        seen[query.name] = guard.report_of()

    async def both() -> None:
        await asyncio.gather(*(one(query) for query in queries))

    with ExitStack() as stack:
        for query in queries:
            stack.enter_context(serve_anthropic(query.fake))
        asyncio.run(both())
    assert queries[0].completed and queries[1].completed  # on_stop="end": no raise
    assert seen["q0"].stop is not None and seen["q0"].decisions == ("tracked", "warn", "stop")
    assert seen["q1"].stop is None and seen["q1"].batches == 4


def _events(session_id: str) -> list[dict[str, Any]]:
    """One session's prompt as Claude Code's hook events give it: 2 failed Reads, one batch."""
    common = {"session_id": session_id, "prompt_id": f"p-{session_id}", "cwd": "/w"}
    ids = [f"toolu_{session_id}_{n}" for n in range(2)]
    failures = [
        {
            **common,
            "hook_event_name": "PostToolUseFailure",
            "tool_name": "Read",
            "tool_use_id": call_id,
            "tool_input": {"file_path": "/w/missing.txt"},
            "error": "File does not exist.",
        }
        for call_id in ids
    ]
    batch = {
        **common,
        "hook_event_name": "PostToolBatch",
        "tool_calls": [
            {"tool_name": "Read", "tool_use_id": call_id, "tool_input": {}} for call_id in ids
        ],
    }
    return [{**common, "hook_event_name": "UserPromptSubmit", "prompt": "go"}, *failures, batch]


def _held_bytes(sessions: int) -> tuple[RepeatedToolFailureHooks, int]:
    guard = RepeatedToolFailureHooks(mode="enforce")

    async def feed() -> None:
        for number in range(sessions):
            for event in _events(f"s{number:05d}"):
                await guard._event(event, None, None)

    tracemalloc.start()
    try:
        before = tracemalloc.take_snapshot()
        asyncio.run(feed())
        after = tracemalloc.take_snapshot()
    finally:
        tracemalloc.stop()
    held = sum(stat.size_diff for stat in after.compare_to(before, "filename"))
    return guard, held


@pytest.mark.parametrize("sessions", [5000])
def test_sessions_of_hooks_wired_by_the_application_are_bounded(sessions: int) -> None:
    """5,000 sessions through the callbacks (no query end to hear): at most ``MAX_LIVE``
    stay live and ``MAX_FINISHED`` reports are kept; memory stops growing past the bound."""
    guard, held = _held_bytes(sessions)
    assert guard.sessions == MAX_LIVE
    assert guard.report_of("s04999").decisions == ("tracked",)  # the newest: live
    ended = guard.report_of("s00000")  # the oldest: ended, its report dropped past the bound
    assert ended.decisions == () and ended.batches == 0
    kept = guard.report_of(f"s{sessions - MAX_LIVE - 1:05d}")  # ended, its report kept
    assert kept.decisions == ("tracked",)
    _, held_at_bound = _held_bytes(MAX_LIVE + MAX_FINISHED)
    assert held < held_at_bound * 1.25, (held, held_at_bound)
