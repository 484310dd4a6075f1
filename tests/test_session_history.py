"""History persistence: append-only JSON Lines, round trip, clear errors, replay updates."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tool_failure_guard.core.actions import shown_text
from tool_failure_guard.guard import REPEATED_TOOL_FAILURE_STOP_MESSAGE
from tool_failure_guard.session.persistence.history import HistoryStore, HistoryWriteError
from tool_failure_guard.session.persistence.messages import HistoryError, Message, Part
from tool_failure_guard.session.persistence.replay import replay_updates


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
    with pytest.raises(HistoryWriteError, match="cannot append to the history of session s1"):
        store.append("s1", sample()[0])
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(HistoryWriteError, match="cannot create"):
        HistoryStore(blocker).create("s2", "/work")


PROMPT_LINE = '{"type": "message", "role": "user", "kind": "prompt", "parts": []}\n'


def test_a_corrupt_line_is_skipped_and_kept_aside_in_the_sidecar(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = HistoryStore(tmp_path)
    store.create("s1", "/work")
    with store.path("s1").open("a") as handle:
        handle.write("{not json\n")
        handle.write(PROMPT_LINE)
    loaded = store.load_session("s1")
    assert loaded.skipped_lines == (2,)
    assert [m.kind for m in loaded.messages] == ["prompt"]
    assert "skipped corrupt history line 2" in caplog.text
    sidecar = [json.loads(x) for x in store.corrupt_path("s1").read_text().splitlines()]
    assert sidecar == [{"line": 2, "error": "s1.jsonl:2: not JSON", "text": "{not json"}]
    store.load_session("s1")  # a second load does not keep the same line twice
    assert len(store.corrupt_path("s1").read_text().splitlines()) == 1
    store.append("s1", sample()[0])  # the session stays usable
    assert len(store.load_session("s1").messages) == 2


def test_undecodable_or_absurdly_nested_lines_are_skipped(tmp_path: Path) -> None:
    store = HistoryStore(tmp_path)
    store.create("s1", "/work")
    with store.path("s1").open("ab") as handle:
        handle.write(b'{"type": "message", "text": "\xff"}\n')
        handle.write(b"[" * 100_000 + b"\n")
        handle.write(PROMPT_LINE.encode())
    loaded = store.load_session("s1")
    assert loaded.skipped_lines == (2, 3)
    errors = [json.loads(x)["error"] for x in store.corrupt_path("s1").read_text().splitlines()]
    assert errors == [
        "s1.jsonl:2: not UTF-8 text (invalid start byte)",
        "s1.jsonl:3: JSON nested too deeply",
    ]
    assert len(loaded.messages) == 1


@pytest.mark.parametrize(
    ("line", "error"),
    [
        (
            {"kind": "function_response", "call_id": "c1", "status": "success", "duplicate": "no"},
            "duplicate must be true or false, got string",
        ),
        ({"kind": "function_response", "call_id": "c1", "status": "done"}, "status must be one of"),
        ({"kind": "function_response", "status": "success"}, "needs a call_id"),
        ({"kind": "text", "text": 3}, "text must be a string, got integer"),
        ({"kind": "text", "text": "x", "colour": "red"}, "unknown key(s) 'colour'"),
        (
            {"kind": "function_response", "call_id": "c", "status": "error", "error_type": 1},
            "error_type",
        ),
        ({"kind": "picture"}, "unknown part kind"),
    ],
)
def test_history_lines_are_validated_strictly(
    tmp_path: Path, line: dict[str, object], error: str
) -> None:
    store = HistoryStore(tmp_path)
    store.create("s1", "/work")
    record = {
        "type": "message",
        "role": "user",
        "kind": "tool_results",
        "prompt_id": "",
        "parts": [line],
    }
    with store.path("s1").open("a") as handle:
        handle.write(json.dumps(record) + "\n")
    assert store.load_session("s1").skipped_lines == (2,)
    kept = json.loads(store.corrupt_path("s1").read_text())
    assert kept["line"] == 2 and error in kept["error"]


@pytest.mark.parametrize(
    ("record", "error"),
    [
        ({"type": "message", "role": "model", "kind": "prompt", "parts": []}, "has role user"),
        ({"type": "message", "role": "user", "kind": "chat", "parts": []}, "unknown message kind"),
        (
            {"type": "message", "role": "user", "kind": "prompt", "parts": {}},
            "parts must be a list",
        ),
        (
            {"type": "message", "role": "user", "kind": "prompt", "parts": [{"kind": "notice"}]},
            "cannot hold a notice part",
        ),
        ({"type": "pending_input", "texts": [1]}, "list of strings"),
        ({"type": "call_settled", "part": {"kind": "text"}}, "holds a function_response"),
        ({"type": "session", "version": 9, "session_id": "s1"}, "unsupported history version"),
        ({"type": "snapshot"}, "unknown record type"),
        ([1, 2], "a record must be an object"),
    ],
)
def test_records_are_validated_strictly(tmp_path: Path, record: object, error: str) -> None:
    store = HistoryStore(tmp_path)
    store.create("s1", "/work")
    with store.path("s1").open("a") as handle:
        handle.write(json.dumps(record) + "\n")
    assert store.load_session("s1").skipped_lines == (2,)
    assert error in json.loads(store.corrupt_path("s1").read_text())["error"]


def test_errors_never_name_the_state_directory(tmp_path: Path) -> None:
    store = HistoryStore(tmp_path / "state")
    with pytest.raises(HistoryError) as missing:
        store.load_session("s1")
    store.create("s1", "/work")
    store.path("s1").chmod(0)
    store.path("s1").unlink()
    store.path("s1").mkdir()
    with pytest.raises(HistoryError) as unreadable:
        store.load_session("s1")
    with pytest.raises(HistoryWriteError) as unwritable:
        store.append("s1", sample()[0])
    for error in (missing, unreadable, unwritable):
        assert str(tmp_path) not in str(error.value)
        assert "s1" in str(error.value)


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
    assert updates[-1].content.text == shown_text(REPEATED_TOOL_FAILURE_STOP_MESSAGE)


def test_a_version_1_history_still_loads(tmp_path: Path) -> None:
    store = HistoryStore(tmp_path)
    store.path("s1").parent.mkdir(parents=True)
    lines = [
        {"type": "session", "version": 1, "session_id": "s1", "cwd": "/w"},
        *(message.to_json() for message in sample()),
    ]
    store.path("s1").write_text("".join(json.dumps(line) + "\n" for line in lines))
    loaded = store.load_session("s1")
    assert (loaded.cwd, loaded.messages, loaded.skipped_lines) == ("/w", sample(), ())
