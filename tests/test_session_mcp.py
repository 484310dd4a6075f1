"""MCP servers and tools: naming, validation, the outcome contract over real stdio servers.

The edge cases (JSON-RPC errors, structured-only results, cancellation seen
by the server) use ``tests/mcp_edge_server.py``, a small server written with
the SDK's server side; start-up failures use commands that cannot serve.  The
real npm servers are exercised end to end in ``test_e2e_mcp.py``.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar, cast

import mcp_types as types
import pytest
from acp.schema import EnvVariable, HttpMcpServer, McpServerStdio
from e2e_helpers import run
from mcp_servers import edge_server, read_pid

from tool_failure_guard.guard import Observation, classify_observation
from tool_failure_guard.session.tools.builtin import InvalidToolParams, Tool, ToolContext
from tool_failure_guard.session.tools.executor import (
    MCP_EXECUTION_ERROR_TYPES,
    CallOutcome,
    Executor,
    FunctionCall,
    PermissionAnswer,
)
from tool_failure_guard.session.tools.mcp import SessionMcp, connect_servers
from tool_failure_guard.session.tools.mcp_tools import (
    MAX_NAME_LENGTH,
    MCP_OUTCOME_TABLE,
    McpTool,
    mcp_registry,
    registered_name,
    result_text,
    tool_kind,
)

T = TypeVar("T")
DOCS = Path(__file__).resolve().parent.parent / "docs"


# -- naming, kind, validation, result text -------------------------------------------


def test_registered_names_map_odd_characters_and_stay_short_and_unique() -> None:
    assert registered_name("fs", "read_text_file") == "mcp__fs__read_text_file"
    assert registered_name("my server.v2", "get/thing:now") == "mcp__my_server_v2__get_thing_now"
    assert registered_name("ünï", "tool-1") == "mcp___n___tool-1"
    long_a = registered_name("s" * 40, "a" * 40)
    long_b = registered_name("s" * 40, "a" * 39 + "b")
    assert len(long_a) == len(long_b) == MAX_NAME_LENGTH
    assert long_a != long_b
    assert long_a == registered_name("s" * 40, "a" * 40)  # stable


def test_tool_kind_comes_from_the_read_only_hint() -> None:
    assert tool_kind(types.ToolAnnotations(read_only_hint=True)) == "read"
    assert tool_kind(types.ToolAnnotations(read_only_hint=False)) == "edit"
    assert tool_kind(types.ToolAnnotations()) == "other"
    assert tool_kind(None) == "other"


def _tool(schema: dict[str, Any]) -> McpTool:
    mcp = SessionMcp()
    connection = cast(Any, type("C", (), {"name": "srv", "tools": ()})())
    connection.tools = (types.Tool(name="t", input_schema=schema),)
    mcp.connections.append(connection)
    [tool] = mcp_registry(mcp, 1.0, {}).values()
    return cast(McpTool, tool)


def _check(tool: McpTool, args: Any) -> Any:
    """The executor's one schema check, as a call to ``tool`` would get it."""
    executor = Executor({tool.name: tool}, ToolContext(cwd=Path.cwd()), _never_asked)
    return executor.check(tool, FunctionCall(call_id="c", name=tool.name, args=args))


async def _never_asked(*_: Any) -> PermissionAnswer:
    raise AssertionError("no permission expected")


def test_arguments_are_validated_against_the_input_schema() -> None:
    tool = _tool(
        {
            "type": "object",
            "properties": {"path": {"type": "string"}, "n": {"type": "integer", "minimum": 1}},
            "required": ["path"],
            "additionalProperties": False,
        }
    )
    assert _check(tool, {"path": "a", "n": 2}) == {"path": "a", "n": 2}
    assert tool.parameters_schema["required"] == ["path"]  # the model is sent the same schema
    with pytest.raises(InvalidToolParams, match="missing required argument 'path'"):
        _check(tool, {})
    with pytest.raises(InvalidToolParams, match=r"argument 'n' must be a number above 1"):
        _check(tool, {"path": "a", "n": 0})
    with pytest.raises(InvalidToolParams, match="unexpected argument"):
        _check(tool, {"path": "a", "x": 1})


