"""End-to-end: persistence, reconnect, agent restart, history replay, persistence failure."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, TypeVar

import pytest
from acp import text_block
from acp.exceptions import RequestError
from e2e_helpers import run

from tool_failure_guard.core.actions import shown_text
from tool_failure_guard.guard import REPEATED_TOOL_FAILURE_STOP_MESSAGE
from tool_failure_guard.session.persistence.history import HistoryStore
from tool_failure_guard.session.transport.client import Event, RecordingClient, spawn_guarded_agent

T = TypeVar("T")
READ_MISSING = {"tool": "read_file", "args": {"path": "missing.txt"}}


@pytest.fixture
def dirs(tmp_path: Path) -> dict[str, Path]:
    paths = {name: tmp_path / name for name in ("project", "home", "state")}
    paths["project"].mkdir()
    paths["home"].mkdir()
    return paths


async def first_agent_stops(dirs: dict[str, Path], scenario: str = "read-loop") -> str:
    """Agent 1: a session whose first prompt is stopped by the guard; return its id."""
    client = RecordingClient()
    async with spawn_guarded_agent(
        client, mode="enforce", state_dir=dirs["state"], home=dirs["home"], scenario=scenario
    ) as conn:
        session = await conn.new_session(cwd=str(dirs["project"]), mcp_servers=[])
        response = await conn.prompt(
            session_id=session.session_id, prompt=[text_block("read the config")]
        )
        assert response.field_meta["loopType"] == "repeated_tool_execution_failure"
        return str(session.session_id)


def test_reconnect_with_session_load_replays_history_including_the_stop(
    dirs: dict[str, Path],
) -> None:
    sid = run(first_agent_stops(dirs))

    async def reconnect() -> tuple[RecordingClient, Any]:
        client = RecordingClient()
        async with spawn_guarded_agent(
            client, mode="enforce", state_dir=dirs["state"], home=dirs["home"]
        ) as conn:
            await conn.load_session(cwd=str(dirs["project"]), session_id=sid, mcp_servers=[])
            replayed = len(client.events)
            response = await conn.prompt(session_id=sid, prompt=[text_block("what now?")])
            client.events.insert(replayed, Event("marker"))
        return client, response

    client, response = run(reconnect())
    marker = next(i for i, e in enumerate(client.events) if e.kind == "marker")
    replay, after = client.events[:marker], client.events[marker + 1 :]

    assert replay[0].kind == "user" and replay[0].text == "read the config"
    assert [e.text for e in replay if e.kind == "agent"] == [
        "Reading the configuration.",
        "Reading the configuration.",
        "Reading the configuration.",
        shown_text(REPEATED_TOOL_FAILURE_STOP_MESSAGE),  # as it was shown: no System:
    ]
    assert replay[-1].text == shown_text(REPEATED_TOOL_FAILURE_STOP_MESSAGE)
    statuses = {e.call_id: e.status for e in replay if e.kind == "tool_update"}
    assert len(statuses) == 12 and set(statuses.values()) == {"failed"}
    # the next prompt runs the scenario's second prompt with a fresh guard
    assert response.stop_reason == "end_turn"
    assert "loopType" not in response.field_meta
    assert [r["phaseBefore"] for r in response.field_meta["toolFailureGuard"]["batches"]] == [
        "idle"
    ]
    assert any(e.kind == "tool_call" and e.text == "List ." for e in after)


def test_new_session_after_an_agent_restart_starts_clean(dirs: dict[str, Path]) -> None:
    old = run(first_agent_stops(dirs))

    async def restart() -> tuple[RecordingClient, Any, str]:
        client = RecordingClient()
        async with spawn_guarded_agent(
            client, mode="enforce", state_dir=dirs["state"], home=dirs["home"]
        ) as conn:
            session = await conn.new_session(cwd=str(dirs["project"]), mcp_servers=[])
            assert client.events == []  # nothing replayed into a new session
            response = await conn.prompt(
                session_id=session.session_id, prompt=[text_block("read the config")]
            )
        return client, response, session.session_id

    client, response, sid = run(restart())
    assert sid != old
    rows = response.field_meta["toolFailureGuard"]["batches"]
    assert [(r["decision"], r["failureCount"]) for r in rows] == [
        ("tracked", 4),
        ("warn", 8),
        ("stop", 12),
    ]
    assert client.events[0].kind == "agent"
    # the old session's file is untouched by the new one
    _, old_messages = HistoryStore(dirs["state"]).load(old)
    assert old_messages[-1].parts[-1].text == REPEATED_TOOL_FAILURE_STOP_MESSAGE


def test_loaded_session_still_refuses_replays_of_answered_calls(
    dirs: dict[str, Path], tmp_path: Path
) -> None:
    replay = {"tool": "read_file", "args": {"path": "missing.txt"}, "id": "provider-1"}
    scenario = tmp_path / "replay.json"
    scenario.write_text(
        json.dumps(
            {
                "prompts": [
                    {"turns": [{"calls": [replay]}], "final_text": "first done"},
                    {
                        "turns": [{"calls": [replay]}, {"calls": [replay]}, {"calls": [replay]}],
                        "final_text": "never reached",
                    },
                ]
            }
        ),
        encoding="utf-8",
    )

    async def go() -> tuple[RecordingClient, Any, str]:
        client = RecordingClient()
        async with spawn_guarded_agent(
            client,
            mode="enforce",
            state_dir=dirs["state"],
            home=dirs["home"],
            scenario=str(scenario),
        ) as conn:
            session = await conn.new_session(cwd=str(dirs["project"]), mcp_servers=[])
            await conn.prompt(session_id=session.session_id, prompt=[text_block("one")])
        client = RecordingClient()
        async with spawn_guarded_agent(
            client,
            mode="enforce",
            state_dir=dirs["state"],
            home=dirs["home"],
            scenario=str(scenario),
        ) as conn:
            await conn.load_session(
                cwd=str(dirs["project"]), session_id=session.session_id, mcp_servers=[]
            )
            client.events.clear()
            response = await conn.prompt(session_id=session.session_id, prompt=[text_block("2")])
        return client, response, session.session_id

    client, response, sid = run(go())
    assert response.field_meta["loopType"] == "global_tool_call_duplicate"
    # the replayed call was never executed nor shown again
    assert [e for e in client.events if e.kind in ("tool_call", "tool_update")] == []
    _, messages = HistoryStore(dirs["state"]).load(sid)
    results = [p for m in messages for p in m.parts if p.kind == "function_response"]
    assert [r.duplicate for r in results] == [False, True, True, True]


def test_stop_history_persistence_failure_is_an_internal_error(dirs: dict[str, Path]) -> None:
    state = dirs["state"]

    async def go() -> tuple[RecordingClient, str, RequestError]:
        sid_box: list[str] = []

        def break_history(drain_index: int) -> None:
            if drain_index == 2:  # the drain just before the stopping batch is reduced
                path = HistoryStore(state).path(sid_box[0])
                path.unlink()
                path.mkdir()  # appending to a directory fails, even for root

        client = RecordingClient(on_drain=break_history)
        async with spawn_guarded_agent(
            client, mode="enforce", state_dir=state, home=dirs["home"]
        ) as conn:
            session = await conn.new_session(cwd=str(dirs["project"]), mcp_servers=[])
            sid_box.append(session.session_id)
            try:
                await conn.prompt(session_id=session.session_id, prompt=[text_block("go")])
            except RequestError as exc:
                return client, session.session_id, exc
        raise AssertionError("the prompt did not fail")

    client, _sid, error = run(go())
    assert error.code == -32603
    assert "could not be persisted" in json.dumps(error.data)
    # never pretend the stop was recorded: the stop message was not emitted
    assert shown_text(REPEATED_TOOL_FAILURE_STOP_MESSAGE) not in client.agent_texts()


def test_state_dir_under_a_regular_file_fails_new_session(
    dirs: dict[str, Path], tmp_path: Path
) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x", encoding="utf-8")

    async def go() -> RequestError:
        async with spawn_guarded_agent(
            RecordingClient(), mode="enforce", state_dir=blocker / "state", home=dirs["home"]
        ) as conn:
            try:
                await conn.new_session(cwd=str(dirs["project"]), mcp_servers=[])
            except RequestError as exc:
                return exc
        raise AssertionError("new_session succeeded")

    assert run(go()).code == -32603


def test_load_of_an_unknown_session_is_invalid_params(dirs: dict[str, Path]) -> None:
    async def go() -> RequestError:
        async with spawn_guarded_agent(
            RecordingClient(), mode="enforce", state_dir=dirs["state"], home=dirs["home"]
        ) as conn:
            for session_id in ("0" * 32, "../../etc/passwd"):
                try:
                    await conn.load_session(
                        cwd=str(dirs["project"]), session_id=session_id, mcp_servers=[]
                    )
                except RequestError as exc:
                    last = exc
                else:
                    raise AssertionError(f"{session_id} loaded")
            return last

    error = run(go())
    assert error.code == -32602
    assert "not a valid session id" in json.dumps(error.data)
