"""Live sessions: one lock per session, one writer per history, session/close, a bound.

The in-process tests drive a real :class:`GuardedAgent` (real tools, real MCP
edge-server processes, the scripted model); the last ones spawn real agent
processes over stdio with the official SDK client.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest
from acp import text_block
from acp.exceptions import RequestError
from acp.schema import McpServerStdio
from e2e_helpers import run, wait_until
from mcp_servers import alive, read_pid
from telemetry_harness import Harness
from test_session_loop import FakeClient
from test_session_mcp import _wrapped_edge

from tool_failure_guard.session.model.base import ModelTurn, ScriptedModel, load_scenario
from tool_failure_guard.session.transport.agent import AgentConfig, GuardedAgent
from tool_failure_guard.session.transport.client import RecordingClient, spawn_guarded_agent
from tool_failure_guard.session.transport.lifecycle import DEFAULT_MAX_LIVE_SESSIONS
from tool_failure_guard.telemetry.sink import SESSION_CLOSED_EVENT


class HangingModel:
    """A model request that never answers: the prompt runs until cancelled."""

    async def generate(self, history: Any) -> ModelTurn:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")


def make_agent(tmp_path: Path, *, hanging: bool = False, **config: Any) -> GuardedAgent:
    agent = GuardedAgent(
        AgentConfig(
            model_factory=(
                HangingModel if hanging else lambda: ScriptedModel(load_scenario("read-loop"))
            ),
            state_dir=tmp_path / "state",
            **config,
        )
    )
    agent.on_connect(FakeClient())
    return agent


def project(tmp_path: Path) -> str:
    path = tmp_path / "project"
    path.mkdir(exist_ok=True)
    return str(path)


def details(error: RequestError) -> str:
    data = error.data
    return str(data.get("details") if isinstance(data, dict) else data)


# -- one lock per session ---------------------------------------------------------------


def test_a_prompt_arriving_while_its_session_loads_is_refused(tmp_path: Path) -> None:
    agent = make_agent(tmp_path)
    cwd = project(tmp_path)
    pid_file = tmp_path / "server.pid"

    async def go() -> tuple[RequestError, str]:
        sid = (await agent.new_session(cwd=cwd)).session_id
        # The load connects an MCP server: it is mid-load while the server starts.
        load = asyncio.ensure_future(
            agent.load_session(cwd=cwd, session_id=sid, mcp_servers=[_wrapped_edge(pid_file)])
        )
        await wait_until(pid_file.exists)
        assert not load.done()
        with pytest.raises(RequestError) as refused:
            await agent.prompt(sid, [text_block("go")])
        await load
        # Once loaded, the session takes prompts again (only the loaded object runs them).
        response = await agent.prompt(sid, [text_block("go")])
        await agent.close()
        return refused.value, str(response.stop_reason)

    error, stop_reason = run(go())
    assert "is being loaded" in details(error) and "prompt refused" in details(error)
    assert stop_reason == "end_turn"


def test_a_load_while_the_sessions_prompt_runs_is_refused(tmp_path: Path) -> None:
    agent = make_agent(tmp_path, hanging=True)
    cwd = project(tmp_path)

    async def go() -> RequestError:
        sid = (await agent.new_session(cwd=cwd)).session_id
        prompt = asyncio.ensure_future(agent.prompt(sid, [text_block("go")]))
        await wait_until(lambda: agent.sessions[sid].running)
        with pytest.raises(RequestError) as refused:
            await agent.load_session(cwd=cwd, session_id=sid)
        await agent.cancel(sid)
        assert (await prompt).stop_reason == "cancelled"
        await agent.load_session(cwd=cwd, session_id=sid)  # idle again: allowed
        return refused.value

    assert "has a prompt running" in details(run(go()))


def test_overlapping_loads_never_leave_a_second_server_set(tmp_path: Path) -> None:
    agent = make_agent(tmp_path)
    cwd = project(tmp_path)
    first, second = tmp_path / "first.pid", tmp_path / "second.pid"

    async def go() -> tuple[list[BaseException | Any], list[int]]:
        sid = (await agent.new_session(cwd=cwd)).session_id
        results = await asyncio.gather(
            agent.load_session(cwd=cwd, session_id=sid, mcp_servers=[_wrapped_edge(first)]),
            agent.load_session(cwd=cwd, session_id=sid, mcp_servers=[_wrapped_edge(second)]),
            return_exceptions=True,
        )
        pids = [read_pid(p) for p in (first, second) if p.exists()]
        await agent.close()  # the connection ended: every server it knows is shut down
        for pid in pids:
            await wait_until(lambda pid=pid: not alive(pid))  # type: ignore[misc]
        return list(results), pids

    results, pids = run(go())
    refused = [r for r in results if isinstance(r, RequestError)]
    assert len(refused) == 1 and "is being loaded" in details(refused[0])
    assert len(pids) == 1  # the refused load started no server


def test_a_sequential_reload_closes_the_old_servers_first(tmp_path: Path) -> None:
    agent = make_agent(tmp_path)
    cwd = project(tmp_path)
    first, second = tmp_path / "first.pid", tmp_path / "second.pid"

    async def go() -> tuple[int, int, bool]:
        sid = (await agent.new_session(cwd=cwd, mcp_servers=[_wrapped_edge(first)])).session_id
        old = read_pid(first)
        await agent.load_session(cwd=cwd, session_id=sid, mcp_servers=[_wrapped_edge(second)])
        old_gone = not alive(old)  # closed before the new one started, not just later
        new = read_pid(second)
        await agent.close()
        return old, new, old_gone

    old, new, old_gone = run(go())
    assert old != new and old_gone


# -- session/close and the bound --------------------------------------------------------


def test_session_close_releases_the_session_and_its_servers(tmp_path: Path) -> None:
    harness = Harness()
    agent = make_agent(tmp_path, telemetry=harness.sink)
    cwd = project(tmp_path)
    pid_file = tmp_path / "server.pid"

    async def go() -> tuple[int, RequestError, str]:
        sid = (await agent.new_session(cwd=cwd, mcp_servers=[_wrapped_edge(pid_file)])).session_id
        pid = read_pid(pid_file)
        await agent.close_session(sid)
        await wait_until(lambda: not alive(pid))
        with pytest.raises(RequestError) as unknown:
            await agent.prompt(sid, [text_block("go")])
        await agent.load_session(cwd=cwd, session_id=sid)  # the history stays on disk
        response = await agent.prompt(sid, [text_block("go")])
        return pid, unknown.value, str(response.stop_reason)

    _, unknown, stop_reason = run(go())
    assert "unknown session" in str(unknown.data)
    assert stop_reason == "end_turn"
    assert [r["close_reason"] for r in harness.logs(SESSION_CLOSED_EVENT)] == ["clean"]


def test_session_close_mid_prompt_cancels_it_and_reports_a_disconnect(tmp_path: Path) -> None:
    harness = Harness()
    agent = make_agent(tmp_path, hanging=True, telemetry=harness.sink)
    cwd = project(tmp_path)

    async def go() -> str:
        sid = (await agent.new_session(cwd=cwd)).session_id
        prompt = asyncio.ensure_future(agent.prompt(sid, [text_block("go")]))
        await wait_until(lambda: agent.sessions[sid].running)
        await agent.close_session(sid)
        assert sid not in agent.sessions
        return str((await prompt).stop_reason)

    assert run(go()) == "cancelled"
    assert [r["close_reason"] for r in harness.logs(SESSION_CLOSED_EVENT)] == ["disconnect"]


def test_live_sessions_are_bounded_by_closing_the_least_recently_used_idle_one(
    tmp_path: Path,
) -> None:
    harness = Harness()
    agent = make_agent(tmp_path, max_live_sessions=2, telemetry=harness.sink)
    cwd = project(tmp_path)
    pid_files = [tmp_path / f"server{i}.pid" for i in range(4)]

    async def go() -> tuple[list[str], list[int]]:
        ids = []
        for index, pid_file in enumerate(pid_files):
            created = await agent.new_session(cwd=cwd, mcp_servers=[_wrapped_edge(pid_file)])
            ids.append(created.session_id)
            if index == 1:
                await agent.prompt(ids[0], [text_block("go")])  # session 0 is now the newest
        pids = [read_pid(p) for p in pid_files]
        for pid in (pids[1], pids[0]):  # evicted: 1 (least recently used), then 0
            await wait_until(lambda pid=pid: not alive(pid))  # type: ignore[misc]
        assert all(alive(pid) for pid in pids[2:])
        assert list(agent.sessions) == ids[2:]
        await agent.load_session(cwd=cwd, session_id=ids[1])  # an evicted one comes back
        assert list(agent.sessions) == [ids[3], ids[1]]
        await agent.close()
        return ids, pids

    ids, _ = run(go())
    closed = [r["session_id"] for r in harness.logs(SESSION_CLOSED_EVENT)]
    assert closed == [ids[1], ids[0], ids[2]]


def test_a_new_session_is_refused_when_every_live_one_is_busy(tmp_path: Path) -> None:
    agent = make_agent(tmp_path, hanging=True, max_live_sessions=1)
    cwd = project(tmp_path)

    async def go() -> RequestError:
        sid = (await agent.new_session(cwd=cwd)).session_id
        prompt = asyncio.ensure_future(agent.prompt(sid, [text_block("go")]))
        await wait_until(lambda: agent.sessions[sid].running)
        with pytest.raises(RequestError) as refused:
            await agent.new_session(cwd=cwd)
        await agent.cancel(sid)
        await prompt
        await agent.new_session(cwd=cwd)  # idle now: it is closed to make room
        assert sid not in agent.sessions
        return refused.value

    text = details(run(go()))
    assert "live and busy" in text and "at most 1" in text


# -- one writer per history, across processes -------------------------------------------


def test_a_second_agent_process_on_the_same_session_is_refused(tmp_path: Path) -> None:
    state, home = tmp_path / "state", tmp_path / "home"
    home.mkdir()
    cwd = project(tmp_path)

    async def go() -> tuple[RequestError, str]:
        async with spawn_guarded_agent(
            RecordingClient(), mode="enforce", state_dir=state, home=home
        ) as first:
            sid = (await first.new_session(cwd=cwd, mcp_servers=[])).session_id
            async with spawn_guarded_agent(
                RecordingClient(), mode="enforce", state_dir=state, home=home
            ) as second:
                with pytest.raises(RequestError) as refused:
                    await second.load_session(cwd=cwd, session_id=sid, mcp_servers=[])
                # The first process still owns the history and keeps writing it.
                response = await first.prompt(session_id=sid, prompt=[text_block("go")])
                assert response.field_meta["loopType"] == "repeated_tool_execution_failure"
        # The first process has exited: its lock went with it.
        async with spawn_guarded_agent(
            RecordingClient(), mode="enforce", state_dir=state, home=home
        ) as third:
            await third.load_session(cwd=cwd, session_id=sid, mcp_servers=[])
            again = await third.prompt(session_id=sid, prompt=[text_block("go on")])
        return refused.value, str(again.stop_reason)

    error, stop_reason = run(go(), timeout=120)
    assert "open in another agent process (pid " in details(error)
    assert stop_reason == "end_turn"


def test_session_close_over_the_wire(tmp_path: Path) -> None:
    state, home = tmp_path / "state", tmp_path / "home"
    home.mkdir()
    cwd = project(tmp_path)

    async def go() -> tuple[bool, RequestError]:
        async with spawn_guarded_agent(
            RecordingClient(), mode="enforce", state_dir=state, home=home
        ) as conn:
            sid = (await conn.new_session(cwd=cwd, mcp_servers=[])).session_id
            await conn.close_session(session_id=sid)
            with pytest.raises(RequestError) as unknown:
                await conn.prompt(session_id=sid, prompt=[text_block("go")])
            # Closed: another process may now open it.
            async with spawn_guarded_agent(
                RecordingClient(), mode="enforce", state_dir=state, home=home
            ) as other:
                await other.load_session(cwd=cwd, session_id=sid, mcp_servers=[])
        return True, unknown.value

    _, unknown = run(go(), timeout=120)
    assert "unknown session" in str(unknown.data)


def _slow_closing_edge(marker: Path) -> McpServerStdio:
    """The edge server behind a shell that, once the server's stdin closed, ignores SIGTERM.

    Its close takes the SDK's whole shutdown sequence (stdin closed, a wait, SIGTERM,
    a wait, SIGKILL): seconds during which the session is being evicted.  ``marker``
    appears when that close began.
    """
    script = Path(__file__).parent / "mcp_edge_server.py"
    return McpServerStdio(
        name="edge",
        command="/bin/sh",
        args=[
            "-c",
            'trap "" TERM; "$@"; echo closing > "$0"; sleep 30',
            str(marker),
            sys.executable,
            str(script),
        ],
        env=[],
    )


def test_a_load_while_the_session_is_evicted_never_makes_two_writers(tmp_path: Path) -> None:
    """Evicting an idle session whose servers close slowly, while a load of it arrives.

    Two real agent processes on one state directory: whatever the interleaving,
    at most one of them may hold the session (and write its history).
    """
    state, home = tmp_path / "state", tmp_path / "home"
    home.mkdir()
    cwd = project(tmp_path)
    marker = tmp_path / "closing"

    async def go() -> tuple[Any, Any, Any]:
        async with spawn_guarded_agent(
            RecordingClient(), mode="enforce", state_dir=state, home=home
        ) as first:
            created = await first.new_session(cwd=cwd, mcp_servers=[_slow_closing_edge(marker)])
            sid = created.session_id
            for _ in range(DEFAULT_MAX_LIVE_SESSIONS - 1):
                await first.new_session(cwd=cwd, mcp_servers=[])
            # One more: the least recently used idle session (sid) is evicted.
            newest = asyncio.ensure_future(first.new_session(cwd=cwd, mcp_servers=[]))
            await wait_until(marker.exists)
            assert not newest.done()  # the eviction is still closing the servers
            try:
                in_first: Any = await first.load_session(cwd=cwd, session_id=sid, mcp_servers=[])
            except RequestError as exc:
                in_first = exc
            await newest
            async with spawn_guarded_agent(
                RecordingClient(), mode="enforce", state_dir=state, home=home
            ) as second:
                try:
                    in_second: Any = await second.load_session(
                        cwd=cwd, session_id=sid, mcp_servers=[]
                    )
                except RequestError as exc:
                    in_second = exc
                # Once the eviction is over, the first process may retry: refused now.
                try:
                    retried: Any = await first.load_session(cwd=cwd, session_id=sid, mcp_servers=[])
                except RequestError as exc:
                    retried = exc
        return in_first, in_second, retried

    in_first, in_second, retried = run(go(), timeout=180)
    loaded = [not isinstance(r, RequestError) for r in (in_first, in_second)]
    assert loaded.count(True) <= 1, "two agent processes hold the same session's history"
    assert isinstance(in_first, RequestError) and "is being closed" in details(in_first)
    assert not isinstance(in_second, RequestError)  # the session is free once evicted
    assert isinstance(retried, RequestError)
    assert "open in another agent process (pid " in details(retried)