def test_a_broken_input_schema_still_requires_an_object() -> None:
    tool = _tool({"type": "object", "properties": {"a": {"type": 12}}})
    assert tool.parameters_schema == {"type": "object"}
    assert _check(tool, {"anything": 1}) == {"anything": 1}
    with pytest.raises(InvalidToolParams, match="must be a JSON object"):
        _check(tool, ["not", "an", "object"])


def test_clashing_names_keep_the_first_tool_and_tell_the_client() -> None:
    mcp = SessionMcp()
    for server in ("a.b", "a_b"):
        connection = cast(Any, type("C", (), {})())
        connection.name = server
        connection.tools = (types.Tool(name="t", input_schema={"type": "object"}),)
        mcp.connections.append(connection)
    registry = mcp_registry(mcp, 1.0, {})
    assert list(registry) == ["mcp__a_b__t"]
    assert cast(McpTool, registry["mcp__a_b__t"]).connection.name == "a.b"
    assert mcp.take_notices() == [
        "MCP server 'a_b': tool 't' was not registered: its name 'mcp__a_b__t' is already taken"
    ]


def test_result_text_keeps_text_and_describes_the_rest() -> None:
    result = types.CallToolResult(
        content=[
            types.TextContent(text="hello"),
            types.ImageContent(data="AAAA", mime_type="image/png"),
            types.ResourceLink(uri="file:///x", name="x"),
            types.EmbeddedResource(
                resource=types.TextResourceContents(uri="file:///y", text="inner")
            ),
        ]
    )
    assert (
        result_text(result) == "hello\n[image image/png omitted]\n[resource link: file:///x]\ninner"
    )
    structured = types.CallToolResult(content=[], structured_content={"k": 1})
    assert result_text(structured) == '{"k": 1}'


# -- the documented table --------------------------------------------------------------


def _doc_rows() -> list[list[str]]:
    text = (DOCS / "outcome-contract.md").read_text(encoding="utf-8")
    name = "mcp-outcome-table"
    body = text.split(f"<!-- {name}:begin -->", 1)[1].split(f"<!-- {name}:end -->", 1)[0]
    rows = [line for line in body.strip().splitlines() if line.startswith("|")]
    return [[cell.strip() for cell in row.strip("|").split("|")] for row in rows[2:]]


def test_the_mcp_outcome_table_in_the_docs_matches_the_code_and_the_classifier() -> None:
    rows = _doc_rows()
    assert [
        (path, terminal, execution, None if error == "(none)" else error)
        for path, terminal, execution, error, _ in rows
    ] == [
        (r.path, r.terminal_status, r.execution_status, r.execution_error_type)
        for r in MCP_OUTCOME_TABLE
    ]
    for _, terminal, execution, error, expected in rows:
        observation = Observation(
            call_id="c1",
            terminal_status=terminal,
            execution_status=execution,
            execution_error_type=None if error == "(none)" else error,
            policy_tool_name="mcp__srv__tool",
            tool_type="mcp",
        )
        assert classify_observation(observation).value == expected, (terminal, execution)
    # every MCP type the table produces survives the executor as it is (the timeout has
    # the original's name, execution_timeout, shared with the shell's timeout)
    produced = {r.execution_error_type for r in MCP_OUTCOME_TABLE}
    mcp_own = {t for t in produced if t and (t.startswith("mcp_") or t == "execution_timeout")}
    assert mcp_own == MCP_EXECUTION_ERROR_TYPES


# -- over a real stdio server (the SDK's server side) -------------------------------------


