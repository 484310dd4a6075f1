"""A schema's regular expressions never stall the agent; session/cancel still ends the prompt.

A real stdio MCP server (``tests/mcp_edge_server.py`` with ``EDGE_SERVER_REDOS``)
declares ``pattern: "^(a+)+$"`` (exponential in Python's ``re``) and
``"^(a|a)*$"`` (exponential in any backtracking engine).  The agent runs as a
real process over ACP stdio, so a stalled agent cannot stall this test: the
bound on each run is what fails it.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from acp import text_block
from e2e_helpers import Box, run, wait_until
from mcp_servers import edge_server

from tool_failure_guard.session.tools.schema_check import (
    InvalidToolParams,
    check_arguments,
    schema_problem,
    schema_validator,
)
from tool_failure_guard.session.tools.schema_patterns import CheckTimedOut, deadline, search
from tool_failure_guard.session.transport.client import RecordingClient, spawn_guarded_agent

EVIL = "a" * 48 + "!"


def test_patterns_are_matched_by_the_bounded_engine() -> None:
    validator = schema_validator(
        {
            "type": "object",
            "properties": {"s": {"type": "string", "pattern": "^(a+)+$"}},
            "patternProperties": {"^x_(a+)+$": {"type": "integer"}},
            "additionalProperties": False,
        }
    )
    assert check_arguments(validator, {"s": "aaa", "x_aa": 1}) == {"s": "aaa", "x_aa": 1}
    with pytest.raises(InvalidToolParams, match="does not fit"):
        check_arguments(validator, {"s": EVIL})
    with pytest.raises(InvalidToolParams, match="unexpected argument"):
        check_arguments(validator, {"x_" + EVIL: 1})
    with pytest.raises(InvalidToolParams, match="must be a integer"):
        check_arguments(validator, {"x_aa": "one"})


def test_a_pattern_that_backtracks_everywhere_ends_in_a_verdict() -> None:
    validator = schema_validator({"properties": {"s": {"pattern": "^(a|a)*$"}}})
    with pytest.raises(InvalidToolParams, match="took longer than"):
        check_arguments(validator, {"s": "a" * 60 + "!"})
    with deadline(0.0), pytest.raises(CheckTimedOut):
        search("a", "a")


def test_schemas_whose_patterns_cannot_be_checked_safely_are_unusable() -> None:
    assert schema_problem({"properties": {"s": {"pattern": "(?P<"}}}) is not None
    combined = {"patternProperties": {"^a": {}}, "unevaluatedProperties": False}
    assert "unevaluatedProperties" in str(schema_problem(combined))
    assert schema_problem({"properties": {"s": {"pattern": "^(a+)+$"}}}) is None


@pytest.fixture
def box(tmp_path: Path) -> Box:
    return Box(tmp_path)


def _scenario(box: Box, tool: str, repeat: int) -> str:
    call = {"tool": f"mcp__edge__{tool}", "args": {"s": "a" * 60 + "!"}}
    if tool == "redos":
        call["args"] = {"s": EVIL}
    return box.scenario({"turns": [{"calls": [call], "repeat": repeat}], "final_text": "done"})


def test_a_backtracking_pattern_is_a_prompt_verdict_and_other_sessions_are_served(
    box: Box,
) -> None:
    client = RecordingClient()

    async def go() -> tuple[Any, Any]:
        async with spawn_guarded_agent(
            client,
            mode="enforce",
            state_dir=box.state,
            home=box.home,
            scenario=_scenario(box, "redos", 1),
        ) as conn:
            servers = [edge_server("edge", EDGE_SERVER_REDOS="1")]
            first = await conn.new_session(cwd=str(box.project), mcp_servers=servers)
            prompt = asyncio.ensure_future(
                conn.prompt(session_id=first.session_id, prompt=[text_block("go")])
            )
            # Meanwhile another session opens and answers: the agent is not stalled.
            other = await asyncio.wait_for(
                conn.new_session(cwd=str(box.project), mcp_servers=[]), 30
            )
            return await asyncio.wait_for(prompt, 60), other

    response, other = run(go(), timeout=120)
    assert other.session_id
    assert str(response.stop_reason) == "end_turn"
    [result] = [e for e in client.events if e.kind == "tool_update" and e.status == "failed"]
    assert "does not fit" in result.text  # a verdict, before any permission was asked
    assert client.permission_requests == []


def test_session_cancel_ends_a_prompt_whose_check_backtracks(box: Box) -> None:
    client = RecordingClient()

    async def go() -> Any:
        async with spawn_guarded_agent(
            client,
            mode="enforce",
            state_dir=box.state,
            home=box.home,
            scenario=_scenario(box, "redos_hard", 2),
        ) as conn:
            servers = [edge_server("edge", EDGE_SERVER_REDOS="1")]
            created = await conn.new_session(cwd=str(box.project), mcp_servers=servers)
            sid = created.session_id
            prompt = asyncio.ensure_future(conn.prompt(session_id=sid, prompt=[text_block("go")]))
            await wait_until(lambda: any(e.kind == "tool_call" for e in client.events))
            await conn.cancel(session_id=sid)
            return await asyncio.wait_for(prompt, 30)

    response = run(go(), timeout=120)
    assert str(response.stop_reason) == "cancelled"
