"""Which wire name of the drain a connection speaks: the bare one first, learnt once.

The unit half drives :class:`DrainMethodNames` against a recorded raw request
path; the wire half spawns the real agent and plays Python ACP SDK hosts that
answer the bare name (as a host written for Qwen Code 0.24.4 does), the
``_``-prefixed name (what this project's documentation told host authors),
both, or neither, counting every drain request on the wire.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from acp import text_block
from acp.exceptions import RequestError
from e2e_helpers import Box, decisions

from tool_failure_guard.guard import REPEATED_TOOL_FAILURE_REMINDER
from tool_failure_guard.session.transport.client import RecordingClient, spawn_guarded_agent
from tool_failure_guard.session.transport.drain_names import (
    BARE_DRAIN_NAME,
    PREFIXED_DRAIN_NAME,
    DrainMethodNames,
)

BARE, PREFIXED = BARE_DRAIN_NAME, PREFIXED_DRAIN_NAME
ANSWER = {"messages": [], "hasQueuedPrompt": False}


class Wire:
    """A raw request path: each name answers, fails "method not found", or hangs."""

    def __init__(self, speaks: Sequence[str], *, hang: bool = False, error: Any = None) -> None:
        self.speaks = set(speaks)
        self.hang = hang
        self.error = error
        self.sent: list[str] = []

    async def send(self, method: str, params: Any) -> Any:
        self.sent.append(method)
        if self.hang:
            await asyncio.Event().wait()
        if method not in self.speaks:
            raise RequestError.method_not_found(method)
        if self.error is not None:
            raise self.error
        return ANSWER


def drain(names: DrainMethodNames, times: int = 1) -> list[Any]:
    async def go() -> list[Any]:
        return [await names.request(BARE, {"sessionId": "s1"}) for _ in range(times)]

    return asyncio.run(go())


@pytest.mark.parametrize(
    ("speaks", "sent"),
    [
        ([BARE], [BARE] * 3),
        ([PREFIXED], [BARE, PREFIXED, PREFIXED, PREFIXED]),
        ([BARE, PREFIXED], [BARE] * 3),
    ],
    ids=["bare", "prefixed", "both"],
)
def test_the_name_is_learnt_at_the_first_boundary(speaks: list[str], sent: list[str]) -> None:
    wire = Wire(speaks)
    names = DrainMethodNames(wire.send)
    assert drain(names, 3) == [ANSWER] * 3
    assert wire.sent == sent
    assert names.known == speaks[0]


def test_neither_name_is_method_not_found_and_costs_no_round_trip_after() -> None:
    wire = Wire([])
    names = DrainMethodNames(wire.send)
    for _ in range(3):
        with pytest.raises(RequestError) as caught:
            drain(names)
        assert caught.value.code == -32601
    assert wire.sent == [BARE, PREFIXED]  # learnt absent for the connection
    assert names.absent and names.known is None


def test_another_error_is_passed_on_and_switches_nothing() -> None:
    wire = Wire([BARE], error=RequestError.internal_error({"details": "queue broken"}))
    names = DrainMethodNames(wire.send)
    for _ in range(2):
        with pytest.raises(RequestError) as caught:
            drain(names)
        assert caught.value.code == -32603
    assert wire.sent == [BARE, BARE]
    assert names.known is None and not names.absent


def test_a_timeout_does_not_switch_names() -> None:
    wire = Wire([PREFIXED], hang=True)
    names = DrainMethodNames(wire.send)

    async def go() -> None:
        for _ in range(2):
            task = asyncio.ensure_future(names.request(BARE, {"sessionId": "s1"}))
            done, _ = await asyncio.wait({task}, timeout=0.02)
            assert not done
            task.cancel()

    asyncio.run(go())
    assert wire.sent == [BARE, BARE]  # the bare name again: no answer is no verdict


def test_other_extension_methods_go_the_sdk_way() -> None:
    sent: list[str] = []

    async def ext(method: str, params: dict[str, Any]) -> dict[str, Any]:
        sent.append(method)
        return {}

    wire = Wire([BARE])
    asyncio.run(DrainMethodNames(wire.send, ext).request("session/other", {}))
    assert sent == ["session/other"] and wire.sent == []


# -- real ACP SDK hosts over stdio ---------------------------------------------------


async def prompts(
    box: Box, client: RecordingClient, *, sessions: int = 1, extra: Sequence[str] = ()
) -> list[Any]:
    responses = []
    async with spawn_guarded_agent(
        client,
        mode="enforce",
        state_dir=box.state,
        home=box.home,
        scenario="read-loop",
        extra_args=extra,
    ) as conn:
        for _ in range(sessions):
            session = await conn.new_session(cwd=str(box.project), mcp_servers=[])
            responses.append(
                await conn.prompt(session_id=session.session_id, prompt=[text_block("go")])
            )
    return responses


@pytest.fixture
def box(tmp_path: Path) -> Box:
    return Box(tmp_path)


@pytest.mark.parametrize(
    ("speaks", "wire"),
    [
        ([BARE], [BARE] * 6),
        ([PREFIXED], [BARE, PREFIXED] + [PREFIXED] * 5),
        ([BARE, PREFIXED], [BARE] * 6),
    ],
    ids=["bare-host", "prefixed-host", "both"],
)
def test_a_host_of_either_name_gets_the_reminder_and_the_stop(
    box: Box, speaks: list[str], wire: list[str]
) -> None:
    client = RecordingClient(drain_names=speaks)
    [first, second] = asyncio.run(prompts(box, client, sessions=2))
    for response in (first, second):
        assert decisions(response) == ["tracked", "warn", "stop"]
        assert response.field_meta["toolFailureGuard"]["drainSupported"] is True
        assert response.field_meta["loopType"] == "repeated_tool_execution_failure"
    # a boundary after each of the 3 batches, two sessions; the name is learnt once
    assert client.drain_round_trips() == wire
    assert len(client.drain_requests) == 6


def test_a_host_with_neither_name_stays_fail_open(box: Box) -> None:
    client = RecordingClient(drain_names=())
    [first, second] = asyncio.run(prompts(box, client, sessions=2))
    for response in (first, second):
        rows = response.field_meta["toolFailureGuard"]["batches"]
        assert (rows[0]["decision"], rows[0]["reason"]) == ("reset", "unreliable_input")
        assert {r["reliableInput"] for r in rows} == {False}
        assert {r["decision"] for r in rows[1:]} == {"none"}
        assert "loopType" not in response.field_meta
        assert response.field_meta["toolFailureGuard"]["drainSupported"] is False
    assert client.drain_round_trips() == [BARE, PREFIXED]  # then never again, any session
    assert REPEATED_TOOL_FAILURE_REMINDER not in str(client.events)


@pytest.mark.parametrize(
    ("mode", "warned"), [("off", 0), ("shadow", 0), ("warn", 1), ("enforce", 1)]
)
def test_the_cannot_act_warning_is_given_only_where_the_guard_is_meant_to_act(
    box: Box, mode: str, warned: int
) -> None:
    """Issue 41.2: a host without the drain takes nothing from off or shadow (docs/modes.md)."""
    client = RecordingClient(drain_names=())
    log = box.home / "agent.stderr"

    async def go() -> None:
        with log.open("wb") as stderr:
            async with spawn_guarded_agent(
                client, mode=mode, state_dir=box.state, home=box.home, stderr=stderr
            ) as conn:
                for _ in range(2):  # two sessions of one connection: one warning each
                    session = await conn.new_session(cwd=str(box.project), mcp_servers=[])
                    await conn.prompt(session_id=session.session_id, prompt=[text_block("go")])

    asyncio.run(go())
    lines = log.read_text(encoding="utf-8", errors="replace").splitlines()
    warnings = [line for line in lines if "can never remind or stop" in line]
    assert len(warnings) == 2 * warned, lines
    assert all(f"its mode is {mode}" in line for line in warnings)
    if mode != "off":  # off never asks the host (the guard is not run); the others do, once
        assert client.drain_round_trips() == [BARE, PREFIXED]


def test_a_timeout_on_the_bare_name_is_not_method_not_found(box: Box) -> None:
    client = RecordingClient(drain="slow", drain_names=[BARE])
    [response] = asyncio.run(prompts(box, client, extra=["--drain-timeout", "0.05"]))
    assert client.drain_round_trips() == [BARE]  # outstanding; never the other name
    assert {r["reliableInput"] for r in response.field_meta["toolFailureGuard"]["batches"]} == {
        False
    }
