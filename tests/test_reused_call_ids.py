"""A provider that numbers call ids per message (``call_0`` every turn) is not replaying.

Issue 15 §3: a replay is the same call sent again.  An id already answered
with a different tool name or arguments is a new call: it runs, and it is
logged.  The real agent over ACP stdio with the real OpenAI SDK against
:class:`openai_server.FakeOpenAI`; then the memory rebuilt from a history.
"""

from __future__ import annotations

import json
from pathlib import Path

from openai_server import Reply, call
from provider_harness import run_agent

from tool_failure_guard.core.protections import CallIdDeduplicator, call_fingerprint
from tool_failure_guard.session.persistence.assembly import function_calls
from tool_failure_guard.session.persistence.messages import Message, Part
from tool_failure_guard.session.tools.executor import FunctionCall


def _write(path: str, content: str) -> tuple[str, str, str]:
    return call("call_0", "write_file", json.dumps({"path": path, "content": content}))


def test_call_0_in_every_message_runs_every_new_call(tmp_path: Path) -> None:
    answers = [
        Reply(calls=(_write("a.txt", "one"),)),
        Reply(calls=(_write("b.txt", "two"),)),
        Reply(calls=(_write("c.txt", "three"),)),
        Reply(text="all written"),
    ]
    run = run_agent(
        tmp_path,
        mode="enforce",
        provider="openai",
        answers=answers,
        extra_args=("--log-level", "INFO"),
    )
    (response,) = run.responses
    assert response.stop_reason == "end_turn"
    assert not (response.field_meta or {}).get("loopType")
    project = tmp_path / "project"
    assert [(project / n).read_text() for n in ("a.txt", "b.txt", "c.txt")] == [
        "one",
        "two",
        "three",
    ]
    responses = [p for m in run.history for p in m.parts if p.kind == "function_response"]
    assert [(p.call_id, p.status, p.duplicate) for p in responses] == [
        ("call_0", "success", False)
    ] * 3
    assert run.stderr.count("'call_0' was answered before for another call") == 2


def test_the_same_call_sent_again_is_still_a_replay(tmp_path: Path) -> None:
    same = _write("a.txt", "one")
    answers = [Reply(calls=(same,))] * 4 + [Reply(text="done")]
    run = run_agent(tmp_path, mode="enforce", provider="openai", answers=answers)
    (response,) = run.responses
    assert response.field_meta["loopType"] == "global_tool_call_duplicate"
    responses = [p for m in run.history for p in m.parts if p.kind == "function_response"]
    assert [p.duplicate for p in responses] == [False, True, True, True]


def _history() -> list[Message]:
    def model(*calls: tuple[str, str, dict[str, str]]) -> Message:
        parts = tuple(Part(kind="function_call", call_id=i, name=n, args=a) for i, n, a in calls)
        return Message(role="model", kind="model", prompt_id="p", parts=parts)

    def results(*ids: str) -> Message:
        parts = tuple(
            Part(kind="function_response", call_id=i, name="read_file", status="success")
            for i in ids
        )
        return Message(role="user", kind="tool_results", prompt_id="p", parts=parts)

    return [
        model(("call_0", "read_file", {"path": "a"})),
        results("call_0"),
        model(("call_0", "read_file", {"path": "b"})),
        results("call_0"),
        model(("call_1", "read_file", {"path": "c"})),  # open: no results yet
    ]


def test_the_memory_is_rebuilt_from_history_per_call_not_per_id() -> None:
    answered, still_open = function_calls(_history())
    assert [(i, a["path"]) for i, _, a in answered] == [("call_0", "a"), ("call_0", "b")]
    assert [(i, a["path"]) for i, _, a in still_open] == [("call_1", "c")]
    dedup = CallIdDeduplicator(
        [(i, call_fingerprint(n, a)) for i, n, a in answered],
        open_calls=[(i, call_fingerprint(n, a)) for i, n, a in still_open],
    )
    dedup.mark_answered(["call_1"])  # the open batch answered (closing it after a load)

    def read(call_id: str, path: str, name: str = "read_file") -> FunctionCall:
        return FunctionCall(call_id=call_id, name=name, args={"path": path})

    admission = dedup.admit([read("call_0", "b"), read("call_1", "c"), read("call_2", "a")])
    fresh = dedup.admit([read("call_0", "d"), read("call_1", "c", "list_directory")])
    assert admission.provider_duplicates == {"call_0", "call_1"}
    assert [c.call_id for c in admission.executable] == ["call_2"]
    assert admission.reused_ids == frozenset()
    assert fresh.provider_duplicates == frozenset()  # new arguments, new name: new calls
    assert fresh.reused_ids == {"call_0", "call_1"}


def test_an_id_without_its_call_still_answers_every_call() -> None:
    dedup = CallIdDeduplicator(["x"])
    admission = dedup.admit([FunctionCall(call_id="x", name="anything", args={"k": 1})])
    assert admission.provider_duplicates == {"x"}


def test_answering_a_replay_does_not_turn_its_id_into_any_call() -> None:
    # A batch's answered calls include its replays; the replay's id must keep its
    # fingerprints, or the next new call reusing the id would be taken for a replay.
    dedup = CallIdDeduplicator()
    first = FunctionCall(call_id="x1", name="fetch", args={"key": "a"})
    admitted = dedup.admit([first])
    assert not admitted.provider_duplicates
    dedup.mark_answered(c.call_id for c in admitted.calls)
    replay = dedup.admit([first])
    assert replay.provider_duplicates == {"x1"}
    dedup.mark_answered(c.call_id for c in replay.calls)
    other = dedup.admit([FunctionCall(call_id="x1", name="fetch", args={"key": "b"})])
    assert not other.provider_duplicates and other.reused_ids == {"x1"}
