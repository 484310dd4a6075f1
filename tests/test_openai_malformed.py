"""Malformed and cut-short streams end the prompt as model errors, over ACP with the real SDK.

Each stream first shows the user some text, then breaks; the prompt must end with
``model request failed: malformed stream: <what>`` (no traceback), the text the
user saw must be persisted (``session/load`` replays it, the next request carries
it), and the session must go on serving.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from acp.exceptions import RequestError
from openai_server import Fail, Raw, Reply
from provider_harness import run_agent

SHOWN = "Let me look at the project."


def _chunk_line(extra: str) -> str:
    """A chunk's JSON with ``extra`` spliced in as its last member (raw, unparsed)."""
    chunk = {
        "id": "chatcmpl-test",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "test-model",
        "choices": [{"index": 0, "delta": {"content": "!"}, "finish_reason": None}],
    }
    return json.dumps(chunk)[:-1] + f', "extra": {extra}}}'


def _tool_delta(**fragment: Any) -> dict[str, Any]:
    return {"tool_calls": [{"type": "function", **fragment}]}


MALFORMED = {
    "arguments-as-object": (
        Raw(
            events=(
                {"content": SHOWN},
                _tool_delta(
                    index=0, id="c1", function={"name": "read_file", "arguments": {"path": "a"}}
                ),
            ),
            finish="tool_calls",
        ),
        "a tool call's arguments is a JSON object, not a string",
    ),
    "mixed-index": (
        Raw(
            events=(
                {"content": SHOWN},
                _tool_delta(index=0, id="c1", function={"name": "list_directory"}),
                _tool_delta(id="c2", function={"name": "list_directory", "arguments": "{}"}),
            ),
            finish="tool_calls",
        ),
        "tool call deltas mix fragments with and without an index",
    ),
    "undecodable-data-line": (
        Raw(events=({"content": SHOWN}, '{"choices": [{"delta": ')),
        "a data: line is not JSON",
    ),
    "integer-past-the-digit-limit": (
        Raw(events=({"content": SHOWN}, _chunk_line("9" * 5000))),
        "a data: line cannot be decoded (ValueError: Exceeds the limit (4300 digits)",
    ),
    "data-line-not-utf8": (
        Raw(events=({"content": SHOWN}, b'data: {"choices": \xff\xfe}\n\n')),
        "a data: line is not UTF-8",
    ),
    "cut-short": (
        Raw(events=({"content": SHOWN}, {"content": " Half a sen"}), finish=None, done=False),
        "the stream ended early (no choice carried a finish_reason)",
    ),
}


@pytest.mark.parametrize("case", list(MALFORMED))
def test_a_malformed_stream_is_a_model_error_and_the_shown_text_is_kept(
    tmp_path: Path, case: str
) -> None:
    stream, what = MALFORMED[case]
    run = run_agent(
        tmp_path,
        mode="enforce",
        provider="openai",
        answers=[stream, Reply(text="back again")],
        prompts=("go", "again"),
    )
    error, after = run.responses
    assert isinstance(error, RequestError), error
    assert error.code == -32603
    details = error.data["details"]
    assert details.startswith("model request failed: malformed stream: "), details
    assert what in details
    assert "Traceback" not in run.stderr
    shown = "".join(run.client.agent_texts())
    assert shown.startswith(SHOWN) and shown.endswith("back again")
    # What the user saw is persisted as the model's words; no call of the broken turn is.
    models = [m for m in run.history if m.role == "model"]
    assert models[0].texts("text") == [shown.removesuffix("back again")]
    assert not [p for m in run.history for p in m.parts if p.kind == "function_call"]
    assert [m.kind for m in run.history] == ["prompt", "model", "prompt", "model"]
    assert after.stop_reason == "end_turn"
    assert run.fake is not None
    assert run.fake.messages(1)[2] == {
        "role": "assistant",
        "content": shown.removesuffix("back again"),
    }


def test_fragments_without_index_carrying_a_new_id_are_new_calls(tmp_path: Path) -> None:
    """Some gateways omit ``index``: each new id starts a call; fragments without an id
    continue the current one.  Two calls are never merged into one bogus call."""
    (tmp_path / "project").mkdir()
    (tmp_path / "project" / "a.txt").write_text("alpha", encoding="utf-8")
    (tmp_path / "project" / "b.txt").write_text("beta", encoding="utf-8")
    stream = Raw(
        events=(
            _tool_delta(id="c1", function={"name": "read_file", "arguments": ""}),
            _tool_delta(function={"arguments": '{"path": '}),
            _tool_delta(function={"arguments": '"a.txt"}'}),
            _tool_delta(id="c2", function={"name": "read_file", "arguments": '{"path": '}),
            _tool_delta(function={"arguments": '"b.txt"}'}),
        ),
        finish="tool_calls",
    )
    run = run_agent(
        tmp_path, mode="enforce", provider="openai", answers=[stream, Reply(text="read both")]
    )
    (response,) = run.responses
    assert response.stop_reason == "end_turn"
    responses = [p for m in run.history for p in m.parts if p.kind == "function_response"]
    assert [(p.call_id, p.status, p.text) for p in responses] == [
        ("c1", "success", "alpha"),
        ("c2", "success", "beta"),
    ]
    assert run.client.final_statuses() == {"c1": "completed", "c2": "completed"}


def test_arguments_holding_an_integer_past_the_digit_limit_are_invalid_params(
    tmp_path: Path,
) -> None:
    """Valid JSON the interpreter refuses to decode: the call is not started, the prompt
    goes on (arguments are the model's, not the stream's)."""
    arguments = '{"path": ' + "7" * 5000 + "}"
    stream = Raw(
        events=(
            _tool_delta(index=0, id="big", function={"name": "read_file", "arguments": arguments}),
        ),
        finish="tool_calls",
    )
    run = run_agent(tmp_path, mode="enforce", provider="openai", answers=[stream, Reply(text="ok")])
    (response,) = run.responses
    assert response.stop_reason == "end_turn"
    (part,) = [p for m in run.history for p in m.parts if p.kind == "function_response"]
    assert (part.status, part.error_type) == ("error", "invalid_tool_params")
    assert "the arguments are not valid JSON: Exceeds the limit (4300 digits)" in part.text
    assert "Traceback" not in run.stderr


def test_a_huge_error_body_from_the_endpoint_is_cut_in_the_error(tmp_path: Path) -> None:
    fail = Fail(status=403, message="D" * 3_000_000, type="permission_denied")
    run = run_agent(tmp_path, mode="enforce", provider="openai", answers=[fail])
    (error,) = run.responses
    assert isinstance(error, RequestError)
    details = error.data["details"]
    assert details.startswith("model request failed: permission denied (HTTP 403)")
    assert details.endswith(f"... [{3_000_000 - 1000} more characters cut]")
    assert len(details) < 1200
    assert len(run.stderr) < 5000