class Edge:
    """A session's registry with the edge server, and an executor over it."""

    def __init__(
        self,
        mcp: SessionMcp,
        tmp_path: Path,
        timeout: float,
        answer: PermissionAnswer = PermissionAnswer.ALLOWED,
    ) -> None:
        self.mcp = mcp
        self.registry: dict[str, Tool] = mcp_registry(mcp, timeout, {})
        self.asked: list[tuple[str, str, str]] = []  # (call id, kind, title)

        async def ask(call: FunctionCall, tool: Tool, args: Any) -> PermissionAnswer:
            self.asked.append((call.call_id, tool.kind, tool.title(args)))
            return answer

        self.executor = Executor(self.registry, ToolContext(cwd=tmp_path), ask)

    async def call(
        self,
        tool: str,
        args: dict[str, Any] | None = None,
        *,
        cancel_when: Callable[[], bool] | None = None,
    ) -> CallOutcome:
        """Run one call; with ``cancel_when``, cancel it as soon as that becomes true."""
        cancelled = asyncio.Event()
        call = FunctionCall(call_id="c", name=f"mcp__edge__{tool}", args=args or {})
        if cancel_when is None:
            return await self.executor.execute(call, cancelled)
        condition = cancel_when

        async def cancel() -> None:
            await _until(condition)
            cancelled.set()

        canceller = asyncio.ensure_future(cancel())
        try:
            return await self.executor.execute(call, cancelled)
        finally:
            canceller.cancel()


def axes(outcome: CallOutcome) -> tuple[str, str, str | None]:
    return (outcome.terminal_status, outcome.execution_status, outcome.execution_error_type)


async def _edge(tmp_path: Path, timeout: float = 10.0, **env: str) -> Edge:
    mcp = await connect_servers([edge_server("edge", **env)], cwd=tmp_path)
    assert mcp.problems == []
    return Edge(mcp, tmp_path, timeout)


def test_json_rpc_errors_settle_by_the_contract(tmp_path: Path) -> None:
    async def go() -> dict[str, CallOutcome]:
        edge = await _edge(tmp_path)
        try:
            return {
                "schema": await edge.call("strict", {"n": 0}),
                "strict": await edge.call("strict", {"n": 1}),
                "vanishing": await edge.call("vanishing"),
                "broken": await edge.call("broken"),
                "ok": await edge.call("ok"),
            }
        finally:
            await edge.mcp.close()

    got = run(go())
    assert axes(got["schema"]) == ("error", "not_started", "invalid_tool_params")
    assert axes(got["strict"]) == ("error", "not_started", "invalid_tool_params")
    assert axes(got["vanishing"]) == ("error", "not_started", "tool_not_registered")
    assert axes(got["broken"]) == ("error", "error", "mcp_protocol_error")
    assert axes(got["ok"]) == ("success", "success", None)
    assert got["ok"].output == '{"text": "fine"}'
    assert (got["ok"].policy_tool_name, got["ok"].tool_type) == ("mcp__edge__ok", "mcp")


def test_every_mcp_call_asks_permission_and_a_refusal_is_a_cancellation(tmp_path: Path) -> None:
    log = tmp_path / "server.log"

    async def go() -> tuple[CallOutcome, list[tuple[str, str, str]]]:
        mcp = await connect_servers([edge_server("edge", EDGE_SERVER_LOG=str(log))], cwd=tmp_path)
        edge = Edge(mcp, tmp_path, 10.0, PermissionAnswer.REJECTED)
        try:
            return await edge.call("sleepy", {"seconds": 0}), edge.asked
        finally:
            await mcp.close()

    outcome, asked = run(go())
    assert axes(outcome) == ("cancelled", "not_started", None)
    assert asked == [("c", "other", "sleepy (edge)")]  # no annotations: kind other
    assert _read(log) == ""  # nothing reached the server


def test_a_timeout_cancels_the_request_at_the_server(tmp_path: Path) -> None:
    log = tmp_path / "server.log"

    async def go() -> CallOutcome:
        # long enough for a loaded machine to start the server's work before it fires
        edge = await _edge(tmp_path, timeout=2.0, EDGE_SERVER_LOG=str(log))
        try:
            outcome = await edge.call("sleepy", {"seconds": 30})
            await _until(lambda: "sleepy cancelled" in _read(log))
            return outcome
        finally:
            await edge.mcp.close()

    outcome = run(go())
    assert axes(outcome) == ("error", "error", "execution_timeout")
    assert _read(log).splitlines() == ["sleepy started", "sleepy cancelled"]


