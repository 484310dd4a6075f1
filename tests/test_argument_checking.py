"""Every admitted call settles: argument checking never raises, never touches the network.

Issue 15 §1/§3 over a real stdio MCP server (``tests/mcp_edge_server.py``,
written with the SDK's server side): a schema that recurses (``"$ref": "#"``)
or refers to nothing is replaced at registration by "an object" with one
warning; a remote ``$ref`` is never fetched (a 127.0.0.1 HTTP server counts
requests); any failure while checking is ``not_started`` /
``invalid_tool_params``; a server answering JSON-RPC ``-32000`` stays up.
"""

from __future__ import annotations

import asyncio
import http.server
import logging
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, ClassVar, Literal

import attrs
import pytest
from acp import text_block
from e2e_helpers import Box, run
from mcp_servers import edge_server

from tool_failure_guard.session.tools.builtin import Tool, ToolContext, ToolKind, default_tools
from tool_failure_guard.session.tools.executor import (
    CallOutcome,
    Executor,
    FunctionCall,
    PermissionAnswer,
)
from tool_failure_guard.session.tools.mcp import connect_servers
from tool_failure_guard.session.tools.mcp_tools import mcp_registry
from tool_failure_guard.session.transport.client import RecordingClient, spawn_guarded_agent


async def _allow(call: FunctionCall, tool: Tool, args: Any) -> PermissionAnswer:
    return PermissionAnswer.ALLOWED


def axes(outcome: CallOutcome) -> tuple[str, str, str | None]:
    return (outcome.terminal_status, outcome.execution_status, outcome.execution_error_type)


async def _calls(
    tmp_path: Path, calls: list[tuple[str, dict[str, Any]]], **env: str
) -> tuple[dict[str, Tool], list[CallOutcome]]:
    mcp = await connect_servers(
        [edge_server("edge", EDGE_SERVER_ODD_TOOLS="1", **env)], cwd=tmp_path
    )
    assert mcp.problems == []
    try:
        registry = mcp_registry(mcp, 10.0, {})
        executor = Executor(registry, ToolContext(cwd=tmp_path), _allow)
        outcomes = []
        for number, (tool, args) in enumerate(calls):
            call = FunctionCall(call_id=f"c{number}", name=f"mcp__edge__{tool}", args=args)
            outcomes.append(await executor.execute(call, asyncio.Event()))
        return registry, outcomes
    finally:
        await mcp.close()


def test_a_schema_that_recurses_or_resolves_nowhere_is_an_object_with_one_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="session.mcp_tools"):
        registry, outcomes = run(
            _calls(tmp_path, [("selfref", {"a": 1}), ("unresolvable", {"x": 2})])
        )
    assert registry["mcp__edge__selfref"].parameters_schema == {"type": "object"}
    assert registry["mcp__edge__unresolvable"].parameters_schema == {"type": "object"}
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert sum("'selfref'" in w and "recurses" in w for w in warnings) == 1
    assert sum("'unresolvable'" in w and "#/$defs/missing" in w for w in warnings) == 1
    # checked as an object, they reach the server and settle
    assert [axes(o) for o in outcomes] == [("success", "success", None)] * 2


class _Counting(http.server.BaseHTTPRequestHandler):
    hits: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        self.hits.append(self.path)
        body = b'{"type": "string"}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        return None


@pytest.fixture
def schema_host() -> Iterator[tuple[str, list[str]]]:
    hits: ClassVar[list[str]] = []
    handler = type("Handler", (_Counting,), {"hits": hits})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/schema.json", hits
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def test_a_remote_ref_is_never_fetched(tmp_path: Path, schema_host: tuple[str, list[str]]) -> None:
    url, hits = schema_host
    registry, outcomes = run(_calls(tmp_path, [("remote", {"x": 1})], EDGE_SERVER_REMOTE_REF=url))
    assert hits == []  # neither registration nor checking asked the network
    assert registry["mcp__edge__remote"].parameters_schema == {"type": "object"}
    assert axes(outcomes[0]) == ("success", "success", None)


@attrs.frozen
class _SchemaTool:
    """A native tool whose schema recurses (bypassing any registration check)."""

    parameters_schema: Mapping[str, Any]
    name: str = "odd"
    kind: ToolKind = "other"
    tool_type: Literal["native", "mcp"] = "native"
    needs_permission: bool = False
    description: str = "odd"

    def validate(self, args: Mapping[str, Any]) -> Mapping[str, Any]:
        return args

    def title(self, args: Mapping[str, Any]) -> str:
        return "odd"

    async def run(self, args: Mapping[str, Any], context: ToolContext) -> bytes:
        return b"ran"


@pytest.mark.parametrize(
    "schema",
    [{"$ref": "#"}, {"properties": {"x": {"$ref": "#/$defs/none"}}}],
    ids=["recursion", "unresolvable"],
)
def test_a_schema_failure_while_checking_is_invalid_tool_params(
    tmp_path: Path, schema: dict[str, Any]
) -> None:
    executor = Executor({"odd": _SchemaTool(schema)}, ToolContext(cwd=tmp_path), _allow)
    call = FunctionCall(call_id="c", name="odd", args={"x": 1})
    outcome = run(executor.execute(call, asyncio.Event()))
    assert axes(outcome) == ("error", "not_started", "invalid_tool_params")
    assert "schema cannot be checked" in outcome.output


def test_a_shell_timeout_too_large_for_a_float_is_invalid_tool_params(tmp_path: Path) -> None:
    executor = Executor(default_tools(), ToolContext(cwd=tmp_path), _allow)
    call = FunctionCall(
        call_id="c", name="run_shell_command", args={"command": "true", "timeout": 10**400}
    )
    outcome = run(executor.execute(call, asyncio.Event()))
    assert axes(outcome) == ("error", "not_started", "invalid_tool_params")
    assert "timeout" in outcome.output


def test_a_server_answering_the_generic_server_error_stays_available(tmp_path: Path) -> None:
    _, outcomes = run(_calls(tmp_path, [("busy", {}), ("ok", {}), ("busy", {})]))
    assert [axes(o) for o in outcomes] == [
        ("error", "error", "mcp_protocol_error"),
        ("success", "success", None),
        ("error", "error", "mcp_protocol_error"),
    ]
    assert "-32000" in outcomes[0].output and "busy, try again" in outcomes[0].output


def test_over_stdio_a_call_whose_check_fails_settles_and_the_guard_decides(
    tmp_path: Path,
) -> None:
    """The agent over ACP stdio: every such call is failed for the client, none pending."""
    box = Box(tmp_path)
    shell = {"tool": "run_shell_command", "args": {"command": "true", "timeout": 10**400}}
    scenario = box.scenario({"turns": [{"calls": [shell], "repeat": 10}], "final_text": "x"})
    client = RecordingClient()

    async def go() -> tuple[Any, str]:
        async with spawn_guarded_agent(
            client,
            mode="enforce",
            state_dir=box.state,
            home=box.home,
            scenario=scenario,
            extra_args=["--report-decisions"],
        ) as conn:
            session = await conn.new_session(cwd=str(box.project), mcp_servers=[])
            response = await conn.prompt(session_id=session.session_id, prompt=[text_block("go")])
            return response, session.session_id

    response, session_id = run(go())
    assert response.field_meta["loopType"] == "invalid_tool_params_stagnation"
    statuses = client.final_statuses()
    assert len(statuses) == 3 and set(statuses.values()) == {"failed"}
    responses = [
        p for m in box.history(session_id) for p in m.parts if p.kind == "function_response"
    ]
    assert [p.error_type for p in responses] == ["invalid_tool_params"] * 3
