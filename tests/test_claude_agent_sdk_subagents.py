"""One guard per agent loop in the Claude Agent SDK adapter: a subagent defined in
``ClaudeAgentOptions(agents=...)``, run by the SDK's bundled Claude Code against the local
fake Anthropic API, which plays the subagent's script to the requests whose first user
message holds its marker (the prompt the main agent's ``Agent`` call gave it)."""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import attrs
import pytest
from agent_fakes.anthropic_messages import FakeAnthropic, serve_anthropic
from agent_fakes.script import Call, Turn
from claude_agent_sdk import AgentDefinition, ResultMessage, TaskNotificationMessage
from claude_hook_harness import read
from claude_sdk_harness import Workspace, sdk_options

from tool_failure_guard.guard import REPEATED_TOOL_FAILURE_REMINDER
from tool_failure_guard.integrations.claude_agent_sdk import (
    ProtectionStopped,
    RepeatedToolFailureHooks,
    RunReport,
)

MARKER = "SUBAGENT-CHECKER-1"
AGENTS = {
    "checker": AgentDefinition(
        description="Reads the files it is told to and reports what they hold.",
        prompt="You read the files you are told to read.",
        tools=["Read"],
    )
}


def delegate() -> Call:
    """The main agent's call of the subagent, in the foreground (it waits for the result)."""
    return Call(
        name="Agent",
        arguments={
            "description": "check the files",
            "prompt": f"{MARKER}: read the files and report.",
            "subagent_type": "checker",
            "run_in_background": False,
        },
    )


@attrs.frozen
class AgentRun:
    main: list[dict[str, Any]]  #: the main agent's model requests
    sub: list[dict[str, Any]]  #: the subagent's model requests
    result: ResultMessage | None
    raised: ProtectionStopped | None
    report: RunReport

    def carrying(self, text: str, *, sub: bool = False) -> list[int]:
        """The indexes of the requests whose newest message holds ``text``."""
        needle = json.dumps(text)[1:-1]
        requests = self.sub if sub else self.main
        return [i for i, b in enumerate(requests) if needle in json.dumps(b["messages"][-1])]

    def reminded_in(self, *, sub: bool = False) -> list[int]:
        return self.carrying(REPEATED_TOOL_FAILURE_REMINDER, sub=sub)


Script = Callable[[Workspace], list[Turn]]


def _run(base: Path, mode: str, main: Script, sub: Script) -> AgentRun:
    place = Workspace.make(base)
    fake = FakeAnthropic(main(place), agents={MARKER: sub(place)})
    guard = RepeatedToolFailureHooks(mode=mode)
    seen: list[Any] = []
    raised: list[ProtectionStopped] = []

    async def drive() -> None:
        options = sdk_options(fake, place, allowed_tools=["Read", "Agent"], agents=AGENTS)
        try:
            async for message in guard.query(prompt="Check the files", options=options):
                seen.append(message)
        except ProtectionStopped as stopped:
            raised.append(stopped)

    with serve_anthropic(fake):
        asyncio.run(asyncio.wait_for(drive(), timeout=240))
    results = [m for m in seen if isinstance(m, ResultMessage)]
    result = results[-1] if results else None
    report = guard.report_of(result.session_id if result is not None else None)
    return AgentRun(
        fake.main_requests(),
        fake.agent_requests(MARKER),
        result,
        raised[0] if raised else None,
        report,
    )


def _failing_sub(place: Workspace) -> list[Turn]:
    """2 failing Reads per response for 8 responses."""
    return [Turn(text="Reading.", calls=(read(place.missing),) * 2)] * 8


def _healthy_sub(place: Workspace) -> list[Turn]:
    """The same calls, succeeding."""
    return [Turn(text="Reading.", calls=(read(place.present),) * 2)] * 8


def _delegating_main(place: Workspace) -> list[Turn]:
    return [Turn(text="Delegating.", calls=(delegate(),))]


def test_a_stubborn_subagent_is_stopped_alone_and_the_main_agent_told(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="tool_failure_guard")
    ran = _run(tmp_path, "enforce", _delegating_main, _failing_sub)
    # the subagent's own streak: reminded in its 5th request, stopped after its 5th batch
    assert ran.reminded_in(sub=True) == [4]
    assert len(ran.sub) == 5
    # the main agent makes its next request, which carries the guard's stop text, and ends
    assert len(ran.main) == 2 and ran.reminded_in() == []
    [stopped] = ran.report.stopped_subagents
    stop = stopped.stop
    assert stop is not None and stop.loop_type == "repeated_tool_execution_failure"
    assert ran.carrying(stop.notice) == [1] and ran.carrying(str(stop.agent_id)) == [1]
    assert ran.raised is None  # the query ends normally: its own agent was not stopped
    assert ran.result is not None and not ran.result.is_error
    assert ran.result.stop_reason == "end_turn"
    # the report: the main agent's own, the subagent's stop named in it
    assert ran.report.stop is None and ran.report.decisions == ("none",)
    assert stopped.agent_type == "checker" and stop.agent_type == "checker"
    assert stopped.agent_id == stop.agent_id and stop.agent_id
    assert stopped.decisions == ("tracked", "tracked", "tracked", "warn", "stop")
    assert stopped.batches == 5 and stopped.tool_calls == 10
    # the application's log says which loop was stopped, never "the run"
    logged = [r.getMessage() for r in caplog.records if "tool-failure-guard" in r.getMessage()]
    assert [m for m in logged if "stopped" in m] == [
        "tool-failure-guard (enforce, claude_agent_sdk): stopped the subagent at batch 5 "
        f"(repeated_tool_execution_failure), subagent {stop.agent_id} (checker)"
    ]


