"""The input boundary: pull drain answers, failures, late answers, and the push queue."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
from acp.exceptions import RequestError

from tool_failure_guard.guard import GuardMode
from tool_failure_guard.session.config.declared_boundary import BoundaryKind
from tool_failure_guard.session.pipeline.drain import (
    DRAIN_METHOD,
    DrainAnswer,
    MidTurnInput,
    parse_drain_answer,
    unreadable_note,
)


def test_the_drain_is_named_as_in_the_seed() -> None:
    assert DRAIN_METHOD == "craft/drainMidTurnQueue"


def test_well_formed_answers() -> None:
    assert parse_drain_answer(
        {"messages": ["a"], "hasQueuedPrompt": True}, watched=True
    ) == DrainAnswer(("a",), True, True)
    # off sends no watch flag: the legacy shape is the contract then
    assert parse_drain_answer(
        {"messages": [{"type": "text", "text": "b"}]}, watched=False
    ) == DrainAnswer(("b",), False, True)


def test_a_legacy_answer_to_a_watched_request_keeps_its_messages() -> None:
    answer = parse_drain_answer({"messages": ["a", "b"]}, watched=True)
    assert answer.messages == ("a", "b")
    assert not answer.well_formed  # the boundary is unreliable, the messages are not


def test_no_count_limit_drops_input() -> None:
    many = {"messages": [str(i) for i in range(12)], "hasQueuedPrompt": False}
    assert parse_drain_answer(many, watched=True).messages == tuple(str(i) for i in range(12))


NOTE = "[queued input that is not text was left out: {}]"


@pytest.mark.parametrize(
    ("answer", "messages"),
    [
        ({"messages": ["a", 1, "b"], "hasQueuedPrompt": False}, ("a", NOTE.format("number"), "b")),
        (
            {"messages": [{"type": "image", "data": "..."}], "hasQueuedPrompt": False},
            (NOTE.format("image"),),
        ),
        (
            {"messages": [{"type": "text", "text": 5}], "hasQueuedPrompt": False},
            (NOTE.format("text"),),
        ),
        ({"messages": "just text", "hasQueuedPrompt": False}, ("just text",)),
        ({"messages": ["a"], "hasQueuedPrompt": "no"}, ("a",)),
        (["a", "b"], ("a", "b")),
        ({"messages": None, "hasQueuedPrompt": False}, ()),
        (None, ()),
    ],
)
def test_malformed_answers_deliver_what_they_carried(
    answer: Any, messages: tuple[str, ...]
) -> None:
    parsed = parse_drain_answer(answer, watched=True)
    assert not parsed.well_formed
    assert parsed.messages == messages


def test_an_unreadable_item_becomes_a_visible_note() -> None:
    assert unreadable_note({"type": "image"}) == NOTE.format("image")
    assert unreadable_note(3.5).endswith(": number]")
    assert unreadable_note([1]).endswith(": array]")


class Host:
    """A host's drain method whose answers the test releases one by one."""

    def __init__(self, answers: list[Any], *, hold: bool = False) -> None:
        self.answers = answers
        self.requests: list[dict[str, Any]] = []
        self.hold = hold
        self.release = asyncio.Event()

    async def ext(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        assert method == DRAIN_METHOD
        index = len(self.requests)
        self.requests.append(params)
        if self.hold and index == 0:
            await self.release.wait()
        answer = self.answers[min(index, len(self.answers) - 1)]
        if isinstance(answer, BaseException):
            raise answer
        return answer  # type: ignore[no-any-return]


def test_watch_flag_only_when_the_mode_is_not_off() -> None:
    async def go(watch: bool) -> list[dict[str, Any]]:
        host = Host([{"messages": [], "hasQueuedPrompt": False}])
        await MidTurnInput("s1", host.ext).drain(watch_queued_prompt=watch)
        return host.requests

    assert asyncio.run(go(True)) == [{"sessionId": "s1", "todoStopGuardWatchQueuedPrompt": True}]
    assert asyncio.run(go(False)) == [{"sessionId": "s1"}]


def test_pushed_and_pulled_input_are_external_input_in_arrival_order() -> None:
    async def go() -> Any:
        host = Host([{"messages": ["pulled"], "hasQueuedPrompt": True}])
        boundary = MidTurnInput("s1", host.ext)
        boundary.push(["pushed"])
        return await boundary.drain(watch_queued_prompt=True)

    result = asyncio.run(go())
    assert result.messages == ("pushed", "pulled")
    boundary = result.boundary()
    assert boundary.has_external_input and boundary.has_queued_prompt and boundary.reliable


def test_without_the_drain_method_every_boundary_is_unreliable_and_push_still_works() -> None:
    async def go() -> tuple[list[Any], MidTurnInput, Host]:
        host = Host([RequestError.method_not_found("_" + DRAIN_METHOD)])
        boundary = MidTurnInput("s1", host.ext)
        boundary.start_prompt()
        results = [await boundary.drain(watch_queued_prompt=True)]
        boundary.push(["steer"])
        results.append(await boundary.drain(watch_queued_prompt=True))
        boundary.start_prompt()
        results.append(await boundary.drain(watch_queued_prompt=True))
        return results, boundary, host

    results, boundary, host = asyncio.run(go())
    assert [r.reliable for r in results] == [False, False, False]
    assert [r.messages for r in results] == [(), ("steer",), ()]
    assert boundary.pull_disabled and not boundary.drain_supported
    assert len(host.requests) == 1  # never asked again


@pytest.mark.parametrize("mode", [GuardMode.WARN, GuardMode.ENFORCE])
def test_a_client_without_the_drain_gets_one_warning_naming_the_reason_and_the_fix(
    caplog: pytest.LogCaptureFixture, mode: GuardMode
) -> None:
    async def go() -> None:
        host = Host([RequestError.method_not_found("_" + DRAIN_METHOD)])
        boundary = MidTurnInput("s1", host.ext, mode=mode)
        for _ in range(3):  # three prompts, one warning
            boundary.start_prompt()
            await boundary.drain(watch_queued_prompt=True)
            await boundary.drain(watch_queued_prompt=True)

    with caplog.at_level(logging.WARNING, logger="session.drain"):
        asyncio.run(go())
    (warning,) = caplog.records
    assert warning.levelno == logging.WARNING
    text = warning.getMessage()
    assert "session s1" in text and "method not found" in text
    assert "can never remind or stop" in text and f"its mode is {mode.value}" in text
    assert "TOOL_FAILURE_GUARD_INPUT_BOUNDARY=prompt-only" in text


@pytest.mark.parametrize("mode", [GuardMode.OFF, GuardMode.SHADOW])
def test_a_client_without_the_drain_is_no_warning_where_the_guard_is_not_meant_to_act(
    caplog: pytest.LogCaptureFixture, mode: GuardMode
) -> None:
    """Issue 41.2: off and shadow never remind or stop, so nothing is lost to the host."""

    async def go() -> MidTurnInput:
        host = Host([RequestError.method_not_found("_" + DRAIN_METHOD)])
        boundary = MidTurnInput("s1", host.ext, mode=mode)
        boundary.start_prompt()
        await boundary.drain(watch_queued_prompt=mode is not GuardMode.OFF)
        return boundary

    with caplog.at_level(logging.DEBUG, logger="session.drain"):
        boundary = asyncio.run(go())
    assert caplog.records == []
    assert boundary.pull_disabled and not boundary.drain_supported  # recorded all the same


def test_a_declared_prompt_only_client_gets_no_warning(caplog: pytest.LogCaptureFixture) -> None:
    async def go() -> None:
        host = Host([RequestError.method_not_found("_" + DRAIN_METHOD)])
        boundary = MidTurnInput("s1", host.ext, declared=BoundaryKind.PROMPT_ONLY)
        boundary.start_prompt()
        await boundary.drain(watch_queued_prompt=True)

    with caplog.at_level(logging.WARNING, logger="session.drain"):
        asyncio.run(go())
    assert caplog.records == []


def test_no_client_means_no_drain_support_from_the_first_prompt() -> None:
    boundary = MidTurnInput("s1", None)
    boundary.start_prompt()
    assert not boundary.drain_supported
    assert not asyncio.run(boundary.drain(watch_queued_prompt=True)).reliable


def test_other_failures_are_unreliable_but_keep_pulling() -> None:
    async def go(answer: Any) -> tuple[Any, MidTurnInput]:
        boundary = MidTurnInput("s1", Host([answer]).ext)
        boundary.start_prompt()
        return await boundary.drain(watch_queued_prompt=True), boundary

    result, boundary = asyncio.run(go(RequestError.internal_error()))
    assert not result.reliable and not boundary.pull_disabled and boundary.drain_supported
    result, boundary = asyncio.run(go({"messages": ["kept"]}))  # legacy shape, watched
    assert not result.reliable and not boundary.pull_disabled and not boundary.drain_supported
    assert result.messages == ("kept",)


def test_a_late_answer_is_kept_and_delivered_at_the_next_boundary(
    caplog: pytest.LogCaptureFixture,
) -> None:
    changes: list[tuple[str, ...]] = []

    async def go() -> tuple[list[Any], Host]:
        host = Host(
            [
                {"messages": ["late"], "hasQueuedPrompt": False},
                {"messages": ["fresh"], "hasQueuedPrompt": False},
            ],
            hold=True,
        )
        boundary = MidTurnInput("s1", host.ext, timeout=0.01, on_queue_change=changes.append)
        first = await boundary.drain(watch_queued_prompt=True)
        assert boundary.request_outstanding
        host.release.set()
        while boundary.request_outstanding:
            await asyncio.sleep(0)
        assert boundary.pending == ("late",)  # adopted (and reported) on arrival
        second = await boundary.drain(watch_queued_prompt=True)
        return [first, second], host

    with caplog.at_level(logging.WARNING, logger="session.drain"):
        (first, second), host = asyncio.run(go())
    assert (first.messages, first.reliable) == ((), False)
    assert (second.messages, second.reliable) == (("late", "fresh"), True)
    assert len(host.requests) == 2
    assert changes == [("late",), ("late", "fresh"), ()]
    assert "late answer is kept" in caplog.text


def test_an_outstanding_request_is_awaited_again_not_duplicated() -> None:
    async def go() -> tuple[Any, Host]:
        host = Host([{"messages": ["slow"], "hasQueuedPrompt": False}], hold=True)
        boundary = MidTurnInput("s1", host.ext, timeout=0.01)
        await boundary.drain(watch_queued_prompt=True)  # times out
        asyncio.get_running_loop().call_soon(host.release.set)
        boundary._timeout = 5.0  # the answer comes while the next boundary waits
        return await boundary.drain(watch_queued_prompt=True), host

    result, host = asyncio.run(go())
    assert result.messages == ("slow",) and result.reliable
    assert len(host.requests) == 1


def test_a_cancel_ends_a_hung_drain_and_the_answer_is_kept() -> None:
    async def go() -> tuple[Any, bool, MidTurnInput]:
        host = Host([{"messages": ["after cancel"], "hasQueuedPrompt": False}], hold=True)
        boundary = MidTurnInput("s1", host.ext, timeout=3600)
        boundary.push(["queued"])
        cancelled = asyncio.Event()
        asyncio.get_running_loop().call_soon(cancelled.set)
        result = await boundary.drain(watch_queued_prompt=True, cancelled=cancelled)
        outstanding = boundary.request_outstanding
        host.release.set()
        while boundary.request_outstanding:
            await asyncio.sleep(0)
        return result, outstanding, boundary

    result, outstanding, boundary = asyncio.run(go())
    assert (result.messages, result.reliable) == ((), False)
    assert outstanding
    assert boundary.pending == ("queued", "after cancel")


def test_requeued_input_stays_queued_in_front() -> None:
    boundary = MidTurnInput("s1", None)
    boundary.push(["later"])
    boundary.requeue(("first",))
    assert boundary.take_pushed() == ["first", "later"]