def test_session_cancel_wins_and_cancels_the_request_at_the_server(tmp_path: Path) -> None:
    log = tmp_path / "server.log"

    async def go() -> CallOutcome:
        # the timeout would fire later: cancellation arrives first and wins
        edge = await _edge(tmp_path, timeout=2.0, EDGE_SERVER_LOG=str(log))
        try:

            def started() -> bool:
                return "sleepy started" in _read(log)

            outcome = await edge.call("sleepy", {"seconds": 30}, cancel_when=started)
            await _until(lambda: "sleepy cancelled" in _read(log))
            await asyncio.sleep(2.0)  # past the timeout: nothing changes the settled outcome
            return outcome
        finally:
            await edge.mcp.close()

    outcome = run(go())
    assert axes(outcome) == ("cancelled", "cancelled", None)
    assert _read(log).splitlines() == ["sleepy started", "sleepy cancelled"]


def test_a_killed_server_is_unavailable_mid_call_and_afterwards(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    log = tmp_path / "server.log"
    server = McpServerStdio(
        name="edge",
        command="/bin/sh",
        args=[
            "-c",
            'echo $$ > "$0"; exec "$@"',
            str(pid_file),
            sys.executable,
            str(Path(__file__).parent / "mcp_edge_server.py"),
        ],
        env=[EnvVariable(name="EDGE_SERVER_LOG", value=str(log))],
    )

    async def go() -> tuple[CallOutcome, CallOutcome]:
        mcp = await connect_servers([server], cwd=tmp_path)
        edge = Edge(mcp, tmp_path, 10.0)
        try:
            pending = asyncio.ensure_future(edge.call("sleepy", {"seconds": 30}))
            await _until(lambda: "sleepy started" in _read(log))  # the call is at the server
            os.kill(read_pid(pid_file), signal.SIGKILL)
            during = await pending
            after = await edge.call("ok")
            return during, after
        finally:
            await mcp.close()

    during, after = run(go())
    assert axes(during) == ("error", "error", "mcp_server_unavailable")
    assert axes(after) == ("error", "error", "mcp_server_unavailable")


def test_servers_that_cannot_start_are_reported_and_the_others_work(tmp_path: Path) -> None:
    servers = [
        McpServerStdio(name="missing", command=str(tmp_path / "no-such-binary"), args=[], env=[]),
        McpServerStdio(name="exits", command="/bin/true", args=[], env=[]),
        HttpMcpServer(type="http", name="remote", url="http://127.0.0.1:9/mcp", headers=[]),
        edge_server("edge"),
        edge_server("edge"),
    ]

    async def go() -> tuple[SessionMcp, CallOutcome]:
        mcp = await connect_servers(servers, cwd=tmp_path)
        try:
            return mcp, await Edge(mcp, tmp_path, 10.0).call("ok")
        finally:
            await mcp.close()

    mcp, outcome = run(go())
    assert [c.name for c in mcp.connections] == ["edge"]
    assert axes(outcome) == ("success", "success", None)
    notices = mcp.take_notices()
    assert notices == mcp.problems and mcp.take_notices() == []
    assert len(notices) == 4
    assert any("'remote' was not started: only stdio servers are supported" in n for n in notices)
    assert any("'edge' was not started: another server has that name" in n for n in notices)
    assert any("'missing' was not started: command not found" in n for n in notices)
    assert any(
        "'exits' was not started: the server exited or closed its output" in n for n in notices
    )


def _read(path: Path) -> str:
    return path.read_text(encoding="utf-8") if path.exists() else ""


async def _until(condition: Any) -> None:
    for _ in range(500):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("condition never became true")


# -- the timeout is an operator setting -----------------------------------------------------


def test_a_project_cannot_set_the_mcp_timeout_but_home_and_process_can(tmp_path: Path) -> None:
    from tool_failure_guard.session.config.envconfig import MCP_TIMEOUT_ENV_VAR, load_env

    project, home = tmp_path / "project", tmp_path / "home"
    (project / ".qwen").mkdir(parents=True)
    home.mkdir()
    (project / ".env").write_text(f"{MCP_TIMEOUT_ENV_VAR}=3600\n", encoding="utf-8")
    (project / ".qwen" / "settings.json").write_text(
        f'{{"env": {{"{MCP_TIMEOUT_ENV_VAR}": "3600"}}}}', encoding="utf-8"
    )
    refused = load_env(project, home=home, environ={})
    assert refused.get(MCP_TIMEOUT_ENV_VAR) is None
    assert {r.variable for r in refused.refused} == {MCP_TIMEOUT_ENV_VAR}
    (home / ".env").write_text(f"{MCP_TIMEOUT_ENV_VAR}=5\n", encoding="utf-8")
    assert load_env(project, home=home, environ={}).get(MCP_TIMEOUT_ENV_VAR) == "5"
    exported = load_env(project, home=home, environ={MCP_TIMEOUT_ENV_VAR: "7"})
    assert exported.get(MCP_TIMEOUT_ENV_VAR) == "7"


# -- the agent: session/load restarts the servers, the connection's end stops them -----------


EDGE_TOOLS = tuple(f"mcp__edge__{t}" for t in ("broken", "ok", "sleepy", "strict", "vanishing"))


def _wrapped_edge(pid_file: Path) -> McpServerStdio:
    script = Path(__file__).parent / "mcp_edge_server.py"
    return McpServerStdio(
        name="edge",
        command="/bin/sh",
        args=["-c", 'echo $$ > "$0"; exec "$@"', str(pid_file), sys.executable, str(script)],
        env=[],
    )


def test_session_load_starts_the_servers_afresh_and_close_stops_them(tmp_path: Path) -> None:
    from mcp_servers import alive

    from tool_failure_guard.session.model.base import ScriptedModel, load_scenario
    from tool_failure_guard.session.transport.agent import AgentConfig, GuardedAgent

    project = tmp_path / "project"
    project.mkdir()
    first, second = tmp_path / "first.pid", tmp_path / "second.pid"
    agent = GuardedAgent(
        AgentConfig(
            model_factory=lambda: ScriptedModel(load_scenario("read-loop")),
            state_dir=tmp_path / "state",
        )
    )

    async def go() -> tuple[Any, Any, list[str], int, int]:
        created = await agent.new_session(cwd=str(project), mcp_servers=[_wrapped_edge(first)])
        sid = created.session_id
        old = read_pid(first)
        loaded = await agent.load_session(
            cwd=str(project), session_id=sid, mcp_servers=[_wrapped_edge(second)]
        )
        new = read_pid(second)
        await _until(lambda: not alive(old))  # the old server was shut down
        assert alive(new)
        executor = agent.sessions[sid].executor
        names = [n for n in EDGE_TOOLS if executor.resolve(n) is not None]
        await agent.close()  # the connection ended
        return created, loaded, names, old, new

    created, loaded, names, old, new = run(go())
    for response in (created, loaded):
        [status] = response.field_meta["toolFailureGuard"]["mcpServers"]
        assert status == {"name": "edge", "status": "connected", "tools": 5}
    assert names == list(EDGE_TOOLS)
    assert old != new and not alive(old) and not alive(new)


def test_demo_mcp_server_options_are_checked() -> None:
    from tool_failure_guard.commands.demo import parse_mcp_server

    assert parse_mcp_server("fs=npx -y 'a b' .") == ("fs", ["npx", "-y", "a b", "."])
    for bad, why in [
        ("npx server", "expected NAME=COMMAND"),
        ("=npx", "expected NAME=COMMAND"),
        ("fs=", "the command is empty"),
        ("fs=npx 'open", "No closing quotation"),
    ]:
        with pytest.raises(ValueError, match=why):
            parse_mcp_server(bad)


def test_a_server_that_never_answers_is_not_started_within_the_startup_timeout(
    tmp_path: Path,
) -> None:
    # reads every request, answers none, keeps its output open, exits at end of input
    silent = McpServerStdio(
        name="silent", command="/bin/sh", args=["-c", "exec 3>&1; cat > /dev/null"], env=[]
    )

    async def go() -> SessionMcp:
        return await connect_servers([silent], cwd=tmp_path, startup_timeout=0.5)

    mcp = run(go())
    assert mcp.connections == []
    assert mcp.problems == [
        "MCP server 'silent' was not started: no answer to initialize and tools/list within 0.5s"
    ]