def _failing_around(place: Workspace) -> list[Turn]:
    """The main agent fails before and after calling the subagent."""
    failing = Turn(text="Reading.", calls=(read(place.missing),) * 4)
    return [failing, Turn(text="Delegating.", calls=(delegate(),)), *[failing] * 5]


def test_the_main_agents_streak_is_its_own_whatever_its_subagent_does(tmp_path: Path) -> None:
    for mode in ("enforce", "warn"):
        failing = _run(tmp_path, mode, _failing_around, _failing_sub)
        healthy = _run(tmp_path, mode, _failing_around, _healthy_sub)
        # the main agent's reminder and stop come at the same requests either way
        assert failing.reminded_in() == healthy.reminded_in() != [], mode
        assert len(failing.main) == len(healthy.main), mode
        assert failing.report.decisions == healthy.report.decisions, mode
        # the subagent is never reminded for the parent's failures, only for its own
        assert healthy.reminded_in(sub=True) == [] and failing.reminded_in(sub=True) == [4]
        assert healthy.report.stopped_subagents == ()
        if mode == "enforce":
            assert failing.raised is not None and healthy.raised is not None
            assert failing.raised.report.stop is not None
            assert failing.raised.report.stop.agent_id is None  # the run's own agent
            assert len(failing.raised.report.stopped_subagents) == 1
        else:
            assert failing.raised is None and healthy.raised is None
            assert failing.report.reminded and failing.report.stop is None


class _MidTurn(FakeAnthropic):
    """Holds the main agent's 3rd answer until its background subagent has finished (its
    2nd request answered, its completion seen in the stream), so that the completion's
    ``<task-notification>`` reaches the main agent in the middle of its turn."""

    def __init__(self, turns: list[Turn], agents: dict[str, list[Turn]]) -> None:
        super().__init__(turns, agents=agents)
        self.finished = threading.Event()  #: set by the consumer at the task's notification

    def handle(self, handler: BaseHTTPRequestHandler, method: str, body: Any) -> None:
        if isinstance(body, dict) and body.get("tools") and self.agent_of(body) is None:
            position = sum(1 for m in body.get("messages", []) if m.get("role") == "assistant")
            if position == 2 and not self.finished.wait(timeout=60):
                raise TimeoutError("the background subagent never finished")
        super().handle(handler, method, body)


def test_a_background_subagent_finishing_mid_turn_leaves_the_main_streak(
    tmp_path: Path,
) -> None:
    """The SDK's bundled CLI runs a subagent in the background by default: its completion
    comes back as a ``UserPromptSubmit`` of the same prompt id, which is not a new prompt."""
    place = Workspace.make(tmp_path)
    background = Call(
        name="Agent",
        arguments={
            "description": "check the files",
            "prompt": f"{MARKER}: read the files and report.",
            "subagent_type": "checker",
        },
    )
    failing = Turn(text="Reading.", calls=(read(place.missing),) * 4)
    fake = _MidTurn(
        [Turn(text="Delegating.", calls=(background,)), *[failing] * 5],
        agents={MARKER: [Turn(text="Reading.", calls=(read(place.present),) * 2)]},
    )
    guard = RepeatedToolFailureHooks(mode="enforce")
    raised: list[ProtectionStopped] = []

    async def drive() -> None:
        options = sdk_options(fake, place, allowed_tools=["Read", "Agent"], agents=AGENTS)
        try:
            async for message in guard.query(prompt="Check the files", options=options):
                if isinstance(message, TaskNotificationMessage):
                    fake.finished.set()
        except ProtectionStopped as stopped:
            raised.append(stopped)

    with serve_anthropic(fake):
        asyncio.run(asyncio.wait_for(drive(), timeout=240))
    main = fake.main_requests()
    notified = [i for i, b in enumerate(main) if "<task-notification>" in json.dumps(b["messages"])]
    # the completion came mid-turn: with the request after batch 3, a batch still to come
    assert notified and notified[0] == 3
    # the main agent's reminder and stop where they are without a subagent: batches 3 and 4
    reminder = REPEATED_TOOL_FAILURE_REMINDER
    reminded = [i for i, b in enumerate(main) if reminder in json.dumps(b["messages"][-1])]
    assert reminded == [3] and len(main) == 4
    [stopped] = raised
    assert stopped.report.decisions == ("none", "tracked", "warn", "stop")
    assert stopped.report.stop is not None and stopped.report.stop.agent_id is None
    assert len(fake.agent_requests(MARKER)) == 2  # the subagent: one batch, then its answer
