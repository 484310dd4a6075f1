"""End to end over ACP stdio with real MCP servers nobody here wrote.

The agent (``python -m tool_failure_guard agent``) is given
``@modelcontextprotocol/server-filesystem`` and
``@modelcontextprotocol/server-everything`` (npm, exact versions from
``.mcp-servers/package-lock.json``) in ``session/new``, exactly as an ACP
client sends them, and a scenario calls their tools by registered name.
Without Node.js these tests are skipped with a message saying how to get
them (see ``tests/mcp_servers.py``).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import uuid
from pathlib import Path
from typing import IO, Any, TypeVar

import e2e_helpers
import pytest
from acp import text_block
from acp.schema import McpServerStdio
from e2e_helpers import decisions, run, telemetry_documents, wait_until
from mcp_servers import alive, everything_server, filesystem_server, read_pid

from tool_failure_guard.core.actions import shown_text
from tool_failure_guard.guard import (
    REPEATED_TOOL_FAILURE_REMINDER,
    REPEATED_TOOL_FAILURE_STOP_MESSAGE,
)
from tool_failure_guard.session.config.envconfig import MCP_TIMEOUT_ENV_VAR
from tool_failure_guard.session.persistence.messages import Part
from tool_failure_guard.session.transport.client import RecordingClient, spawn_guarded_agent
from tool_failure_guard.telemetry.sink import GUARD_LOG_EVENT

pytestmark = pytest.mark.usefixtures("real_mcp_servers")
T = TypeVar("T")
READ_TOOL = "mcp__fs__read_text_file"
LONG_TOOL = "mcp__ev__trigger-long-running-operation"


class Box(e2e_helpers.Box):
    """A test's directories, plus what the MCP tests read back from the history."""

    def turns(self, turns: list[dict[str, Any]], **extra: Any) -> str:
        """A one-prompt scenario of ``turns`` (plus top-level keys such as final_text)."""
        return self.scenario({"turns": turns, **extra})

    def results(self, session_id: str) -> list[Part]:
        return [
            p for m in self.history(session_id) for p in m.parts if p.kind == "function_response"
        ]

    def system_texts(self, session_id: str) -> list[str]:
        return [t for m in self.history(session_id) for t in m.texts("system")]


@pytest.fixture
def box(tmp_path: Path) -> Box:
    return Box(tmp_path)


def metric_attributes(documents: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        point["attributes"]
        for document in documents
        for rm in document.get("resource_metrics", [])
        for sm in rm["scope_metrics"]
        for metric in sm["metrics"]
        for point in metric["data"]["data_points"]
    ]


def missing_file_loop(box: Box, path: str, tool: str = READ_TOOL, *, heed: bool = False) -> str:
    """Four failing reads per turn; ``heed``: the model stops once reminded."""
    call = {"tool": tool, "args": {"path": path}}
    extra: dict[str, Any] = {"on_reminder": [{"text": "I will stop reading it."}]} if heed else {}
    return box.turns(
        [{"text": "Reading.", "calls": [call] * 4, "repeat": 4}], final_text="Gave up.", **extra
    )


# -- the guard over a real server's failing read ----------------------------------------


