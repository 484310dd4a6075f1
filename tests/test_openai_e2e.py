"""The OpenAI-compatible provider end to end: ACP stdio -> agent -> real SDK -> real HTTP.

The model is :class:`openai_server.FakeOpenAI` on 127.0.0.1; the assertions read
what a client sees and the request bodies the server received.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import openai
import pytest
from acp import text_block
from acp.exceptions import RequestError
from openai_server import Fail, FakeOpenAI, Hang, Reply, ScenarioResponder, call, serve
from provider_harness import openai_args, run_agent

from tool_failure_guard.guard import (
    REPEATED_TOOL_FAILURE_REMINDER,
    REPEATED_TOOL_FAILURE_STOP_MESSAGE,
)
from tool_failure_guard.session.model.chat_messages import (
    DEFAULT_SYSTEM_PROMPT,
    FOLDED_CONTEXT_HEADING,
)
from tool_failure_guard.session.persistence.history import HistoryStore
from tool_failure_guard.session.tools.builtin import default_tools
from tool_failure_guard.session.transport.client import RecordingClient, spawn_guarded_agent

READ = {"tool": "read_file", "args": {"path": "missing.txt"}}
LOOP = {"turns": [{"text": "Reading.", "calls": [READ] * 4, "repeat": 5}], "final_text": "Gave up."}


def reminder_requests(fake: FakeOpenAI) -> list[int]:
    """Per request: how many messages carry the reminder."""
    return [fake.count_in(i, REPEATED_TOOL_FAILURE_REMINDER) for i in range(len(fake.requests))]


def test_text_streams_as_chunks_and_the_request_carries_prompt_tools_and_usage(
    tmp_path: Path,
) -> None:
    run = run_agent(
        tmp_path,
        mode="warn",
        provider="openai",
        answers=[Reply(text="Hello there, streaming world.", pieces=4, usage=(120, 30))],
    )
    (response,) = run.responses
    assert response.stop_reason == "end_turn"
    chunks = run.client.agent_texts()
    assert len(chunks) == 4 and "".join(chunks) == "Hello there, streaming world."
    # The turn is recorded once, whole; the prompt step did not re-emit it.
    assert [m.texts("text") for m in run.history if m.role == "model"] == [
        ["Hello there, streaming world."]
    ]
    assert run.fake is not None
    (body,) = run.fake.requests
    assert body["model"] == "test-model" and body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert body["messages"][0] == {"role": "system", "content": DEFAULT_SYSTEM_PROMPT}
    assert body["messages"][1] == {"role": "user", "content": "go"}
    sent = {t["function"]["name"]: t["function"]["parameters"] for t in body["tools"]}
    assert sent == {name: dict(tool.parameters_schema) for name, tool in default_tools().items()}
    assert run.fake.auth == ["Bearer sk-test-key"]
    usage = response.field_meta["toolFailureGuard"]["usage"]
    assert (usage["modelTurns"], usage["inputTokens"], usage["outputTokens"]) == (1, 120, 30)
    assert usage["latencyS"] > 0


def test_usage_is_summed_over_the_prompts_model_requests(tmp_path: Path) -> None:
    answers = [
        Reply(calls=(call("c1", "list_directory", {}),), usage=(100, 10)),
        Reply(calls=(call("c2", "list_directory", {"path": "."}),), usage=(150, 20)),
        Reply(text="done", usage=(200, 5)),
    ]
    run = run_agent(tmp_path, mode="shadow", provider="openai", answers=answers)
    usage = run.responses[0].field_meta["toolFailureGuard"]["usage"]
    assert usage["modelTurns"] == usage["reportedTurns"] == 3
    assert (usage["inputTokens"], usage["outputTokens"]) == (450, 35)


@pytest.mark.parametrize("mode", ["warn", "enforce"])
def test_the_reminder_is_in_the_next_request_exactly_once(tmp_path: Path, mode: str) -> None:
    run = run_agent(tmp_path, mode=mode, provider="openai", scenario=LOOP)
    assert run.fake is not None
    counts = reminder_requests(run.fake)
    # batches 1-2 track, batch 2 warns: request 3 is the first to carry it, once, as system
    assert counts[:3] == [0, 0, 1]
    third = run.fake.messages(2)
    (carrier,) = [m for m in third if REPEATED_TOOL_FAILURE_REMINDER in str(m["content"])]
    assert carrier == {"role": "system", "content": REPEATED_TOOL_FAILURE_REMINDER}
    if mode == "enforce":
        assert len(run.fake.requests) == 3  # no request after the stop
        assert run.responses[0].field_meta["loopType"] == "repeated_tool_execution_failure"
    else:
        assert counts == [0, 0, 1, 1, 1, 1]  # stays in the history, never repeated
        assert run.responses[0].stop_reason == "end_turn"


@pytest.mark.parametrize("mode", ["off", "shadow"])
def test_no_reminder_is_ever_sent_in_off_or_shadow(tmp_path: Path, mode: str) -> None:
    run = run_agent(tmp_path, mode=mode, provider="openai", scenario=LOOP)
    assert run.fake is not None
    assert len(run.fake.requests) == 6
    assert reminder_requests(run.fake) == [0] * 6


def test_the_stop_notice_is_system_context_in_the_next_prompts_request(tmp_path: Path) -> None:
    scenario = {"prompts": [LOOP, {"turns": [], "final_text": "ok"}]}
    run = run_agent(
        tmp_path, mode="enforce", provider="openai", scenario=scenario, prompts=("go", "again")
    )
    assert run.fake is not None
    last = run.fake.messages(len(run.fake.requests) - 1)
    assert {"role": "system", "content": REPEATED_TOOL_FAILURE_STOP_MESSAGE} in last
    assert last[-1] == {"role": "user", "content": "again"}
    # every tool call was answered by a tool message, in the model's call order
    for index, message in enumerate(last):
        if message.get("tool_calls"):
            ids = [c["id"] for c in message["tool_calls"]]
            following = [m["tool_call_id"] for m in last[index + 1 : index + 1 + len(ids)]]
            assert following == ids


def test_a_server_refusing_later_system_messages_gets_them_folded_into_the_first(
    tmp_path: Path,
) -> None:
    run = run_agent(
        tmp_path, mode="warn", provider="openai", scenario=LOOP, reject_later_system=True
    )
    (response,) = run.responses
    assert response.stop_reason == "end_turn"
    assert run.fake is not None
    bodies = run.fake.requests
    refused = [
        i for i, b in enumerate(bodies) if any(m["role"] == "system" for m in b["messages"][1:])
    ]
    assert refused == [2]  # tried once in place, refused, then folded for the session
    for index in range(3, len(bodies)):
        messages = run.fake.messages(index)
        assert [m["role"] for m in messages].count("system") == 1
        head = messages[0]["content"]
        assert FOLDED_CONTEXT_HEADING in head
        assert head.count(REPEATED_TOOL_FAILURE_REMINDER) == 1
        assert all(m["role"] != "user" or m["content"] == "go" for m in messages)
    assert "".join(run.client.agent_texts()).endswith("Gave up.")


def test_malformed_tool_call_arguments_are_invalid_params_not_started(tmp_path: Path) -> None:
    answers = [
        Reply(calls=(call("bad-1", "read_file", '{"path": "a.txt"'),)),
        Reply(calls=(call("bad-2", "read_file", "[1, 2]"),)),
        Reply(text="I will stop."),
    ]
    run = run_agent(tmp_path, mode="enforce", provider="openai", answers=answers)
    assert run.responses[0].stop_reason == "end_turn"
    responses = [p for m in run.history for p in m.parts if p.kind == "function_response"]
    assert [(p.status, p.error_type) for p in responses] == [("error", "invalid_tool_params")] * 2
    assert "not valid JSON" in responses[0].text
    assert run.client.final_statuses() == {"bad-1": "failed", "bad-2": "failed"}
    assert run.fake is not None
    second = run.fake.messages(1)
    assistant = next(m for m in second if m.get("tool_calls"))
    # the undecodable arguments go back as an empty object, so the request stays valid JSON
    assert assistant["tool_calls"][0]["function"]["arguments"] == "{}"
    tool = next(m for m in second if m["role"] == "tool")
    assert tool["tool_call_id"] == "bad-1"
    assert tool["content"].startswith("[error: invalid_tool_params] ")


def test_rate_limit_is_retried_then_succeeds(tmp_path: Path) -> None:
    answers = [
        Fail(
            status=429, message="slow down", type="rate_limit", headers=(("retry-after-ms", "5"),)
        ),
        Fail(status=503, message="busy", type="server_error", headers=(("retry-after-ms", "5"),)),
        Reply(text="made it"),
    ]
    run = run_agent(tmp_path, mode="warn", provider="openai", answers=answers)
    (response,) = run.responses
    assert response.stop_reason == "end_turn"
    assert "".join(run.client.agent_texts()) == "made it"
    assert run.fake is not None and len(run.fake.requests) == 3


def test_a_fatal_error_ends_the_prompt_naming_the_cause_and_the_history_stays_usable(
    tmp_path: Path,
) -> None:
    """401 over ACP; the other causes are named in-process (tests/test_openai_model.py)."""
    fail = Fail(status=401, message="bad key", type="invalid_api_key")
    cause = "authentication failed (HTTP 401)"
    run = run_agent(
        tmp_path,
        mode="enforce",
        provider="openai",
        answers=[fail, Reply(text="back again")],
        prompts=("go", "again"),
    )
    error, after = run.responses
    assert isinstance(error, RequestError)
    details = str(error.data)
    assert cause in details and "model request failed" in details
    assert "Traceback" not in run.stderr
    assert after.stop_reason == "end_turn"
    assert "".join(run.client.agent_texts()) == "back again"
    assert run.fake is not None and len(run.fake.requests) == 2
    # the history is loadable and holds both prompts and the one good turn
    kinds = [m.kind for m in run.history]
    assert kinds == ["prompt", "prompt", "model"]


def test_cancel_mid_stream_closes_the_connection_and_ends_cancelled(tmp_path: Path) -> None:
    project, home, state = tmp_path / "project", tmp_path / "home", tmp_path / "state"
    project.mkdir()
    home.mkdir()
    client = RecordingClient()

    async def go(fake: FakeOpenAI) -> tuple[Any, Any, int]:
        args, env = openai_args(fake)
        async with spawn_guarded_agent(
            client,
            mode="enforce",
            state_dir=state,
            home=home,
            scenario=None,
            extra_args=args,
            extra_env=env,
        ) as conn:
            session = await conn.new_session(cwd=str(project), mcp_servers=[])
            sid = session.session_id
            prompt = asyncio.ensure_future(conn.prompt(session_id=sid, prompt=[text_block("go")]))
            for _ in range(2000):
                if client.agent_texts():
                    break
                await asyncio.sleep(0.01)
            assert client.agent_texts() == ["Thinking"]  # the first delta arrived while held
            await conn.cancel(session_id=sid)
            cancelled = await prompt
            for _ in range(2000):
                if fake.disconnects:
                    break
                await asyncio.sleep(0.01)
            disconnects = fake.disconnects
            await conn.load_session(cwd=str(project), session_id=sid, mcp_servers=[])
            again = await conn.prompt(session_id=sid, prompt=[text_block("again")])
            return cancelled, again, disconnects

    with serve(FakeOpenAI([Hang(text="Thinking"), Reply(text="fresh")])) as fake:
        cancelled, again, disconnects = asyncio.run(asyncio.wait_for(go(fake), 60))
    assert cancelled.stop_reason == "cancelled"
    assert disconnects == 1  # the server saw the client close the held stream
    assert again.stop_reason == "end_turn"
    assert len(fake.requests) == 2
    # What the user saw before the cancel is kept: the model is told it said it.
    assert [m["role"] for m in fake.messages(1)] == ["system", "user", "assistant", "user"]
    assert fake.messages(1)[2]["content"] == "Thinking"
    assert [m.kind for m in HistoryStore(state).load(client.sessions[0])[1]] == [
        "prompt",
        "model",
        "prompt",
        "model",
    ]


def test_system_prompt_file_replaces_the_default(tmp_path: Path) -> None:
    prompt_file = tmp_path / "system.txt"
    prompt_file.write_text("You are terse.", encoding="utf-8")
    run = run_agent(
        tmp_path,
        mode="warn",
        provider="openai",
        answers=[Reply(text="ok")],
        extra_args=("--system-prompt-file", str(prompt_file)),
    )
    assert run.fake is not None
    assert run.fake.messages(0)[0] == {"role": "system", "content": "You are terse."}


def test_missing_api_key_is_a_clear_error(tmp_path: Path) -> None:
    with serve(FakeOpenAI([Reply(text="never")])) as fake:
        args, env = openai_args(fake)
        env["OPENAI_API_KEY"] = ""
        client = RecordingClient()

        async def go() -> Any:
            async with spawn_guarded_agent(
                client,
                mode="warn",
                state_dir=tmp_path / "state",
                home=tmp_path,
                scenario=None,
                extra_args=args,
                extra_env=env,
            ) as conn:
                session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
                with pytest.raises(RequestError) as raised:
                    await conn.prompt(session_id=session.session_id, prompt=[text_block("go")])
                return raised.value

        error = asyncio.run(asyncio.wait_for(go(), 60))
    assert "OPENAI_API_KEY is not set" in str(error.data)
    assert fake.requests == []


def test_a_home_env_file_sets_the_endpoint_a_project_env_file_neither_it_nor_the_mode(
    tmp_path: Path,
) -> None:
    """OPENAI_* are operator-only like the guard mode: a home .env may set them, a project's not."""
    with serve(FakeOpenAI(ScenarioResponder(LOOP))) as fake:
        project = tmp_path / "project"
        project.mkdir()
        (tmp_path / ".env").write_text(  # the home directory's
            f"OPENAI_BASE_URL={fake.base_url}\nOPENAI_API_KEY=sk-from-home\n", encoding="utf-8"
        )
        (project / ".env").write_text(
            "OPENAI_BASE_URL=http://127.0.0.1:9/v1\nOPENAI_API_KEY=sk-from-project\n"
            "QWEN_CODE_ACP_REPEATED_TOOL_FAILURE_GUARD=enforce\n",
            encoding="utf-8",
        )
        client = RecordingClient()

        async def go() -> Any:
            async with spawn_guarded_agent(
                client,
                mode=None,
                state_dir=tmp_path / "state",
                home=tmp_path,
                scenario=None,
                extra_args=["--model", "openai:test-model"],
            ) as conn:
                session = await conn.new_session(cwd=str(project), mcp_servers=[])
                return await conn.prompt(session_id=session.session_id, prompt=[text_block("go")])

        response = asyncio.run(asyncio.wait_for(go(), 60))
    assert set(fake.auth) == {"Bearer sk-from-home"}
    assert response.field_meta["toolFailureGuard"]["mode"] == "shadow"
    assert response.field_meta.get("loopType") is None


