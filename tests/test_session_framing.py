"""The connection survives any frame: bad, huge and stray frames over real stdio.

The end-to-end tests reproduce issue 7 §1 against ``python -m tool_failure_guard
agent``; the table tests pin the filter's rules (which id an answer echoes,
which frames are answered and which are only logged).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from stdio_driver import RawAgent, frame

from tool_failure_guard.session.transport.framing import (
    INVALID_REQUEST,
    MALFORMED_RESPONSE,
    PARSE_ERROR,
    JsonId,
    Verdict,
    judge_frame,
    judge_oversized,
)

INITIALIZE = frame(
    {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}}
)


@pytest.fixture
def agent(tmp_path: Path) -> Iterator[RawAgent]:
    raw = RawAgent(tmp_path)
    yield raw
    raw.close()


def only_reply(agent: RawAgent) -> dict[str, Any]:
    assert len(agent.stray) == 1, agent.stray
    return agent.stray[0]


def framing_warnings(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "session.framing" in line]


# -- issue 7 §1 reproductions, over real stdio -------------------------------------------


def test_bad_frames_are_answered_and_initialize_still_is(agent: RawAgent) -> None:
    """Each of these used to end the agent (or, truncated, go unanswered)."""
    bad = [b"[]", b"42", b'"x"', b"null", INITIALIZE[:-10]]
    for n, value in enumerate(bad, start=1):
        agent.send(value)
        agent.send(INITIALIZE.replace(b'"id":1', b'"id":%d' % n))
        result = agent.wait_for([n])[0]["result"]
        assert result["protocolVersion"] == 1
    replies = [(r["error"]["code"], r["id"]) for r in agent.stray]
    assert replies == [(INVALID_REQUEST, None)] * 4 + [(PARSE_ERROR, None)]
    assert "not valid JSON" in agent.stray[-1]["error"]["data"]["details"]
    stderr = agent.new_stderr()
    assert len(framing_warnings(stderr)) == len(bad)
    assert "Traceback" not in stderr
    assert agent.alive()


def test_object_id_response_while_the_drain_waits_does_not_freeze_the_prompt(
    agent: RawAgent,
) -> None:
    agent.initialize()
    session_id = agent.new_session()

    def stray_response_first(request: dict[str, Any]) -> None:
        agent.send(frame({"jsonrpc": "2.0", "id": {"a": 1}, "result": {}}))
        agent.send(frame({"jsonrpc": "2.0", "id": [request["id"]], "result": {}}))

    result = agent.prompt(session_id, on_agent_request=stray_response_first)
    assert result["stopReason"] == "end_turn"
    # this host speaks the ``_`` name: the bare one first, "method not found", then that
    drains = [r["method"] for r in agent.agent_requests if "drainMidTurnQueue" in r["method"]]
    assert drains[:2] == ["craft/drainMidTurnQueue", "_craft/drainMidTurnQueue"]
    assert set(drains[2:]) <= {"_craft/drainMidTurnQueue"}
    assert agent.stray == []  # a response is never answered
    stderr = agent.new_stderr()
    assert len(framing_warnings(stderr)) == 2 * len(agent.agent_requests)
    assert "Traceback" not in stderr


def test_malformed_answer_to_a_waiting_request_settles_it(agent: RawAgent) -> None:
    """``"error": "boom"`` used to kill the SDK's receive loop; now the request just fails."""
    agent.initialize()
    session_id = agent.new_session()

    def broken_answer_first(request: dict[str, Any]) -> None:
        agent.send(frame({"jsonrpc": "2.0", "id": request["id"], "error": "boom"}))

    result = agent.prompt(session_id, on_agent_request=broken_answer_first)
    assert result["stopReason"] in {"end_turn", "cancelled"}
    stderr = agent.new_stderr()
    warnings = framing_warnings(stderr)
    # per agent request: the broken answer, then the driver's real answer to a settled id
    assert len(warnings) == 2 * len(agent.agent_requests)
    assert any("integer code" in w for w in warnings)
    assert any("no request the agent is waiting on" in w for w in warnings)
    assert "Traceback" not in stderr
    # the connection still serves
    assert agent.new_session()


