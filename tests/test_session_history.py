"""History persistence: append-only JSON Lines, round trip, clear errors, replay updates."""

from __future__ import annotations

from pathlib import Path

import pytest

from guard import REPEATED_TOOL_FAILURE_STOP_MESSAGE
from session.history import HistoryError, HistoryStore, HistoryWriteError, Message, Part
from session.replay import replay_updates


def sample() -> list[Message]:
    return [
        Message(role="user", kind="prompt", prompt_id="p", parts=(Part(kind="text", text="hi"),)),
        Message(
            role="model",
            kind="model",
            parts=(
                Part(kind="text", text="Reading."),
                Part(
                    kind="function_call",
                    call_id="c1",
                    name="read_file",
                    title="Read a",
                    tool_kind="read",
                    args={"path": "a"},
                ),
            ),
        ),
        Message(
            role="user",
            kind="tool_results",
            parts=(
                Part(
                    kind="function_response",
                    call_id="c1",
                    name="read_file",
                    status="error",
                    error_type="file_not_found",
                    text="a: no such file",
                ),
                Part(kind="notice", text=REPEATED_TOOL_FAILURE_STOP_MESSAGE),
            ),
        ),
    ]


def test_round_trip_and_append_only(tmp_path: Path) -> None:
    store = HistoryStore(tmp_path)
    store.create("s1", "/work")
    for message in sample():
        store.append("s1", message)
    before = store.path("s1").read_text()
    cwd, messages = store.load("s1")
    assert cwd == "/work"
    assert messages == sample()
    assert messages[1].parts[1].args == {"path": "a"}
    store.append("s1", sample()[0])
    assert store.path("s1").read_text().startswith(before)


def test_write_failure_is_reported(tmp_path: Path) -> None:
    store = HistoryStore(tmp_path)
    store.create("s1", "/work")
    path = store.path("s1")
    path.unlink()
    path.mkdir()
    with pytest.raises(HistoryWriteError, match="cannot append"):
        store.append("s1", sample()[0])
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(HistoryWriteError, match="cannot create"):
        HistoryStore(blocker).create("s2", "/work")


def test_corrupt_lines_name_the_line(tmp_path: Path) -> None:
    store = HistoryStore(tmp_path)
    store.create("s1", "/work")
    with store.path("s1").open("a") as handle:
        handle.write("{not json\n")
        handle.write('{"type": "message", "role": "user", "kind": "prompt", "parts": []}\n')
    with pytest.raises(HistoryError, match=r"s1.jsonl:2: not JSON"):
        store.load("s1")


def test_undecodable_or_absurdly_nested_history_is_a_history_error(tmp_path: Path) -> None:
    store = HistoryStore(tmp_path)
    store.create("s1", "/work")
    with store.path("s1").open("ab") as handle:
        handle.write(b'{"type": "message", "text": "\xff"}\n')
    with pytest.raises(HistoryError, match=r"s1.jsonl: not UTF-8 text"):
        store.load("s1")
    store.create("s2", "/work")
    with store.path("s2").open("a") as handle:
        handle.write("[" * 100_000 + "\n")
        handle.write('{"type": "message", "role": "user", "kind": "prompt", "parts": []}\n')
    with pytest.raises(HistoryError, match=r"s2.jsonl:2: JSON nested too deeply"):
        store.load("s2")


def test_a_torn_line_is_ignored_and_appending_after_it_stays_loadable(tmp_path: Path) -> None:
    store = HistoryStore(tmp_path)
    store.create("s1", "/work")
    store.append("s1", sample()[0])
    with store.path("s1").open("a") as handle:
        handle.write('{"type": "mess')
    assert len(store.load("s1")[1]) == 1
    store.append("s1", sample()[1])
    store.append("s1", sample()[2])
    assert store.load("s1")[1] == sample()


def test_session_ids_cannot_escape_the_state_dir(tmp_path: Path) -> None:
    with pytest.raises(HistoryError, match="not a valid session id"):
        HistoryStore(tmp_path).path("../x")


def test_replay_shows_prompt_tools_and_the_stop_message() -> None:
    updates = replay_updates(sample())
    kinds = [u.session_update for u in updates]
    assert kinds == [
        "user_message_chunk",
        "agent_message_chunk",
        "tool_call",
        "tool_call_update",
        "agent_message_chunk",
    ]
    assert updates[3].status == "failed"
    assert updates[-1].content.text == REPEATED_TOOL_FAILURE_STOP_MESSAGE
