"""The input boundary: pull drain answers, failures, disabling, and the push queue."""

from __future__ import annotations

import asyncio
from typing import Any

from acp.exceptions import RequestError

from session.drain import DRAIN_METHOD, DRAIN_WIRE_NAME, MidTurnInput, parse_drain_answer


def test_wire_name_carries_the_extension_prefix() -> None:
    assert DRAIN_METHOD == "craft/drainMidTurnQueue"
    assert DRAIN_WIRE_NAME == "_craft/drainMidTurnQueue"


def test_answers_are_validated() -> None:
    assert parse_drain_answer({"messages": ["a"], "hasQueuedPrompt": False}, watched=True) == (
        ("a",),
        False,
    )
    assert parse_drain_answer({"messages": [{"type": "text", "text": "b"}]}, watched=False) == (
        ("b",),
        False,
    )
    assert parse_drain_answer({"messages": []}, watched=True) is None  # flag required
    assert parse_drain_answer({"messages": [1], "hasQueuedPrompt": False}, watched=True) is None
    assert parse_drain_answer({"hasQueuedPrompt": "no"}, watched=True) is None
    assert parse_drain_answer([], watched=False) is None
    many = {"messages": [str(i) for i in range(15)], "hasQueuedPrompt": True}
    parsed = parse_drain_answer(many, watched=True)
    assert parsed is not None and len(parsed[0]) == 10


def drain_with(answer: Any, *, watch: bool = True, pushed: list[str] | None = None) -> Any:
    seen: list[dict[str, Any]] = []

    async def ext(method: str, params: dict[str, Any]) -> dict[str, Any]:
        seen.append(params)
        if isinstance(answer, BaseException):
            raise answer
        return answer  # type: ignore[no-any-return]

    async def go() -> Any:
        boundary = MidTurnInput("s1", ext, timeout=0.05)
        boundary.push(pushed or [])
        return await boundary.drain(watch_queued_prompt=watch), boundary

    result, boundary = asyncio.run(go())
    return result, boundary, seen


def test_watch_flag_only_when_the_mode_is_not_off() -> None:
    _, _, seen = drain_with({"messages": [], "hasQueuedPrompt": False}, watch=True)
    assert seen == [{"sessionId": "s1", "todoStopGuardWatchQueuedPrompt": True}]
    _, _, seen = drain_with({"messages": []}, watch=False)
    assert seen == [{"sessionId": "s1"}]


def test_pushed_and_pulled_input_are_external_input() -> None:
    result, _, _ = drain_with({"messages": ["pulled"], "hasQueuedPrompt": True}, pushed=["pushed"])
    assert result.messages == ("pulled", "pushed")
    boundary = result.boundary()
    assert boundary.has_external_input and boundary.has_queued_prompt and boundary.reliable


def test_method_not_found_disables_pulling_then_the_agent_queue_is_the_boundary() -> None:
    async def ext(method: str, params: dict[str, Any]) -> dict[str, Any]:
        raise RequestError.method_not_found("_" + method)

    async def go() -> list[bool]:
        boundary = MidTurnInput("s1", ext)
        boundary.start_prompt()
        first = await boundary.drain(watch_queued_prompt=True)
        second = await boundary.drain(watch_queued_prompt=True)
        boundary.start_prompt()
        third = await boundary.drain(watch_queued_prompt=True)
        assert boundary.pull_disabled
        return [first.reliable, second.reliable, third.reliable]

    assert asyncio.run(go()) == [False, True, False]


def test_other_failures_are_unreliable_but_keep_pulling() -> None:
    result, boundary, _ = drain_with(RequestError.internal_error())
    assert not result.reliable and not boundary.pull_disabled
    result, boundary, _ = drain_with({"messages": "nope"})
    assert not result.reliable and not boundary.pull_disabled


def test_requeued_input_stays_queued_in_front() -> None:
    boundary = MidTurnInput("s1", None)
    boundary.push(["later"])
    boundary.requeue(("first",))
    assert boundary.take_pushed() == ["first", "later"]
