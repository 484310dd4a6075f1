"""The input boundary inside a prompt: no input lost, shadow equals off, cancel wins.

Every test drives a real :class:`GuardedSession` in-process (real tools on a
temporary project, the scripted model) against a host double that plays one
behaviour of the drain (``craft/drainMidTurnQueue``, called in-process).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from acp.exceptions import RequestError
from acp.schema import (
    AllowedOutcome,
    PermissionOption,
    RequestPermissionResponse,
    ToolCallUpdate,
)
from session_harness import in_process_session, per_call_order

from tool_failure_guard.guard import Decision, GuardMode, RepeatedToolFailureGuard
from tool_failure_guard.session.model.base import (
    ModelTurn,
    ScriptedModel,
    load_scenario,
    parse_scenario,
)
from tool_failure_guard.session.persistence.history import HistoryStore
from tool_failure_guard.session.persistence.messages import Message
from tool_failure_guard.session.pipeline.drain import QUEUED_INPUT_PREFIX, unreadable_note
from tool_failure_guard.session.pipeline.session import GuardedSession, SessionOptions
from tool_failure_guard.telemetry.sink import GuardTelemetry

#: How a host answers drain request number ``index`` (raise to fail it).
Behaviour = Callable[["Host", int], Awaitable[Any]]


class Host:
    """A client: records updates, answers permissions, plays one drain behaviour."""

    def __init__(self, behaviour: Behaviour | None, *, permission: str = "allow") -> None:
        self.behaviour = behaviour
        self.permission = permission
        self.updates: list[dict[str, Any]] = []
        self.drain_requests: list[dict[str, Any]] = []
        self.asked_at: dict[str, list[str]] = {}  #: call id -> its statuses when asked
        self.release = asyncio.Event()
        self.events: list[str] = []

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append(update.model_dump(mode="json", by_alias=True, exclude_none=True))

    def statuses(self, call_id: str) -> list[str]:
        return [
            u["status"] for u in self.updates if u.get("toolCallId") == call_id and "status" in u
        ]

    async def request_permission(
        self, session_id: str, tool_call: ToolCallUpdate, options: list[PermissionOption], **_: Any
    ) -> RequestPermissionResponse:
        self.asked_at[tool_call.tool_call_id] = self.statuses(tool_call.tool_call_id)
        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id=self.permission)
        )

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        assert self.behaviour is not None
        index = len(self.drain_requests)
        self.drain_requests.append(params)
        return await self.behaviour(self, index)  # type: ignore[no-any-return]


class RecordingModel:
    """The scripted model, remembering what it was sent; may act on the n-th request."""

    def __init__(self, scenario: Any, on_request: Callable[[int], None] | None = None) -> None:
        self.inner = ScriptedModel(scenario)
        self.inputs: list[list[tuple[str, list[tuple[str, str]]]]] = []
        self.on_request = on_request

    async def generate(self, history: Sequence[Message]) -> ModelTurn:
        if self.on_request is not None:
            self.on_request(len(self.inputs))
        self.inputs.append([(m.kind, [(p.kind, p.text) for p in m.parts]) for m in history])
        return await self.inner.generate(history)


def open_session(
    root: Path,
    project: Path,
    host: Host,
    model: RecordingModel,
    mode: GuardMode,
    *,
    timeout: float = 5.0,
    telemetry: GuardTelemetry | None = None,
) -> GuardedSession:
    return in_process_session(
        HistoryStore(root),
        project,
        client=host,
        model=model,
        mode=mode,
        telemetry=telemetry,
        drain_supported=host.behaviour is not None,
        drain_timeout=timeout,
        options=SessionOptions(report_decisions=True),
    )


def empty() -> dict[str, Any]:
    return {"messages": [], "hasQueuedPrompt": False}


# -- host behaviours ------------------------------------------------------------------


async def answers(host: Host, index: int) -> Any:
    if index == 1:
        return {"messages": ["use the other file"], "hasQueuedPrompt": False}
    return {"messages": [], "hasQueuedPrompt": index == 2}


async def legacy(host: Host, index: int) -> Any:
    return {"messages": ["legacy a", "legacy b"] if index == 1 else []}


async def error_then_answers(host: Host, index: int) -> Any:
    if index == 1:
        raise RequestError.internal_error({"details": "host queue broken"})
    if index == 2:
        return {"messages": ["after error"], "hasQueuedPrompt": False}
    return empty()


async def hangs(host: Host, index: int) -> Any:
    await asyncio.Event().wait()  # never answers
    raise AssertionError("unreachable")


async def late(host: Host, index: int) -> Any:
    if index == 0:
        await host.release.wait()  # released when the model is asked for turn 3
        return {"messages": ["late answer"], "hasQueuedPrompt": False}
    return empty()


async def method_not_found(host: Host, index: int) -> Any:
    raise RequestError.method_not_found("_craft/drainMidTurnQueue")


async def malformed(host: Host, index: int) -> Any:
    if index == 1:
        return {"messages": ["ok", {"type": "image", "data": "AA=="}], "hasQueuedPrompt": False}
    return empty()


PUSH = "pushed while the tools ran"

#: Behaviours that hold an answer back: only these need the drain to time out, and a
#: short timeout is certain to fire for them; an answering host gets a long one, so a
#: loaded machine never turns its answer into a timeout.
HOLDS_BACK = (hangs, late)

#: behaviour, host has the method, push at the 3rd model request, input the model must get
HOST_BEHAVIOURS: dict[str, tuple[Behaviour | None, bool, list[str]]] = {
    "answers-with-hasQueuedPrompt": (answers, False, ["use the other file"]),
    "answers-without-hasQueuedPrompt": (legacy, False, ["legacy a", "legacy b"]),
    "error": (error_then_answers, False, ["after error"]),
    "timeout": (hangs, False, []),
    "late-answer": (late, False, ["late answer"]),
    "method-not-found": (method_not_found, False, []),
    "method-not-found-with-push": (method_not_found, True, [PUSH]),
    "malformed-item": (malformed, False, ["ok", unreadable_note({"type": "image"})]),
    "no-client-method-with-push": (None, True, [PUSH]),
}


def run_behaviour(
    root: Path, project: Path, name: str, mode: GuardMode
) -> tuple[RecordingModel, Host, Any]:
    behaviour, push, _ = HOST_BEHAVIOURS[name]
    host = Host(behaviour)
    session: GuardedSession | None = None

    def on_request(n: int) -> None:
        if n == 2:
            host.release.set()
            if push:
                assert session is not None
                session.drain.push([PUSH])

    model = RecordingModel(load_scenario("read-loop"), on_request)
    timeout = 0.05 if behaviour in HOLDS_BACK else 5.0
    session = open_session(root, project, host, model, mode, timeout=timeout)
    response = asyncio.run(session.run_prompt(["go"], channel=False))
    return model, host, response


def test_per_call_order_keeps_each_calls_own_order_and_the_stretches_apart() -> None:
    a1, a2 = {"toolCallId": "a", "n": 1}, {"toolCallId": "a", "n": 2}
    b1, b2 = {"toolCallId": "b", "n": 1}, {"toolCallId": "b", "n": 2}
    text = {"sessionUpdate": "agent_message_chunk"}
    assert per_call_order([b1, a1, b2, a2, text, b1, a1]) == [a1, a2, b1, b2, text, a1, b1]
    assert per_call_order([a2, a1]) == [a2, a1]  # a call's own order is never changed


@pytest.mark.parametrize("name", list(HOST_BEHAVIOURS))
def test_shadow_and_off_give_the_same_model_input_and_updates(tmp_path: Path, name: str) -> None:
    project = tmp_path / "project"
    project.mkdir()
    off_model, off_host, off = run_behaviour(tmp_path / "off", project, name, GuardMode.OFF)
    shadow_model, shadow_host, shadow = run_behaviour(
        tmp_path / "shadow", project, name, GuardMode.SHADOW
    )

    assert shadow_model.inputs == off_model.inputs
    assert per_call_order(shadow_host.updates) == per_call_order(off_host.updates)
    assert shadow.stop_reason == off.stop_reason == "end_turn"
    # whatever the host handed over reached the model, in order, exactly once
    expected = [QUEUED_INPUT_PREFIX + text for text in HOST_BEHAVIOURS[name][2]]
    for model in (off_model, shadow_model):
        final = model.inputs[-1]
        queued = [text for _, parts in final for kind, text in parts if kind == "queued_input"]
        assert queued == expected
    shown = [
        u["content"]["text"]
        for u in shadow_host.updates
        if u["sessionUpdate"] == "user_message_chunk"
    ]
    assert shown == expected
    # shadow really ran the guard (off never does)
    shadow_rows = shadow.field_meta["toolFailureGuard"]["batches"]
    assert {r["decision"] for r in off.field_meta["toolFailureGuard"]["batches"]} == {"none"}
    assert len(shadow_rows) == 5


class DecisionLog:
    """A telemetry sink keeping each guard decision's kind and reason."""

    def __init__(self) -> None:
        self.records: list[tuple[str, str | None]] = []

    def guard_decision(
        self, *, decision: Decision, guard: RepeatedToolFailureGuard, **_: Any
    ) -> None:
        reason = decision.reason.value if decision.reason is not None else None
        self.records.append((decision.kind.value, reason))

    def loop_detected(self, *, prompt_id: str, loop_type: str) -> None:
        return None

    def tool_call_settled(self, **_: Any) -> None:
        return None