def test_bad_frames_mid_prompt_are_answered_and_the_prompt_completes(agent: RawAgent) -> None:
    agent.initialize()
    session_id = agent.new_session()
    prompt_id = agent.request(
        "session/prompt", {"sessionId": session_id, "prompt": [{"type": "text", "text": "go"}]}
    )
    agent.send_all([b"[]", b"{", b"\xff\xfe", b'{"jsonrpc":"2.0","id":"m","method":7}'])
    # notifications the SDK cannot route: one warning each, not a traceback
    agent.send(frame({"jsonrpc": "2.0", "method": "no/such/notification"}))
    agent.send(frame({"jsonrpc": "2.0", "method": "session/cancel", "params": {"x": 1}}))
    answer = agent.wait_for([prompt_id])[0]
    assert answer["result"]["stopReason"] == "end_turn"
    replies = [(r["error"]["code"], r["id"]) for r in agent.stray]
    assert replies == [
        (INVALID_REQUEST, None),
        (PARSE_ERROR, None),
        (PARSE_ERROR, None),
        (INVALID_REQUEST, "m"),
    ]
    stderr = agent.new_stderr()
    assert len(framing_warnings(stderr)) == 4
    assert len([line for line in stderr.splitlines() if "notification" in line]) == 2
    assert "Traceback" not in stderr


def test_a_200_mib_line_is_refused_without_being_buffered(agent: RawAgent) -> None:
    agent.initialize()
    before = agent.peak_rss_kib()
    assert agent.proc.stdin is not None
    agent.proc.stdin.write(b'{"jsonrpc":"2.0","id":"huge","method":"session/prompt","params":"')
    block = b"a" * (1 << 20)
    for _ in range(200):
        agent.proc.stdin.write(block)
    agent.send(b'"}')
    agent.send(INITIALIZE)
    agent.wait_for([1])
    reply = only_reply(agent)
    assert reply["id"] == "huge"
    assert reply["error"]["code"] == INVALID_REQUEST
    assert "exceeds the 8388608-byte limit" in reply["error"]["data"]["details"]
    growth_mib = (agent.peak_rss_kib() - before) / 1024
    print(f"peak RSS growth for a 200 MiB line: {growth_mib:.1f} MiB")
    assert growth_mib < 32  # the default limit (8 MiB) is all a line may hold


def test_max_frame_bytes_sets_the_limit(tmp_path: Path) -> None:
    agent = RawAgent(tmp_path, "--max-frame-bytes", "2048")
    try:
        agent.send(frame({"jsonrpc": "2.0", "id": 5, "method": "x", "params": {"s": "a" * 3000}}))
        agent.send(frame({"jsonrpc": "2.0", "id": 6, "method": "x", "params": {"s": "a" * 1500}}))
        answers = agent.wait_for([5, 6])
    finally:
        agent.close()
    assert answers[0]["error"]["code"] == INVALID_REQUEST
    assert "2048-byte limit" in answers[0]["error"]["data"]["details"]
    assert answers[1]["error"]["code"] == -32601  # under the limit: the SDK routes it


def test_a_too_small_frame_limit_is_refused() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "tool_failure_guard", "agent", "--max-frame-bytes", "1023"],
        stdin=subprocess.PIPE,
        capture_output=True,
        text=True,
        timeout=180,  # a bound on a hang: start-up alone takes tens of seconds under load
    )
    assert result.returncode == 2
    assert "--max-frame-bytes must be at least 1024 bytes" in result.stderr


# -- the rules, as a table ----------------------------------------------------------------

PENDING: frozenset[JsonId] = frozenset({0, 3})


