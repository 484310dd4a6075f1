"""Settled outcomes persisted per call, assembly on load, replay, and the persisted input queue."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from acp.exceptions import RequestError
from session_harness import in_process_session

from tool_failure_guard.guard import GuardMode
from tool_failure_guard.session.model.base import ScriptedModel, parse_scenario
from tool_failure_guard.session.persistence.assembly import INTERRUPTED, assemble
from tool_failure_guard.session.persistence.history import HistoryStore, HistoryWriteError
from tool_failure_guard.session.persistence.messages import Message, Part, SettledCall
from tool_failure_guard.session.persistence.pending import PendingInputLog
from tool_failure_guard.session.persistence.replay import replay_updates
from tool_failure_guard.session.pipeline.drain import MidTurnInput


def call(call_id: str, duplicate: bool = False) -> Part:
    return Part(
        kind="function_call",
        call_id=call_id,
        name="write_file",
        title=f"Write {call_id}",
        tool_kind="edit",
        args={"path": call_id},
        duplicate=duplicate,
    )


def response(call_id: str, status: str = "success", text: str = "ok") -> Part:
    return Part(
        kind="function_response", call_id=call_id, name="write_file", status=status, text=text
    )


PROMPT = Message(role="user", kind="prompt", prompt_id="p0", parts=(Part(kind="text", text="go"),))
MODEL = Message(
    role="model", kind="model", prompt_id="p0", parts=tuple(call(c) for c in ("c1", "c2", "c3"))
)
SECOND = Message(role="user", kind="prompt", prompt_id="p1", parts=(Part(kind="text", text="2"),))


def settled(call_id: str, status: str = "success") -> SettledCall:
    return SettledCall(prompt_id="p0", part=response(call_id, status))


def responses_of(message: Message) -> list[tuple[str, str, str | None]]:
    return [(p.call_id, p.status, p.error_type) for p in message.parts]


def test_a_crash_mid_batch_keeps_settled_outcomes_and_answers_the_rest_interrupted() -> None:
    # c3 settled first, c1 second, c2 never settled: answers come in the model's order
    messages, interrupted = assemble([PROMPT, MODEL, settled("c3", "error"), settled("c1")])
    assert len(messages) == 3 and messages[2].kind == "tool_results"
    assert responses_of(messages[2]) == [
        ("c1", "success", None),
        ("c2", "cancelled", INTERRUPTED),
        ("c3", "error", None),
    ]
    assert interrupted == ["c2"]


def test_the_batch_message_and_early_outcomes_give_exactly_one_response_per_call() -> None:
    results = Message(
        role="user",
        kind="tool_results",
        prompt_id="p0",
        parts=(
            response("c1"),
            response("c2"),
            response("c3"),
            Part(kind="system", text="reminder"),
        ),
    )
    records = [PROMPT, MODEL, settled("c2"), settled("c1"), settled("c3"), results]
    messages, interrupted = assemble(records)
    assert messages == [PROMPT, MODEL, results]
    assert interrupted == []


def test_a_prompt_after_a_crash_is_preceded_by_the_closing_results() -> None:
    messages, interrupted = assemble([PROMPT, MODEL, settled("c1"), SECOND])
    assert [m.kind for m in messages] == ["prompt", "model", "tool_results", "prompt"]
    assert [p.status for p in messages[2].parts] == ["success", "cancelled", "cancelled"]
    assert interrupted == ["c2", "c3"]


def test_stray_outcomes_and_responses_never_reach_the_model() -> None:
    orphan = Message(role="user", kind="tool_results", parts=(response("zz"), Part(kind="system")))
    messages, _ = assemble([PROMPT, SettledCall(prompt_id="p0", part=response("x")), orphan])
    assert messages[1].parts == (Part(kind="system"),)


def test_replay_never_shows_a_call_pending() -> None:
    messages, _ = assemble([PROMPT, MODEL, settled("c1")])
    updates = replay_updates(messages)
    starts = [u for u in updates if u.session_update == "tool_call"]
    finals = {u.tool_call_id: u for u in updates if u.session_update == "tool_call_update"}
    assert [u.status for u in starts] == ["completed", "failed", "failed"]
    assert finals["c2"].status == "failed"
    assert finals["c2"].raw_output == {"terminalStatus": "cancelled", "errorType": INTERRUPTED}
    # even an unassembled history gets a final update for every call
    raw = replay_updates([PROMPT, MODEL])
    assert {u.tool_call_id for u in raw if u.session_update == "tool_call_update"} == {
        "c1",
        "c2",
        "c3",
    }
    assert all(getattr(u, "status", None) != "pending" for u in raw)


def test_settled_records_round_trip_through_the_file(tmp_path: Path) -> None:
    store = HistoryStore(tmp_path)
    store.create("s1", "/w")
    store.append("s1", PROMPT)
    store.append("s1", MODEL)
    store.append_settled("s1", settled("c2"))
    loaded = store.load_session("s1")
    assert responses_of(loaded.messages[-1]) == [
        ("c1", "cancelled", INTERRUPTED),
        ("c2", "success", None),
        ("c3", "cancelled", INTERRUPTED),
    ]
    assert loaded.interrupted_calls == ("c1", "c3")


def test_the_input_queue_is_persisted_and_what_leaves_it_stays_until_delivered(
    tmp_path: Path,
) -> None:
    store = HistoryStore(tmp_path)
    store.create("s1", "/w")
    log = PendingInputLog(store, "s1")
    queue = MidTurnInput("s1", None, on_queue_change=log.changed)

    def persisted() -> tuple[str, ...]:
        return store.load_session("s1").pending_input

    queue.push(["a"])
    queue.push(["b"])
    assert persisted() == ("a", "b")
    taken = queue.take_pushed()
    assert persisted() == ("a", "b")  # in flight: not delivered yet
    queue.push(["c"])  # pushed while a and b are in flight: none of them is lost
    assert persisted() == ("a", "b", "c")
    delivered = Message(
        role="user",
        kind="prompt",
        parts=tuple(Part(kind="queued_input", text=t) for t in taken),
    )
    store.append("s1", delivered, pending_input=log.snapshot_for_message())
    log.message_persisted()
    assert persisted() == ("c",)
    # requeued at a stop: back at the front, persisted at once, not duplicated
    drained = queue.take_pushed()
    queue.requeue(("host", *drained))
    assert persisted() == ("host", "c")
    assert log.snapshot_for_message() is None


def test_a_restored_queue_is_delivered_once(tmp_path: Path) -> None:
    store = HistoryStore(tmp_path)
    store.create("s1", "/w")
    store.append_pending_input("s1", ["left over"])
    restored = store.load_session("s1").pending_input
    log = PendingInputLog(store, "s1", restored)
    queue = MidTurnInput("s1", None, on_queue_change=log.changed)
    queue.restore(restored)
    assert queue.take_pushed() == ["left over"]
    store.append("s1", PROMPT, pending_input=log.snapshot_for_message())
    log.message_persisted()
    assert store.load_session("s1").pending_input == ()


def test_a_prompt_that_failed_mid_batch_is_closed_with_its_settled_outcomes(
    tmp_path: Path,
) -> None:
    class Client:
        async def session_update(self, session_id: str, update: object, **_: object) -> None:
            return None

        async def ext_method(self, method: str, params: dict[str, object]) -> dict[str, object]:
            return {"messages": [], "hasQueuedPrompt": False}

    class FailingOnce(HistoryStore):
        failed = False

        def append(
            self, session_id: str, message: Message, *, pending_input: object = None
        ) -> None:
            if message.kind == "tool_results" and not self.failed:
                self.failed = True
                raise HistoryWriteError("disk full")
            super().append(session_id, message, pending_input=pending_input)  # type: ignore[arg-type]

    read = {"tool": "read_file", "args": {"path": "missing.txt"}}
    scenario = parse_scenario(
        {"prompts": [{"turns": [{"calls": [read, read]}]}, {"turns": []}]}, "t"
    )
    store = FailingOnce(tmp_path / "state")
    session = in_process_session(
        store,
        tmp_path,
        client=Client(),
        model=ScriptedModel(scenario),
        mode=GuardMode.ENFORCE,
    )
    with pytest.raises(RequestError):
        asyncio.run(session.run_prompt(["go"], channel=False))
    asyncio.run(session.run_prompt(["again"], channel=False))
    kinds = [m.kind for m in session.history]
    assert kinds == ["prompt", "model", "tool_results", "prompt", "model"]
    closing = session.history[2]
    assert [(p.status, p.error_type) for p in closing.parts] == [("error", "file_not_found")] * 2
    assert store.load_session("s1").messages == session.history
