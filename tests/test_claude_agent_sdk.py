"""The Claude Agent SDK adapter (0.2.190) with its bundled Claude Code, against the local fake
Anthropic Messages API: the same guard as the command hook, in memory."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import pytest
from agent_fakes.anthropic_messages import FakeAnthropic, serve_anthropic
from agent_fakes.script import Turn
from claude_agent_sdk import ClaudeAgentOptions, ClaudeSDKError, ResultMessage
from claude_hook_harness import Run, read
from claude_sdk_harness import Workspace, sdk_options

from tool_failure_guard.integrations.claude_agent_sdk import (
    ProtectionStopped,
    RepeatedToolFailureHooks,
    report_of,
    stop_of,
)


@attrs.frozen
class SdkRun:
    run: Run
    messages: list[Any]
    raised: BaseException | None
    guard: RepeatedToolFailureHooks


def _reads(count: int) -> Callable[[Path], list[Turn]]:
    def turns(ws: Path) -> list[Turn]:
        return [Turn(text="Reading.", calls=(read(str(ws / "missing.txt")),) * 4)] * count

    return turns


def _run(
    turns_of: Callable[[Path], list[Turn]], base: Path, *, own_options: bool = False, **guard: Any
) -> SdkRun:
    place = Workspace.make(base)
    fake = FakeAnthropic(turns_of(place.ws))
    hooks = RepeatedToolFailureHooks(**guard)
    messages: list[Any] = []
    raised: list[BaseException] = []

    async def drive() -> None:
        options = sdk_options(fake, place)
        try:
            if own_options:  # the hooks registered by the application itself
                from claude_agent_sdk import query

                options = ClaudeAgentOptions(**{**options.__dict__, "hooks": hooks.hooks()})
                async for message in query(prompt="Read missing.txt", options=options):
                    messages.append(message)
            else:
                async for message in hooks.query(prompt="Read missing.txt", options=options):
                    messages.append(message)
        except ProtectionStopped as stopped:
            raised.append(stopped)

    with serve_anthropic(fake):
        asyncio.run(drive())
    run = Run(fake.main_requests(), [], 0, "", place.root)
    return SdkRun(run, messages, raised[0] if raised else None, hooks)


def test_enforce_reminds_once_then_stops_and_raises_a_typed_stop(tmp_path: Path) -> None:
    ran = _run(_reads(6), tmp_path, mode="enforce")
    assert len(ran.run.requests) == 3
    assert ran.run.reminded_in() == [2]
    stopped = ran.raised
    assert isinstance(stopped, ProtectionStopped) and isinstance(stopped, ClaudeSDKError)
    assert stopped.loop_type == "repeated_tool_execution_failure"
    assert stopped.key is not None and stopped.key.execution_error_type == "file_not_found"
    assert stopped.report.decisions == ("tracked", "warn", "stop")
    result = ran.messages[-1]
    assert isinstance(result, ResultMessage) and result.result == ""


def test_on_stop_end_ends_without_raising_and_stop_of_says_why(tmp_path: Path) -> None:
    ran = _run(_reads(6), tmp_path, mode="enforce", on_stop="end")
    assert ran.raised is None and len(ran.run.requests) == 3
    stop = stop_of(ran.guard)
    assert stop is not None and stop.loop_type == "repeated_tool_execution_failure"


def test_hooks_registered_by_the_application_act_the_same(tmp_path: Path) -> None:
    ran = _run(_reads(6), tmp_path, own_options=True, mode="warn")
    assert len(ran.run.requests) == 7 and ran.run.reminded_in() == [2]
    report = report_of(ran.guard)
    assert report.reminded and report.stop is None
    assert report.decisions[:3] == ("tracked", "warn", "would_stop")


def test_shadow_sends_the_model_exactly_what_off_sends(tmp_path: Path) -> None:
    off = _run(_reads(4), tmp_path, mode="off")
    shadow = _run(_reads(4), tmp_path, mode="shadow")
    assert len(shadow.run.requests) == len(off.run.requests) == 5
    assert shadow.run.messages() == off.run.messages()
    assert report_of(shadow.guard).would_stop and report_of(off.guard).decisions == ()


def test_a_failing_callback_fails_open(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    hooks = RepeatedToolFailureHooks(mode="enforce")
    bad = {"hook_event_name": "PostToolBatch", "session_id": "s", "tool_calls": "nope"}
    assert asyncio.run(hooks._event(bad, None, None)) == {}
    assert "failed open" in caplog.text


def test_options_that_hold_the_guard_already_are_not_given_it_twice() -> None:
    hooks = RepeatedToolFailureHooks(mode="enforce")
    other = RepeatedToolFailureHooks(mode="enforce")
    once = hooks.options(hooks.options(ClaudeAgentOptions()))
    assert once.hooks is not None
    assert {event: len(matchers) for event, matchers in once.hooks.items()} == {
        event: 1 for event in hooks.hooks()
    }
    both = other.options(once)  # another guard is another guard: added after
    assert both.hooks is not None and all(len(m) == 2 for m in both.hooks.values())
