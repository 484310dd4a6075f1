"""How a stop ends the prompt, on the real wire, for every protection that stops one.

A host written for Qwen Code 0.24.4 recognises a stop by the ``data`` of the
error it answers ``session/prompt`` with (``code``, ``errorKind``,
``loopType``).  Our agent ends the prompt with a normal ``PromptResponse``
whose ``_meta`` carries the same three fields; the person reads the stop
sentence without ``System: ``, the model-facing history keeps ``System: ...``.
"""

from __future__ import annotations

from typing import Any

import pytest
from acp import text_block
from e2e_helpers import Box, run

from tool_failure_guard.core import (
    LOOP_INVALID_TOOL_PARAMS,
    LOOP_PROVIDER_DUPLICATE,
    LOOP_REPEATED_TOOL_FAILURE,
    LOOP_TOOL_CALL_CAP,
    STOP_NOTICES,
)
from tool_failure_guard.core.actions import SYSTEM_PREFIX, shown_text
from tool_failure_guard.guard import REPEATED_TOOL_FAILURE_STOP_MESSAGE
from tool_failure_guard.session.transport.client import RecordingClient, spawn_guarded_agent

BAD = {"tool": "read_file", "args": {"file": "x"}}
REPLAY = {"tool": "read_file", "args": {"path": "missing.txt"}, "id": "provider-1"}

#: loop type -> (mode, scenario: a bundled name or a scenario document, extra arguments)
STOPS: dict[str, tuple[str, Any, list[str]]] = {
    LOOP_REPEATED_TOOL_FAILURE: ("enforce", "read-loop", []),
    LOOP_INVALID_TOOL_PARAMS: ("enforce", {"turns": [{"calls": [BAD]}] * 3}, []),
    LOOP_PROVIDER_DUPLICATE: ("enforce", {"turns": [{"calls": [REPLAY]}] * 4}, []),
    LOOP_TOOL_CALL_CAP: ("shadow", "read-loop", ["--max-tool-calls", "6"]),
}


def test_the_loop_types_are_the_originals() -> None:
    assert (
        set(STOPS)
        == set(STOP_NOTICES)
        == {
            "repeated_tool_execution_failure",
            "invalid_tool_params_stagnation",
            "global_tool_call_duplicate",
            "turn_tool_call_cap",
        }
    )


def test_every_notice_is_system_context_and_its_shown_text_is_the_sentence() -> None:
    for notice in STOP_NOTICES.values():
        assert notice.startswith(SYSTEM_PREFIX)
        assert shown_text(notice) == notice[len(SYSTEM_PREFIX) :]
    # the sentence of the original's REPEATED_TOOL_FAILURE_STOP_MESSAGE (no prefix)
    assert shown_text(REPEATED_TOOL_FAILURE_STOP_MESSAGE) == (
        "Automatic continuation stopped because the same tool execution failure "
        "continued after a corrective reminder. New user input is required to continue."
    )


async def stopped_prompt(box: Box, loop_type: str) -> tuple[RecordingClient, dict[str, Any], str]:
    mode, scenario, extra = STOPS[loop_type]
    if isinstance(scenario, dict):
        scenario = box.scenario({**scenario, "final_text": "never reached"})
    client = RecordingClient()
    async with spawn_guarded_agent(
        client,
        mode=mode,
        state_dir=box.state,
        home=box.home,
        scenario=scenario,
        extra_args=extra,
    ) as conn:
        session = await conn.new_session(cwd=str(box.project), mcp_servers=[])
        # the raw JSON-RPC answer, exactly as a host reads it off the wire
        raw = await conn._conn.send_request(
            "session/prompt",
            {"sessionId": session.session_id, "prompt": [text_block("go").model_dump()]},
        )
    return client, raw, session.session_id


@pytest.mark.parametrize("loop_type", list(STOPS))
def test_a_stop_carries_the_originals_loop_detected_fields(tmp_path: Any, loop_type: str) -> None:
    box = Box(tmp_path)
    client, raw, sid = run(stopped_prompt(box, loop_type))
    cap = loop_type == LOOP_TOOL_CALL_CAP
    assert raw["stopReason"] == ("max_turn_requests" if cap else "end_turn")
    meta = raw["_meta"]
    assert {key: meta[key] for key in ("code", "errorKind", "loopType")} == {
        "code": "LOOP_DETECTED",
        "errorKind": "loop_detected",
        "loopType": loop_type,
    }
    notice = STOP_NOTICES[loop_type]
    # a person reads the sentence once, without the prefix
    texts = client.agent_texts()
    assert texts[-1] == shown_text(notice) and not texts[-1].startswith(SYSTEM_PREFIX)
    assert sum(notice[len(SYSTEM_PREFIX) :] in t for t in texts) == 1
    # the model-facing history keeps the fixed system context, prefix included
    notices = [p.text for m in box.history(sid) for p in m.parts if p.kind == "notice"]
    assert notices == [notice]


def test_a_prompt_that_did_not_stop_carries_none_of_them(tmp_path: Any) -> None:
    box = Box(tmp_path)
    client = RecordingClient()

    async def go() -> Any:
        async with spawn_guarded_agent(
            client, mode="warn", state_dir=box.state, home=box.home, scenario="read-loop"
        ) as conn:
            session = await conn.new_session(cwd=str(box.project), mcp_servers=[])
            return await conn.prompt(session_id=session.session_id, prompt=[text_block("go")])

    meta = run(go()).field_meta or {}
    assert not {"code", "errorKind", "loopType"} & set(meta)


def test_session_load_replays_the_stop_as_it_was_shown(tmp_path: Any) -> None:
    box = Box(tmp_path)
    _, _, sid = run(stopped_prompt(box, LOOP_REPEATED_TOOL_FAILURE))
    client = RecordingClient()

    async def load() -> None:
        async with spawn_guarded_agent(
            client, mode="enforce", state_dir=box.state, home=box.home, scenario="read-loop"
        ) as conn:
            await conn.load_session(cwd=str(box.project), session_id=sid, mcp_servers=[])

    run(load())
    assert client.agent_texts()[-1] == shown_text(REPEATED_TOOL_FAILURE_STOP_MESSAGE)
