"""End-to-end recovery: stdin closed mid-batch, queued input across a restart, load errors.

Real agent processes over real stdio (``spawn_guarded_agent_process``).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
from pathlib import Path
from typing import Any, TypeVar

import pytest
from acp import text_block
from acp.exceptions import RequestError
from e2e_helpers import Box, run, wait_until

from tool_failure_guard.session.persistence.history import HistoryStore
from tool_failure_guard.session.pipeline.drain import QUEUED_INPUT_PREFIX
from tool_failure_guard.session.transport.agent import HISTORY_META_KEY
from tool_failure_guard.session.transport.client import (
    RecordingClient,
    spawn_guarded_agent,
    spawn_guarded_agent_process,
)

T = TypeVar("T")
SLOW_SHELL = {"tool": "run_shell_command", "args": {"command": "sleep 30"}, "id": "slow"}
WRITE = {"tool": "write_file", "args": {"path": "a.txt", "content": "A\n"}, "id": "write"}


@pytest.fixture
def box(tmp_path: Path) -> Box:
    return Box(tmp_path)


def status_of(client: RecordingClient, call_id: str) -> str:
    return client.final_statuses().get(call_id, "")


def test_stdin_closed_mid_batch_cancels_persists_and_exits(box: Box) -> None:
    scenario = box.scenario(
        {"prompts": [{"turns": [{"calls": [WRITE, SLOW_SHELL]}], "final_text": "never"}]}
    )

    async def go() -> tuple[str, int | None]:
        client = RecordingClient()
        async with spawn_guarded_agent_process(
            client, mode="enforce", state_dir=box.state, home=box.home, scenario=scenario
        ) as (conn, process):
            session = await conn.new_session(cwd=str(box.project), mcp_servers=[])
            prompt = asyncio.ensure_future(
                conn.prompt(session_id=session.session_id, prompt=[text_block("go")])
            )
            await wait_until(
                lambda: (
                    status_of(client, "write") == "completed"
                    and status_of(client, "slow") == "in_progress"
                )
            )
            assert process.stdin is not None
            process.stdin.close()  # the client goes away mid-batch
            code = await asyncio.wait_for(process.wait(), 30)  # a bound, not a timing claim
            prompt.cancel()
            return session.session_id, code

    sid, code = run(go(), 90)
    assert code == 0
    assert (box.project / "a.txt").read_text() == "A\n"
    results = box.history(sid)[-1]
    assert results.kind == "tool_results"
    answers = {p.call_id: (p.status, p.error_type) for p in results.parts}
    # the finished write keeps its real outcome; the running shell was cancelled, not lost
    assert answers == {"write": ("success", None), "slow": ("cancelled", None)}
    raw = HistoryStore(box.state).path(sid).read_text()
    assert raw.count('"type":"call_settled"') == 2


def test_pushed_input_survives_sigkill_and_is_delivered_once_after_load(box: Box) -> None:
    scenario = box.scenario(
        {
            "prompts": [
                {"turns": [{"calls": [SLOW_SHELL]}], "final_text": "never"},
                {"turns": [], "final_text": "after the restart"},
            ]
        }
    )

    async def go() -> tuple[str, Any, RecordingClient]:
        client = RecordingClient()
        async with spawn_guarded_agent_process(
            client, mode="enforce", state_dir=box.state, home=box.home, scenario=scenario
        ) as (conn, process):
            session = await conn.new_session(cwd=str(box.project), mcp_servers=[])
            sid = session.session_id
            prompt = asyncio.ensure_future(conn.prompt(session_id=sid, prompt=[text_block("go")]))
            await wait_until(lambda: status_of(client, "slow") == "in_progress")
            params = {"sessionId": sid, "prompt": [{"type": "text", "text": "steer me"}]}
            assert (await conn.ext_method("session/steering", params))["outcome"] == "injected"
            os.kill(process.pid, signal.SIGKILL)
            await process.wait()
            prompt.cancel()
        client = RecordingClient()
        async with spawn_guarded_agent(
            client, mode="enforce", state_dir=box.state, home=box.home, scenario=scenario
        ) as conn:
            await conn.load_session(cwd=str(box.project), session_id=sid, mcp_servers=[])
            response = await conn.prompt(session_id=sid, prompt=[text_block("next")])
        return sid, response, client

    sid, response, client = run(go(), 90)
    assert response.stop_reason == "end_turn"
    history = box.history(sid)
    steered = QUEUED_INPUT_PREFIX + "steer me"
    assert [p.text for m in history for p in m.parts if "steer me" in p.text] == [steered]
    assert history[-2].kind == "prompt"
    assert history[-2].texts("queued_input") == [steered]
    # the killed call was answered interrupted and replayed as failed, never pending
    assert status_of(client, "slow") == "failed"


def test_input_requeued_at_a_stop_survives_a_restart_and_is_delivered_once(box: Box) -> None:
    read = {"tool": "read_file", "args": {"path": "missing.txt"}}
    scenario = box.scenario(
        {
            "prompts": [
                {"turns": [{"calls": [read, read]}], "final_text": "never"},
                {"turns": [], "final_text": "after the restart"},
            ]
        }
    )

    async def go() -> tuple[str, Any, Any]:
        client = RecordingClient(drain_messages={0: ["host says hi"]})
        async with spawn_guarded_agent(
            client,
            mode="enforce",
            state_dir=box.state,
            home=box.home,
            scenario=scenario,
            extra_args=["--max-tool-calls", "2"],
        ) as conn:
            session = await conn.new_session(cwd=str(box.project), mcp_servers=[])
            sid = session.session_id
            stopped = await conn.prompt(session_id=sid, prompt=[text_block("go")])
        async with spawn_guarded_agent(
            RecordingClient(), mode="enforce", state_dir=box.state, home=box.home, scenario=scenario
        ) as conn:
            await conn.load_session(cwd=str(box.project), session_id=sid, mcp_servers=[])
            response = await conn.prompt(session_id=sid, prompt=[text_block("next")])
        return sid, stopped, response

    sid, stopped, response = run(go(), 90)
    assert stopped.field_meta["loopType"] == "turn_tool_call_cap"
    assert response.stop_reason == "end_turn"
    history = box.history(sid)
    delivered = [p.text for m in history for p in m.parts if "host says hi" in p.text]
    assert delivered == [QUEUED_INPUT_PREFIX + "host says hi"]
    assert history[-2].kind == "prompt"


def test_a_corrupt_line_still_loads_and_errors_never_name_the_state_path(box: Box) -> None:
    async def go() -> tuple[str, Any, RequestError]:
        async with spawn_guarded_agent(
            RecordingClient(), mode="enforce", state_dir=box.state, home=box.home
        ) as conn:
            session = await conn.new_session(cwd=str(box.project), mcp_servers=[])
            sid = session.session_id
            await conn.prompt(session_id=sid, prompt=[text_block("go")])
        store = HistoryStore(box.state)
        with store.path(sid).open("a") as handle:
            handle.write('{"type": "message", "role": "user", "kind": "prompt", "parts": 7}\n')
        broken = "0123456789abcdef" * 2
        store.create(broken, str(box.project))
        store.path(broken).unlink()
        store.path(broken).mkdir()  # unreadable as a file
        async with spawn_guarded_agent(
            RecordingClient(), mode="enforce", state_dir=box.state, home=box.home
        ) as conn:
            loaded = await conn.load_session(cwd=str(box.project), session_id=sid, mcp_servers=[])
            try:
                await conn.load_session(cwd=str(box.project), session_id=broken, mcp_servers=[])
            except RequestError as exc:
                return sid, loaded, exc
        raise AssertionError("the unreadable session loaded")

    sid, loaded, error = run(go(), 90)
    lines = len(HistoryStore(box.state).path(sid).read_text().splitlines())
    assert loaded.field_meta == {HISTORY_META_KEY: {"skippedLines": [lines]}}
    assert HistoryStore(box.state).corrupt_path(sid).is_file()
    assert error.code == -32602
    assert str(box.state) not in json.dumps(error.data)
    assert str(box.root) not in json.dumps(error.data)