@pytest.mark.parametrize("mode", ["warn", "enforce"])
def test_a_repeatedly_failing_mcp_read_is_warned_and_stopped_and_leaks_nothing(
    box: Box, mode: str, tmp_path: Path
) -> None:
    """The enforce run names its server and its folder with a sentinel: no telemetry has it."""
    sentinel = f"SENTINEL{uuid.uuid4().hex[:12]}" if mode == "enforce" else "fs"
    allowed = box.project / f"{sentinel}-allowed"
    allowed.mkdir()
    tool = f"mcp__{sentinel}__read_text_file"
    scenario = missing_file_loop(
        box, str(allowed / f"{sentinel}-missing.txt"), tool, heed=mode == "warn"
    )
    log = tmp_path / "agent.stderr"
    pid_file = tmp_path / "server.pid"
    client = RecordingClient()

    async def go() -> tuple[Any, Any]:
        with log.open("w") as stderr:
            stderr_file: IO[Any] = stderr
            async with spawn_guarded_agent(
                client,
                mode=mode,
                state_dir=box.state,
                home=box.home,
                scenario=scenario,
                extra_args=["--telemetry", "console"],
                stderr=stderr_file,
            ) as conn:
                server = filesystem_server(sentinel, allowed, pid_file=pid_file)
                session = await conn.new_session(cwd=str(box.project), mcp_servers=[server])
                response = await conn.prompt(
                    session_id=session.session_id, prompt=[text_block("read it")]
                )
                return session, response

    session, response = run(go())
    run(gone(read_pid(pid_file)))  # the connection ended (EOF): no orphan server
    [status] = session.field_meta["toolFailureGuard"]["mcpServers"]
    assert status["name"] == sentinel and status["status"] == "connected" and status["tools"] > 5

    results = box.results(session.session_id)
    assert {(p.name, p.status, p.error_type) for p in results} == {
        (tool, "error", "mcp_tool_error")
    }
    assert "ENOENT" in results[0].text  # the server's own words reach the model
    if mode == "warn":
        assert decisions(response) == ["tracked", "warn"]
        assert box.system_texts(session.session_id) == [REPEATED_TOOL_FAILURE_REMINDER]
        assert response.field_meta.get("loopType") is None
        assert client.agent_texts()[-1] == "I will stop reading it."
    else:
        assert decisions(response) == ["tracked", "warn", "stop"]
        assert response.field_meta["loopType"] == "repeated_tool_execution_failure"
        assert client.agent_texts()[-1] == shown_text(REPEATED_TOOL_FAILURE_STOP_MESSAGE)
        assert any(sentinel in line for line in client.transcript())  # it went through

    documents = telemetry_documents(log.read_text(encoding="utf-8"))
    guard_logs = [d["attributes"] for d in documents if d.get("event_name") == GUARD_LOG_EVENT]
    assert guard_logs
    assert {(a["tool_type"], a["execution_error_type"]) for a in guard_logs} == {
        ("mcp", "mcp_tool_error")
    }
    metrics = [d for d in documents if "resource_metrics" in d]
    assert any(a.get("tool_type") == "mcp" for a in metric_attributes(metrics))
    for document in metrics:  # the error type is a diagnostic-log field only
        assert "mcp_tool_error" not in json.dumps(document)
    for document in documents:  # tool and server names never leave the agent
        assert "read_text_file" not in json.dumps(document)
        if mode == "enforce":
            assert sentinel not in json.dumps(document)


# -- timeout and cancellation ------------------------------------------------------------------


def long_call(duration: float = 30) -> dict[str, Any]:
    return {"tool": LONG_TOOL, "args": {"duration": duration, "steps": 30}}


def test_a_long_running_tool_times_out_and_another_is_cancelled(box: Box) -> None:
    """Prompt 1 hits the operator's timeout; prompt 2 is cancelled by session/cancel."""
    scenario = box.turns([{"calls": [long_call()]}], final_text="Timed out.")
    client = RecordingClient()

    async def go() -> tuple[Any, Any, str]:
        async with spawn_guarded_agent(
            client,
            mode="enforce",
            state_dir=box.state,
            home=box.home,
            scenario=scenario,
            extra_env={MCP_TIMEOUT_ENV_VAR: "2"},
        ) as conn:
            session = await conn.new_session(
                cwd=str(box.project), mcp_servers=[everything_server("ev")]
            )
            sid = session.session_id
            timed_out = await conn.prompt(session_id=sid, prompt=[text_block("x")])
            seen = len(client.events)
            prompt = asyncio.ensure_future(conn.prompt(session_id=sid, prompt=[text_block("y")]))
            await wait_until(lambda: any(e.status == "in_progress" for e in client.events[seen:]))
            await conn.cancel(session_id=sid)
            return timed_out, await prompt, sid

    timed_out, cancelled, sid = run(go())
    first, second = box.results(sid)
    assert (first.name, first.status, first.error_type) == (LONG_TOOL, "error", "execution_timeout")
    assert decisions(timed_out) == ["tracked"]
    assert (second.name, second.status, second.error_type) == (LONG_TOOL, "cancelled", None)
    assert cancelled.stop_reason == "cancelled"
    # the cancelled batch never reaches the guard as a failure: nothing is counted
    assert cancelled.field_meta["toolFailureGuard"]["batches"] == []
    assert client.final_statuses() == {"call-p0-t0-0": "failed", "call-p1-t0-0": "failed"}


# -- start-up failures, a dying server, clean shutdown ---------------------------------------