@pytest.mark.parametrize("behaviour", [method_not_found, None], ids=["not-found", "no-client"])
def test_a_host_without_the_drain_gets_one_diagnostic_per_prompt_and_no_candidate(
    tmp_path: Path, behaviour: Behaviour | None
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    host = Host(behaviour)
    sink = DecisionLog()
    model = RecordingModel(load_scenario("read-loop"))
    session = open_session(
        tmp_path / "state", project, host, model, GuardMode.ENFORCE, telemetry=sink
    )

    async def two_prompts() -> list[Any]:
        return [await session.run_prompt(["go"], channel=False) for _ in range(2)]

    first, second = asyncio.run(two_prompts())
    assert sink.records == [("reset", "unreliable_input")] * 2  # one per prompt, not per batch
    rows = first.field_meta["toolFailureGuard"]["batches"]
    assert [r["reliableInput"] for r in rows] == [False] * 5
    assert {r["phaseAfter"] for r in rows} == {"idle"}  # no candidate ever accumulated
    for response in (first, second):
        assert response.field_meta["toolFailureGuard"]["drainSupported"] is False
        assert "loopType" not in response.field_meta
    assert len(host.drain_requests) == (1 if behaviour is not None else 0)


def test_a_supported_host_is_marked_drain_supported(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    model = RecordingModel(load_scenario("read-loop"))
    session = open_session(tmp_path / "state", project, Host(answers), model, GuardMode.ENFORCE)
    response = asyncio.run(session.run_prompt(["go"], channel=False))
    assert response.field_meta["toolFailureGuard"]["drainSupported"] is True


def test_cancel_ends_a_prompt_whose_drain_hangs_and_the_late_answer_is_kept(
    tmp_path: Path,
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    asked = asyncio.Event()
    prompt_done = asyncio.Event()

    async def hung(host: Host, index: int) -> Any:
        if index == 0:
            asked.set()
            # Answer once the prompt has ended -- or, if cancel does not end it, after a
            # while, so a broken agent shows up as the wrong order rather than a hang.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(prompt_done.wait(), 1.0)
            host.events.append("host answered")
            return {"messages": ["typed during the cancel"], "hasQueuedPrompt": False}
        return empty()

    host = Host(hung)
    scenario = parse_scenario(
        {
            "prompts": [
                {"turns": [{"calls": [{"tool": "read_file", "args": {"path": "x"}}]}]},
                {"turns": []},
            ]
        },
        "cancel.json",
    )
    model = RecordingModel(scenario)
    session = open_session(
        tmp_path / "state", project, host, model, GuardMode.ENFORCE, timeout=3600
    )

    async def go() -> tuple[Any, bool]:
        task = asyncio.create_task(session.run_prompt(["go"], channel=False))
        await asked.wait()
        session.cancel()
        response = await task
        outstanding = session.drain.request_outstanding
        host.events.append("prompt ended")
        prompt_done.set()
        while session.drain.request_outstanding:
            await asyncio.sleep(0.01)
        await session.run_prompt(["next"], channel=False)
        return response, outstanding

    response, outstanding = asyncio.run(go())
    assert response.stop_reason == "cancelled"
    assert outstanding  # the drain request was still waiting for the host
    assert host.events == ["prompt ended", "host answered"]
    # the late answer became queued input of the next prompt, exactly once
    next_prompt = [m for m in session.history if m.kind == "prompt"][1]
    assert next_prompt.texts("queued_input") == [QUEUED_INPUT_PREFIX + "typed during the cancel"]
    assert session.drain.pending == ()


def test_a_call_stays_pending_while_its_permission_is_asked(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "present.txt").write_text("hi", encoding="utf-8")
    scenario = parse_scenario(
        {
            "turns": [
                {
                    "calls": [
                        {"tool": "write_file", "args": {"path": "new.txt", "content": "x"}},
                        {"tool": "read_file", "args": {"path": "present.txt"}},
                    ]
                }
            ]
        },
        "permission.json",
    )
    host = Host(answers)
    session = open_session(
        tmp_path / "state", project, host, RecordingModel(scenario), GuardMode.ENFORCE
    )
    asyncio.run(session.run_prompt(["go"], channel=False))

    write, read = "call-p0-t0-0", "call-p0-t0-1"
    assert host.asked_at == {write: ["pending"]}  # not in_progress while being asked
    assert host.statuses(write) == ["pending", "in_progress", "completed"]
    assert host.statuses(read) == ["pending", "in_progress", "completed"]


def test_a_refused_call_never_reports_in_progress(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    scenario = parse_scenario(
        {"turns": [{"calls": [{"tool": "run_shell_command", "args": {"command": "true"}}]}]},
        "refused.json",
    )
    host = Host(answers, permission="reject")
    session = open_session(
        tmp_path / "state", project, host, RecordingModel(scenario), GuardMode.ENFORCE
    )
    asyncio.run(session.run_prompt(["go"], channel=False))
    assert host.statuses("call-p0-t0-0") == ["pending", "failed"]