def test_the_test_server_also_speaks_non_streaming_completions() -> None:
    """The double answers the SDK's plain (non-streamed) call in the same wire format."""

    async def go(base_url: str) -> Any:
        client = openai.AsyncOpenAI(base_url=base_url, api_key="k", max_retries=0)
        try:
            return await client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "hi"}]
            )
        finally:
            await client.close()

    answer = Reply(text="plain", calls=(call("c1", "read_file", {"path": "a"}),), usage=(3, 4))
    with serve(FakeOpenAI([answer])) as fake:
        completion = asyncio.run(go(fake.base_url))
    message = completion.choices[0].message
    assert message.content == "plain"
    assert message.tool_calls is not None
    assert json.loads(message.tool_calls[0].function.arguments) == {"path": "a"}
    assert completion.usage is not None and completion.usage.prompt_tokens == 3


def test_sampling_options_reach_every_request_and_are_absent_by_default(tmp_path: Path) -> None:
    loop = {"turns": [{"text": "Reading.", "calls": [READ]}], "final_text": "Done."}
    for name in ("seeded", "plain"):
        (tmp_path / name).mkdir()
    seeded = run_agent(
        tmp_path / "seeded",
        mode="warn",
        provider="openai",
        scenario=loop,
        extra_args=("--temperature", "0.7", "--seed", "42", "--max-tokens", "64"),
    )
    assert seeded.fake is not None and len(seeded.fake.requests) == 2
    for body in seeded.fake.requests:
        assert (body["temperature"], body["seed"], body["max_tokens"]) == (0.7, 42, 64)
    plain = run_agent(tmp_path / "plain", mode="warn", provider="openai", scenario=loop)
    assert plain.fake is not None and plain.fake.requests
    for body in plain.fake.requests:
        assert not {"temperature", "seed", "max_tokens"} & set(body)