def test_server_lifecycle_over_a_session(box: Box) -> None:
    """A broken server is reported; a killed one is unavailable; none outlives the connection."""
    fs_pid, ev_pid = box.root / "fs.pid", box.root / "ev.pid"
    (box.project / "notes.txt").write_text("still here\n", encoding="utf-8")
    echo = {"tool": "mcp__ev__echo", "args": {"message": "hello"}}
    scenario = box.turns(
        [
            {"calls": [echo]},
            {"calls": [long_call()]},
            {"calls": [echo]},
            {"calls": [{"tool": "mcp__fs__read_text_file", "args": {"path": "notes.txt"}}]},
        ],
        final_text="Carried on.",
    )
    client = RecordingClient()

    async def go() -> tuple[Any, Any, Any, tuple[int, int]]:
        async with spawn_guarded_agent(
            client, mode="enforce", state_dir=box.state, home=box.home, scenario=scenario
        ) as conn:
            init = await conn.initialize(protocol_version=1)
            servers = [
                filesystem_server("fs", box.project, pid_file=fs_pid),
                McpServerStdio(name="broken", command="/bin/true", args=[], env=[]),
                everything_server("ev", pid_file=ev_pid),
            ]
            session = await conn.new_session(cwd=str(box.project), mcp_servers=servers)
            pids = (read_pid(fs_pid), read_pid(ev_pid))
            prompt = asyncio.ensure_future(
                conn.prompt(session_id=session.session_id, prompt=[text_block("x")])
            )
            await wait_until(
                lambda: any(
                    e.call_id.endswith("t1-0") and e.status == "in_progress" for e in client.events
                )
            )
            os.kill(pids[1], signal.SIGKILL)
            response = await prompt
            assert alive(pids[0])
            # a client that terminates the agent: SIGTERM shuts the servers down too
            os.kill(parent_pid(pids[0]), signal.SIGTERM)
            return init, session, response, pids

    init, session, response, pids = run(go())
    capabilities = init.agent_capabilities.mcp_capabilities
    assert (capabilities.http, capabilities.sse) == (False, False)
    statuses = session.field_meta["toolFailureGuard"]["mcpServers"]
    assert [s.get("name") for s in statuses] == ["fs", "ev", None]
    assert statuses[2]["status"] == "not_started"
    assert "'broken' was not started" in statuses[2]["message"]
    # the user hears about the broken server once, before the first prompt's output
    assert client.agent_texts()[0].startswith("MCP server 'broken' was not started")
    assert client.agent_texts()[1:] == ["Carried on."]
    assert response.stop_reason == "end_turn"
    results = box.results(session.session_id)
    assert [(p.name, p.status, p.error_type) for p in results] == [
        ("mcp__ev__echo", "success", None),
        (LONG_TOOL, "error", "mcp_server_unavailable"),
        ("mcp__ev__echo", "error", "mcp_server_unavailable"),  # fails fast: still down
        ("mcp__fs__read_text_file", "success", None),  # the other server goes on
    ]
    assert results[0].text == "Echo: hello"
    # every MCP call asked permission; the kind comes from the readOnlyHint annotation
    assert [(r.title, r.kind) for r in client.permission_requests] == [
        ("echo (ev)", "read"),
        ("trigger-long-running-operation (ev)", "read"),
        ("echo (ev)", "read"),
        ("read_text_file (fs)", "read"),
    ]
    run(gone(*pids))  # no orphan server processes once the agent has gone


async def gone(*pids: int) -> None:
    await wait_until(lambda: not any(alive(pid) for pid in pids))


def parent_pid(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text(encoding="utf-8")
    return int(re.search(r"^PPid:\s+(\d+)", status, re.MULTILINE).group(1))  # type: ignore[union-attr]


# -- the demo drives a real server ---------------------------------------------------------------


def test_the_demo_loops_on_a_real_mcp_server_and_stops(capsys: pytest.CaptureFixture[str]) -> None:
    from mcp_servers import FILESYSTEM

    from tool_failure_guard.commands.cli import main

    status = main(
        [
            "demo",
            "--scenario",
            "mcp-read-loop",
            "--modes",
            "enforce",
            "--mcp-server",
            f"fs=node {FILESYSTEM} .",
        ]
    )
    out = capsys.readouterr().out
    assert status == 0
    assert "read_text_file (fs) -> failed: ENOENT" in out
    assert "_meta.loopType=repeated_tool_execution_failure" in out
    assert "enforce        3         12         1  stopped (enforce)" in out