def outcome(verdict: Verdict) -> tuple[int | None, Any, bool, Any]:
    """(code answered or None, id answered to, handed to the SDK, request settled)."""
    code = verdict.error["code"] if verdict.error is not None else None
    return code, verdict.reply_id, verdict.forward is not None, verdict.settles


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (b"", (None, None, False, None)),
        (b"  \r", (None, None, False, None)),
        (b"{", (PARSE_ERROR, None, False, None)),
        (b"\xff", (PARSE_ERROR, None, False, None)),
        (b"NaN", (PARSE_ERROR, None, False, None)),
        (b'{"a": Infinity}', (PARSE_ERROR, None, False, None)),
        (b"[" * 100_000, (PARSE_ERROR, None, False, None)),
        (b"[]", (INVALID_REQUEST, None, False, None)),
        (b"[{}]", (INVALID_REQUEST, None, False, None)),
        (b"42", (INVALID_REQUEST, None, False, None)),
        (b"null", (INVALID_REQUEST, None, False, None)),
        (b"{}", (INVALID_REQUEST, None, False, None)),
        (b'{"jsonrpc":"2.0","id":9}', (INVALID_REQUEST, 9, False, None)),
        (b'{"jsonrpc":"2.0","id":"a","method":1}', (INVALID_REQUEST, "a", False, None)),
        (b'{"jsonrpc":"1.0","id":"a","method":"m"}', (INVALID_REQUEST, "a", False, None)),
        (
            b'{"jsonrpc":"2.0","id":"a","method":"m","params":3}',
            (INVALID_REQUEST, "a", False, None),
        ),
        (b'{"jsonrpc":"2.0","id":{"x":1},"method":"m"}', (INVALID_REQUEST, None, False, None)),
        (b'{"jsonrpc":"2.0","id":true,"method":"m"}', (INVALID_REQUEST, None, False, None)),
        (b'{"jsonrpc":"2.0","id":1.5,"method":"m"}', (INVALID_REQUEST, None, False, None)),
        (b'{"jsonrpc":"2.0","id":null,"method":"m"}', (INVALID_REQUEST, None, False, None)),
        (b'{"jsonrpc":"2.0","method":"m"}', (None, None, True, None)),
        (b'{"jsonrpc":"2.0","id":0,"method":"m","params":[]}', (None, None, True, None)),
        (b'{"jsonrpc":"2.0","id":0,"result":null}', (None, None, True, 0)),
        (b'{"jsonrpc":"2.0","id":3,"error":{"code":1,"message":"m"}}', (None, None, True, 3)),
        (b'{"jsonrpc":"2.0","id":7,"result":{}}', (None, None, False, None)),
        (b'{"jsonrpc":"2.0","id":"0","result":{}}', (None, None, False, None)),
        (b'{"jsonrpc":"2.0","id":{"a":1},"result":{}}', (None, None, False, None)),
        (b'{"jsonrpc":"2.0","id":[0],"error":{}}', (None, None, False, None)),
        (b'{"jsonrpc":"2.0","id":0,"error":"boom"}', (None, None, True, 0)),
        (
            b'{"jsonrpc":"2.0","id":0,"result":1,"error":{"code":1,"message":"m"}}',
            (None, None, True, 0),
        ),
        (b'{"id":0,"result":1}', (None, None, True, 0)),
        (b'{"jsonrpc":"2.0","id":3}', (None, None, True, 3)),
    ],
)
def test_frame_rules(line: bytes, expected: tuple[int | None, Any, bool, Any]) -> None:
    verdict = judge_frame(line, PENDING)
    assert outcome(verdict) == expected
    # warned exactly when the frame is not handed on as it came
    unchanged = verdict.forward == line.strip() + b"\n" or line.strip() == b""
    assert (verdict.warning is None) == unchanged


def test_a_malformed_answer_becomes_an_error_for_the_waiting_request() -> None:
    verdict = judge_frame(b'{"jsonrpc":"2.0","id":0,"error":"boom"}', PENDING)
    assert verdict.forward is not None
    settled = json.loads(verdict.forward)
    assert settled["id"] == 0
    assert settled["error"]["code"] == MALFORMED_RESPONSE


@pytest.mark.parametrize(
    ("head", "expected"),
    [
        (
            b'{"jsonrpc":"2.0","id":"big","method":"session/prompt","params":{',
            (INVALID_REQUEST, "big", False, None),
        ),
        (b'{"id": 12, "method": "x"', (INVALID_REQUEST, 12, False, None)),
        (b'{"jsonrpc":"2.0","id":3,"result":"aaaa', (None, None, True, 3)),
        (b'{"jsonrpc":"2.0","id":4,"result":"aaaa', (None, None, False, None)),
        (b'{"jsonrpc":"2.0","method":"x","id":5,', (INVALID_REQUEST, None, False, None)),
        (b'{"params":{"id":5,"method":"x"', (INVALID_REQUEST, None, False, None)),
        (b"aaaaaaaa", (INVALID_REQUEST, None, False, None)),
    ],
)
def test_oversized_frame_rules(head: bytes, expected: tuple[int | None, Any, bool, Any]) -> None:
    verdict = judge_oversized(head, 10_000, 1024, PENDING)
    assert outcome(verdict) == expected
    assert verdict.warning is not None
