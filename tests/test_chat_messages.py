"""History -> chat messages, tool schemas, and the provider's pieces that need no server."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import openai
import pytest
from jsonschema import Draft202012Validator

from tool_failure_guard.guard import (
    REPEATED_TOOL_FAILURE_REMINDER,
    REPEATED_TOOL_FAILURE_STOP_MESSAGE,
)
from tool_failure_guard.session.model.base import (
    ModelTurn,
    ModelUsage,
    ScriptedModel,
    UsageTotals,
    load_scenario,
)
from tool_failure_guard.session.model.chat_messages import (
    FOLDED_CONTEXT_HEADING,
    UNANSWERED_CALL_TEXT,
    chat_messages,
    fold_system_context,
    tool_definitions,
)
from tool_failure_guard.session.model.openai import (
    OpenAIChatModel,
    OpenAISettings,
    SystemPromptError,
    describe_error,
    is_context_length_error,
    read_system_prompt,
)
from tool_failure_guard.session.model.openai_stream import _PendingCall, decode_call
from tool_failure_guard.session.persistence.messages import Message, Part
from tool_failure_guard.session.pipeline.drain import QUEUED_INPUT_PREFIX
from tool_failure_guard.session.tools.builtin import ToolContext, default_tools
from tool_failure_guard.session.tools.executor import Executor, FunctionCall, PermissionAnswer


def prompt(*texts: str, queued: tuple[str, ...] = ()) -> Message:
    return Message(
        role="user",
        kind="prompt",
        parts=(
            *(Part(kind="text", text=t) for t in texts),
            *(Part(kind="queued_input", text=QUEUED_INPUT_PREFIX + t) for t in queued),
        ),
    )


def model(text: str, *calls: tuple[str, str, dict[str, Any]]) -> Message:
    return Message(
        role="model",
        kind="model",
        parts=(
            *((Part(kind="text", text=text),) if text else ()),
            *(Part(kind="function_call", call_id=i, name=n, args=a) for i, n, a in calls),
        ),
    )


def results(*parts: Part) -> Message:
    return Message(role="user", kind="tool_results", parts=parts)


def response(call_id: str, text: str, error_type: str | None = None) -> Part:
    return Part(
        kind="function_response",
        call_id=call_id,
        name="read_file",
        status="error" if error_type else "success",
        error_type=error_type,
        text=text,
    )


def test_the_mapping_keeps_roles_order_and_fixed_texts() -> None:
    history = [
        prompt("fix it", queued=("left over",)),
        model("Looking.", ("a", "read_file", {"path": "x"}), ("b", "read_file", {"path": "y"})),
        results(
            response("b", "second"),  # recorded first, still answered in the model's order
            response("a", "x: no such file", "file_not_found"),
            Part(kind="system", text=REPEATED_TOOL_FAILURE_REMINDER),
            Part(kind="queued_input", text=QUEUED_INPUT_PREFIX + "hurry"),
        ),
        model("ok"),
    ]
    messages = chat_messages(history, "SYS")
    assert messages == [
        {"role": "system", "content": "SYS"},
        {"role": "user", "content": "fix it\n\n" + QUEUED_INPUT_PREFIX + "left over"},
        {
            "role": "assistant",
            "content": "Looking.",
            "tool_calls": [
                {
                    "id": "a",
                    "type": "function",
                    "function": {"name": "read_file", "arguments": '{"path": "x"}'},
                },
                {
                    "id": "b",
                    "type": "function",
                    "function": {"name": "read_file", "arguments": '{"path": "y"}'},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "a", "content": "[error: file_not_found] x: no such file"},
        {"role": "tool", "tool_call_id": "b", "content": "second"},
        {"role": "system", "content": REPEATED_TOOL_FAILURE_REMINDER},
        {"role": "user", "content": QUEUED_INPUT_PREFIX + "hurry"},
        {"role": "assistant", "content": "ok"},
    ]


def test_tool_messages_follow_their_calls_in_the_models_order() -> None:
    history = [
        prompt("go"),
        model("", ("a", "read_file", {}), ("b", "read_file", {})),
        results(response("b", "2"), response("a", "1")),
    ]
    tools = [m for m in chat_messages(history, "S") if m["role"] == "tool"]
    assert [(m["tool_call_id"], m["content"]) for m in tools] == [("a", "1"), ("b", "2")]


def test_an_unanswered_call_gets_a_fixed_answer_so_the_request_stays_valid() -> None:
    history = [prompt("go"), model("", ("a", "read_file", {})), prompt("again")]
    messages = chat_messages(history, "S")
    assert messages[3] == {"role": "tool", "tool_call_id": "a", "content": UNANSWERED_CALL_TEXT}
    assert messages[4] == {"role": "user", "content": "again"}


def test_the_stop_notice_and_continuation_are_system_never_user() -> None:
    history = [
        prompt("go"),
        model("", ("a", "read_file", {})),
        results(response("a", "no", "file_not_found"), Part(kind="notice", text="N")),
        Message(role="user", kind="continuation", parts=(Part(kind="system", text="C"),)),
    ]
    messages = chat_messages(history, "S")
    assert {"role": "system", "content": "N"} in messages
    assert messages[-1] == {"role": "system", "content": "C"}
    assert all(m["content"] not in ("N", "C") for m in messages if m["role"] == "user")


def test_folding_moves_later_system_context_verbatim_into_the_first_message() -> None:
    messages = chat_messages(
        [
            prompt("go"),
            model("", ("a", "read_file", {})),
            results(
                response("a", "no", "file_not_found"),
                Part(kind="system", text=REPEATED_TOOL_FAILURE_REMINDER),
            ),
            model("", ("b", "read_file", {})),
            results(
                response("b", "no", "file_not_found"),
                Part(kind="notice", text=REPEATED_TOOL_FAILURE_STOP_MESSAGE),
            ),
        ],
        "SYS",
    )
    folded = fold_system_context(messages)
    assert [m["role"] for m in folded].count("system") == 1
    assert folded[0]["content"] == "\n\n".join(
        [
            "SYS",
            FOLDED_CONTEXT_HEADING,
            REPEATED_TOOL_FAILURE_REMINDER,
            REPEATED_TOOL_FAILURE_STOP_MESSAGE,
        ]
    )
    assert [m for m in folded[1:]] == [m for m in messages[1:] if m["role"] != "system"]


def test_each_tool_declares_one_valid_schema_and_it_is_what_the_model_gets() -> None:
    tools = list(default_tools().values())
    definitions = tool_definitions(tools)
    for tool, definition in zip(tools, definitions, strict=True):
        Draft202012Validator.check_schema(tool.parameters_schema)
        assert definition["function"]["name"] == tool.name
        assert definition["function"]["parameters"] == tool.parameters_schema
        assert definition["function"]["description"] == tool.description


def check(name: str, call: FunctionCall, tmp_path: Path) -> Any:
    async def ask(*_: Any) -> PermissionAnswer:
        return PermissionAnswer.ALLOWED

    executor = Executor(default_tools(), ToolContext(cwd=tmp_path), ask)
    return asyncio.run(executor.execute(call, asyncio.Event()))


@pytest.mark.parametrize(
    ("name", "args", "message"),
    [
        ("read_file", {}, "missing required argument 'path'"),
        ("read_file", {"path": ""}, "argument 'path' must not be empty"),
        ("read_file", {"path": "a", "mode": "r"}, "unexpected argument(s) 'mode'"),
        ("write_file", {"path": "a"}, "missing required argument 'content'"),
        ("list_directory", {"path": 3}, "argument 'path' must be a string, got number"),
        ("run_shell_command", {"command": "ls", "timeout": 0}, "argument 'timeout' must be"),
        ("run_shell_command", {"command": "ls", "timeout": True}, "must be a number, got boolean"),
        ("run_shell_command", {"command": "ls", "timeout": float("nan")}, "finite"),
    ],
)
def test_schema_violations_are_invalid_params_not_started(
    tmp_path: Path, name: str, args: dict[str, Any], message: str
) -> None:
    outcome = check(name, FunctionCall(call_id="c", name=name, args=args), tmp_path)
    assert (outcome.terminal_status, outcome.execution_status) == ("error", "not_started")
    assert outcome.execution_error_type == "invalid_tool_params"
    assert message in outcome.output


def test_defaults_still_apply_after_the_schema(tmp_path: Path) -> None:
    (tmp_path / "f.txt").write_text("")
    outcome = check("list_directory", FunctionCall(call_id="c", name="list_directory"), tmp_path)
    assert outcome.terminal_status == "success" and "f.txt" in outcome.output


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ('{"path": "a"}', {"path": "a"}),
        ("", {}),
        ('{"path": ', None),
        ("[1]", None),
        ('"text"', None),
    ],
)
def test_decoding_assembled_arguments(raw: str, expected: dict[str, Any] | None) -> None:
    decoded = decode_call(_PendingCall(call_id="c", name="read_file", arguments=[raw]))
    if expected is None:
        assert decoded.arguments_error is not None and decoded.args == {}
    else:
        assert decoded.arguments_error is None and decoded.args == expected


def test_usage_totals_sum_what_was_reported() -> None:
    totals = (
        UsageTotals()
        .add(ModelUsage(input_tokens=10, output_tokens=2, latency_s=0.5))
        .add(None)
        .add(ModelUsage(input_tokens=5, output_tokens=None, latency_s=0.25))
    )
    assert totals == UsageTotals(
        model_turns=3, reported_turns=2, input_tokens=15, output_tokens=2, latency_s=0.75
    )


def test_system_prompt_file_errors_name_the_file(tmp_path: Path) -> None:
    empty = tmp_path / "empty.txt"
    empty.write_text("  \n")
    with pytest.raises(SystemPromptError, match=r"empty\.txt: the system prompt file is empty"):
        read_system_prompt(empty)
    with pytest.raises(SystemPromptError, match=r"missing\.txt: cannot read"):
        read_system_prompt(tmp_path / "missing.txt")
    assert read_system_prompt(None).startswith("You are a coding agent")


def test_the_scripted_model_needs_no_streaming_and_the_provider_keeps_the_key_out_of_repr() -> None:
    scripted = ScriptedModel(load_scenario("read-loop"))
    turn = asyncio.run(scripted.generate([prompt("go")]))
    assert isinstance(turn, ModelTurn) and turn.usage is None
    provider = OpenAIChatModel(OpenAISettings(model="m", api_key="sk-secret"))
    assert "sk-secret" not in repr(provider.settings)
    assert json.dumps(tool_definitions([])) == "[]"


def test_context_length_errors_are_recognised_by_code_or_words() -> None:
    import httpx2

    def bad_request(message: str, code: str | None) -> openai.BadRequestError:
        request = httpx2.Request("POST", "http://127.0.0.1/v1/chat/completions")
        response = httpx2.Response(400, request=request)
        return openai.BadRequestError(message, response=response, body={"code": code})

    settings = OpenAISettings(model="m", api_key="k")
    by_code = bad_request("too long", "context_length_exceeded")
    by_words = bad_request("This model's maximum context length is 8192 tokens", None)
    other = bad_request("System message must be at the beginning.", None)
    assert is_context_length_error(by_code) and is_context_length_error(by_words)
    assert not is_context_length_error(other)
    assert "exceeds the context length of model 'm'" in describe_error(by_words, settings)
    assert describe_error(other, settings).startswith("the model endpoint answered HTTP 400")
